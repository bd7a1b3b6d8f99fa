//! Crash consistency: a manager killed between recording a claim and preparing it, between
//! preparing and checkpointing, or between unpreparing and forgetting, then restarted from
//! the same state dir, is consistent — the claim is never forgotten while a driver may hold
//! it prepared — and the driver is called again idempotently.

use std::sync::Arc;

use crate::support::*;
use corral_dra::{CrashPoint, DraManager, DraManagerConfig, DraManagerError, PluginRegistry};

const DRIVER: &str = "gpu.example.com";
const PREPARE: &str = "NodePrepareResources";
const UNPREPARE: &str = "NodeUnprepareResources";

fn crashing(
    dirs: &Dirs,
    registry: &Arc<PluginRegistry>,
    point: CrashPoint,
) -> DraManager<Arc<PluginRegistry>> {
    let config = DraManagerConfig {
        crash_at: Some(point),
        ..DraManagerConfig::default()
    };
    let store = corral_checkpoint::CheckpointStore::open(dirs.state()).unwrap();
    DraManager::new(
        corral_checkpoint::StateFile::in_store(&store, corral_checkpoint::DRA_MANAGER_FILE)
            .unwrap(),
        Arc::clone(registry),
        config,
    )
    .unwrap()
}

/// A manager that crashed at `point` preparing pod-1's claim: dead, for further calls.
async fn crashed_preparing(
    dirs: &Dirs,
    registry: &Arc<PluginRegistry>,
    point: CrashPoint,
) -> DraManager<Arc<PluginRegistry>> {
    let m = crashing(dirs, registry, point);
    let err = prepare_pod1(&m, DRIVER).await.unwrap_err();
    assert!(
        matches!(err, DraManagerError::Crashed(at) if at == point),
        "{err}"
    );
    m
}

#[tokio::test]
async fn killed_between_record_and_prepare() {
    let (dirs, registry, watcher, driver) = with_sample(DRIVER).await;
    let p = pod("pod-1", &["c1"]);
    let c = claim("c1", DRIVER, &["pod-1"]);
    {
        let m = crashed_preparing(&dirs, &registry, CrashPoint::AfterRecord).await;
        // A dead manager refuses everything.
        assert!(m.unprepare_resources("pod-1").await.is_err());
    }
    assert_eq!(driver.call_count(PREPARE, "c1-uid"), 0);

    // Restarted: the claim is remembered (with its driver), unprepared.
    let m = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let info = m
        .claim_info("default", "c1")
        .expect("recorded before the driver call");
    assert!(!info.is_prepared());
    assert_eq!(info.drivers().collect::<Vec<_>>(), [DRIVER]);
    assert!(m.pod_might_need_to_unprepare_resources("pod-1"));

    // The pod is still wanted: prepared now.
    m.prepare_resources(&p, &[c]).await.unwrap();
    assert_eq!(driver.call_count(PREPARE, "c1-uid"), 1);
    assert!(m.claim_info("default", "c1").unwrap().is_prepared());
    watcher.stop().await;
}

#[tokio::test]
async fn killed_between_record_and_prepare_then_pod_gone() {
    let (dirs, registry, watcher, driver) = with_sample(DRIVER).await;
    {
        let m = crashing(&dirs, &registry, CrashPoint::AfterRecord);
        let _ = prepare_pod1(&m, DRIVER).await;
    }
    let m = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    // The pod went away meanwhile: unpreparing asks the driver (idempotent), then forgets.
    m.unprepare_resources("pod-1").await.unwrap();
    assert_eq!(driver.call_count(UNPREPARE, "c1-uid"), 1);
    assert!(m.claim_infos().is_empty());
    watcher.stop().await;
}

#[tokio::test]
async fn killed_between_prepare_and_checkpoint() {
    let (dirs, registry, watcher, driver) = with_sample(DRIVER).await;
    let p = pod("pod-1", &["c1"]);
    let c = claim("c1", DRIVER, &["pod-1"]);
    // The dead manager is gone before the restart.
    drop(crashed_preparing(&dirs, &registry, CrashPoint::AfterPrepare).await);
    // The driver holds it prepared; the checkpoint knows the claim but not its devices.
    assert_eq!(driver.call_count(PREPARE, "c1-uid"), 1);
    assert!(driver.prepared().contains_key("c1-uid"));
    let m = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let info = m.claim_info("default", "c1").expect("never forgotten");
    assert!(info.devices(DRIVER).is_empty());

    // Prepared again: the driver is asked a second time and answers the same devices.
    m.prepare_resources(&p, &[c]).await.unwrap();
    assert_eq!(driver.call_count(PREPARE, "c1-uid"), 2);
    let info = m.claim_info("default", "c1").unwrap();
    assert_eq!(info.devices(DRIVER), driver.prepared()["c1-uid"]);
    let text = std::fs::read_to_string(dirs.state().join("dra_manager_state")).unwrap();
    assert!(text.contains("claim-c1-uid"), "{text}");
    watcher.stop().await;
}

#[tokio::test]
async fn killed_between_unprepare_and_forget() {
    let (dirs, registry, watcher, driver) = with_sample(DRIVER).await;
    let p = pod("pod-1", &["c1"]);
    DraManager::open(dirs.state(), Arc::clone(&registry))
        .unwrap()
        .prepare_resources(&p, &[claim("c1", DRIVER, &["pod-1"])])
        .await
        .unwrap();
    {
        let m = crashing(&dirs, &registry, CrashPoint::AfterUnprepare);
        let err = m.unprepare_resources("pod-1").await.unwrap_err();
        assert!(matches!(
            err,
            DraManagerError::Crashed(CrashPoint::AfterUnprepare)
        ));
    }
    assert_eq!(driver.call_count(UNPREPARE, "c1-uid"), 1);
    let m = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    assert!(
        m.pod_might_need_to_unprepare_resources("pod-1"),
        "still in the checkpoint"
    );
    m.unprepare_resources("pod-1").await.unwrap();
    assert_eq!(
        driver.call_count(UNPREPARE, "c1-uid"),
        2,
        "unprepared again, idempotently"
    );
    assert!(m.claim_infos().is_empty());
    watcher.stop().await;
}
