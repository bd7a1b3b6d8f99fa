//! A pod released (or refused) and admitted again with the same uid — a client's retry
//! through the admission API — is decided as on a node that never saw it: what its init
//! containers left for its later containers to reuse (the memory manager's reusable
//! memory, the CPU manager's CPUs to reuse) goes with the pod, where upstream keeps it
//! until another pod is allocated (a kubelet never admits a uid twice).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::Node;
use super::tests_concurrent::{config, holdings, machine, open, outcome};

/// Pod `uid`: a Guaranteed init container (2 CPUs, 600Mi) then a Guaranteed app container
/// (1 CPU, 300Mi), which reuses part of what the init container had.
fn with_init(uid: &str) -> K8sPod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {
            "initContainers": [{"name": "init", "resources": {"limits": {"cpu": "2", "memory": "600Mi"}}}],
            "containers": [{"name": "c0", "resources": {"limits": {"cpu": "1", "memory": "300Mi"}}}],
        },
    }))
    .unwrap()
}

async fn admitted(node: &Arc<Node>, pod: K8sPod) {
    let answer = node.admit(pod, Vec::new()).await.unwrap();
    assert_eq!(outcome(&answer), "admitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_admitted_again_after_its_release_is_decided_as_on_a_fresh_node() {
    let machine = machine(2, 4, 1024, 0);
    let (again_dir, fresh_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let again = open(
        &config(again_dir.path(), "best-effort", "container"),
        &machine,
    )
    .await;
    let fresh = open(
        &config(fresh_dir.path(), "best-effort", "container"),
        &machine,
    )
    .await;
    let empty = holdings(&again);
    admitted(&again, with_init("r")).await;
    assert!(again.release("r").await.unwrap());
    assert_eq!(holdings(&again), empty, "everything given back");
    admitted(&again, with_init("r")).await;
    admitted(&fresh, with_init("r")).await;
    assert_eq!(holdings(&again), holdings(&fresh));
    again.stop_devices().await;
    fresh.stop_devices().await;
}
