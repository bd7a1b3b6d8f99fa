//! Device health (KEP-4680) over real unix sockets: the registry's newest plugin of a driver
//! streams `NodeWatchResources` (v1alpha1 as 1.36 drivers do, or v1), the cache and the
//! `dra_health_state` file follow, a container's claims show it, and the stream follows
//! rolling updates as upstream 1.37's tests (TestHealthStreamUsesLatestPlugin,
//! TestHealthStreamDoesNotFallBackFromPreferredPlugin, TestHealthStreamUnimplemented)
//! require.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use crate::support::*;
use corral_checkpoint::{DRA_HEALTH_FILE, DraHealthState};
use corral_dra::health::{DeviceHealthStatus, HealthCache, HealthMonitor, HealthMonitorConfig};
use corral_dra::sample::{SampleDeviceHealth, SampleDriver, SampleDriverConfig};
use corral_dra::{DraManager, PluginRegistry};
use corral_proto::dra_health::{v1, v1alpha1};
use corral_proto::pluginregistration::v1 as reg;
use corral_proto::tonic::{self, Code, Request, Response, Status};
use corral_proto::uds::{SocketOptions, UdsListener};
use corral_topology::{Container, ContainerClaim};
use tokio_util::sync::CancellationToken;

const DRIVER: &str = "gpu.example.com";
const POOL: &str = "sample-pool";

fn monitor(dirs: &Dirs, registry: &PluginRegistry) -> HealthMonitor {
    let (cache, damaged) = HealthCache::open(&dirs.state()).unwrap();
    assert!(damaged.is_none());
    let monitor = HealthMonitor::new(
        Arc::new(cache),
        HealthMonitorConfig {
            retry_interval: Duration::from_millis(100),
            // Longer than any answer takes here: no attempt is dropped as unanswered.
            open_timeout: WAIT,
        },
    );
    registry.set_observer(Arc::new(monitor.clone())).unwrap();
    monitor
}

async fn instance(dirs: &Dirs, pod_uid: &str, health: Option<&str>) -> SampleDriver {
    let mut config = SampleDriverConfig::new(DRIVER, dirs.registry(), dirs.plugins(DRIVER));
    config.rolling_update = Some(pod_uid.into());
    if let Some(service) = health {
        config = config.with_health(service);
    }
    SampleDriver::start(config).await.unwrap()
}

async fn wait_health(monitor: &HealthMonitor, device: &str, want: DeviceHealthStatus) {
    eventually(&format!("{device} {want}"), || async {
        monitor
            .cache()
            .health(DRIVER, POOL, device, SystemTime::now())
            .health
            == want
    })
    .await;
}

async fn wait_stream(monitor: &HealthMonitor, driver: &SampleDriver) -> u64 {
    let endpoint = driver.config().endpoint();
    eventually(&format!("stream on {}", endpoint.display()), || async {
        monitor
            .active_stream(DRIVER)
            .is_some_and(|(at, _)| at == endpoint)
    })
    .await;
    monitor.active_stream(DRIVER).map_or(0, |(_, g)| g)
}

#[tokio::test]
async fn v1alpha1_stream_fills_the_cache_the_file_and_the_container_view() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let monitor = monitor(&dirs, &registry);
    let driver = instance(&dirs, "pod-a", Some(v1alpha1::DRA_RESOURCE_HEALTH_SERVICE)).await;
    driver.set_allocation("c1-uid", vec![("gpu".into(), "gpu-0".into())]);
    let mut unhealthy = SampleDeviceHealth::new("gpu-0", DeviceHealthStatus::Unhealthy);
    unhealthy.message = "ECC error count exceeded threshold".into();
    unhealthy.timeout_seconds = 120;
    driver.set_health(vec![
        SampleDeviceHealth::new("gpu-0", DeviceHealthStatus::Healthy),
        SampleDeviceHealth::new("gpu-1", DeviceHealthStatus::Healthy),
    ]);
    wait_registered(&registry, DRIVER).await;
    wait_stream(&monitor, &driver).await;
    wait_health(&monitor, "gpu-0", DeviceHealthStatus::Healthy).await;

    // A container using the claim sees its device's health.
    let m = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let pod = pod("pod-1", &["c1"]);
    m.prepare_resources(&pod, &[claim("c1", DRIVER, &["pod-1"])])
        .await
        .unwrap();
    let container = Container {
        name: "app".into(),
        claims: vec![ContainerClaim {
            name: "c1".into(),
            request: Some("gpu".into()),
        }],
        ..Default::default()
    };
    let status = m.container_health(&pod, &container, monitor.cache(), SystemTime::now());
    assert_eq!(status.len(), 1, "{status:?}");
    assert_eq!(status[0].name, "claim:c1/gpu");
    assert_eq!(
        status[0].devices[0].resource_id,
        "corral.example.com/sample=gpu-0"
    );
    assert_eq!(status[0].devices[0].health, DeviceHealthStatus::Healthy);

    // It turns unhealthy, with a message and its own timeout.
    driver.set_health(vec![
        unhealthy,
        SampleDeviceHealth::new("gpu-1", DeviceHealthStatus::Healthy),
    ]);
    wait_health(&monitor, "gpu-0", DeviceHealthStatus::Unhealthy).await;
    let status = m.container_health(&pod, &container, monitor.cache(), SystemTime::now());
    assert_eq!(status[0].devices[0].health, DeviceHealthStatus::Unhealthy);
    assert_eq!(
        status[0].devices[0].message.as_deref(),
        Some("ECC error count exceeded threshold")
    );
    let file = std::fs::read(dirs.state().join(DRA_HEALTH_FILE)).unwrap();
    let state = DraHealthState::decode(&file).unwrap();
    let gpu0 = &state.0[DRIVER].devices.as_ref().unwrap()["sample-pool/gpu-0"];
    assert_eq!(gpu0.health, "Unhealthy");
    assert_eq!(gpu0.health_check_timeout, 120_000_000_000);

    // The file survives a restart of the cache.
    let (again, damaged) = HealthCache::open(&dirs.state()).unwrap();
    assert!(damaged.is_none());
    assert_eq!(
        again
            .health(DRIVER, POOL, "gpu-0", SystemTime::now())
            .health,
        DeviceHealthStatus::Unhealthy
    );
    watcher.stop().await;
    monitor.stop();
}

