//! The agent's configuration: a YAML or JSON file whose keys are KubeletConfiguration's
//! (the ones the resource managers read) plus corral's own, overlaid by command-line flags,
//! then validated as a whole before anything starts. Every invalid value is reported with
//! its key and the accepted values, all at once.

mod gates;
mod layout;
mod memory;
mod topology;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_cpumgr::{OptionsError, PolicyError};
use corral_topology::topologymanager::TopologyManagerConfig;
use corral_topology::{CpuSet, Feature, FeatureGates, PolicyName};
use serde::Deserialize;

use crate::cli::ConfigArgs;

pub(crate) use crate::duration::{GoDuration, parse_go_duration};
pub(crate) use layout::Layout;
pub(crate) use memory::{MemorySettings, ReservedMemoryEntry};

/// The config file and the flags, as written (every key optional).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConfigSource {
    // KubeletConfiguration keys.
    pub(crate) cpu_manager_policy: Option<String>,
    pub(crate) cpu_manager_policy_options: Option<BTreeMap<String, String>>,
    pub(crate) cpu_manager_reconcile_period: Option<String>,
    #[serde(rename = "reservedSystemCPUs")]
    pub(crate) reserved_system_cpus: Option<String>,
    pub(crate) kube_reserved: Option<BTreeMap<String, String>>,
    pub(crate) system_reserved: Option<BTreeMap<String, String>>,
    pub(crate) topology_manager_policy: Option<String>,
    pub(crate) topology_manager_scope: Option<String>,
    pub(crate) topology_manager_policy_options: Option<BTreeMap<String, String>>,
    pub(crate) container_runtime_endpoint: Option<String>,
    pub(crate) memory_manager_policy: Option<String>,
    pub(crate) reserved_memory: Option<Vec<ReservedMemoryEntry>>,
    pub(crate) eviction_hard: Option<BTreeMap<String, String>>,
    pub(crate) merge_default_eviction_settings: Option<bool>,
    pub(crate) feature_gates: Option<BTreeMap<String, bool>>,
    // corral's own keys.
    pub(crate) root: Option<PathBuf>,
    pub(crate) kubelet_layout: Option<bool>,
    pub(crate) host_root: Option<PathBuf>,
    pub(crate) metrics_address: Option<String>,
    pub(crate) device_plugin_grace_period: Option<String>,
    pub(crate) plugin_wait_timeout: Option<String>,
    pub(crate) max_containers_per_pod: Option<u64>,
    pub(crate) max_manifest_bytes: Option<u64>,
    pub(crate) max_connections_per_socket: Option<u64>,
    pub(crate) max_resources_per_device_plugin: Option<u64>,
    pub(crate) nri: Option<bool>,
    pub(crate) nri_socket: Option<PathBuf>,
    pub(crate) nri_plugin_index: Option<String>,
    pub(crate) kubelet_pod_resources_socket: Option<PathBuf>,
    /// Keys corral does not read (a full KubeletConfiguration has many): warned about.
    #[serde(flatten)]
    pub(crate) other: BTreeMap<String, serde_json::Value>,
}

/// KubeletConfiguration keys that may appear in a kubelet's file and that corral ignores
/// without a warning (they belong to parts of the kubelet corral is not).
const IGNORED_KUBELET_KEYS: &[&str] = &["apiVersion", "kind"];

impl ConfigSource {
    /// Read a config file (YAML or JSON; JSON is read as YAML 1.2).
    pub(crate) fn from_file(path: &Path) -> Result<Self, ConfigErrors> {
        let text = std::fs::read_to_string(path).map_err(|err| {
            ConfigErrors::one(
                "--config",
                &path.display().to_string(),
                &format!("a readable file ({err})"),
            )
        })?;
        serde_saphyr::from_str(&text).map_err(|err| {
            ConfigErrors::one(
                "--config",
                &path.display().to_string(),
                &format!("valid YAML or JSON with KubeletConfiguration keys ({err})"),
            )
        })
    }

