//! The registration handshake over real unix sockets: a plugin is accepted, refused for an
//! unsupported version or a wrong type (and told why), dropped when its socket goes, and
//! registered again when it restarts under the same name.

mod common;

use std::time::Duration;

use common::*;
use corral_dra::sample::{SampleDriver, SampleDriverConfig};
use corral_dra::{DraService, RegistrationEvent};

#[tokio::test]
async fn accepted_plugin_is_registered_and_notified() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut events = registry.subscribe();
    let mut driver = sample(&dirs, "gpu.example.com").await;
    assert_eq!(
        driver.wait_for_status(0, WAIT).await,
        Some((true, String::new()))
    );
    wait_registered(&registry, "gpu.example.com").await;
    let plugin = registry.plugin("gpu.example.com").unwrap();
    assert_eq!(
        plugin.service(),
        DraService::V1,
        "the newest service is chosen"
    );
    assert_eq!(plugin.endpoint(), driver.config().endpoint());
    let event = tokio::time::timeout(WAIT, events.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(event, RegistrationEvent::Registered { ref driver, .. } if driver == "gpu.example.com")
    );

    // The socket goes: the driver is dropped.
    driver.stop().await;
    assert!(!driver.config().registration_socket().exists());
    eventually("deregistration", || async { registry.drivers().is_empty() }).await;
    watcher.stop().await;
}

#[tokio::test]
async fn unsupported_version_is_rejected_with_reason() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut config =
        SampleDriverConfig::new("old.example.com", dirs.registry(), dirs.plugins("old"));
    config.supported_versions = vec!["v1alpha3.Node".into()];
    let driver = SampleDriver::start(config).await.unwrap();
    let (registered, reason) = driver.wait_for_status(0, WAIT).await.unwrap();
    assert!(!registered);
    assert!(
        reason.contains("none of services supported by the plugin"),
        "{reason}"
    );
    assert!(reason.contains("v1alpha3.Node"), "{reason}");
    assert!(registry.drivers().is_empty());
    watcher.stop().await;
}

#[tokio::test]
async fn wrong_type_is_rejected_with_reason() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut config =
        SampleDriverConfig::new("csi.example.com", dirs.registry(), dirs.plugins("csi"));
    config.plugin_type = "CSIPlugin".into();
    let driver = SampleDriver::start(config).await.unwrap();
    let (registered, reason) = driver.wait_for_status(0, WAIT).await.unwrap();
    assert!(!registered);
    assert!(
        reason.contains("no handler registered for plugin type: CSIPlugin"),
        "{reason}"
    );
    assert!(registry.drivers().is_empty());
    watcher.stop().await;
}

#[tokio::test]
async fn v1beta1_only_plugin_gets_v1beta1() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut config =
        SampleDriverConfig::new("beta.example.com", dirs.registry(), dirs.plugins("beta"));
    config.supported_versions = vec!["v1beta1.DRAPlugin".into()];
    let _driver = SampleDriver::start(config).await.unwrap();
    wait_registered(&registry, "beta.example.com").await;
    assert_eq!(
        registry.plugin("beta.example.com").unwrap().service(),
        DraService::V1Beta1
    );
    watcher.stop().await;
}

#[tokio::test]
async fn restart_under_the_same_name_registers_again() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut driver = sample(&dirs, "gpu.example.com").await;
    assert_eq!(
        driver.wait_for_status(0, WAIT).await,
        Some((true, String::new()))
    );
    wait_registered(&registry, "gpu.example.com").await;
    driver.restart().await.unwrap();
    assert_eq!(
        driver.wait_for_status(1, WAIT).await,
        Some((true, String::new()))
    );
    wait_registered(&registry, "gpu.example.com").await;
    assert_eq!(registry.store().plugin_count("gpu.example.com"), 1);
    watcher.stop().await;
}

#[tokio::test]
async fn rejected_plugin_is_retried_with_backoff() {
    let dirs = Dirs::new();
    let (_registry, watcher) = registry(&dirs);
    let mut config =
        SampleDriverConfig::new("old.example.com", dirs.registry(), dirs.plugins("old"));
    config.supported_versions = vec!["v0.DRAPlugin".into()];
    let driver = SampleDriver::start(config).await.unwrap();
    assert_eq!(
        driver.wait_for_status(1, WAIT).await.map(|s| s.0),
        Some(false)
    );
    watcher.stop().await;
    // No more scans once stopped.
    let seen = driver.registration_statuses().len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(driver.registration_statuses().len(), seen);
}

#[tokio::test]
async fn non_socket_files_and_hidden_names_are_ignored() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.registry()).unwrap();
    std::fs::write(dirs.registry().join("not-a-socket"), b"x").unwrap();
    let registry = corral_dra::PluginRegistry::new(fast_config(&dirs.registry()));
    let mut events = registry.subscribe();
    registry.sync_once().await;
    assert!(events.try_recv().is_err());
    assert!(registry.drivers().is_empty());
}
