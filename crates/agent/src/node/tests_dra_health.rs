//! DRA device health (KEP-4680) through the whole node: the sample driver streams
//! `v1alpha1.DRAResourceHealth` (as 1.36 drivers do), and the app container holding its
//! claim shows `claim:<podClaim>/<request>` with the device's first CDI id and health, the
//! driver's message only with `ResourceHealthStatusMessage`, nothing with
//! `ResourceHealthStatus` off.

use std::time::{Duration, Instant};

use corral_dra::health::DeviceHealthStatus;
use corral_dra::sample::{SampleDeviceHealth, SampleDriver, SampleDriverConfig};
use corral_proto::dra_health::v1alpha1::DRA_RESOURCE_HEALTH_SERVICE;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;

use super::tests::{WAIT, fixture, fixture_memory, gated_config, open_on};
use super::{Admission, Node};

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";
const DRIVER: &str = "gpu.example.com";

fn pod_and_claim() -> (K8sPod, K8sResourceClaim) {
    let pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "p-gpus"}],
            "initContainers": [{"name": "init", "resources": {"claims": [{"name": "gpus"}]}}],
            "containers": [{"name": "app", "resources": {"claims": [{"name": "gpus", "request": "gpu"}]}}],
        },
    }))
    .unwrap();
    let claim = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "p-gpus", "namespace": "default", "uid": "claim-uid"},
        "spec": {},
        "status": {
            "allocation": {"devices": {"results": [{
                "request": "gpu", "driver": DRIVER, "pool": "sample-pool", "device": "gpu-0",
            }]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "p"}],
        },
    }))
    .unwrap();
    (pod, claim)
}

async fn node_with_driver(
    gates: &[(&str, bool)],
) -> (tempfile::TempDir, std::sync::Arc<Node>, SampleDriver) {
    let dir = tempfile::tempdir().unwrap();
    let config = gated_config(dir.path(), "container", gates);
    let node = open_on(&config, &fixture(MACHINE), &fixture_memory(MACHINE)).await;
    let driver = SampleDriver::start(
        SampleDriverConfig::new(
            DRIVER,
            config.layout.plugins_registry_dir(),
            dir.path().join("plugins").join(DRIVER),
        )
        .with_health(DRA_RESOURCE_HEALTH_SERVICE),
    )
    .await
    .unwrap();
    driver.set_allocation("claim-uid", vec![("gpu".into(), "gpu-0".into())]);
    let deadline = Instant::now() + WAIT;
    while node.registry().plugin(DRIVER).is_none() {
        assert!(Instant::now() < deadline, "driver never registered");
        node.registry().sync_once().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (dir, node, driver)
}

/// The app container's status once `check` holds for it (waiting for the stream).
async fn app_status(
    node: &Node,
    check: impl Fn(&[super::resource_status::ResourceStatusView]) -> bool,
) -> Vec<super::resource_status::ResourceStatusView> {
    let deadline = Instant::now() + WAIT;
    loop {
        let view = node.view("p").expect("admitted");
        let status = view.containers[1].allocated_resources_status.clone();
        if check(&status) {
            assert!(view.containers[0].allocated_resources_status.is_empty());
            return status;
        }
        assert!(Instant::now() < deadline, "{status:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn unhealthy() -> Vec<SampleDeviceHealth> {
    let mut d = SampleDeviceHealth::new("gpu-0", DeviceHealthStatus::Unhealthy);
    d.message = "ECC error count exceeded threshold".into();
    vec![d]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_device_that_turns_unhealthy_shows_for_the_app_container() {
    let (_dir, node, driver) = node_with_driver(&[]).await;
    let (pod, claim) = pod_and_claim();
    let answer = node.admit(pod, vec![claim]).await.unwrap();
    assert!(matches!(answer, Admission::Admitted(_)), "{answer:?}");
    // Not reported yet: Unknown.
    let status = app_status(&node, |s| !s.is_empty()).await;
    assert_eq!(status[0].name, "claim:gpus/gpu");
    assert_eq!(
        status[0].resources[0].resource_id,
        "corral.example.com/sample=gpu-0"
    );
    assert_eq!(status[0].resources[0].health, "Unknown");

    driver.set_health(vec![SampleDeviceHealth::new(
        "gpu-0",
        DeviceHealthStatus::Healthy,
    )]);
    app_status(&node, |s| s[0].resources[0].health == "Healthy").await;
    driver.set_health(unhealthy());
    let status = app_status(&node, |s| s[0].resources[0].health == "Unhealthy").await;
    assert_eq!(
        status[0].resources[0].message.as_deref(),
        Some("ECC error count exceeded threshold")
    );
    // The health file names it.
    let file = std::fs::read_to_string(node.state_dir.join("dra_health_state")).unwrap();
    assert!(file.contains(r#""Health":"Unhealthy""#), "{file}");
    assert!(node.release("p").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_need_their_gate_and_status_needs_its_own() {
    let (_dir, node, driver) = node_with_driver(&[("ResourceHealthStatusMessage", false)]).await;
    let (pod, claim) = pod_and_claim();
    node.admit(pod, vec![claim]).await.unwrap();
    driver.set_health(unhealthy());
    let status = app_status(&node, |s| {
        s.first()
            .is_some_and(|s| s.resources[0].health == "Unhealthy")
    })
    .await;
    assert_eq!(status[0].resources[0].message, None);
    drop(driver);

    let (_dir, node, driver) = node_with_driver(&[
        ("ResourceHealthStatus", false),
        ("ResourceHealthStatusMessage", false),
    ])
    .await;
    let (pod, claim) = pod_and_claim();
    node.admit(pod, vec![claim]).await.unwrap();
    driver.set_health(unhealthy());
    // Without the gate nothing watches the driver's health (no monitor observes the
    // registry), so nothing the driver reports can ever show, however long one waits.
    assert!(node.health.is_none());
    let view = node.view("p").unwrap();
    assert!(view.containers[1].allocated_resources_status.is_empty());
    assert!(!node.state_dir.join("dra_health_state").exists());
    drop(driver);
}
