//! Extended resources backed by DRA (KEP-5004) through the whole node: with
//! `DRAExtendedResource` on (v1.36's default) the claim named in the pod's
//! `status.extendedResourceClaimStatus` is prepared with the pod, the container gets the CDI
//! devices of its mapped request, and the device manager is never asked for the resource;
//! with the gate off the status is not read.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;

use super::Admission;
use super::tests::{WAIT, fixture, fixture_memory, gated_config, open_on};

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";
pub(super) const DRIVER: &str = "gpu.example.com";

/// A pod whose container `c0` requests `example.com/gpu: 1`, which the scheduler mapped to
/// request `container-0-request-0` of the generated claim `p-extended-resources-x`; and
/// that claim, allocated on the sample driver and reserved for the pod.
fn pod_and_claim() -> (K8sPod, K8sResourceClaim) {
    let pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {"containers": [{
            "name": "c0",
            "resources": {"limits": {"cpu": "2", "memory": "64Mi", "example.com/gpu": "1"}},
        }]},
        "status": {"extendedResourceClaimStatus": {
            "resourceClaimName": "p-extended-resources-x",
            "requestMappings": [{
                "containerName": "c0",
                "resourceName": "example.com/gpu",
                "requestName": "container-0-request-0",
            }],
        }},
    }))
    .unwrap();
    let claim = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "p-extended-resources-x", "namespace": "default", "uid": "claim-uid"},
        "spec": {},
        "status": {
            "allocation": {"devices": {"results": [{
                "request": "container-0-request-0", "driver": DRIVER,
                "pool": "sample-pool", "device": "gpu-0",
            }]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "p"}],
        },
    }))
    .unwrap();
    (pod, claim)
}

/// A node with the sample driver registered, under `gates`.
pub(super) async fn node_with_driver(
    gates: &[(&str, bool)],
) -> (
    tempfile::TempDir,
    std::sync::Arc<super::Node>,
    corral_dra::sample::SampleDriver,
) {
    let dir = tempfile::tempdir().unwrap();
    let config = gated_config(dir.path(), "container", gates);
    let node = open_on(&config, &fixture(MACHINE), &fixture_memory(MACHINE)).await;
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
    (dir, node, driver)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_is_prepared_and_the_device_manager_never_sees_the_resource() {
    let (_dir, node, driver) = node_with_driver(&[]).await;
    let (pod, claim) = pod_and_claim();
    let answer = node.admit(pod, vec![claim]).await.unwrap();
    let Admission::Admitted(view) = answer else {
        panic!("rejected: {answer:?}");
    };
    let c0 = &view.containers[0];
    assert!(c0.exclusive_cpus, "{c0:?}");
    assert!(
        c0.devices.is_empty(),
        "the device manager gave {:?}",
        c0.devices
    );
    assert_eq!(c0.claims.len(), 1, "{c0:?}");
    assert_eq!(c0.claims[0].name, "p-extended-resources-x");
    assert_eq!(c0.claims[0].devices[0].driver, DRIVER);
    assert!(!c0.cdi_devices.is_empty(), "{c0:?}");
    assert!(node.release("p").await.unwrap());
    assert!(node.dra.claim_infos().is_empty());
    drop(driver);
}
