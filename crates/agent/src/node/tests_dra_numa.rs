//! DRA devices placed on NUMA nodes by their ResourceSlices (`resource.kubernetes.io/numaNode`)
//! steer the pod's exclusive CPUs and memory (`dra_devices`); without the attribute the pod
//! is decided as upstream decides it, DRA devices ignored.

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::{ResourceClaim as K8sResourceClaim, ResourceSlice};

use super::Admission;
use super::tests::fixture;
use super::tests_dra_extended::{DRIVER, node_with_driver};

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";
const POOL: &str = "sample-pool";

/// A Guaranteed pod whose container `c0` uses claim `gpu` (a direct ResourceClaim), and the
/// claim, allocated `gpu-0` (request `gpus`) and `nic-0` (request `nics`) of the sample
/// driver's pool.
fn pod_and_claim(request: Option<&str>) -> (K8sPod, K8sResourceClaim) {
    let claim_ref = match request {
        Some(request) => serde_json::json!({"name": "gpu", "request": request}),
        None => serde_json::json!({"name": "gpu"}),
    };
    let pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
            "containers": [{
                "name": "c0",
                "resources": {
                    "limits": {"cpu": "2", "memory": "64Mi"},
                    "claims": [claim_ref],
                },
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
                {"request": "gpus", "driver": DRIVER, "pool": POOL, "device": "gpu-0"},
                {"request": "nics", "driver": DRIVER, "pool": POOL, "device": "nic-0"},
            ]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "p"}],
        },
    }))
    .unwrap();
    (pod, claim)
}

/// A slice of the sample pool with `gpu-0` on NUMA node `gpu_numa` (no attribute when `None`) and
/// `nic-0` on node 0.
fn slice(gpu_numa: Option<i64>) -> ResourceSlice {
    let gpu_attributes = match gpu_numa {
        Some(numa) => serde_json::json!({
            "resource.kubernetes.io/numaNode": {"int": numa},
            "model": {"string": "x"},
        }),
        None => serde_json::json!({"model": {"string": "x"}}),
    };
    crate::manifest::slice_from_document(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "node-a-gpus"},
        "spec": {
            "driver": DRIVER, "nodeName": "node-a",
            "pool": {"name": POOL, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "attributes": gpu_attributes},
                {"name": "nic-0", "attributes": {"resource.kubernetes.io/numaNode": {"int": 0}}},
            ],
        },
    }))
    .unwrap()
}

/// The NUMA nodes `c0`'s exclusive CPUs sit on, once the pod is admitted under
/// `single-numa-node` (the sample driver prepares the claim).
async fn cpus_numa(request: Option<&str>, slices: Vec<ResourceSlice>) -> Vec<usize> {
    let (_dir, node, driver) = node_with_driver(&[]).await;
    let (pod, claim) = pod_and_claim(request);
    let answer = node
        .admit_with_slices(pod, vec![claim], slices)
        .await
        .unwrap();
    let Admission::Admitted(view) = answer else {
        panic!("rejected: {answer:?}");
    };
    let c0 = &view.containers[0];
    assert!(c0.exclusive_cpus, "{c0:?}");
    let cpus: corral_topology::CpuSet = c0.cpuset.parse().unwrap();
    let topology = fixture(MACHINE);
    let details = topology.details();
    drop(driver);
    (0..2)
        .filter(|numa| cpus.intersects(&details.cpus_in_numa_nodes([*numa])))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_on_node_1_takes_the_cpus_to_node_1() {
    // `c0` uses request `gpus`: gpu-0, which the slice places on node 1.
    assert_eq!(cpus_numa(Some("gpus"), vec![slice(Some(1))]).await, [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_attribute_the_device_is_ignored_as_upstream() {
    // Upstream's single-numa-node choice for a 2-CPU container: the lowest node.
    assert_eq!(cpus_numa(Some("gpus"), vec![slice(None)]).await, [0]);
    assert_eq!(cpus_numa(Some("gpus"), Vec::new()).await, [0]);
    // The whole claim, nic-0 placed on node 0 and gpu-0 nowhere: node 0.
    assert_eq!(cpus_numa(None, vec![slice(None)]).await, [0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_follows_only_the_request_it_uses() {
    // `c0` uses request `nics` (node 0), not `gpus` (node 1).
    assert_eq!(cpus_numa(Some("nics"), vec![slice(Some(1))]).await, [0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_on_two_nodes_cannot_be_aligned_under_single_numa_node() {
    // The whole claim: gpu-0 on node 1 and nic-0 on node 0.
    let (_dir, node, driver) = node_with_driver(&[]).await;
    let (pod, claim) = pod_and_claim(None);
    let answer = node
        .admit_with_slices(pod, vec![claim], vec![slice(Some(1))])
        .await
        .unwrap();
    let Admission::Rejected { reason, .. } = answer else {
        panic!("admitted: {answer:?}");
    };
    assert_eq!(reason, "TopologyAffinityError");
    assert!(node.cpu().exclusive_cpus("p", "c0").is_empty());
    drop(driver);
}
