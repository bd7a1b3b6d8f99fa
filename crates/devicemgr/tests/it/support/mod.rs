//! Shared helpers of the device manager's integration tests: a manager on a temporary
//! plugin directory, sample plugins registered with it, pods. Every wait is bounded by a
//! generous [`WAIT`]; only tests of hanging plugins use a shorter deadline
//! ([`HANG_DEADLINE`]), which the hang is sure to hit.

use std::path::Path;
use std::time::Duration;

use corral_devicemgr::sample::{SampleConfig, SamplePlugin};
use corral_devicemgr::{DeviceManager, DeviceManagerConfig, StartOptions};
use corral_proto::deviceplugin::v1beta1::{self as api, ContainerAllocateResponse};
use corral_topology::{Container, ContainerRestartPolicy, Pod};

/// Assert that `result` (of an allocation) failed with an [`AllocateError`] matching
/// `pattern`; evaluates to the error.
///
/// [`AllocateError`]: corral_devicemgr::AllocateError
macro_rules! assert_allocate_error {
    ($result:expr, $pattern:pat) => {{
        let err = $result.unwrap_err();
        assert!(
            matches!(
                err,
                corral_devicemgr::DeviceManagerError::Allocate($pattern)
            ),
            "{err}"
        );
        err
    }};
}

/// Every wait in these tests is bounded by this: generous, so that a loaded machine makes
/// the tests slower, never makes them fail.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// The plugin-call deadline of the tests in which a hanging call must hit it
/// ([`config_with_deadline`]). The calls that must succeed in those tests are answered at
/// once by a sample plugin in this process, which this leaves ample room on a loaded
/// machine; each such test waits it out once per hang.
pub(crate) const HANG_DEADLINE: Duration = Duration::from_secs(10);

/// A config for tests: deadlines no call of a well-behaved plugin hits, even on a loaded
/// machine ([`WAIT`]); upstream's grace period for stopped plugins (tests of its expiry
/// set a short one); admission never waits for a plugin to register.
pub(crate) fn config(dir: &Path, numa_nodes: Vec<usize>) -> DeviceManagerConfig {
    let mut config = DeviceManagerConfig::new(dir, numa_nodes);
    config.dial_timeout = WAIT;
    config.rpc_timeout = WAIT;
    config.pre_start_timeout = WAIT;
    config.registration_wait = Duration::ZERO;
    config.socket_poll_interval = Duration::from_millis(50);
    config
}

/// [`config`] whose plugin calls (`PreStartContainer` too) have [`HANG_DEADLINE`], for the
/// tests of hanging plugins.
pub(crate) fn config_with_deadline(dir: &Path, numa_nodes: Vec<usize>) -> DeviceManagerConfig {
    let mut config = config(dir, numa_nodes);
    config.rpc_timeout = HANG_DEADLINE;
    config.pre_start_timeout = HANG_DEADLINE;
    config
}

/// A started manager.
pub(crate) async fn manager(config: DeviceManagerConfig) -> DeviceManager {
    let manager = DeviceManager::new(config).expect("manager");
    manager.start(StartOptions::default()).await.expect("start");
    manager
}

/// A temporary plugin directory and a manager started on it with [`config`].
pub(crate) async fn started(numa_nodes: Vec<usize>) -> (tempfile::TempDir, DeviceManager) {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = manager(config(dir.path(), numa_nodes)).await;
    (dir, manager)
}

/// Start a sample plugin, register it, and wait until its devices are listed.
pub(crate) async fn plugin(manager: &DeviceManager, config: SampleConfig) -> SamplePlugin {
    let resource = config.resource.clone();
    let plugin = SamplePlugin::start(config).await.expect("plugin serves");
    plugin
        .register(&manager.socket_path())
        .await
        .expect("registration accepted");
    assert!(
        manager.wait_for_plugin(&resource, WAIT).await,
        "{resource} listed its devices"
    );
    plugin
}