    /// `self`, with every key `flags` sets replacing the file's.
    pub(crate) fn overlay(mut self, flags: ConfigSource) -> Self {
        macro_rules! take {
            ($($field:ident),*) => { $( if flags.$field.is_some() { self.$field = flags.$field; } )* };
        }
        take!(
            cpu_manager_policy,
            cpu_manager_policy_options,
            cpu_manager_reconcile_period,
            reserved_system_cpus,
            kube_reserved,
            system_reserved,
            topology_manager_policy,
            topology_manager_scope,
            topology_manager_policy_options,
            container_runtime_endpoint,
            memory_manager_policy,
            reserved_memory,
            eviction_hard,
            merge_default_eviction_settings,
            feature_gates,
            root,
            kubelet_layout,
            host_root,
            metrics_address,
            device_plugin_grace_period,
            plugin_wait_timeout,
            max_containers_per_pod,
            max_manifest_bytes,
            max_connections_per_socket,
            max_resources_per_device_plugin,
            nri,
            nri_socket,
            nri_plugin_index,
            kubelet_pod_resources_socket
        );
        self
    }

    /// Keys present in the file that corral does not read.
    pub(crate) fn unknown_keys(&self) -> Vec<&str> {
        self.other
            .keys()
            .map(String::as_str)
            .filter(|key| !IGNORED_KUBELET_KEYS.contains(key))
            .collect()
    }

