//! [`DeviceManagerConfig`]: where the manager listens and keeps its checkpoint, and every
//! deadline and bound it applies to plugins.

use std::path::PathBuf;
use std::time::Duration;

use corral_proto::uds::ServeOptions;
use corral_topology::{CpuTopology, NumaIds};

/// Upstream's grace period before a stopped plugin's resource is dropped
/// (`endpointStopGracePeriod`).
pub const DEFAULT_ENDPOINT_STOP_GRACE: Duration = Duration::from_secs(5 * 60);

/// Default [`DeviceManagerConfig::max_resources_per_plugin`].
pub const DEFAULT_MAX_RESOURCES_PER_PLUGIN: usize = 16;

/// Default [`DeviceManagerConfig::max_resources`].
pub const DEFAULT_MAX_RESOURCES: usize = 256;

/// Configuration of a [`crate::DeviceManager`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceManagerConfig {
    /// The device-plugin directory: `kubelet.sock` is served here and plugin endpoints are
    /// file names in it (upstream: `/var/lib/kubelet/device-plugins/`).
    pub plugin_dir: PathBuf,
    /// Where `kubelet_internal_checkpoint` lives (upstream: the plugin directory).
    pub checkpoint_dir: PathBuf,
    /// The machine's NUMA nodes as mask bits, in the order the topology manager iterates
    /// them (the ids of [`CpuTopology::numa_nodes_for_manager`]).
    pub numa_nodes: Vec<usize>,
    /// Which mask bit stands for which NUMA node OS id (a plugin reports OS ids in
    /// `Device.topology`); the identity, upstream's numbering, unless the machine has a
    /// node id of 64 or more ([`CpuTopology::numa_ids`]).
    pub numa_ids: NumaIds,
    /// How long a stopped plugin's resource stays before it is dropped (upstream: 5 min).
    pub endpoint_stop_grace: Duration,
    /// Deadline for dialing a plugin's socket (upstream: 10 s).
    pub dial_timeout: Duration,
    /// Deadline for `GetDevicePluginOptions`, `GetPreferredAllocation`, `Allocate` and for
    /// the first answer of `ListAndWatch` (upstream: none).
    pub rpc_timeout: Duration,
    /// Deadline for `PreStartContainer` (upstream: 30 s).
    pub pre_start_timeout: Duration,
    /// How long an admission that needs a resource whose plugin has not (re-)registered
    /// waits for it before failing (upstream: fails at once).
    pub registration_wait: Duration,
    /// Largest device list accepted from a plugin; a longer list is ignored and logged.
    pub max_devices_per_plugin: usize,
    /// Largest gRPC message accepted from a plugin, in bytes.
    pub max_message_bytes: usize,
    /// How often a plugin's socket is checked for existence while its stream is open.
    pub socket_poll_interval: Duration,
    /// Most resources one plugin may have registered at once; a plugin is its endpoint
    /// socket (the registrations naming the same endpoint). A registration of one more is
    /// refused with `RESOURCE_EXHAUSTED` naming this cap; re-registering a resource the
    /// plugin has is always accepted (it replaces the old endpoint). Each registered
    /// resource holds one connection to its plugin. Default
    /// [`DEFAULT_MAX_RESOURCES_PER_PLUGIN`] (upstream: no cap).
    pub max_resources_per_plugin: usize,
    /// Most resources all plugins together may have registered at once; beyond it as
    /// [`max_resources_per_plugin`](Self::max_resources_per_plugin). Default
    /// [`DEFAULT_MAX_RESOURCES`] (upstream: no cap).
    pub max_resources: usize,
    /// Connection limits of the registration socket `kubelet.sock` (handshake timeout,
    /// connection cap) and its shutdown grace period. Default: [`ServeOptions::default`]
    /// with a 1 s grace period.
    pub registration_server: ServeOptions,
}

impl DeviceManagerConfig {
    /// Defaults (upstream's values where upstream has one) for a plugin directory and the
    /// machine's NUMA nodes (OS ids = mask bits, as upstream); the checkpoint lives in the
    /// plugin directory. A machine from discovery takes [`for_topology`](Self::for_topology).
    pub fn new(plugin_dir: impl Into<PathBuf>, numa_nodes: Vec<usize>) -> DeviceManagerConfig {
        let plugin_dir = plugin_dir.into();
        DeviceManagerConfig {
            checkpoint_dir: plugin_dir.clone(),
            plugin_dir,
            numa_nodes,
            numa_ids: NumaIds::identity(),
            endpoint_stop_grace: DEFAULT_ENDPOINT_STOP_GRACE,
            dial_timeout: Duration::from_secs(10),
            rpc_timeout: Duration::from_secs(30),
            pre_start_timeout: Duration::from_secs(
                corral_proto::deviceplugin::v1beta1::KUBELET_PRE_START_CONTAINER_RPC_TIMEOUT_SECS,
            ),
            registration_wait: Duration::from_secs(10),
            max_devices_per_plugin: 100_000,
            max_message_bytes: 64 << 20,
            socket_poll_interval: Duration::from_secs(1),
            max_resources_per_plugin: DEFAULT_MAX_RESOURCES_PER_PLUGIN,
            max_resources: DEFAULT_MAX_RESOURCES,
            registration_server: ServeOptions {
                grace: Duration::from_secs(1),
                ..ServeOptions::default()
            },
        }
    }

    /// As [`new`](Self::new), for the NUMA nodes of `topology`: their mask bits and the
    /// table that maps the OS ids plugins report to those bits.
    ///
    /// ```
    /// use corral_devicemgr::DeviceManagerConfig;
    /// use corral_topology::{CpuInfo, CpuRecord, CpuTopology};
    ///
    /// let records = [(0, 0), (1, 72)].map(|(cpu, numa)| CpuRecord {
    ///     cpu,
    ///     info: CpuInfo { core: cpu, socket: 0, numa, uncore: 0 },
    /// });
    /// let config = DeviceManagerConfig::for_topology("/var/lib/kubelet/device-plugins", &CpuTopology::new(&records)?);
    /// assert_eq!(config.numa_nodes, vec![0, 1]);
    /// assert_eq!(config.numa_ids.bit(72)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_topology(
        plugin_dir: impl Into<PathBuf>,
        topology: &CpuTopology,
    ) -> DeviceManagerConfig {
        let nodes = topology
            .numa_nodes_for_manager()
            .iter()
            .map(|n| n.id)
            .collect();
        DeviceManagerConfig {
            numa_ids: topology.numa_ids().clone(),
            ..DeviceManagerConfig::new(plugin_dir, nodes)
        }
    }

    /// The registration socket, `<plugin dir>/kubelet.sock`.
    pub fn kubelet_socket(&self) -> PathBuf {
        self.plugin_dir
            .join(corral_proto::deviceplugin::v1beta1::KUBELET_SOCKET_NAME)
    }
}