// TestHealthStreamUsesLatestPlugin: a newer instance takes the stream over (next generation)
// without the health being cleared; removing the old one leaves the stream alone; removing
// the last clears it.
#[tokio::test]
async fn stream_follows_the_newest_instance() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let monitor = monitor(&dirs, &registry);
    let mut a = instance(&dirs, "pod-a", Some(v1::DRA_RESOURCE_HEALTH_SERVICE)).await;
    a.set_health(vec![SampleDeviceHealth::new(
        "gpu-0",
        DeviceHealthStatus::Unhealthy,
    )]);
    let first = wait_stream(&monitor, &a).await;
    wait_health(&monitor, "gpu-0", DeviceHealthStatus::Unhealthy).await;

    let mut b = instance(&dirs, "pod-b", Some(v1::DRA_RESOURCE_HEALTH_SERVICE)).await;
    b.set_health(vec![SampleDeviceHealth::new(
        "gpu-0",
        DeviceHealthStatus::Healthy,
    )]);
    let second = wait_stream(&monitor, &b).await;
    assert!(second > first);
    wait_health(&monitor, "gpu-0", DeviceHealthStatus::Healthy).await;

    a.stop().await;
    eventually("a deregistered", || async {
        registry.store().plugin_count(DRIVER) == 1
    })
    .await;
    assert_eq!(
        monitor.active_stream(DRIVER),
        Some((b.config().endpoint(), second))
    );

    b.stop().await;
    eventually("health cleared", || async {
        monitor.active_stream(DRIVER).is_none() && monitor.cache().snapshot().0.is_empty()
    })
    .await;
    watcher.stop().await;
}

// TestHealthStreamDoesNotFallBackFromPreferredPlugin: a newer instance without a health
// service ends the stream and clears the driver's health.
#[tokio::test]
async fn a_newer_instance_without_health_clears_it() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let monitor = monitor(&dirs, &registry);
    let a = instance(&dirs, "pod-a", Some(v1alpha1::DRA_RESOURCE_HEALTH_SERVICE)).await;
    a.set_health(vec![SampleDeviceHealth::new(
        "gpu-0",
        DeviceHealthStatus::Healthy,
    )]);
    wait_stream(&monitor, &a).await;
    wait_health(&monitor, "gpu-0", DeviceHealthStatus::Healthy).await;
    let _b = instance(&dirs, "pod-b", None).await;
    eventually("stream ended and health cleared", || async {
        monitor.active_stream(DRIVER).is_none() && monitor.cache().snapshot().0.is_empty()
    })
    .await;
    let file = std::fs::read(dirs.state().join(DRA_HEALTH_FILE)).unwrap();
    assert_eq!(file, b"{}");
    watcher.stop().await;
}

/// A plugin serving its registration and DRAResourceHealth v1 on one socket
/// (`<registry>/<driver>-reg.sock`, also its DRAPlugin endpoint), whose every
/// `NodeWatchResources` fails with `code`; it counts the calls. Stopped on drop.
struct FailingHealth {
    calls: Arc<AtomicUsize>,
    stop: CancellationToken,
}