    /// Check every value; return the validated config or every problem found.
    pub(crate) fn validate(&self) -> Result<AgentConfig, ConfigErrors> {
        let mut errors = ConfigErrors::default();
        let feature_gates = self.feature_gates(&mut errors);
        let reconcile = errors.duration(
            "cpuManagerReconcilePeriod",
            self.cpu_manager_reconcile_period.as_deref(),
            Duration::from_secs(10),
        );
        let reservation_errors = errors.0.len();
        let reserved_system_cpus = match self.reserved_system_cpus.as_deref() {
            None | Some("") => CpuSet::new(),
            Some(text) => match text.parse::<CpuSet>() {
                Ok(set) => set,
                Err(err) => {
                    errors.push(
                        "reservedSystemCPUs",
                        text,
                        &format!("a cpuset list like \"0-1,4\" ({err})"),
                    );
                    CpuSet::new()
                }
            },
        };
        let kube_reserved_cpu = errors.reserved_cpu("kubeReserved", self.kube_reserved.as_ref());
        let system_reserved_cpu =
            errors.reserved_cpu("systemReserved", self.system_reserved.as_ref());
        let reserved_cpu = errors.reserved_cpu_sum(kube_reserved_cpu, system_reserved_cpu, self);
        let reservation_valid = errors.0.len() == reservation_errors;
        let topology = self.topology_config(&feature_gates, &mut errors);
        // The CPU manager's configuration, checked by the CPU manager's own rules (the ones
        // `CpuManager::new` applies at `run`, less those that need the machine).
        let mut cpu_manager = corral_cpumgr::CpuManagerConfig {
            policy: self
                .cpu_manager_policy
                .clone()
                .unwrap_or_else(|| "none".into()),
            policy_options: self.cpu_manager_policy_options.clone().unwrap_or_default(),
            reconcile_period: reconcile,
            // As the kubelet: `reservedSystemCPUs` replaces kubeReserved.cpu and
            // systemReserved.cpu (the CPU manager then reserves the set's size).
            reserved_cpu_millis: reserved_cpu.filter(|_| reserved_system_cpus.is_empty()),
            reserved_system_cpus,
            topology_manager_policy: topology
                .as_ref()
                .map_or(PolicyName::None, |topology| topology.policy),
            feature_gates: feature_gates.clone(),
        };
        if reservation_valid {
            errors.cpu_manager(&cpu_manager, self);
        } else {
            // The reservation is reported already; check the rest against a valid one.
            errors.cpu_manager(
                &corral_cpumgr::CpuManagerConfig {
                    reserved_cpu_millis: Some(1000),
                    reserved_system_cpus: CpuSet::new(),
                    ..cpu_manager.clone()
                },
                self,
            );
        }
        let metrics_address = match self.metrics_address.as_deref() {
            None | Some("") => None,
            Some(text) => match text.parse::<SocketAddr>() {
                Ok(addr) if addr.ip().is_loopback() => Some(addr),
                Ok(_) => {
                    errors.push("metricsAddress", text, "a loopback address like 127.0.0.1:9464 (metrics are never exposed beyond the node's loopback)");
                    None
                }
                Err(_) => {
                    errors.push("metricsAddress", text, "an address like 127.0.0.1:9464");
                    None
                }
            },
        };
        let device_plugin_grace_period = errors.duration(
            "devicePluginGracePeriod",
            self.device_plugin_grace_period.as_deref(),
            Duration::from_secs(5 * 60),
        );
        let plugin_wait_timeout = errors.duration(
            "pluginWaitTimeout",
            self.plugin_wait_timeout.as_deref(),
            Duration::from_secs(30),
        );
        let layout = Layout::new(self.root.clone(), self.kubelet_layout.unwrap_or(false));
        let layout = match layout {
            Ok(layout) => Some(layout),
            Err(why) => {
                errors.push(
                    "root/kubeletLayout",
                    &format!("{:?}/{:?}", self.root, self.kubelet_layout),
                    &why,
                );
                None
            }
        };
        let container_runtime_endpoint = match self.container_runtime_endpoint.as_deref() {
            None | Some("") => None,
            Some(text) => {
                let path = text.strip_prefix("unix://").unwrap_or(text);
                if Path::new(path).is_absolute() {
                    Some(PathBuf::from(path))
                } else {
                    errors.push("containerRuntimeEndpoint", text, "an absolute unix socket path, optionally with unix:// (e.g. unix:///run/containerd/containerd.sock)");
                    None
                }
            }
        };
        let pod_limits = PodLimits {
            max_containers: errors.positive(
                "maxContainersPerPod",
                self.max_containers_per_pod,
                PodLimits::DEFAULT.max_containers,
            ),
            max_manifest_bytes: errors.positive(
                "maxManifestBytes",
                self.max_manifest_bytes,
                PodLimits::DEFAULT.max_manifest_bytes,
            ),
            dra_extended_resources: feature_gates.enabled(Feature::DraExtendedResource),
        };
        let max_connections_per_socket = errors.positive(
            "maxConnectionsPerSocket",
            self.max_connections_per_socket,
            corral_proto::uds::DEFAULT_MAX_CONNECTIONS,
        );
        let max_resources_per_device_plugin = errors.positive(
            "maxResourcesPerDevicePlugin",
            self.max_resources_per_device_plugin,
            corral_devicemgr::DEFAULT_MAX_RESOURCES_PER_PLUGIN,
        );
        let nri = self.nri_mode(&mut errors);
        let memory_manager = self.memory_settings(&mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        let (Some(topology), Some(layout)) = (topology, layout) else {
            return Err(errors);
        };
        cpu_manager.topology_manager_policy = topology.policy;
        Ok(AgentConfig {
            cpu_manager,
            memory_manager,
            feature_gates,
            topology,
            container_runtime_endpoint,
            layout,
            host_root: self.host_root.clone().unwrap_or_else(|| PathBuf::from("/")),
            metrics_address,
            device_plugin_grace_period,
            plugin_wait_timeout,
            pod_limits,
            max_connections_per_socket,
            max_resources_per_device_plugin,
            nri,
        })
    }

    /// `nri`, `nriSocket`, `nriPluginIndex`: the NRI plugin corral runs as, when `nri`.
    fn nri_mode(&self, errors: &mut ConfigErrors) -> NriMode {
        if self.nri != Some(true) {
            return NriMode::Off;
        }
        if self
            .container_runtime_endpoint
            .as_deref()
            .is_some_and(|e| !e.is_empty())
        {
            errors.push(
                "nri",
                "true",
                "false when containerRuntimeEndpoint is set (in NRI mode cpusets reach containers through NRI)",
            );
        }
        let index = self
            .nri_plugin_index
            .as_deref()
            .unwrap_or(DEFAULT_NRI_PLUGIN_INDEX);
        let mut plugin = match corral_proto::nri::plugin::PluginConfig::new("corral", index) {
            Ok(plugin) => plugin,
            Err(_) => {
                errors.push("nriPluginIndex", index, "two decimal digits, 00 to 99");
                return NriMode::Off;
            }
        };
        if let Some(socket) = &self.nri_socket {
            if !socket.is_absolute() {
                let text = socket.display().to_string();
                errors.push(
                    "nriSocket",
                    &text,
                    "an absolute path of the runtime's NRI socket",
                );
            }
            plugin.socket = socket.clone();
        }
        let kubelet_pod_resources = match &self.kubelet_pod_resources_socket {
            Some(socket) if !socket.is_absolute() => {
                let text = socket.display().to_string();
                errors.push("kubeletPodResourcesSocket", &text, "an absolute path");
                socket.clone()
            }
            Some(socket) => socket.clone(),
            None => PathBuf::from(DEFAULT_KUBELET_POD_RESOURCES_SOCKET),
        };
        NriMode::Plugin(NriSettings {
            plugin,
            kubelet_pod_resources,
        })
    }
}

/// The NRI plugin index corral registers with by default: after plugins that set up
/// devices, before ones that only observe.
pub(crate) const DEFAULT_NRI_PLUGIN_INDEX: &str = "50";

/// The kubelet's podresources socket, where NRI mode reads the devices the kubelet gave.
pub(crate) const DEFAULT_KUBELET_POD_RESOURCES_SOCKET: &str =
    "/var/lib/kubelet/pod-resources/kubelet.sock";

/// Whether corral runs as an NRI plugin, driven by the container runtime's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NriMode {
    /// No: pods arrive through the admission API only.
    Off,
    /// Yes.
    Plugin(NriSettings),
}

