//! Helpers shared by the tests: temp dirs, a fast registry with a sample driver, pods and
//! claims, a bounded wait, and error-text checks.

#![allow(dead_code, unreachable_pub)]

pub mod fake_driver;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use corral_dra::sample::{SampleDriver, SampleDriverConfig};
use corral_dra::{
    AllocatedDevice, ConsumerRef, DraManager, DraManagerError, DriverClients, PluginRegistry,
    PodClaim, PodClaims, RegistryConfig, RegistryWatcher, ResourceClaim,
};

/// Upper bound of every wait in these tests: what they wait for happens far sooner, also on
/// a busy machine; this only ends a test that would otherwise hang.
pub const WAIT: Duration = Duration::from_secs(60);

pub const NAMESPACE: &str = "default";

/// A temp dir with `registry/`, `plugins/` and `state/` beneath.
pub struct Dirs {
    pub root: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Self {
        // Short paths: unix socket paths are limited to 108 bytes.
        let root = tempfile::Builder::new()
            .prefix("dra")
            .tempdir_in("/tmp")
            .unwrap();
        Dirs { root }
    }
    pub fn registry(&self) -> PathBuf {
        self.root.path().join("reg")
    }
    pub fn plugins(&self, driver: &str) -> PathBuf {
        self.root.path().join("plugins").join(driver)
    }
    pub fn state(&self) -> PathBuf {
        self.root.path().join("state")
    }
}

/// A registry that scans and retries quickly, and whose deadlines (a handshake step, a
/// socket's whole probe, a driver call) are longer than any answer takes here, also on a
/// busy machine: a test that wants a deadline to pass sets a short one itself.
pub fn fast_config(dir: &Path) -> RegistryConfig {
    RegistryConfig {
        poll_interval: Duration::from_millis(20),
        retry_initial: Duration::from_millis(50),
        retry_max: Duration::from_millis(200),
        registration_timeout: WAIT,
        probe_timeout: WAIT,
        call_timeout: WAIT,
        ..RegistryConfig::new(dir)
    }
}

pub fn registry(dirs: &Dirs) -> (Arc<PluginRegistry>, RegistryWatcher) {
    let registry = PluginRegistry::new(fast_config(&dirs.registry()));
    let watcher = registry.watch();
    (registry, watcher)
}

pub async fn sample(dirs: &Dirs, driver: &str) -> SampleDriver {
    SampleDriver::start(SampleDriverConfig::new(
        driver,
        dirs.registry(),
        dirs.plugins(driver),
    ))
    .await
    .unwrap()
}

/// Poll `check` every 10 ms until it holds or [`WAIT`] passes.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn wait_registered(registry: &PluginRegistry, driver: &str) {
    eventually(&format!("{driver} registered"), || async {
        registry.drivers().iter().any(|d| d == driver)
    })
    .await;
}

pub fn pod(uid: &str, claims: &[&str]) -> PodClaims {
    pod_in(NAMESPACE, uid, claims)
}

/// A pod in `namespace` whose pod claims are named after the claims they use.
pub fn pod_in(namespace: &str, uid: &str, claims: &[&str]) -> PodClaims {
    PodClaims {
        uid: uid.into(),
        namespace: namespace.into(),
        name: format!("pod-{uid}"),
        claims: claims
            .iter()
            .map(|c| PodClaim {
                name: c.to_string(),
                claim_name: Some(c.to_string()),
            })
            .collect(),
    }
}

pub fn claim(name: &str, driver: &str, pods: &[&str]) -> ResourceClaim {
    claim_in(
        NAMESPACE,
        name,
        allocated("req", driver, "sample-pool", "dev"),
        pods,
    )
}

/// Claim `namespace/name` (uid `<name>-uid`) with one allocated device, reserved for the
/// pods with these uids.
pub fn claim_in(
    namespace: &str,
    name: &str,
    device: AllocatedDevice,
    pods: &[&str],
) -> ResourceClaim {
    ResourceClaim {
        namespace: namespace.into(),
        name: name.into(),
        uid: format!("{name}-uid"),
        allocation: Some(vec![device]),
        reserved_for: pods.iter().map(|p| ConsumerRef::pod("p", *p)).collect(),
    }
}

/// The device `request` of a claim got: `device` of `pool`, from `driver`.
pub fn allocated(request: &str, driver: &str, pool: &str, device: &str) -> AllocatedDevice {
    AllocatedDevice {
        request: request.into(),
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
    }
}

/// `pod-1` prepares its claim `c1` of `driver`.
pub async fn prepare_pod1<D: DriverClients>(
    manager: &DraManager<D>,
    driver: &str,
) -> Result<(), DraManagerError> {
    manager
        .prepare_resources(&pod("pod-1", &["c1"]), &[claim("c1", driver, &["pod-1"])])
        .await
}

/// The error as reported — its text, then each cause's, `: `-separated, as the agent
/// prints it — names every one of `parts`.
pub fn assert_mentions(err: &(dyn std::error::Error + 'static), parts: &[&str]) {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(source) = cause {
        text = format!("{text}: {source}");
        cause = source.source();
    }
    assert!(parts.iter().all(|part| text.contains(part)), "{text}");
}

/// A watched registry with a sample driver of `driver` registered in it.
pub async fn with_sample(
    driver: &str,
) -> (Dirs, Arc<PluginRegistry>, RegistryWatcher, SampleDriver) {
    let started = with_sample_config(driver, |_| {}).await;
    wait_registered(&started.1, driver).await;
    started
}

/// A watched registry and a sample driver of `driver`, its settings changed by `adjust`,
/// started (registered or not).
pub async fn with_sample_config(
    driver: &str,
    adjust: impl FnOnce(&mut SampleDriverConfig),
) -> (Dirs, Arc<PluginRegistry>, RegistryWatcher, SampleDriver) {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut config = SampleDriverConfig::new(driver, dirs.registry(), dirs.plugins(driver));
    adjust(&mut config);
    let sample = SampleDriver::start(config).await.unwrap();
    (dirs, registry, watcher, sample)
}
