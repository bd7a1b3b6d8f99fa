//! A pod admitted again with other resources (an in-place resize): refused with upstream's
//! `Infeasible` reason while the managers hold exclusive resources for it, taken (the
//! record follows) when they hold nothing.

use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::Admission;
use super::resize::{CPU_STATIC_INFEASIBLE, INFEASIBLE};
use super::tests::{admitted, pod, snapshot, started};

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";

/// A Burstable pod: one container requesting `millis` of CPU, limited to 2.
fn burstable(uid: &str, millis: u32) -> K8sPod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{
            "name": "c0",
            "resources": {
                "requests": {"cpu": format!("{millis}m")},
                "limits": {"cpu": "2"},
            },
        }]},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guaranteed_pod_under_the_static_policy_is_not_resized() {
    let (dir, _config, node) = started(MACHINE, "none", &[]).await;
    let first = admitted(&node, pod("g", &[2])).await;
    let before = snapshot(dir.path());
    let answer = node.admit(pod("g", &[3]), Vec::new()).await.unwrap();
    let Admission::Rejected {
        reason, message, ..
    } = answer
    else {
        panic!("resized: {answer:?}");
    };
    assert_eq!(
        (reason.as_str(), message.as_str()),
        (INFEASIBLE, CPU_STATIC_INFEASIBLE)
    );
    assert_eq!(snapshot(dir.path()), before);
    // The same spec again is the same answer as before.
    assert_eq!(admitted(&node, pod("g", &[2])).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_in_the_shared_pool_is_resized_and_its_record_follows() {
    let (_dir, _config, node) = started(MACHINE, "none", &[]).await;
    admitted(&node, burstable("b", 500)).await;
    let view = admitted(&node, burstable("b", 700)).await;
    assert!(!view.containers[0].exclusive_cpus);
    let held = node.pods().get("b").unwrap();
    let requests = &held.pod.containers[0].resources.requests;
    assert_eq!(requests.cpu_millis, Some(700));
    assert!(
        held.record.pod.to_string().contains("700m"),
        "{}",
        held.record.pod
    );
}
