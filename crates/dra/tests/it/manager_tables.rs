//! Upstream's manager test tables (`pkg/kubelet/cm/dra/manager_test.go`), ported as facts
//! about behaviour, run against an in-memory driver and an in-memory checkpoint.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use corral_checkpoint::StateFile;
use corral_dra::{
    DraManager, DraManagerConfig, DraManagerError, DriverClients, PodClaim, PodClaims,
    PreparedDevice, ResourceClaim,
};
use corral_topology::{Container, ContainerClaim};

use crate::support::fake_driver::{Answer, FAKE_DRIVER, FAKE_REQUEST, FakeDriver};
use crate::support::{allocated, assert_mentions, claim_in, pod_in};

const DRIVER: &str = FAKE_DRIVER;
const NAMESPACE: &str = "test-namespace";
const POD_UID: &str = "test-pod-uid";
const CLAIM: &str = "test-claim";
const CLAIM_UID: &str = "test-claim-uid";
const REQUEST: &str = FAKE_REQUEST;
const CDI_ID: &str = "test-driver/test=claim-test-claim-uid";

fn pod(uid: &str, claims: &[&str]) -> PodClaims {
    pod_in(NAMESPACE, uid, claims)
}

/// The test pod prepares the test claim.
async fn prepare_default<D: DriverClients>(m: &DraManager<D>) -> Result<(), DraManagerError> {
    m.prepare_resources(&pod(POD_UID, &[CLAIM]), &[claim(CLAIM, DRIVER, &[POD_UID])])
        .await
}

fn claim(name: &str, driver: &str, reserved_for: &[&str]) -> ResourceClaim {
    let device = allocated(REQUEST, driver, "worker-1-pool", "dev-1");
    claim_in(NAMESPACE, name, device, reserved_for)
}

fn container(claims: &[(&str, Option<&str>)]) -> Container {
    let mut c = Container::new("test-container");
    c.claims = claims
        .iter()
        .map(|(name, request)| ContainerClaim {
            name: name.to_string(),
            request: request.map(str::to_owned),
        })
        .collect();
    c
}

fn manager(driver: FakeDriver) -> (DraManager<FakeDriver>, StateFile) {
    let store = StateFile::in_memory();
    let m = DraManager::new(store.clone(), driver, DraManagerConfig::default()).unwrap();
    (m, store)
}