/// How corral runs as an NRI plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NriSettings {
    /// The plugin it registers as, and the runtime's socket.
    pub(crate) plugin: corral_proto::nri::plugin::PluginConfig,
    /// `kubeletPodResourcesSocket`: the kubelet's podresources API, for the devices it gave.
    pub(crate) kubelet_pod_resources: PathBuf,
}

/// What one admission request may ask for (`maxContainersPerPod`, `maxManifestBytes`), and
/// which pod fields the node reads (`featureGates`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PodLimits {
    /// Containers per pod, init and sidecar containers included.
    pub(crate) max_containers: usize,
    /// Bytes of one admission request's manifests (a pod and its claims).
    pub(crate) max_manifest_bytes: usize,
    /// Whether `status.extendedResourceClaimStatus` is read: extended resources backed by a
    /// DRA claim (`DRAExtendedResource`, beta and on in v1.36).
    pub(crate) dra_extended_resources: bool,
}

impl PodLimits {
    /// The defaults: 512 containers (far above any real pod; the API server sets no count
    /// but bounds the object), 3 MiB of manifests (the API server's request body limit).
    pub(crate) const DEFAULT: PodLimits = PodLimits {
        max_containers: 512,
        max_manifest_bytes: 3 * 1024 * 1024,
        dra_extended_resources: true,
    };

    /// The largest agent API request the gRPC decoder takes: the manifests plus 1 KiB of
    /// framing, saturating (`maxManifestBytes` may be as large as `u64` allows, where the
    /// plain sum overflowed at start-up).
    pub(crate) fn max_request_bytes(&self) -> usize {
        self.max_manifest_bytes.saturating_add(1024)
    }
}

/// Load the file named by `args` (if any), overlay the flags, validate. Returns the config
/// and the config-file keys corral does not read (for a warning).
pub(crate) fn load(args: &ConfigArgs) -> Result<(AgentConfig, Vec<String>), ConfigErrors> {
    let file = match &args.config {
        Some(path) => ConfigSource::from_file(path)?,
        None => ConfigSource::default(),
    };
    let unknown = file.unknown_keys().into_iter().map(str::to_owned).collect();
    // Every occurrence of a map flag, in order (`--x a=1,b=2 --x a=3`: a=3, b=2), as the
    // kubelet's mapStringString flags.
    let options = |values: &[crate::cli::KeyValues]| {
        (!values.is_empty()).then(|| {
            values
                .iter()
                .flat_map(|pairs| pairs.0.iter().cloned())
                .collect::<BTreeMap<_, _>>()
        })
    };
    let flags = ConfigSource {
        cpu_manager_policy: args.cpu_manager_policy.clone(),
        cpu_manager_policy_options: options(&args.cpu_manager_policy_option),
        reserved_system_cpus: args.reserved_system_cpus.clone(),
        topology_manager_policy: args.topology_manager_policy.clone(),
        topology_manager_scope: args.topology_manager_scope.clone(),
        topology_manager_policy_options: options(&args.topology_manager_policy_option),
        container_runtime_endpoint: args.container_runtime_endpoint.clone(),
        root: args.root.clone(),
        kubelet_layout: args.kubelet_layout.then_some(true),
        host_root: args.host_root.clone(),
        metrics_address: args.metrics_addr.clone(),
        nri: args.nri.then_some(true),
        nri_socket: args.nri_socket.clone(),
        nri_plugin_index: args.nri_plugin_index.clone(),
        kubelet_pod_resources_socket: args.kubelet_pod_resources_socket.clone(),
        ..ConfigSource::default()
    };
    let config = file.overlay(flags).validate()?;
    Ok((config, unknown))
}

