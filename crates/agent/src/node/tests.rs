//! Admission through the composed managers: results, all-or-nothing rejections (every
//! checkpoint byte-identical afterwards) and restarts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_topology::CpuTopology;
use corral_topology::memory::NumaMemory;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;

use super::{Admission, NoRuntime, Node};
use crate::config::{AgentConfig, ConfigSource};

/// The bound of every wait for something that must happen (a plugin or driver registering,
/// a status changing): it happens far sooner, also on a busy machine; this only ends a test
/// that would otherwise hang.
pub(crate) const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

pub(crate) fn fixture(machine: &str) -> CpuTopology {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/sysfs")
        .join(machine);
    corral_topology::sysfs::discover(&root).unwrap()
}

/// The NUMA nodes' memory of `machine`.
pub(crate) fn fixture_memory(machine: &str) -> BTreeMap<usize, NumaMemory> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/sysfs")
        .join(machine);
    corral_topology::sysfs::discover_memory(&root).unwrap()
}

/// A node on `machine`'s topology with its state in a fresh temp dir: the dir, the config
/// and the node.
pub(crate) async fn started(
    machine: &str,
    topology_policy: &str,
    cpu_options: &[(&str, &str)],
) -> (tempfile::TempDir, AgentConfig, Arc<Node>) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), topology_policy, cpu_options);
    let node = open_on(&config, &fixture(machine), &fixture_memory(machine)).await;
    (dir, config, node)
}

