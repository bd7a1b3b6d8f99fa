//! Admission one container at a time ([`Node::admit_container`]): containers join their
//! pod, a rejected one changes nothing, a restart keeps them all.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::tests::{fixture, open, snapshot, started};
use super::{Admission, Node, PodView};

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";

/// A Guaranteed pod manifest with the one container `name` of `cpus` CPUs.
fn one(uid: &str, name: &str, cpus: u32) -> K8sPod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{
            "name": name,
            "resources": {"limits": {"cpu": cpus.to_string(), "memory": "64Mi"}},
        }]},
    }))
    .unwrap()
}

async fn joined(node: &Arc<Node>, manifest: K8sPod) -> PodView {
    match node.admit_container(manifest).await.unwrap() {
        Admission::Admitted(view) => view,
        Admission::Rejected {
            reason, message, ..
        } => panic!("rejected: {reason}: {message}"),
    }
}

fn cpuset<'a>(view: &'a PodView, name: &str) -> &'a str {
    let container = view.containers.iter().find(|c| c.name == name).unwrap();
    &container.cpuset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_join_their_pod_and_a_rejected_one_changes_nothing() {
    let (dir, config, node) = started(MACHINE, "single-numa-node", &[]).await;
    let first = joined(&node, one("p", "a", 2)).await;
    assert_eq!(first.containers.len(), 1);
    let both = joined(&node, one("p", "b", 2)).await;
    assert_eq!(both.containers.len(), 2);
    let (a, b) = (cpuset(&both, "a").to_owned(), cpuset(&both, "b").to_owned());
    assert_eq!(a, cpuset(&first, "a"));
    let overlap = corral_topology::CpuSet::parse(&a)
        .unwrap()
        .intersects(&corral_topology::CpuSet::parse(&b).unwrap());
    assert!(!overlap, "{a} and {b}");
    // Again: the same answer, nothing allocated twice.
    let again = joined(&node, one("p", "b", 2)).await;
    assert_eq!(cpuset(&again, "b"), b);

    // More CPUs than one NUMA node has: rejected, and no byte of state changes.
    let before = snapshot(dir.path());
    match node.admit_container(one("p", "huge", 12)).await.unwrap() {
        Admission::Rejected { reason, .. } => assert_eq!(reason, "TopologyAffinityError"),
        Admission::Admitted(view) => panic!("admitted: {view:?}"),
    }
    assert_eq!(snapshot(dir.path()), before);
    assert_eq!(node.view("p").unwrap().containers.len(), 2);

    // A restart keeps both containers and their CPUs.
    node.stop_devices().await;
    drop(node);
    let node = open(&config, &fixture(MACHINE)).await;
    let restored = node.view("p").unwrap();
    assert_eq!(
        (cpuset(&restored, "a"), cpuset(&restored, "b")),
        (a.as_str(), b.as_str())
    );
    assert!(node.release("p").await.unwrap());
    assert!(node.cpu().state().exclusive_cpus().is_empty());
}