/// The validated configuration the agent runs with.
#[derive(Debug, Clone)]
pub(crate) struct AgentConfig {
    /// The CPU manager's: `cpuManagerPolicy`, `cpuManagerPolicyOptions`,
    /// `cpuManagerReconcilePeriod`, the CPU reservation (`reservedSystemCPUs`, else
    /// `kubeReserved.cpu` + `systemReserved.cpu`) and the topology manager policy; passed
    /// [`corral_cpumgr::CpuManagerConfig::validate`], so `CpuManager::new` can refuse it only
    /// for the machine's reasons.
    pub(crate) cpu_manager: corral_cpumgr::CpuManagerConfig,
    /// The memory manager's: `memoryManagerPolicy`, `reservedMemory`, and the memory and
    /// huge pages of `systemReserved`, `kubeReserved` and `evictionHard`.
    pub(crate) memory_manager: MemorySettings,
    /// `featureGates`: the gates corral's managers read, v1.36's defaults otherwise.
    pub(crate) feature_gates: FeatureGates,
    /// The topology manager's policy, scope and options.
    pub(crate) topology: TopologyManagerConfig,
    /// `containerRuntimeEndpoint` (CRI socket), when CPU reconcile should push cpusets.
    pub(crate) container_runtime_endpoint: Option<PathBuf>,
    /// `nri`, `nriSocket`, `nriPluginIndex`, `kubeletPodResourcesSocket`: whether corral
    /// runs as the container runtime's NRI plugin (then cpusets go through NRI).
    pub(crate) nri: NriMode,
    /// Where sockets and state files go.
    pub(crate) layout: Layout,
    /// The host root sysfs is read under.
    pub(crate) host_root: PathBuf,
    /// Where to serve Prometheus metrics (loopback only), when asked.
    pub(crate) metrics_address: Option<SocketAddr>,
    /// How long a device plugin's resource outlives its plugin.
    pub(crate) device_plugin_grace_period: Duration,
    /// How long an admission waits for a resource's plugin to (re)register.
    pub(crate) plugin_wait_timeout: Duration,
    /// `maxContainersPerPod`, `maxManifestBytes`.
    pub(crate) pod_limits: PodLimits,
    /// `maxConnectionsPerSocket`: concurrent connections on each socket corral serves.
    pub(crate) max_connections_per_socket: usize,
    /// `maxResourcesPerDevicePlugin`: resources one device plugin may register.
    pub(crate) max_resources_per_device_plugin: usize,
}

/// One invalid value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    /// The key (or flag) that holds it.
    pub(crate) key: String,
    /// The value as given.
    pub(crate) value: String,
    /// What would have been accepted.
    pub(crate) accepted: String,
}

/// Every invalid value of a configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ConfigErrors(pub(crate) Vec<ConfigError>);

impl ConfigErrors {
    fn one(key: &str, value: &str, accepted: &str) -> Self {
        let mut errors = Self::default();
        errors.push(key, value, accepted);
        errors
    }

