//! Pods with pod-level resources (`spec.resources`) through the whole node, as v1.36
//! admits them: `PodLevelResources` off refuses them, on (its default) with
//! `PodLevelResourceManagers` off puts them in the shared pool, and both on (pod scope)
//! allocates the pod's budget once and partitions it.

use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::Admission;
use super::tests::{admitted, fixture, fixture_memory, gated_config, open_on};

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";

/// A pod of 4 CPUs and 4 GiB at pod level: `exclusive` (2 CPUs, requests = limits) and
/// `shared` (no resources).
fn pod_level_pod(uid: &str) -> K8sPod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {
            "resources": {
                "requests": {"cpu": "4", "memory": "4Gi"},
                "limits": {"cpu": "4", "memory": "4Gi"},
            },
            "containers": [
                {"name": "exclusive", "resources": {
                    "requests": {"cpu": "2", "memory": "1Gi"},
                    "limits": {"cpu": "2", "memory": "1Gi"},
                }},
                {"name": "shared"},
            ],
        },
    }))
    .unwrap()
}

async fn node_with(
    gates: &[(&str, bool)],
    scope: &str,
) -> (tempfile::TempDir, std::sync::Arc<super::Node>) {
    let dir = tempfile::tempdir().unwrap();
    let config = gated_config(dir.path(), scope, gates);
    let node = open_on(&config, &fixture(MACHINE), &fixture_memory(MACHINE)).await;
    (dir, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pod_level_resources_off_such_pods_are_refused() {
    let (_dir, node) = node_with(&[("PodLevelResources", false)], "pod").await;
    let answer = node.admit(pod_level_pod("p"), Vec::new()).await.unwrap();
    let Admission::Rejected { reason, message } = answer else {
        panic!("admitted: {answer:?}");
    };
    assert_eq!(reason, "PodLevelResourcesNotSupported");
    assert_eq!(message, "PodLevelResources feature gate is disabled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_such_pods_run_in_the_shared_pool() {
    let (_dir, node) = node_with(&[], "pod").await;
    let view = admitted(&node, pod_level_pod("p")).await;
    assert!(
        view.containers.iter().all(|c| !c.exclusive_cpus),
        "{view:?}"
    );
    assert!(node.cpu().exclusive_cpus("p", "exclusive").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pod_level_resource_managers_the_budget_is_allocated_once() {
    let (dir, node) = node_with(&[("PodLevelResourceManagers", true)], "pod").await;
    let view = admitted(&node, pod_level_pod("p")).await;
    let cpus = |name: &str| -> corral_topology::CpuSet {
        let c = view.containers.iter().find(|c| c.name == name).unwrap();
        c.cpuset.parse().unwrap()
    };
    assert_eq!(cpus("exclusive").len(), 2);
    assert_eq!(cpus("shared").len(), 2);
    assert!(!cpus("exclusive").intersects(&cpus("shared")));
    // The pod's four CPUs left the node's shared pool; v3 records them.
    let pool: corral_topology::CpuSet = node
        .cpu()
        .cpu_affinity("other", "c")
        .to_string()
        .parse()
        .unwrap();
    assert!(!pool.intersects(&cpus("exclusive").union(&cpus("shared"))));
    let file = std::fs::read(dir.path().join("cpu_manager_state")).unwrap();
    let v3 =
        <corral_checkpoint::CpuManagerCheckpointV3 as corral_checkpoint::Checkpoint>::decode(&file)
            .unwrap();
    let pod_cpus = &v3.pod_entries.unwrap()["p"].cpu_set;
    let pod_cpus: corral_topology::CpuSet = pod_cpus.parse().unwrap();
    assert_eq!(pod_cpus.len(), 4);

    // Released: everything comes back.
    node.release("p").await.unwrap();
    let pool_after = node.cpu().cpu_affinity("other", "c");
    assert!(pod_cpus.is_subset_of(&pool_after), "{pool_after}");
}
