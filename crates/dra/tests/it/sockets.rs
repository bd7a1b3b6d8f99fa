//! The manager end to end over real unix sockets: registry + sample driver + the kubelet's
//! `dra_manager_state` file in a temp state dir.

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use corral_dra::sample::{Behavior, ShareIds};
use corral_dra::{DraManager, DraManagerError, DriverCallError, PluginRegistry, RegistryConfig};
use corral_topology::{Container, ContainerClaim};

const DRIVER: &str = "gpu.example.com";
const PREPARE: &str = "NodePrepareResources";
const UNPREPARE: &str = "NodeUnprepareResources";

fn container(claim: &str, request: Option<&str>) -> Container {
    let mut c = Container::new("main");
    c.claims.push(ContainerClaim {
        name: claim.into(),
        request: request.map(str::to_owned),
    });
    c
}

fn checkpoint_text(dirs: &Dirs) -> String {
    std::fs::read_to_string(dirs.state().join("dra_manager_state")).unwrap()
}

#[tokio::test]
async fn prepare_get_unprepare() {
    let (dirs, registry, watcher, driver) = with_sample(DRIVER).await;
    driver.set_allocation(
        "c1-uid",
        vec![
            ("gpu".into(), "gpu-0".into()),
            ("nic".into(), "nic-0".into()),
        ],
    );
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    prepare_pod1(&manager, DRIVER).await.unwrap();
    let p = pod("pod-1", &["c1"]);
    assert_eq!(driver.call_count(PREPARE, "c1-uid"), 1);
    assert!(driver.calls().iter().all(|c| c.version == "v1"));

    let gpu = manager
        .get_resources(&p, &container("c1", Some("gpu")))
        .unwrap();
    assert_eq!(gpu.cdi_devices, ["corral.example.com/sample=gpu-0"]);
    let all = manager.get_resources(&p, &container("c1", None)).unwrap();
    assert_eq!(all.cdi_devices.len(), 2);
    assert!(
        checkpoint_text(&dirs)
            .contains(r#"\"CDIDeviceIDs\":[\"corral.example.com/sample=gpu-0\"]"#)
    );

    manager.unprepare_resources("pod-1").await.unwrap();
    assert_eq!(driver.call_count(UNPREPARE, "c1-uid"), 1);
    assert!(driver.prepared().is_empty());
    assert!(manager.claim_infos().is_empty());
    assert!(checkpoint_text(&dirs).contains(r#"\"ClaimInfoStateList\":[]"#));
    watcher.stop().await;
}

#[tokio::test]
async fn shared_claim_across_two_pods() {
    let (dirs, registry, watcher, driver) = with_sample(DRIVER).await;
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let shared = claim("shared", DRIVER, &["pod-a", "pod-b"]);
    manager
        .prepare_resources(&pod("pod-a", &["shared"]), std::slice::from_ref(&shared))
        .await
        .unwrap();
    manager
        .prepare_resources(&pod("pod-b", &["shared"]), &[shared])
        .await
        .unwrap();
    assert_eq!(driver.call_count(PREPARE, "shared-uid"), 1, "prepared once");
    assert!(checkpoint_text(&dirs).contains(r#"\"PodUIDs\":{\"pod-a\":{},\"pod-b\":{}}"#));

    manager.unprepare_resources("pod-a").await.unwrap();
    assert_eq!(
        driver.call_count(UNPREPARE, "shared-uid"),
        0,
        "pod-b still uses it"
    );
    let b = manager
        .get_resources(&pod("pod-b", &["shared"]), &container("shared", None))
        .unwrap();
    assert_eq!(
        b.cdi_devices,
        ["corral.example.com/sample=claim-shared-uid"]
    );
    manager.unprepare_resources("pod-b").await.unwrap();
    assert_eq!(driver.call_count(UNPREPARE, "shared-uid"), 1);
    watcher.stop().await;
}

#[tokio::test]
async fn driver_missing_is_a_clear_error_and_nothing_is_prepared() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let err = prepare_pod1(&manager, "absent.example.com")
        .await
        .unwrap_err();
    assert!(matches!(err, DraManagerError::DriverNotRegistered { .. }));
    assert_mentions(
        &err,
        &["absent.example.com", "default/c1", "default/pod-pod-1"],
    );
    assert!(manager.claim_infos().is_empty());
    assert!(checkpoint_text(&dirs).contains(r#"\"ClaimInfoStateList\":[]"#));
    watcher.stop().await;
}

#[tokio::test]
async fn driver_restart_and_disappearance() {
    let (dirs, registry, watcher, mut driver) = with_sample(DRIVER).await;
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    prepare_pod1(&manager, DRIVER).await.unwrap();

    // Restart under the same name: registered again, calls reach the new instance.
    driver.restart().await.unwrap();
    assert_eq!(
        driver.wait_for_status(1, WAIT).await,
        Some((true, String::new()))
    );
    wait_registered(&registry, DRIVER).await;
    manager
        .prepare_resources(&pod("pod-2", &["c2"]), &[claim("c2", DRIVER, &["pod-2"])])
        .await
        .unwrap();
    assert_eq!(driver.call_count(PREPARE, "c2-uid"), 1);

    // Gone: unprepare fails naming the driver, and the claim stays for a retry.
    driver.stop().await;
    eventually("deregistration", || async { registry.drivers().is_empty() }).await;
    let err = manager.unprepare_resources("pod-1").await.unwrap_err();
    assert!(
        matches!(err, DraManagerError::DriverNotRegistered { ref driver, .. } if driver == DRIVER),
        "{err}"
    );
    assert!(manager.pod_might_need_to_unprepare_resources("pod-1"));

    // Back: the retry succeeds.
    driver.restart().await.unwrap();
    wait_registered(&registry, DRIVER).await;
    manager.unprepare_resources("pod-1").await.unwrap();
    assert!(!manager.pod_might_need_to_unprepare_resources("pod-1"));
    watcher.stop().await;
}

// The call deadline is the feature: a driver that never answers fails the call once it
// passes. The test waits for that (at most `WAIT`, 200 times the deadline) and asserts only
// that it happened, never how soon.
#[tokio::test]
async fn hanging_driver_hits_the_deadline() {
    let dirs = Dirs::new();
    let config = RegistryConfig {
        call_timeout: Duration::from_millis(300),
        ..fast_config(&dirs.registry())
    };
    let registry = PluginRegistry::new(config);
    let watcher = registry.watch();
    let driver = sample(&dirs, DRIVER).await;
    wait_registered(&registry, DRIVER).await;
    driver.set_behavior(Behavior::Hang);
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let err = tokio::time::timeout(WAIT, prepare_pod1(&manager, DRIVER))
        .await
        .expect("bounded by the call deadline")
        .unwrap_err();
    assert!(
        matches!(
            err,
            DraManagerError::DriverCall {
                source: DriverCallError::DeadlineExceeded(_),
                ..
            }
        ),
        "{err}"
    );
    assert!(!manager.claim_info("default", "c1").unwrap().is_prepared());
    watcher.stop().await;
}

#[tokio::test]
async fn per_claim_and_call_failures_name_claim_and_driver() {
    let (dirs, registry, watcher, driver) = with_sample(DRIVER).await;
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    driver.set_behavior(Behavior::FailClaims("device is on fire".into()));
    let err = prepare_pod1(&manager, DRIVER).await.unwrap_err();
    assert_mentions(&err, &["default/c1", DRIVER, "device is on fire"]);
    driver.set_behavior(Behavior::FailCall("out of memory".into()));
    let err = manager.unprepare_resources("pod-1").await.unwrap_err();
    assert!(matches!(err, DraManagerError::DriverCall { .. }), "{err}");
    assert_mentions(&err, &["out of memory"]);
    driver.set_behavior(Behavior::Normal);
    manager.unprepare_resources("pod-1").await.unwrap();
    watcher.stop().await;
}

// A driver serving only v1beta1 (its v1 implementation behind corral-proto's
// `V1ServerWrapper`) is called on v1beta1 and its devices arrive intact.
#[tokio::test]
async fn v1beta1_only_driver_prepares_and_unprepares() {
    let (dirs, registry, watcher, driver) = with_sample_config(DRIVER, |c| {
        c.supported_versions = vec!["v1beta1.DRAPlugin".into()]
    })
    .await;
    wait_registered(&registry, DRIVER).await;
    driver.set_allocation("c1-uid", vec![("gpu".into(), "gpu-0".into())]);
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    prepare_pod1(&manager, DRIVER).await.unwrap();
    let p = pod("pod-1", &["c1"]);
    let info = manager.claim_info("default", "c1").unwrap();
    assert_eq!(info.devices(DRIVER), driver.prepared()["c1-uid"]);
    let gpu = manager
        .get_resources(&p, &container("c1", Some("gpu")))
        .unwrap();
    assert_eq!(gpu.cdi_devices, ["corral.example.com/sample=gpu-0"]);
    manager.unprepare_resources("pod-1").await.unwrap();
    assert!(driver.prepared().is_empty());
    let versions: Vec<_> = driver
        .calls()
        .iter()
        .map(|c| (c.method, c.version))
        .collect();
    assert_eq!(versions, [(PREPARE, "v1beta1"), (UNPREPARE, "v1beta1")]);
    watcher.stop().await;
}

/// A real driver that leaves a claim out of its answer: upstream's words
/// (`NodePrepareResources skipped 1 ResourceClaims`), the claim named in the cause, nothing
/// marked prepared; the same for NodeUnprepareResources, where the claim stays for a retry.
#[tokio::test]
async fn driver_skipping_a_claim_is_upstreams_error_naming_the_claim() {
    let (dirs, registry, watcher, driver) = with_sample(DRIVER).await;
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let p = pod("pod-1", &["c1", "c2"]);
    let claims = [
        claim("c1", DRIVER, &["pod-1"]),
        claim("c2", DRIVER, &["pod-1"]),
    ];
    driver.set_behavior(Behavior::SkipClaims(vec!["c2-uid".into()]));
    let err = manager.prepare_resources(&p, &claims).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "NodePrepareResources skipped 1 ResourceClaims"
    );
    assert_mentions(&err, &[DRIVER, "default/c2 (c2-uid)", "pod-1"]);
    assert!(manager.claim_infos().iter().all(|c| !c.is_prepared()));

    driver.set_behavior(Behavior::Normal);
    manager.prepare_resources(&p, &claims).await.unwrap();
    driver.set_behavior(Behavior::SkipClaims(vec!["c1-uid".into()]));
    let err = manager.unprepare_resources("pod-1").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "NodeUnprepareResources skipped 1 ResourceClaims"
    );
    assert_mentions(&err, &["default/c1 (c1-uid)"]);
    assert!(manager.claim_info(NAMESPACE, "c1").is_some());

    driver.set_behavior(Behavior::Normal);
    manager.unprepare_resources("pod-1").await.unwrap();
    assert!(manager.claim_infos().is_empty());
    watcher.stop().await;
}

/// A real driver answering for a claim nobody asked about: upstream's words.
#[tokio::test]
async fn driver_answering_an_unknown_claim_is_upstreams_error() {
    let (dirs, registry, watcher, driver) = with_sample(DRIVER).await;
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    driver.set_behavior(Behavior::AnswerUnknownClaim("stranger-uid".into()));
    let err = prepare_pod1(&manager, DRIVER).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "NodePrepareResources returned result for unknown claim UID stranger-uid"
    );
    assert_mentions(&err, &[DRIVER, "pod-1"]);
    driver.set_behavior(Behavior::Normal);
    prepare_pod1(&manager, DRIVER).await.unwrap();
    driver.set_behavior(Behavior::AnswerUnknownClaim("stranger-uid".into()));
    let err = manager.unprepare_resources("pod-1").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "NodeUnprepareResources returned result for unknown claim UID stranger-uid"
    );
    watcher.stop().await;
}

/// Share ids a real driver sends over DRAPlugin v1 reach the claim info and the kubelet's
/// checkpoint; a restarted manager reads them back.
#[tokio::test]
async fn share_ids_reach_claim_info_and_checkpoint() {
    let (dirs, registry, watcher, _driver) = with_sample_config(DRIVER, |config| {
        config.share_ids = ShareIds::PerDevice;
    })
    .await;
    wait_registered(&registry, DRIVER).await;
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    prepare_pod1(&manager, DRIVER).await.unwrap();
    let share = "share-c1-uid-claim-c1-uid";
    let devices = manager.claim_info(NAMESPACE, "c1").unwrap().devices(DRIVER);
    assert_eq!(devices[0].share_id.as_deref(), Some(share));
    assert!(checkpoint_text(&dirs).contains(&format!(
        r#"\"DeviceName\":\"claim-c1-uid\",\"ShareID\":\"{share}\",\"RequestNames\":null"#
    )));
    drop(manager);
    let restarted = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let devices = restarted
        .claim_info(NAMESPACE, "c1")
        .unwrap()
        .devices(DRIVER);
    assert_eq!(devices[0].share_id.as_deref(), Some(share));
    watcher.stop().await;
}