// TestPrepareResources "claim doesn't exist": a pod claim the caller did not supply.
#[tokio::test]
async fn prepare_claim_not_supplied() {
    let (m, _) = manager(FakeDriver::new(Answer::Devices));
    let err = m
        .prepare_resources(&pod(POD_UID, &[CLAIM]), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(err, DraManagerError::ClaimNotSupplied { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("test-namespace/test-claim"));
    assert_eq!(m.drivers().prepare_calls.load(Ordering::SeqCst), 0);
}

// TestPrepareResources "unknown driver": error names the driver; nothing is recorded.
#[tokio::test]
async fn prepare_unknown_driver() {
    let (m, store) = manager(FakeDriver::new(Answer::Devices));
    let err = m
        .prepare_resources(
            &pod(POD_UID, &[CLAIM]),
            &[claim(CLAIM, "unknown driver", &[POD_UID])],
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("DRA driver unknown driver is not registered"),
        "{err}"
    );
    assert!(m.claim_infos().is_empty());
    let bytes = store.load().unwrap().unwrap();
    assert!(
        String::from_utf8(bytes)
            .unwrap()
            .contains(r#"\"ClaimInfoStateList\":[]"#)
    );
}

// TestPrepareResources "should prepare resources, driver returns nil value": no devices.
#[tokio::test]
async fn prepare_driver_returns_no_devices() {
    let answer = Answer::Fixed(BTreeMap::from([(format!("{CLAIM}-uid"), Ok(vec![]))]));
    let (m, _) = manager(FakeDriver::new(answer));
    prepare_default(&m).await.unwrap();
    let info = m.claim_info(NAMESPACE, CLAIM).unwrap();
    assert!(info.is_prepared());
    assert!(info.devices(DRIVER).is_empty());
    assert_eq!(m.drivers().prepare_calls.load(Ordering::SeqCst), 1);
}

// TestPrepareResources "driver returns empty result": every claim must be answered.
#[tokio::test]
async fn prepare_driver_skips_claims() {
    let (m, _) = manager(FakeDriver::new(Answer::Fixed(BTreeMap::new())));
    let err = prepare_default(&m).await.unwrap_err();
    assert!(
        matches!(err, DraManagerError::ClaimsSkipped { skipped: 1, .. }),
        "{err}"
    );
    // Upstream's words; the claims left out are in the cause.
    assert_eq!(
        err.to_string(),
        "NodePrepareResources skipped 1 ResourceClaims"
    );
    let chain = corral_proto::error_chain(&err);
    assert!(
        chain.contains("test-namespace/test-claim (test-claim-uid)"),
        "{chain}"
    );
    assert!(!m.claim_info(NAMESPACE, CLAIM).unwrap().is_prepared());
}

// An answer for a claim that was not asked about is an error.
#[tokio::test]
async fn prepare_driver_answers_unknown_claim() {
    let answer = Answer::Fixed(BTreeMap::from([
        (format!("{CLAIM}-uid"), Ok(vec![])),
        ("stranger".to_owned(), Ok(vec![])),
    ]));
    let (m, _) = manager(FakeDriver::new(answer));
    let err = prepare_default(&m).await.unwrap_err();
    assert!(
        matches!(err, DraManagerError::UnknownClaimInResponse { ref claim_uid, .. } if claim_uid == "stranger")
    );
    assert_eq!(
        err.to_string(),
        "NodePrepareResources returned result for unknown claim UID stranger"
    );
}

// A per-claim driver error names the claim and the driver.
#[tokio::test]
async fn prepare_per_claim_error() {
    let answer = Answer::Fixed(BTreeMap::from([(
        format!("{CLAIM}-uid"),
        Err("no such GPU".into()),
    )]));
    let (m, _) = manager(FakeDriver::new(answer));
    let err = prepare_default(&m).await.unwrap_err();
    assert_mentions(&err, &["test-namespace/test-claim", DRIVER, "no such GPU"]);
    // Recorded (the driver may have done part of the work), not prepared, still the pod's.
    let info = m.claim_info(NAMESPACE, CLAIM).unwrap();
    assert!(!info.is_prepared());
    assert!(m.pod_might_need_to_unprepare_resources(POD_UID));
}

// TestPrepareResources "pod is not allowed to use resource claim".
#[tokio::test]
async fn prepare_not_reserved() {
    let (m, _) = manager(FakeDriver::new(Answer::Devices));
    let err = m
        .prepare_resources(&pod(POD_UID, &[CLAIM]), &[claim(CLAIM, DRIVER, &[""])])
        .await
        .unwrap_err();
    assert!(matches!(err, DraManagerError::NotReserved { .. }));
    assert_mentions(
        &err,
        &[
            "is not allowed to use resource claim",
            POD_UID,
            "test-claim",
        ],
    );
    assert!(m.claim_infos().is_empty());
}

// TestPrepareResources "no container uses the claim": still prepared.
#[tokio::test]
async fn prepare_claim_no_container_uses() {
    let (m, _) = manager(FakeDriver::new(Answer::Devices));
    prepare_default(&m).await.unwrap();
    let info = m
        .get_resources(&pod(POD_UID, &[CLAIM]), &container(&[]))
        .unwrap();
    assert!(info.cdi_devices.is_empty());
    assert!(m.claim_info(NAMESPACE, CLAIM).unwrap().is_prepared());
}

// TestPrepareResources "resource already prepared": no driver call, pod reference added.
#[tokio::test]
async fn prepare_already_prepared() {
    let (m, _) = manager(FakeDriver::new(Answer::Devices));
    let c = claim(CLAIM, DRIVER, &[POD_UID, "other-pod"]);
    m.prepare_resources(&pod(POD_UID, &[CLAIM]), std::slice::from_ref(&c))
        .await
        .unwrap();
    m.prepare_resources(&pod("other-pod", &[CLAIM]), &[c])
        .await
        .unwrap();
    assert_eq!(m.drivers().prepare_calls.load(Ordering::SeqCst), 1);
    let info = m.claim_info(NAMESPACE, CLAIM).unwrap();
    assert_eq!(info.pod_uids().collect::<Vec<_>>(), ["other-pod", POD_UID]);
}

// TestPrepareResources "should timeout" (the call error is reported with driver and claims).
#[tokio::test]
async fn prepare_call_error() {
    let (m, _) = manager(FakeDriver::new(Answer::CallError("DeadlineExceeded")));
    let err = prepare_default(&m).await.unwrap_err();
    assert_mentions(&err, &["NodePrepareResources", DRIVER, "DeadlineExceeded"]);
}

// TestPrepareResources "should prepare resource, claim not in cache": the state matches
// upstream's genClaimInfoState(cdiID), in v1.36's layout (`"ShareID":null`).
#[tokio::test]
async fn prepare_claim_not_in_cache() {
    let (m, store) = manager(FakeDriver::new(Answer::Devices));
    prepare_default(&m).await.unwrap();
    let info = m.claim_info(NAMESPACE, CLAIM).unwrap();
    assert_eq!(info.uid(), CLAIM_UID);
    assert_eq!(info.pod_uids().collect::<Vec<_>>(), [POD_UID]);
    assert_eq!(info.cdi_devices(None), [CDI_ID]);
    let file = String::from_utf8(store.load().unwrap().unwrap()).unwrap();
    assert!(file.contains(r#"\"DriverState\":{\"test-driver\":{\"Devices\":[{\"PoolName\":\"worker-1-pool\",\"DeviceName\":\"dev-1\",\"ShareID\":null,\"RequestNames\":[\"test-request\"],\"CDIDeviceIDs\":[\"test-driver/test=claim-test-claim-uid\"]}]}}"#), "{file}");
}

// A cached claim of the same name with another uid is an error naming both uids.
#[tokio::test]
async fn prepare_uid_mismatch() {
    let (m, _) = manager(FakeDriver::new(Answer::Devices));
    prepare_default(&m).await.unwrap();
    let mut recreated = claim(CLAIM, DRIVER, &["pod-2"]);
    recreated.uid = "new-uid".into();
    let err = m
        .prepare_resources(&pod("pod-2", &[CLAIM]), &[recreated])
        .await
        .unwrap_err();
    assert!(matches!(err, DraManagerError::ClaimUidMismatch { .. }));
    assert!(err.to_string().contains("test-claim-uid") && err.to_string().contains("new-uid"));
    assert!(!m.pod_might_need_to_unprepare_resources("pod-2"));
}

// TestUnprepareResources "should unprepare resource" and "resource claim referenced by
// other pod(s)": only the last pod triggers the driver call.
#[tokio::test]
async fn unprepare_shared_claim() {
    let (m, _) = manager(FakeDriver::new(Answer::Devices));
    let c = claim(CLAIM, DRIVER, &["pod-a", "pod-b"]);
    m.prepare_resources(&pod("pod-a", &[CLAIM]), std::slice::from_ref(&c))
        .await
        .unwrap();
    m.prepare_resources(&pod("pod-b", &[CLAIM]), &[c])
        .await
        .unwrap();
    m.unprepare_resources("pod-a").await.unwrap();
    assert_eq!(m.drivers().unprepare_calls.load(Ordering::SeqCst), 0);
    assert!(!m.pod_might_need_to_unprepare_resources("pod-a"));
    assert!(m.claim_info(NAMESPACE, CLAIM).is_some());
    m.unprepare_resources("pod-b").await.unwrap();
    assert_eq!(m.drivers().unprepare_calls.load(Ordering::SeqCst), 1);
    assert!(m.claim_info(NAMESPACE, CLAIM).is_none());
    // Idempotent.
    m.unprepare_resources("pod-b").await.unwrap();
    assert_eq!(m.drivers().unprepare_calls.load(Ordering::SeqCst), 1);
}

// TestUnprepareResources "should fail when driver returns empty response" and per-claim
// errors: the claim stays cached and referenced, for a retry.
#[tokio::test]
async fn unprepare_failures_keep_the_claim() {
    let (m, _) = manager(FakeDriver::new(Answer::Devices));
    prepare_default(&m).await.unwrap();
    *m.drivers().unprepare.lock().unwrap() = Some(BTreeMap::new());
    let err = m.unprepare_resources(POD_UID).await.unwrap_err();
    assert!(
        matches!(err, DraManagerError::ClaimsSkipped { skipped: 1, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "NodeUnprepareResources skipped 1 ResourceClaims"
    );
    *m.drivers().unprepare.lock().unwrap() =
        Some(BTreeMap::from([(CLAIM_UID.to_owned(), Err("busy".into()))]));
    let err = m.unprepare_resources(POD_UID).await.unwrap_err();
    assert!(
        err.to_string().contains("busy") && err.to_string().contains("test-namespace/test-claim")
    );
    assert!(m.pod_might_need_to_unprepare_resources(POD_UID));
    *m.drivers().unprepare.lock().unwrap() = None;
    m.unprepare_resources(POD_UID).await.unwrap();
    assert!(!m.pod_might_need_to_unprepare_resources(POD_UID));
}

// TestPodMightNeedToUnprepareResources.
#[tokio::test]
async fn pod_might_need_to_unprepare() {
    let (m, _) = manager(FakeDriver::new(Answer::Devices));
    assert!(!m.pod_might_need_to_unprepare_resources(POD_UID));
    prepare_default(&m).await.unwrap();
    assert!(m.pod_might_need_to_unprepare_resources(POD_UID));
    assert!(!m.pod_might_need_to_unprepare_resources("other"));
}

// TestGetResources / TestGetContainerClaimInfos: only the requests the container names;
// a claim missing from the cache is an error.
#[tokio::test]
async fn get_resources_by_request() {
    let two_requests = Answer::Fixed(BTreeMap::from([(
        format!("{CLAIM}-uid"),
        Ok(vec![
            PreparedDevice {
                request_names: vec!["gpu".into()],
                pool_name: "p".into(),
                device_name: "gpu-0".into(),
                cdi_device_ids: vec!["example.com/gpu=gpu-0".into()],
                share_id: Some("gpu-share".into()),
            },
            PreparedDevice {
                request_names: vec!["nic".into()],
                pool_name: "p".into(),
                device_name: "nic-0".into(),
                cdi_device_ids: vec!["example.com/nic=nic-0".into()],
                share_id: None,
            },
        ]),
    )]));
    let (m, _) = manager(FakeDriver::new(two_requests));
    let p = pod(POD_UID, &[CLAIM]);
    m.prepare_resources(&p, &[claim(CLAIM, DRIVER, &[POD_UID])])
        .await
        .unwrap();
    let gpu = m
        .get_resources(&p, &container(&[(CLAIM, Some("gpu"))]))
        .unwrap();
    assert_eq!(gpu.cdi_devices, ["example.com/gpu=gpu-0"]);
    assert!(gpu.annotations.is_empty());
    let all = m.get_resources(&p, &container(&[(CLAIM, None)])).unwrap();
    assert_eq!(
        all.cdi_devices,
        ["example.com/gpu=gpu-0", "example.com/nic=nic-0"]
    );
    let infos = m
        .container_claim_infos(&p, &container(&[(CLAIM, None)]))
        .unwrap();
    assert_eq!(infos.len(), 1);
    // The driver's share ids reach the claim info (and so podresources).
    let share_ids: Vec<_> = infos[0]
        .devices(DRIVER)
        .into_iter()
        .map(|d| d.share_id)
        .collect();
    assert_eq!(share_ids, [Some("gpu-share".to_owned()), None]);
    let missing = pod(POD_UID, &["not-prepared"]);
    let err = m
        .get_resources(&missing, &container(&[("not-prepared", None)]))
        .unwrap_err();
    assert!(matches!(err, DraManagerError::ClaimNotCached { .. }));
    assert!(
        m.container_claim_infos(&missing, &container(&[("not-prepared", None)]))
            .is_err()
    );
}

// CDI annotations (upstream up to v1.30) when configured.
#[tokio::test]
async fn get_resources_with_annotations() {
    let store = StateFile::in_memory();
    let config = DraManagerConfig {
        cdi_annotations: true,
        ..DraManagerConfig::default()
    };
    let m = DraManager::new(store, FakeDriver::new(Answer::Devices), config).unwrap();
    let p = pod(POD_UID, &[CLAIM]);
    m.prepare_resources(&p, &[claim(CLAIM, DRIVER, &[POD_UID])])
        .await
        .unwrap();
    let info = m.get_resources(&p, &container(&[(CLAIM, None)])).unwrap();
    assert_eq!(
        info.annotations,
        BTreeMap::from([(
            format!("cdi.k8s.io/{DRIVER}_{CLAIM_UID}"),
            CDI_ID.to_owned()
        )])
    );
}

// After a restart every cached claim is prepared again, and re-preparing replaces the
// devices (unlike upstream kubernetes#140471, which appends).
#[tokio::test]
async fn restart_reprepares_and_replaces_devices() {
    let store = StateFile::in_memory();
    let p = pod(POD_UID, &[CLAIM]);
    let c = claim(CLAIM, DRIVER, &[POD_UID]);
    {
        let m = DraManager::new(
            store.clone(),
            FakeDriver::new(Answer::Devices),
            DraManagerConfig::default(),
        )
        .unwrap();
        m.prepare_resources(&p, std::slice::from_ref(&c))
            .await
            .unwrap();
    }
    let m = DraManager::new(
        store.clone(),
        FakeDriver::new(Answer::Devices),
        DraManagerConfig::default(),
    )
    .unwrap();
    let restored = m.claim_info(NAMESPACE, CLAIM).unwrap();
    assert!(!restored.is_prepared());
    assert_eq!(restored.devices(DRIVER).len(), 1);
    m.prepare_resources(&p, &[c]).await.unwrap();
    assert_eq!(m.drivers().prepare_calls.load(Ordering::SeqCst), 1);
    let info = m.claim_info(NAMESPACE, CLAIM).unwrap();
    assert!(info.is_prepared());
    assert_eq!(info.devices(DRIVER).len(), 1, "replaced, not appended");
}

// Claims of several drivers are batched per driver; a claim used twice by the pod is sent
// once.
#[tokio::test]
async fn batches_per_driver() {
    let (m, _) = manager(FakeDriver::new(Answer::Devices));
    let p = PodClaims {
        claims: vec![
            PodClaim {
                name: "a".into(),
                claim_name: Some("claim-a".into()),
            },
            PodClaim {
                name: "b".into(),
                claim_name: Some("claim-b".into()),
            },
            PodClaim {
                name: "a-again".into(),
                claim_name: Some("claim-a".into()),
            },
            PodClaim {
                name: "none".into(),
                claim_name: None,
            },
        ],
        ..pod(POD_UID, &[])
    };
    let claims = [
        claim("claim-a", DRIVER, &[POD_UID]),
        claim("claim-b", DRIVER, &[POD_UID]),
    ];
    m.prepare_resources(&p, &claims).await.unwrap();
    assert_eq!(m.drivers().prepare_calls.load(Ordering::SeqCst), 1);
    assert_eq!(m.claim_infos().len(), 2);
    m.unprepare_resources(POD_UID).await.unwrap();
    assert_eq!(m.drivers().unprepare_calls.load(Ordering::SeqCst), 1);
    assert!(m.claim_infos().is_empty());
}
