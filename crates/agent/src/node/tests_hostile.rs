//! What an adversarial run found (issue 12): lost state files refused at start, pods the
//! API server would refuse refused here, bounded requests, and a hung device plugin that
//! delays only the admissions asking for its resource.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use corral_devicemgr::sample::{FailureMode, SampleConfig, SamplePlugin};
use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::locks::tests::holders_and_waiters;
use super::tests::{WAIT, admitted, config, fixture, open, pod, snapshot, started};
use super::{Admission, AdmitError, NoRuntime, Node};
use crate::config::AgentConfig;

const GPU: &str = "example.com/gpu";

fn manifest(value: serde_json::Value) -> K8sPod {
    serde_json::from_value(value).unwrap()
}

/// A Guaranteed pod with one container asking `cpus` CPUs and `gpus` demo devices.
fn gpu_pod(uid: &str, cpus: u32, gpus: u32) -> K8sPod {
    manifest(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "c0", "resources": {"limits": {
            "cpu": cpus.to_string(), "memory": "64Mi", GPU: gpus.to_string()}}}]},
    }))
}

async fn start_plugin(node: &Arc<Node>, dir: &Path, failure: FailureMode) -> SamplePlugin {
    let mut plugin_config = SampleConfig::new(GPU, dir.join("device-plugins/gpu.sock"), 4, &[0, 1]);
    plugin_config.failure = failure;
    let plugin = SamplePlugin::start(plugin_config).await.unwrap();
    plugin
        .register(&node.devices().socket_path())
        .await
        .unwrap();
    assert!(node.devices().wait_for_plugin(GPU, WAIT).await);
    plugin
}

async fn reopen(config: &AgentConfig, dir: &Path) -> anyhow::Result<Arc<Node>> {
    let topology = fixture("32em64t-2n8c+dax+nvme+mic+dimms");
    let _ = dir;
    let memory = super::tests::fixture_memory("32em64t-2n8c+dax+nvme+mic+dimms");
    let node = Arc::new(Node::open(config, &topology, &memory, Arc::new(NoRuntime))?);
    node.start_devices().await?;
    Ok(node)
}

/// What a restart says once the state file `name` is gone (see [`restart_after`]).
async fn restart_without(name: &str) -> String {
    let (_dir, err) = restart_after(|config| {
        std::fs::remove_file(config.layout.state_dir().join(name)).unwrap();
    })
    .await;
    err
}

/// Admit a pod with 2 exclusive CPUs and a device, stop the node, run `damage` on the
/// state dir, lose the state journal too (else it restores the file), and return what a
/// restart says.
async fn restart_after(damage: impl FnOnce(&AgentConfig)) -> (tempfile::TempDir, String) {
    restart_after_damage(|config| {
        damage(config);
        std::fs::remove_file(config.layout.journal_path()).unwrap();
    })
    .await
}

