//! The restore check's second direction (issue 28): a state file that gives something to
//! a pod whose record (`corral/pods/<uid>.json`) is gone is refused at start, naming the
//! file, the pod and the remedy — whichever file it is (`cpu_manager_state`,
//! `memory_manager_state`, `kubelet_internal_checkpoint`, `dra_manager_state`). The state
//! journal is removed too in each case (else it restores the record), so the check is what
//! refuses. After a replay of the journal such a pod is an admission or release a crash cut
//! short: what it holds is released and the node starts.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_devicemgr::sample::{SampleConfig, SamplePlugin};
use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::tests::{WAIT, admitted, config, fixture, fixture_memory, gated_config, pod};
use super::{NoRuntime, Node};
use crate::config::{AgentConfig, ConfigSource};

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";

fn manifest(value: serde_json::Value) -> K8sPod {
    serde_json::from_value(value).unwrap()
}

/// A Burstable pod (nothing exclusive: no CPU or memory entries) whose container `c0` asks
/// `extra` besides half a CPU.
fn burstable(uid: &str, extra: serde_json::Value) -> K8sPod {
    let mut limits = serde_json::json!({"cpu": "500m", "memory": "64Mi"});
    if let (Some(limits), Some(extra)) = (limits.as_object_mut(), extra.as_object()) {
        limits.extend(extra.clone());
    }
    manifest(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "c0", "resources": {"limits": limits}}]},
    }))
}

/// The `none` CPU policy (no CPU entries for any pod), rooted at `root`.
fn no_cpu_policy(root: &Path) -> AgentConfig {
    ConfigSource {
        cpu_manager_policy: Some("none".into()),
        root: Some(root.to_path_buf()),
        ..ConfigSource::default()
    }
    .validate()
    .unwrap()
}

async fn reopen(config: &AgentConfig) -> anyhow::Result<Arc<Node>> {
    let node = Arc::new(Node::open(
        config,
        &fixture(MACHINE),
        &fixture_memory(MACHINE),
        Arc::new(NoRuntime),
    )?);
    if let Err(err) = node.start_devices().await {
        // A refused start still started serving device plugins: stop, for the next start.
        node.stop_devices().await;
        return Err(err);
    }
    Ok(node)
}

/// Stop `node`, then lose the state journal (and its commit mark, if there is one) and the
/// records of `lost`.
async fn stop_and_lose(node: Arc<Node>, config: &AgentConfig, lost: &[&str]) {
    node.stop_devices().await;
    drop(node);
    let journal = config.layout.journal_path();
    let mut mark = journal.clone().into_os_string();
    mark.push(".mark");
    for file in [journal, mark.into()] {
        if file.exists() {
            std::fs::remove_file(&file).unwrap();
        }
    }
    for uid in lost {
        let record = config.layout.pods_dir().join(format!("{uid}.json"));
        std::fs::remove_file(&record).unwrap();
    }
}