#[derive(Clone)]
struct FailingHealthService {
    info: reg::PluginInfo,
    code: Code,
    calls: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl reg::registration_server::Registration for FailingHealthService {
    async fn get_info(
        &self,
        _: Request<reg::InfoRequest>,
    ) -> Result<Response<reg::PluginInfo>, Status> {
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        _: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

#[tonic::async_trait]
impl v1::dra_resource_health_server::DraResourceHealth for FailingHealthService {
    type NodeWatchResourcesStream =
        tokio_stream::Empty<Result<v1::NodeWatchResourcesResponse, Status>>;

    async fn node_watch_resources(
        &self,
        _: Request<v1::NodeWatchResourcesRequest>,
    ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(Status::new(self.code, "no health stream here"))
    }
}

impl FailingHealth {
    fn start(dirs: &Dirs, driver: &str, code: Code) -> Self {
        let socket = dirs.registry().join(format!("{driver}-reg.sock"));
        let service = FailingHealthService {
            info: reg::PluginInfo {
                r#type: reg::DRA_PLUGIN.into(),
                name: driver.into(),
                endpoint: String::new(),
                supported_versions: vec![
                    "v1.DRAPlugin".into(),
                    v1::DRA_RESOURCE_HEALTH_SERVICE.into(),
                ],
            },
            code,
            calls: Arc::default(),
        };
        let calls = Arc::clone(&service.calls);
        let listener = UdsListener::bind(&socket, &SocketOptions::default()).unwrap();
        let router = tonic::transport::Server::builder()
            .add_service(reg::registration_server::RegistrationServer::new(
                service.clone(),
            ))
            .add_service(v1::dra_resource_health_server::DraResourceHealthServer::new(service));
        let stop = CancellationToken::new();
        tokio::spawn(corral_proto::uds::serve(
            router,
            listener,
            stop.clone().cancelled_owned(),
            Duration::from_millis(100),
        ));
        FailingHealth { calls, stop }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Drop for FailingHealth {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

// TestHealthStreamUnimplemented: a plugin that lists the service but answers UNIMPLEMENTED
// ends the stream for good (no retry loop), its health cleared.
#[tokio::test]
async fn an_unimplemented_stream_ends_for_good() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let monitor = monitor(&dirs, &registry);
    let changes = monitor.subscribe();
    let unimplemented = FailingHealth::start(&dirs, DRIVER, Code::Unimplemented);
    wait_registered(&registry, DRIVER).await;
    eventually("stream deactivated", || async {
        *changes.borrow() > 0 && monitor.active_stream(DRIVER).is_none()
    })
    .await;
    assert_eq!(unimplemented.calls(), 1);
    // Still off after several retry intervals: a stream that failed otherwise, started
    // after this one ended, is retried twice meanwhile (each after the same interval).
    let failing = FailingHealth::start(&dirs, "nic.example.com", Code::Unavailable);
    eventually("the other stream retried twice", || async {
        failing.calls() >= 3
    })
    .await;
    assert_eq!(
        unimplemented.calls(),
        1,
        "the unimplemented stream was retried"
    );
    assert_eq!(monitor.active_stream(DRIVER), None);
    watcher.stop().await;
}

/// Upstream #140904 (v1.38, "dra: guard health cache against nil map from checkpoint"): a
/// `dra_health_state` of JSON `null`, or a driver whose `Devices` is `null`, left Go's
/// cache with nil maps and the next update panicked ("assignment to entry in nil map").
/// corral never had it: such files read as empty maps, and the next report is taken and
/// written back.
#[test]
fn a_health_file_with_null_maps_takes_the_next_report() {
    for text in [
        "null",
        r#"{"driverA":{"Devices":null}}"#,
        r#"{"driverA":null}"#,
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DRA_HEALTH_FILE), text).unwrap();
        let (cache, damaged) = HealthCache::open(dir.path()).unwrap();
        assert!(damaged.is_none(), "{text}: {damaged:?}");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let report = corral_dra::health::ReportedDevice {
            pool_name: "pool".into(),
            device_name: "dev".into(),
            health: DeviceHealthStatus::Unhealthy,
            timeout: None,
            message: None,
        };
        let changes = cache.update("driverA", &[report], now).unwrap();
        assert_eq!(changes.len(), 1, "{text}");
        assert_eq!(
            cache.health("driverA", "pool", "dev", now).health,
            DeviceHealthStatus::Unhealthy,
            "{text}"
        );
        let written = std::fs::read(dir.path().join(DRA_HEALTH_FILE)).unwrap();
        let state = DraHealthState::decode(&written).unwrap();
        assert!(
            state.0["driverA"]
                .devices
                .as_ref()
                .unwrap()
                .contains_key("pool/dev")
        );
    }
}