    fn push(&mut self, key: &str, value: &str, accepted: &str) {
        self.0.push(ConfigError {
            key: key.into(),
            value: value.into(),
            accepted: accepted.into(),
        });
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn duration(&mut self, key: &str, value: Option<&str>, default: Duration) -> Duration {
        match value {
            None => default,
            Some(text) => parse_go_duration(text).unwrap_or_else(|why| {
                self.push(
                    key,
                    text,
                    &format!("a duration like \"10s\" or \"1m30s\" ({why})"),
                );
                default
            }),
        }
    }

    fn positive(&mut self, key: &str, value: Option<u64>, default: usize) -> usize {
        match value {
            None => default,
            Some(n) => match usize::try_from(n) {
                Ok(n) if n > 0 => n,
                _ => {
                    self.push(key, &n.to_string(), "a positive whole number");
                    default
                }
            },
        }
    }

    /// `kubeReserved.cpu + systemReserved.cpu` in millicores (`None` when neither is set).
    /// A sum past `i64::MAX` is an error on `systemReserved.cpu`: the kubelet adds the two
    /// as arbitrary-precision quantities, and its `MilliValue` of the sum no longer fits.
    fn reserved_cpu_sum(
        &mut self,
        kube: Option<i64>,
        system: Option<i64>,
        config: &ConfigSource,
    ) -> Option<i64> {
        if kube.is_none() && system.is_none() {
            return None;
        }
        let sum = kube.unwrap_or(0).checked_add(system.unwrap_or(0));
        if sum.is_none() {
            let cpu = config
                .system_reserved
                .as_ref()
                .and_then(|map| map.get("cpu"));
            self.push(
                "systemReserved.cpu",
                cpu.map_or("", String::as_str),
                "a CPU quantity whose sum with kubeReserved.cpu fits 64-bit millicores",
            );
        }
        sum
    }

    /// `key.cpu` in millicores, `None` when the map has no `cpu`.
    fn reserved_cpu(&mut self, key: &str, value: Option<&BTreeMap<String, String>>) -> Option<i64> {
        let cpu = value.and_then(|map| map.get("cpu"))?;
        match corral_topology::parse_cpu_millis(cpu) {
            Ok(millis) if millis >= 0 => Some(millis),
            Ok(_) => {
                self.push(
                    &format!("{key}.cpu"),
                    cpu,
                    "a non-negative CPU quantity like \"500m\" or \"1\"",
                );
                None
            }
            Err(err) => {
                self.push(
                    &format!("{key}.cpu"),
                    cpu,
                    &format!("a CPU quantity like \"500m\" or \"1\" ({err})"),
                );
                None
            }
        }
    }

    /// The CPU manager's own check of its configuration
    /// ([`corral_cpumgr::CpuManagerConfig::validate`]), its error under the key that holds
    /// the value, with the CPU manager's message (the one `run` would stop with).
    fn cpu_manager(&mut self, config: &corral_cpumgr::CpuManagerConfig, source: &ConfigSource) {
        let Err(err) = config.validate() else {
            return;
        };
        let message = crate::error_text::error_chain(&err);
        let cause = match &err {
            corral_cpumgr::CpuManagerError::Policy { source, .. } => Some(source.as_ref()),
            _ => None,
        };
        let options = || options_text(&config.policy_options);
        let reservation = || {
            let map = |m: Option<&BTreeMap<String, String>>| {
                m.and_then(|m| m.get("cpu")).cloned().unwrap_or_default()
            };
            format!(
                "{}/{}/{}",
                source.reserved_system_cpus.as_deref().unwrap_or(""),
                map(source.kube_reserved.as_ref()),
                map(source.system_reserved.as_ref()),
            )
        };
        let levels: Vec<String> = corral_cpumgr::ALL_OPTIONS
            .iter()
            .map(|name| match corral_cpumgr::option_maturity(name) {
                Some(level) => format!("{name} ({level})"),
                None => (*name).to_owned(),
            })
            .collect();
        let options_accepted = format!(
            "with the static policy: {} set to true or false, in compatible combinations, alpha ones only with featureGates CPUManagerPolicyAlphaOptions: true, beta ones not with CPUManagerPolicyBetaOptions: false; with the none policy: no option",
            levels.join(", ")
        );
        let (key, value, accepted) = match cause {
            Some(PolicyError::UnknownPolicy { .. }) => (
                "cpuManagerPolicy",
                config.policy.clone(),
                "\"none\", \"static\"".to_owned(),
            ),
            Some(PolicyError::Options(OptionsError::AlignBySocketWithSingleNumaNode)) => (
                "cpuManagerPolicyOptions/topologyManagerPolicy",
                format!("{}/{}", options(), config.topology_manager_policy),
                "align-by-socket with a topology manager policy other than single-numa-node"
                    .to_owned(),
            ),
            Some(PolicyError::Options(_)) => ("cpuManagerPolicyOptions", options(), options_accepted),
            Some(PolicyError::NoReservation | PolicyError::ZeroReservation) => (
                "reservedSystemCPUs/kubeReserved.cpu/systemReserved.cpu",
                reservation(),
                "with the static policy, reserved CPUs: a reservedSystemCPUs set, or kubeReserved.cpu + systemReserved.cpu above zero".to_owned(),
            ),
            Some(PolicyError::Reservation { .. }) => (
                "reservedSystemCPUs/kubeReserved.cpu/systemReserved.cpu",
                reservation(),
                "a reservedSystemCPUs set of as many CPUs as the reservation".to_owned(),
            ),
            _ => (
                "cpuManagerPolicy",
                config.policy.clone(),
                "a configuration the CPU manager accepts".to_owned(),
            ),
        };
        self.push(key, &value, &format!("{accepted} ({message})"));
    }
}

/// Options as the kubelet's flag takes them: `name=value,name=value`.
pub(super) fn options_text(options: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = options.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "invalid configuration:")?;
        for error in &self.0 {
            writeln!(
                f,
                "  {}: {:?} is not valid; accepted: {}",
                error.key, error.value, error.accepted
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

#[cfg(test)]
mod tests;