/// [`started`] on `numa_nodes`, with a sample plugin on `<dir>/gpu.sock` serving `count`
/// devices of `resource` on `numa` whose devices are listed.
pub(crate) async fn started_with_plugin(
    numa_nodes: Vec<usize>,
    resource: &str,
    count: usize,
    numa: &[i64],
) -> (tempfile::TempDir, DeviceManager, SamplePlugin) {
    let (dir, manager) = started(numa_nodes).await;
    let plugin = plugin(&manager, sample(dir.path(), resource, "gpu", count, numa)).await;
    (dir, manager, plugin)
}

/// [`sample`] on `<dir>/gpu.sock` of a plugin that offers `GetPreferredAllocation` and
/// requires `PreStartContainer`.
/// Allocates `container`'s devices with the topology manager's affinity NUMA node `numa`.
pub(crate) async fn allocate_on(
    manager: &DeviceManager,
    pod: &Pod,
    container: &Container,
    numa: usize,
) {
    let affinity = corral_topology::NumaMask::new([numa]).unwrap();
    manager
        .allocate(pod, container, Some(affinity))
        .await
        .unwrap();
}

/// The run options of a container that holds devices.
pub(crate) async fn run_options(
    manager: &DeviceManager,
    pod: &Pod,
    container: &Container,
) -> corral_devicemgr::RunContainerOptions {
    let options = manager.run_container_options(pod, container, None).await;
    options
        .unwrap()
        .expect("run options of a container holding devices")
}

pub(crate) fn fussy_sample(dir: &Path, resource: &str, count: usize, numa: &[i64]) -> SampleConfig {
    let mut config = sample(dir, resource, "gpu", count, numa);
    config.preferred_allocation = true;
    config.pre_start_required = true;
    config
}

/// A sample config on `<dir>/<name>.sock`.
pub(crate) fn sample(
    dir: &Path,
    resource: &str,
    name: &str,
    count: usize,
    numa: &[i64],
) -> SampleConfig {
    SampleConfig::new(resource, dir.join(format!("{name}.sock")), count, numa)
}

/// A container asking for device-plugin resources (limits = requests).
pub(crate) fn container(name: &str, resources: &[(&str, i64)]) -> Container {
    let mut c = Container::new(name);
    for (r, n) in resources {
        c.resources.limits.extended.insert((*r).to_owned(), *n);
        c.resources.requests.extended.insert((*r).to_owned(), *n);
    }
    c
}

/// A sidecar (restartable init container).
pub(crate) fn sidecar(name: &str, resources: &[(&str, i64)]) -> Container {
    let mut c = container(name, resources);
    c.restart_policy = Some(ContainerRestartPolicy::Always);
    c
}

/// A pod.
pub(crate) fn pod(uid: &str, init: Vec<Container>, app: Vec<Container>) -> Pod {
    Pod {
        uid: uid.into(),
        namespace: "default".into(),
        name: format!("pod-{uid}"),
        init_containers: init,
        containers: app,
        ..Pod::default()
    }
}

/// A read-only mount of host path `h` at container path `c`.
fn read_only_mount(c: &str, h: &str) -> api::Mount {
    api::Mount {
        container_path: c.into(),
        host_path: h.into(),
        read_only: true,
    }
}

/// A plugin's `Allocate` answer for one container: environment, device nodes and mounts
/// (container path, host path; devices `mrw`, mounts read-only) and CDI devices.
pub(crate) fn allocate_response(
    envs: &[(&str, &str)],
    devices: &[(&str, &str)],
    mounts: &[(&str, &str)],
    cdi: &[&str],
) -> ContainerAllocateResponse {
    ContainerAllocateResponse {
        envs: envs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        devices: devices
            .iter()
            .map(|(c, h)| api::DeviceSpec {
                container_path: (*c).into(),
                host_path: (*h).into(),
                permissions: "mrw".into(),
            })
            .collect(),
        mounts: mounts.iter().map(|(c, h)| read_only_mount(c, h)).collect(),
        cdi_devices: cdi
            .iter()
            .map(|n| api::CdiDevice { name: (*n).into() })
            .collect(),
        ..ContainerAllocateResponse::default()
    }
}