async fn restart_after_damage(damage: impl FnOnce(&AgentConfig)) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), "best-effort", &[]);
    // The static memory policy, keeping the kubelet's default eviction threshold (100Mi).
    config.memory_manager.policy = corral_memmgr::MemoryPolicy::Static;
    config.memory_manager.reserved_memory =
        vec![corral_memmgr::MemoryReservation::new(0, [("memory", "100Mi")]).unwrap()];
    let node = reopen(&config, dir.path()).await.unwrap();
    let plugin = start_plugin(&node, dir.path(), FailureMode::None).await;
    let view = admitted(&node, gpu_pod("first", 2, 1)).await;
    assert!(view.containers[0].exclusive_cpus && !view.containers[0].devices.is_empty());
    node.stop_devices().await;
    plugin.stop().await;
    drop(node);
    damage(&config);
    let err = reopen(&config, dir.path())
        .await
        .expect_err("a lost state file must be refused");
    (dir, format!("{err:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_cpu_manager_state_is_refused_naming_the_file_the_pod_and_the_remedy() {
    let err = restart_without("cpu_manager_state").await;
    assert!(err.contains("cpu_manager_state"), "{err}");
    assert!(err.contains("pod first (default/first)"), "{err}");
    assert!(err.contains("should hold exclusive CPUs"), "{err}");
    assert!(
        err.contains("Restore the file") && err.contains("corral/pods/first.json"),
        "{err}"
    );
}

/// With the journal in place, a deleted or rolled-back state file is restored from it: the
/// node starts holding what it held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_state_file_is_restored_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "none", &[]);
    let topology = fixture("32em64t-2n8c+dax+nvme+mic+dimms");
    let node = open(&config, &topology).await;
    let state = config.layout.state_dir().join("cpu_manager_state");
    let empty = std::fs::read(&state).unwrap();
    admitted(&node, pod("held", &[3])).await;
    let held = std::fs::read(&state).unwrap();
    node.stop_devices().await;
    drop(node);
    std::fs::write(&state, empty).unwrap();
    let node = reopen(&config, dir.path()).await.expect("restored");
    assert_eq!(std::fs::read(&state).unwrap(), held);
    assert_eq!(node.cpu().exclusive_cpus("held", "c0").len(), 3);
    node.stop_devices().await;
    drop(node);
    std::fs::remove_file(&state).unwrap();
    let node = reopen(&config, dir.path()).await.expect("restored");
    assert_eq!(std::fs::read(&state).unwrap(), held);
    node.stop_devices().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_memory_manager_state_is_refused() {
    let err = restart_without("memory_manager_state").await;
    assert!(err.contains("memory_manager_state"), "{err}");
    assert!(
        err.contains("container \"c0\" should hold memory [memory=67108864@[0]]")
            || err.contains("container \"c0\" should hold memory [memory=67108864@[1]]"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_device_checkpoint_is_refused() {
    let (_dir, err) = restart_after(|config| {
        std::fs::remove_file(
            config
                .layout
                .device_plugins_dir()
                .join("kubelet_internal_checkpoint"),
        )
        .unwrap();
    })
    .await;
    assert!(err.contains("kubelet_internal_checkpoint"), "{err}");
    assert!(err.contains("should hold example.com/gpu devices"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_cpu_checkpoint_without_the_pods_entry_is_refused() {
    // The file from before the pod was admitted: valid checksum, no entry for the pod.
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "none", &[]);
    let topology = fixture("32em64t-2n8c+dax+nvme+mic+dimms");
    let node = open(&config, &topology).await;
    let state = config.layout.state_dir().join("cpu_manager_state");
    let empty = std::fs::read(&state).unwrap();
    admitted(&node, pod("held", &[3])).await;
    node.stop_devices().await;
    drop(node);
    std::fs::write(&state, empty).unwrap();
    std::fs::remove_file(config.layout.journal_path()).unwrap();
    let err = format!(
        "{:#}",
        reopen(&config, dir.path()).await.expect_err("refused")
    );
    assert!(
        err.contains("cpu_manager_state") && err.contains("pod held"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_without_any_file_is_a_clean_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), "best-effort", &[]);
    // The static memory policy, keeping the kubelet's default eviction threshold (100Mi).
    config.memory_manager.policy = corral_memmgr::MemoryPolicy::Static;
    config.memory_manager.reserved_memory =
        vec![corral_memmgr::MemoryReservation::new(0, [("memory", "100Mi")]).unwrap()];
    let node = reopen(&config, dir.path()).await.unwrap();
    node.stop_devices().await;
    drop(node);
    // And a restart of a node that admitted pods with nothing lost starts too.
    let node = reopen(&config, dir.path()).await.unwrap();
    admitted(&node, pod("p", &[2])).await;
    node.stop_devices().await;
    drop(node);
    reopen(&config, dir.path())
        .await
        .unwrap()
        .stop_devices()
        .await;
}

async fn invalid(node: &Arc<Node>, pod: serde_json::Value) -> String {
    match node.admit(manifest(pod), Vec::new()).await {
        Err(AdmitError::InvalidPod(err)) => err.to_string(),
        other => panic!("not refused as invalid: {other:?}"),
    }
}

fn containers(names: &[&str], init: &[&str]) -> serde_json::Value {
    let list = |names: &[&str]| -> Vec<serde_json::Value> {
        names
            .iter()
            .map(|n| serde_json::json!({"name": n, "resources": {"limits": {"cpu": "2", "memory": "64Mi"}}}))
            .collect()
    };
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "p-uid"},
        "spec": {"containers": list(names), "initContainers": list(init)},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_the_api_server_would_refuse_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let topology = fixture("32em64t-2n8c+dax+nvme+mic+dimms");
    let node = open(&config(dir.path(), "best-effort", &[]), &topology).await;
    let before = snapshot(dir.path());
    let err = invalid(&node, containers(&["c", "c"], &[])).await;
    assert_eq!(
        err,
        "pod default/p: spec.containers[1].name: Duplicate value: \"c\""
    );
    let err = invalid(&node, containers(&["c"], &["c"])).await;
    assert!(
        err.contains("spec.containers[0].name: Duplicate value"),
        "{err}"
    );
    let err = invalid(&node, containers(&["C_1"], &[])).await;
    assert!(err.contains("RFC 1123 label"), "{err}");
    let err = invalid(&node, containers(&[""], &[])).await;
    assert!(
        err.contains("spec.containers[0].name: Required value"),
        "{err}"
    );
    let err = invalid(&node, containers(&[], &[])).await;
    assert!(err.contains("spec.containers: Required value"), "{err}");
    for (resource, value) in [("cpu", "-1"), ("memory", "-1Mi"), (GPU, "-2")] {
        let mut pod = containers(&["c"], &[]);
        pod["spec"]["containers"][0]["resources"]["limits"][resource] = value.into();
        let err = invalid(&node, pod).await;
        assert!(
            err.contains("must be greater than or equal to 0") && err.contains(resource),
            "{err}"
        );
    }
    for (field, value) in [
        ("uid", "a\u{0}b"),
        ("uid", "x\u{1b}[31m"),
        ("namespace", "de\nfault"),
        ("name", "p\u{7}"),
    ] {
        let mut pod = containers(&["c"], &[]);
        pod["metadata"][field] = value.into();
        let err = invalid(&node, pod).await;
        assert!(err.contains(&format!("metadata.{field}")), "{err}");
        assert!(!err.chars().any(char::is_control), "{err:?}");
    }
    assert_eq!(snapshot(dir.path()), before, "nothing was written");
    assert!(node.pods().all().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_more_containers_than_the_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let topology = fixture("32em64t-2n8c+dax+nvme+mic+dimms");
    let mut config = config(dir.path(), "best-effort", &[]);
    config.pod_limits.max_containers = 8;
    let node = open(&config, &topology).await;
    let names: Vec<String> = (0..9).map(|i| format!("c{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let err = invalid(&node, containers(&names[..5], &names[5..])).await;
    assert_eq!(
        err,
        "pod default/p: 9 containers (init and app together) exceed maxContainersPerPod (8)"
    );
    admitted(&node, pod("fits", &[1, 1, 1, 1, 1, 1, 1, 1])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_stuck_in_allocate_delays_only_the_pods_that_ask_for_its_resource() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), "best-effort", &[]);
    // Once the plugin is gone, an admission waits this long for it to come back.
    config.plugin_wait_timeout = Duration::from_secs(1);
    let node = reopen(&config, dir.path()).await.unwrap();
    let plugin = start_plugin(&node, dir.path(), FailureMode::HangAllocate).await;
    let before = snapshot(dir.path());
    let stuck = tokio::spawn({
        let node = Arc::clone(&node);
        async move { node.admit(gpu_pod("stuck", 2, 1), Vec::new()).await }
    });
    // Wait until the stuck pod's Allocate reached the plugin.
    let deadline = std::time::Instant::now() + WAIT;
    while plugin.calls().allocate.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "Allocate never called"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A CPU-only pod is admitted meanwhile: while the stuck pod's Allocate still hangs. That
    // ends only when the plugin crashes below or at the Allocate deadline (30 s, the device
    // manager's), so had the CPU-only admission waited for it, the stuck one would be over.
    let view = tokio::time::timeout(WAIT, admitted(&node, pod("cpu-only", &[2])))
        .await
        .expect("the CPU-only admission ends");
    assert!(
        !stuck.is_finished(),
        "the CPU-only admission waited for the stuck plugin"
    );
    assert!(view.containers[0].exclusive_cpus);
    // A second admission of the stuck pod waits for the first rather than racing it: it
    // queues on the pod's lock, which the first holds.
    let again = tokio::spawn({
        let node = Arc::clone(&node);
        async move { node.admit(gpu_pod("stuck", 2, 1), Vec::new()).await }
    });
    let deadline = std::time::Instant::now() + WAIT;
    while holders_and_waiters(&node.pod_locks, "stuck") < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second admission never waited for the pod's lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!again.is_finished());
    assert_eq!(plugin.calls().allocate.len(), 1);
    // The plugin dies: the stuck admission fails and gives back everything it took.
    plugin.crash().await;
    let answer = tokio::time::timeout(WAIT, stuck)
        .await
        .expect("the stuck admission ended")
        .unwrap()
        .unwrap();
    assert!(
        matches!(answer, Admission::Rejected { ref reason, .. } if reason == "UnexpectedAdmissionError"),
        "{answer:?}"
    );
    let again = tokio::time::timeout(WAIT, again)
        .await
        .expect("the second admission ended")
        .unwrap()
        .unwrap();
    assert!(matches!(again, Admission::Rejected { .. }), "{again:?}");
    assert!(node.cpu().exclusive_cpus("stuck", "c0").is_empty());
    assert!(node.devices().container_devices("stuck", "c0").is_empty());
    // Only the CPU-only pod holds anything; the stuck pod left no trace in any file.
    assert!(node.release("cpu-only").await.unwrap());
    node.stop_devices().await;
    let after = snapshot(dir.path());
    for (path, bytes) in &before {
        if path.ends_with("cpu_manager_state") {
            assert_eq!(after.get(path), Some(bytes), "{}", path.display());
        }
    }
}

/// A machine whose NUMA node ids reach 73 (`48amd64-4pa2n6c-sparse`, nodes 0-2, 33-34, 45,
/// 72-73): the agent runs there, reports real ids and restores them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sparse_numa_ids_above_63_are_admitted_reported_and_restored_as_real_ids() {
    let (_dir, config, node) = started("48amd64-4pa2n6c-sparse", "single-numa-node", &[]).await;
    // Fill nodes 0, 1, 2, 33, 34 and 45 (6 CPUs each; CPU 0 is reserved).
    let mut seen = std::collections::BTreeSet::new();
    for (i, cpus) in [5, 6, 6, 6, 6, 6, 6].into_iter().enumerate() {
        let view = admitted(&node, pod(&format!("p{i}"), &[cpus])).await;
        let numa = &view.containers[0].numa_affinity;
        assert_eq!(numa.len(), 1, "{view:?}");
        seen.insert(numa[0]);
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        [0, 1, 2, 33, 34, 45, 72],
        "real node ids, in upstream's order"
    );
    let file = std::fs::read_to_string(node.pods().record_path("p6")).unwrap();
    assert!(file.contains(r#""numa":[72]"#), "{file}");
    node.stop_devices().await;
    drop(node);
    let node = open(&config, &fixture("48amd64-4pa2n6c-sparse")).await;
    assert_eq!(node.view("p6").unwrap().containers[0].numa_affinity, [72]);
    let last = admitted(&node, pod("last", &[6])).await;
    assert_eq!(last.containers[0].numa_affinity, [73]);
}
