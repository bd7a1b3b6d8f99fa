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
    let (_dir, node) = node_with(
        &[
            ("PodLevelResources", false),
            ("PodLevelResourceManagers", false),
        ],
        "pod",
    )
    .await;
    let answer = node.admit(pod_level_pod("p"), Vec::new()).await.unwrap();
    let Admission::Rejected {
        reason, message, ..
    } = answer
    else {
        panic!("admitted: {answer:?}");
    };
    assert_eq!(reason, "PodLevelResourcesNotSupported");
    assert_eq!(message, "PodLevelResources feature gate is disabled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pod_level_resource_managers_off_such_pods_run_in_the_shared_pool() {
    let (_dir, node) = node_with(&[("PodLevelResourceManagers", false)], "pod").await;
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
    // KEP-5526's counters: `exclusive` carved from the pod's CPUs, `shared` in its pool.
    let metrics = node.resource_metrics();
    let load =
        |counter: &std::sync::atomic::AtomicU64| counter.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(load(&metrics.allocations[0][1]), 1, "cpu from the pod");
    assert_eq!(load(&metrics.allocations[0][0]), 0, "cpu from the node");
    assert_eq!(load(&metrics.assignments[0][1]), 1, "cpu pod_exclusive");
    assert_eq!(load(&metrics.assignments[0][2]), 1, "cpu pod_shared");
    assert_eq!(load(&metrics.assignments[0][0]), 0, "cpu node_exclusive");

    // Released: everything comes back.
    node.release("p").await.unwrap();
    let pool_after = node.cpu().cpu_affinity("other", "c");
    assert!(pod_cpus.is_subset_of(&pool_after), "{pool_after}");
}

/// The pod of [`pod_level_pod`] with an init container, a sidecar and, with `claim`, a
/// ResourceClaim reserved for another pod (its preparation fails after the decision).
fn pod_level_pod_with(
    uid: &str,
    claim: bool,
) -> (K8sPod, Vec<k8s_openapi::api::resource::v1::ResourceClaim>) {
    let mut pod = serde_json::to_value(pod_level_pod(uid)).unwrap();
    let both = |cpu: &str, memory: &str| {
        serde_json::json!({
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory},
        })
    };
    pod["spec"]["initContainers"] = serde_json::json!([
        {"name": "init", "resources": both("3", "1Gi")},
        {"name": "side", "restartPolicy": "Always", "resources": both("1", "512Mi")},
    ]);
    let mut claims = Vec::new();
    if claim {
        pod["spec"]["resourceClaims"] =
            serde_json::json!([{"name": "gpu", "resourceClaimName": "gpu-claim"}]);
        pod["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
        claims.push(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "gpu-claim", "namespace": "default", "uid": "claim-uid"},
                "spec": {},
                "status": {
                    "allocation": {"devices": {"results": [
                        {"request": "gpu", "driver": "gpu.example.com", "pool": "sample-pool", "device": "gpu-0"},
                    ]}},
                    "reservedFor": [{"resource": "pods", "name": "someone-else", "uid": "someone-else"}],
                },
            }))
            .unwrap(),
        );
    }
    (serde_json::from_value(pod).unwrap(), claims)
}

/// What the managers hold for `uid`'s containers `names` and its pod-level CPUs.
fn held_by(node: &super::Node, uid: &str, names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    if !node.cpu().pod_cpus(uid).is_empty() {
        out.push(format!("pod CPUs {}", node.cpu().pod_cpus(uid)));
    }
    for name in names {
        let cpus = node.cpu().exclusive_cpus(uid, name);
        if !cpus.is_empty() {
            out.push(format!("{name}: CPUs {cpus}"));
        }
        let memory = node.memory().container_memory(uid, name);
        if !memory.is_empty() {
            out.push(format!("{name}: memory {memory:?}"));
        }
    }
    out
}

/// A pod with pod-level resources, an init container and a sidecar whose claim cannot be
/// prepared (after the decision) holds nothing and leaves the state files as they were;
/// admitted without it, its holdings are its record's, a removed container and its
/// release give back exactly its CPUs, and restarts on the same root are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_level_pod_refused_after_its_decision_or_released_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = gated_config(dir.path(), "pod", &[("PodLevelResourceManagers", true)]);
    let node = open_on(&config, &fixture(MACHINE), &fixture_memory(MACHINE)).await;
    let names = ["init", "side", "exclusive", "shared"];
    let pool = node.cpu().cpu_affinity("other", "c");
    let before = super::tests::snapshot(dir.path());
    let (pod, claims) = pod_level_pod_with("p", true);
    let answer = node.admit(pod, claims).await.unwrap();
    let Admission::Rejected {
        reason, message, ..
    } = &answer
    else {
        panic!("admitted: {answer:?}");
    };
    // Refused by the claim's preparation, after the decision.
    assert_eq!(reason, "UnexpectedAdmissionError", "{message}");
    assert_eq!(held_by(&node, "p", &names), Vec::<String>::new());
    assert_eq!(
        node.cpu().cpu_affinity("other", "c"),
        pool,
        "the shared pool is whole"
    );
    assert_eq!(
        super::tests::snapshot(dir.path()),
        before,
        "the state files as they were"
    );
    // Admitted without the claim: its holdings are its record's.
    let (pod, _) = pod_level_pod_with("p", false);
    let view = admitted(&node, pod).await;
    let record_matches = |node: &super::Node| {
        let admitted = node.pods().get("p").expect("admitted");
        for (kind, container) in admitted.pod.all_containers() {
            if admitted.record.removed_containers.contains(&container.name) {
                continue;
            }
            let held = super::restore_check::holding_of(node, &admitted.pod, kind, container);
            let recorded = admitted
                .record
                .holdings
                .as_ref()
                .and_then(|h| h.get(&container.name))
                .cloned()
                .unwrap_or_default();
            assert_eq!(held, recorded, "{}", container.name);
        }
    };
    record_matches(&node);
    assert!(!node.cpu().pod_cpus("p").is_empty(), "{view:?}");
    for name in ["side", "exclusive", "shared"] {
        node.container_started("p", name, &format!("id-{name}"))
            .await
            .unwrap();
    }
    node.container_removed("id-exclusive").await.unwrap();
    record_matches(&node);
    node.stop_devices().await;
    drop(node);
    let node = open_on(&config, &fixture(MACHINE), &fixture_memory(MACHINE)).await;
    record_matches(&node);
    assert!(node.release("p").await.unwrap());
    assert_eq!(held_by(&node, "p", &names), Vec::<String>::new());
    assert_eq!(
        node.cpu().cpu_affinity("other", "c"),
        pool,
        "the shared pool is whole"
    );
    node.stop_devices().await;
    drop(node);
    let node = open_on(&config, &fixture(MACHINE), &fixture_memory(MACHINE)).await;
    assert_eq!(held_by(&node, "p", &names), Vec::<String>::new());
    assert_eq!(node.cpu().cpu_affinity("other", "c"), pool);
}