/// The start refused, its message naming `file`, the pod `uid` and the remedy.
async fn assert_refused(config: &AgentConfig, file: &str, uid: &str, holds: &str) {
    let err = format!(
        "{:#}",
        reopen(config)
            .await
            .expect_err("a lost pod record must be refused")
    );
    let record = config.layout.pods_dir().join(format!("{uid}.json"));
    let record = record.display();
    assert!(err.contains(file), "names {file}: {err}");
    assert!(err.contains(&format!("pod {uid} holds {holds}")), "{err}");
    assert!(
        err.contains(&format!("no record of the pod ({record} is missing)")),
        "{err}"
    );
    assert!(
        err.contains(&format!("Restore {record}, or"))
            && err.contains("remove the pod's entries from"),
        "the remedy: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_record_of_a_pod_with_exclusive_cpus_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "best-effort", &[]);
    let node = reopen(&config).await.unwrap();
    admitted(&node, pod("lost", &[2])).await;
    admitted(&node, pod("kept", &[2])).await;
    admitted(&node, burstable("shared", serde_json::json!({}))).await;
    // A pod with nothing exclusive has no entries: losing its record loses nothing.
    stop_and_lose(node, &config, &["shared"]).await;
    let node = reopen(&config).await.expect("nothing of the pod was held");
    let record = config.layout.pods_dir().join("lost.json");
    let kept = std::fs::read(&record).unwrap();
    stop_and_lose(node, &config, &["lost"]).await;
    assert_refused(&config, "cpu_manager_state", "lost", "exclusive CPUs").await;
    // Refused again and again, never forgotten: the state file still names the pod.
    assert_refused(&config, "cpu_manager_state", "lost", "exclusive CPUs").await;
    // The remedy: with the record back, the node starts holding the pod's CPUs.
    std::fs::write(&record, kept).unwrap();
    let node = reopen(&config).await.expect("the record restored");
    assert_eq!(node.cpu().exclusive_cpus("lost", "c0").len(), 2);
    node.stop_devices().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_record_of_a_pod_with_memory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = no_cpu_policy(dir.path());
    // The static memory policy, keeping the kubelet's default eviction threshold (100Mi).
    config.memory_manager.policy = corral_memmgr::MemoryPolicy::Static;
    config.memory_manager.reserved_memory =
        vec![corral_memmgr::MemoryReservation::new(0, [("memory", "100Mi")]).unwrap()];
    let node = reopen(&config).await.unwrap();
    let view = admitted(&node, pod("lost", &[1])).await;
    assert!(!view.containers[0].exclusive_cpus, "{view:?}");
    stop_and_lose(node, &config, &["lost"]).await;
    assert_refused(
        &config,
        "memory_manager_state",
        "lost",
        "memory [memory=67108864@",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_record_of_a_pod_with_devices_is_refused() {
    const GPU: &str = "example.com/gpu";
    let dir = tempfile::tempdir().unwrap();
    let config = no_cpu_policy(dir.path());
    let node = reopen(&config).await.unwrap();
    let plugin = SamplePlugin::start(SampleConfig::new(
        GPU,
        dir.path().join("device-plugins/gpu.sock"),
        4,
        &[0, 1],
    ))
    .await
    .unwrap();
    plugin
        .register(&node.devices().socket_path())
        .await
        .unwrap();
    assert!(node.devices().wait_for_plugin(GPU, WAIT).await);
    let view = admitted(&node, burstable("lost", serde_json::json!({GPU: "1"}))).await;
    assert!(!view.containers[0].devices.is_empty(), "{view:?}");
    stop_and_lose(node, &config, &["lost"]).await;
    plugin.stop().await;
    let holds = format!("{GPU} devices [");
    assert_refused(&config, "kubelet_internal_checkpoint", "lost", &holds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_record_of_a_pod_with_a_prepared_claim_is_refused() {
    const DRIVER: &str = "gpu.example.com";
    let dir = tempfile::tempdir().unwrap();
    let config = gated_config(dir.path(), "container", &[]);
    let node = reopen(&config).await.unwrap();
    let driver =
        corral_dra::sample::SampleDriver::start(corral_dra::sample::SampleDriverConfig::new(
            DRIVER,
            config.layout.plugins_registry_dir(),
            dir.path().join("plugins").join(DRIVER),
        ))
        .await
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while node.registry().plugin(DRIVER).is_none() {
        assert!(Instant::now() < deadline, "driver never registered");
        node.registry().sync_once().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut pod = burstable("lost", serde_json::json!({}));
    let spec = pod.spec.as_mut().unwrap();
    spec.resource_claims = Some(vec![
        serde_json::from_value(
            serde_json::json!({"name": "gpu", "resourceClaimName": "gpu-claim"}),
        )
        .unwrap(),
    ]);
    spec.containers[0].resources.as_mut().unwrap().claims = Some(vec![
        serde_json::from_value(serde_json::json!({"name": "gpu"})).unwrap(),
    ]);
    let claim = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "gpu-claim", "namespace": "default", "uid": "claim-uid"},
        "spec": {},
        "status": {
            "allocation": {"devices": {"results": [{
                "request": "gpu", "driver": DRIVER, "pool": "sample-pool", "device": "gpu-0",
            }]}},
            "reservedFor": [{"resource": "pods", "name": "lost", "uid": "lost"}],
        },
    }))
    .unwrap();
    let answer = node.admit(pod, vec![claim]).await.unwrap();
    let super::Admission::Admitted(view) = answer else {
        panic!("rejected: {answer:?}");
    };
    assert!(!view.containers[0].exclusive_cpus, "{view:?}");
    stop_and_lose(node, &config, &["lost"]).await;
    assert_refused(
        &config,
        "dra_manager_state",
        "lost",
        "ResourceClaim default/gpu-claim prepared for it",
    )
    .await;
    drop(driver);
}

/// A release cut short after its record went and before the managers let go (the journal
/// committed in between, as a concurrent admission's commit does): after the replay the
/// pod's CPUs, memory and devices are released, not refused, and the files agree again —
/// a later start without the journal finds nothing to refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_replay_a_pod_without_a_record_is_released() {
    const GPU: &str = "example.com/gpu";
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), "best-effort", &[]);
    config.memory_manager.policy = corral_memmgr::MemoryPolicy::Static;
    config.memory_manager.reserved_memory =
        vec![corral_memmgr::MemoryReservation::new(0, [("memory", "100Mi")]).unwrap()];
    let node = reopen(&config).await.unwrap();
    let plugin = SamplePlugin::start(SampleConfig::new(
        GPU,
        dir.path().join("device-plugins/gpu.sock"),
        4,
        &[0, 1],
    ))
    .await
    .unwrap();
    plugin
        .register(&node.devices().socket_path())
        .await
        .unwrap();
    assert!(node.devices().wait_for_plugin(GPU, WAIT).await);
    let mut cut = pod("cut", &[2]);
    let limits = cut.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .limits
        .as_mut()
        .unwrap();
    limits.insert(
        GPU.into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
    );
    let view = admitted(&node, cut).await;
    assert!(view.containers[0].exclusive_cpus && !view.containers[0].devices.is_empty());
    admitted(&node, pod("kept", &[2])).await;
    node.pods.update("cut", Option::take).unwrap();
    node.commit().await.unwrap();
    node.stop_devices().await;
    plugin.stop().await;
    drop(node);
    let state = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    assert!(state("cpu_manager_state").contains("\"cut\""));

    let node = reopen(&config).await.expect("a crash leftover is released");
    assert!(node.cpu().exclusive_cpus("cut", "c0").is_empty());
    assert_eq!(node.cpu().exclusive_cpus("kept", "c0").len(), 2);
    for file in [
        "cpu_manager_state",
        "memory_manager_state",
        "device-plugins/kubelet_internal_checkpoint",
    ] {
        assert!(!state(file).contains("\"cut\""), "{file}: {}", state(file));
    }
    assert!(state("cpu_manager_state").contains("\"kept\""));
    stop_and_lose(node, &config, &[]).await;
    reopen(&config)
        .await
        .expect("the files agree")
        .stop_devices()
        .await;
}
