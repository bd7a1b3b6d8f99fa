//! The agent's configuration: a YAML or JSON file whose keys are KubeletConfiguration's
//! (the ones the resource managers read) plus corral's own, overlaid by command-line flags,
//! then validated as a whole before anything starts. Every invalid value is reported with
//! its key and the accepted values, all at once.

mod cpu;
mod errors;
mod gates;
mod keys;
mod layout;
mod memory;
mod nri;
mod nrt;
mod topology;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_topology::topologymanager::TopologyManagerConfig;
use corral_topology::{CpuSet, Feature, FeatureGates, PolicyName};
use serde::Deserialize;

use crate::cli::ConfigArgs;

pub(crate) use crate::duration::{GoDuration, parse_go_duration};
pub(crate) use errors::ConfigErrors;
use errors::options_text;
pub(crate) use keys::UnknownKey;
pub(crate) use layout::Layout;
pub(crate) use memory::{MemorySettings, ReservedMemoryEntry};
#[cfg(test)]
pub(crate) use nri::DEFAULT_NRI_DISCONNECTED_GRACE;
pub(crate) use nri::{NriMode, NriSettings, PinnedCpusets};
pub(crate) use nrt::{Credentials, NrtSettings};

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
    pub(crate) nri_guard_pinned_cpusets: Option<bool>,
    pub(crate) nri_disconnected_grace_period: Option<String>,
    pub(crate) kubeconfig: Option<PathBuf>,
    pub(crate) node_name: Option<String>,
    pub(crate) node_resource_topology_resync_period: Option<String>,
    /// Whether corral runs in a pod (`KUBERNETES_SERVICE_HOST` is set): then without a
    /// kubeconfig it reaches the API server with the pod's service account. Not a key.
    #[serde(skip)]
    pub(crate) in_cluster: bool,
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
            kubelet_pod_resources_socket,
            nri_guard_pinned_cpusets,
            nri_disconnected_grace_period,
            kubeconfig,
            node_name,
            node_resource_topology_resync_period
        );
        // As the kubelet (`kubeletConfigFlagPrecedence`): feature gates merge gate by gate,
        // the flag's value winning; every other map is replaced whole.
        if let Some(gates) = flags.feature_gates {
            self.feature_gates.get_or_insert_default().extend(gates);
        }
        self.in_cluster |= flags.in_cluster;
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
                Ok(addr) => Some(addr),
                Err(_) => {
                    errors.push(
                        "metricsAddress",
                        text,
                        "an address and port like 127.0.0.1:9464 or 0.0.0.0:9464",
                    );
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
                    &why.to_string(),
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
        let nrt = self.nrt_settings(&mut errors);
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
            nrt,
        })
    }
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
pub(crate) fn load(args: &ConfigArgs) -> Result<(AgentConfig, Vec<UnknownKey>), ConfigErrors> {
    let in_pod = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|h| !h.is_empty());
    load_as(args, in_pod)
}

/// [`load`], in a pod (`KUBERNETES_SERVICE_HOST` set: the service account is the API
/// server's credentials when no kubeconfig is given) or not.
pub(crate) fn load_as(
    args: &ConfigArgs,
    in_pod: bool,
) -> Result<(AgentConfig, Vec<UnknownKey>), ConfigErrors> {
    let file = match &args.config {
        Some(path) => ConfigSource::from_file(path)?,
        None => ConfigSource::default(),
    };
    let unknown = file
        .unknown_keys()
        .into_iter()
        .map(UnknownKey::new)
        .collect();
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
    let gates = &args.feature_gates;
    let flags = ConfigSource {
        cpu_manager_policy: args.cpu_manager_policy.clone(),
        cpu_manager_policy_options: options(&args.cpu_manager_policy_option),
        cpu_manager_reconcile_period: args.cpu_manager_reconcile_period.clone(),
        kube_reserved: options(&args.kube_reserved),
        system_reserved: options(&args.system_reserved),
        memory_manager_policy: args.memory_manager_policy.clone(),
        // Each occurrence adds its nodes, as the kubelet's `ReservedMemoryVar`.
        reserved_memory: (!args.reserved_memory.is_empty()).then(|| {
            let values = args.reserved_memory.iter();
            let nodes = values.flat_map(|value| value.0.iter());
            nodes
                .map(|node| ReservedMemoryEntry {
                    numa_node: node.numa_node,
                    limits: node.limits.clone(),
                })
                .collect()
        }),
        feature_gates: (!gates.is_empty()).then(|| {
            gates
                .iter()
                .flat_map(|value| value.0.iter().cloned())
                .collect()
        }),
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
        nri_guard_pinned_cpusets: args.nri_guard_pinned_cpusets,
        nri_disconnected_grace_period: args.nri_disconnected_grace_period.clone(),
        kubeconfig: args.kubeconfig.clone(),
        node_name: args.node_name.clone(),
        in_cluster: in_pod,
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
    /// Where to serve Prometheus metrics and the probes, when asked (any address given:
    /// off unless set; the examples use loopback).
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
    /// `nodeName`, `kubeconfig`, `nodeResourceTopologyResyncPeriod`: where the node's
    /// NodeResourceTopology is published (none: nothing talks to an API server).
    pub(crate) nrt: Option<NrtSettings>,
}

#[cfg(test)]
mod tests;