pub(crate) fn config(
    root: &Path,
    topology_policy: &str,
    cpu_options: &[(&str, &str)],
) -> AgentConfig {
    ConfigSource {
        cpu_manager_policy: Some("static".into()),
        reserved_system_cpus: Some("0".into()),
        topology_manager_policy: Some(topology_policy.into()),
        cpu_manager_policy_options: Some(
            cpu_options
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        root: Some(root.to_path_buf()),
        ..ConfigSource::default()
    }
    .validate()
    .unwrap()
}

/// The static CPU policy (CPU 0 reserved) under `single-numa-node` at `scope`, with the
/// feature gates `gates`, rooted at `root`.
pub(crate) fn gated_config(root: &Path, scope: &str, gates: &[(&str, bool)]) -> AgentConfig {
    ConfigSource {
        cpu_manager_policy: Some("static".into()),
        reserved_system_cpus: Some("0".into()),
        topology_manager_policy: Some("single-numa-node".into()),
        topology_manager_scope: Some(scope.into()),
        feature_gates: Some(
            gates
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect::<BTreeMap<_, _>>(),
        ),
        root: Some(root.to_path_buf()),
        ..ConfigSource::default()
    }
    .validate()
    .unwrap()
}

/// A Guaranteed pod with one container per CPU count.
pub(crate) fn pod(uid: &str, cpus: &[u32]) -> K8sPod {
    let containers: Vec<_> = cpus
        .iter()
        .enumerate()
        .map(|(i, n)| {
            serde_json::json!({
                "name": format!("c{i}"),
                "resources": {"limits": {"cpu": n.to_string(), "memory": "64Mi"}},
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": containers},
    }))
    .unwrap()
}

pub(crate) async fn open(config: &AgentConfig, topology: &CpuTopology) -> Arc<Node> {
    open_on(config, topology, &BTreeMap::new()).await
}

/// A started node on `topology` and `memory`.
pub(crate) async fn open_on(
    config: &AgentConfig,
    topology: &CpuTopology,
    memory: &BTreeMap<usize, NumaMemory>,
) -> Arc<Node> {
    let node = Arc::new(Node::open(config, topology, memory, Arc::new(NoRuntime)).unwrap());
    node.start_devices().await.unwrap();
    node
}

/// Every file under `dir`, with its bytes, but the state journal and its mark (a log of the
/// writes and the last commit's number, not state: a rejected admission's writes and their
/// rollback are in it).
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.is_file()
                && !path.ends_with("corral/state.journal")
                && !path.ends_with("corral/state.journal.mark")
            {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

pub(crate) async fn admitted(node: &Arc<Node>, pod: K8sPod) -> super::PodView {
    match node.admit(pod, Vec::new()).await.unwrap() {
        Admission::Admitted(view) => view,
        Admission::Rejected {
            reason, message, ..
        } => panic!("rejected: {reason}: {message}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unalignable_pod_is_rejected_and_leaves_every_checkpoint_byte_identical() {
    let (dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    let first = admitted(&node, pod("first", &[2, 1])).await;
    assert!(first.containers.iter().all(|c| c.exclusive_cpus));
    let before = snapshot(dir.path());
    assert!(before.keys().any(|p| p.ends_with("cpu_manager_state")));
    assert!(before.keys().any(|p| p.ends_with("dra_manager_state")));
    assert!(
        before
            .keys()
            .any(|p| p.ends_with("kubelet_internal_checkpoint"))
    );
    // c0 fits one NUMA node and is allocated; c1 needs more CPUs than any node has.
    let answer = node
        .admit(pod("second", &[3, 20]), Vec::new())
        .await
        .unwrap();
    let Admission::Rejected { reason, .. } = answer else {
        panic!("admitted: {answer:?}");
    };
    assert_eq!(reason, "TopologyAffinityError");
    assert_eq!(snapshot(dir.path()), before);
    assert!(node.pods().get("second").is_none());
    assert_eq!(node.topology().store().pod_count(), 1);
    // The freed CPUs are usable again.
    admitted(&node, pod("third", &[3])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_smt_alignment_error_with_full_pcpus_only_leaves_every_checkpoint_byte_identical() {
    let (dir, _config, node) =
        started("16em64t-4s2c2t", "none", &[("full-pcpus-only", "true")]).await;
    admitted(&node, pod("first", &[2])).await;
    let before = snapshot(dir.path());
    let answer = node.admit(pod("odd", &[2, 3]), Vec::new()).await.unwrap();
    let Admission::Rejected {
        reason, message, ..
    } = answer
    else {
        panic!("admitted: {answer:?}");
    };
    assert_eq!(reason, "SMTAlignmentError", "{message}");
    assert_eq!(snapshot(dir.path()), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_keeps_every_admitted_pod_and_its_cpus() {
    let (_dir, config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    let a = admitted(&node, pod("a", &[4])).await;
    let b = admitted(&node, pod("b", &[2, 2])).await;
    node.container_started("b", "c1", "cid-b1").await.unwrap();
    node.stop_devices().await;
    drop(node);
    let node = open(&config, &fixture("32em64t-2n8c+dax+nvme+mic+dimms")).await;
    let again = |view: &super::PodView| {
        node.view(&view.uid)
            .unwrap()
            .containers
            .iter()
            .map(|c| c.cpuset.clone())
            .collect::<Vec<_>>()
    };
    let cpus = |view: &super::PodView| {
        view.containers
            .iter()
            .map(|c| c.cpuset.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(again(&a), cpus(&a));
    assert_eq!(again(&b), cpus(&b));
    assert_eq!(node.view("b").unwrap().containers[1].container_id, "cid-b1");
    assert_eq!(
        node.view("a").unwrap(),
        a,
        "cpusets and NUMA affinities survive"
    );
    // Admitting the same uid again answers what it holds.
    assert_eq!(cpus(&admitted(&node, pod("a", &[4])).await), cpus(&a));
    // Released pods give their CPUs back and are forgotten across restarts.
    assert!(node.release("a").await.unwrap());
    assert!(!node.release("a").await.unwrap());
    node.stop_devices().await;
    drop(node);
    let node = open(&config, &fixture("32em64t-2n8c+dax+nvme+mic+dimms")).await;
    assert!(node.pods().get("a").is_none());
    assert_eq!(node.views().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_active_pods_releases_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let topology = fixture("32em64t-2n8c+dax+nvme+mic+dimms");
    let node = open(&config(dir.path(), "none", &[]), &topology).await;
    admitted(&node, pod("keep", &[2])).await;
    admitted(&node, pod("drop", &[2])).await;
    let released = node.sync_active(&["keep".to_owned()]).await.unwrap();
    assert_eq!(released, vec!["drop".to_owned()]);
    assert!(node.cpu().exclusive_cpus("drop", "c0").is_empty());
    assert!(!node.cpu().exclusive_cpus("keep", "c0").is_empty());
}

/// A pod with one container using claim `gpu-claim`, and that claim, allocated on the sample
/// driver and reserved for `reserved_for`.
pub(crate) fn pod_with_claim(uid: &str, reserved_for: &str) -> (K8sPod, K8sResourceClaim) {
    let pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
            "containers": [{
                "name": "c0",
                "resources": {"limits": {"cpu": "2", "memory": "64Mi"}, "claims": [{"name": "gpu"}]},
            }],
        },
    }))
    .unwrap();
    let claim = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "gpu-claim", "namespace": "default", "uid": "claim-uid"},
        "spec": {},
        "status": {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": "sample-pool", "device": "gpu-0"},
            ]}},
            "reservedFor": [{"resource": "pods", "name": reserved_for, "uid": reserved_for}],
        },
    }))
    .unwrap();
    (pod, claim)
}

pub(crate) const DRIVER: &str = "gpu.example.com";

/// The sample DRA driver [`DRIVER`], its socket under `dir`, registered with `node`.
pub(crate) async fn sample_driver(
    dir: &Path,
    config: &AgentConfig,
    node: &Node,
) -> corral_dra::sample::SampleDriver {
    let driver_config = corral_dra::sample::SampleDriverConfig::new(
        DRIVER,
        config.layout.plugins_registry_dir(),
        dir.join("plugins").join(DRIVER),
    );
    let driver = corral_dra::sample::SampleDriver::start(driver_config)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while node.registry().plugin(DRIVER).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "driver never registered"
        );
        node.registry().sync_once().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    driver
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_claims_are_prepared_reported_and_a_failed_prepare_leaves_no_trace() {
    let (dir, config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    let driver = sample_driver(dir.path(), &config, &node).await;

    // A claim reserved for another pod: DRA refuses after CPUs were allocated; nothing stays.
    let before = snapshot(dir.path());
    let (pod, claim) = pod_with_claim("thief", "someone-else");
    let answer = node.admit(pod, vec![claim]).await.unwrap();
    let Admission::Rejected { reason, .. } = answer else {
        panic!("admitted: {answer:?}");
    };
    assert_eq!(reason, "UnexpectedAdmissionError");
    assert_eq!(snapshot(dir.path()), before);
    assert!(node.cpu().exclusive_cpus("thief", "c0").is_empty());

    // The driver fails the call: the rejection names the driver's own words.
    driver.set_behavior(corral_dra::sample::Behavior::FailCall(
        "GPU firmware hung".into(),
    ));
    let (pod, claim) = pod_with_claim("owner", "owner");
    let answer = node.admit(pod, vec![claim]).await.unwrap();
    let Admission::Rejected {
        reason, message, ..
    } = answer
    else {
        panic!("admitted: {answer:?}");
    };
    assert_eq!(reason, "UnexpectedAdmissionError");
    assert!(message.contains("GPU firmware hung"), "{message}");
    assert!(message.ends_with(", which is unexpected"), "{message}");
    assert!(node.cpu().exclusive_cpus("owner", "c0").is_empty());
    // The driver failed the undo too: the claim stays recorded until an unprepare succeeds
    // (the release below), as upstream keeps it for the next UnprepareResources.
    driver.set_behavior(corral_dra::sample::Behavior::Normal);

    // Reserved for the pod: prepared, CDI devices and the claim in the view.
    let (pod, claim) = pod_with_claim("owner", "owner");
    let Admission::Admitted(view) = node.admit(pod, vec![claim]).await.unwrap() else {
        panic!("rejected");
    };
    let container = &view.containers[0];
    assert!(container.exclusive_cpus);
    assert!(!container.cdi_devices.is_empty(), "{container:?}");
    assert_eq!(container.claims.len(), 1);
    assert_eq!(container.claims[0].name, "gpu-claim");
    assert_eq!(container.claims[0].devices[0].driver, DRIVER);
    // Releasing unprepares the claim.
    assert!(node.release("owner").await.unwrap());
    assert!(node.dra.claim_infos().is_empty());
}
