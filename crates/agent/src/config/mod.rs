//! The agent's configuration: a YAML or JSON file whose keys are KubeletConfiguration's
//! (the ones the resource managers read) plus corral's own, overlaid by command-line flags,
//! then validated as a whole before anything starts. Every invalid value is reported with
//! its key and the accepted values, all at once.

mod duration;
mod layout;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_topology::CpuSet;
use corral_topology::topologymanager::ManagerConfig;
use serde::Deserialize;

use crate::cli::ConfigArgs;

pub(crate) use duration::parse_go_duration;
pub(crate) use layout::Layout;

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
            root,
            kubelet_layout,
            host_root,
            metrics_address,
            device_plugin_grace_period,
            plugin_wait_timeout,
            max_containers_per_pod,
            max_manifest_bytes,
            max_connections_per_socket,
            max_resources_per_device_plugin
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
        let cpu_manager_policy = self
            .cpu_manager_policy
            .clone()
            .unwrap_or_else(|| "none".into());
        if !matches!(cpu_manager_policy.as_str(), "none" | "static") {
            errors.push(
                "cpuManagerPolicy",
                &cpu_manager_policy,
                "\"none\", \"static\"",
            );
        }
        let reconcile = errors.duration(
            "cpuManagerReconcilePeriod",
            self.cpu_manager_reconcile_period.as_deref(),
            Duration::from_secs(10),
        );
        let reserved_system_cpus = match self.reserved_system_cpus.as_deref() {
            None | Some("") => None,
            Some(text) => match text.parse::<CpuSet>() {
                Ok(set) => Some(set),
                Err(err) => {
                    errors.push(
                        "reservedSystemCPUs",
                        text,
                        &format!("a cpuset list like \"0-1,4\" ({err})"),
                    );
                    None
                }
            },
        };
        let kube_reserved_cpu = errors.reserved_cpu("kubeReserved", self.kube_reserved.as_ref());
        let system_reserved_cpu =
            errors.reserved_cpu("systemReserved", self.system_reserved.as_ref());
        let topology_policy = self.topology_manager_policy.as_deref().unwrap_or("none");
        let topology_scope = self
            .topology_manager_scope
            .as_deref()
            .unwrap_or("container");
        let empty = BTreeMap::new();
        let topology_options = self
            .topology_manager_policy_options
            .as_ref()
            .unwrap_or(&empty);
        let topology = match ManagerConfig::from_strings(
            topology_policy,
            topology_scope,
            topology_options,
        ) {
            Ok(config) => Some(config),
            Err(err) => {
                errors.push(
                    "topologyManagerPolicy/topologyManagerScope/topologyManagerPolicyOptions",
                    &format!("{topology_policy}/{topology_scope}/{topology_options:?}"),
                    &format!("policies none, best-effort, restricted, single-numa-node; scopes container, pod; options prefer-closest-numa-nodes, max-allowable-numa-nodes ({err})"),
                );
                None
            }
        };
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
        if !errors.is_empty() {
            return Err(errors);
        }
        let (Some(topology), Some(layout)) = (topology, layout) else {
            return Err(errors);
        };
        Ok(AgentConfig {
            cpu_manager_policy,
            cpu_manager_policy_options: self.cpu_manager_policy_options.clone().unwrap_or_default(),
            cpu_manager_reconcile_period: reconcile,
            reserved_system_cpus,
            reserved_cpu_millis: kube_reserved_cpu + system_reserved_cpu,
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
        })
    }
}

/// What one admission request may ask for (`maxContainersPerPod`, `maxManifestBytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PodLimits {
    /// Containers per pod, init and sidecar containers included.
    pub(crate) max_containers: usize,
    /// Bytes of one admission request's manifests (a pod and its claims).
    pub(crate) max_manifest_bytes: usize,
}

impl PodLimits {
    /// The defaults: 512 containers (far above any real pod; the API server sets no count
    /// but bounds the object), 3 MiB of manifests (the API server's request body limit).
    pub(crate) const DEFAULT: PodLimits = PodLimits {
        max_containers: 512,
        max_manifest_bytes: 3 * 1024 * 1024,
    };
}

/// Load the file named by `args` (if any), overlay the flags, validate. Returns the config
/// and the config-file keys corral does not read (for a warning).
pub(crate) fn load(args: &ConfigArgs) -> Result<(AgentConfig, Vec<String>), ConfigErrors> {
    let file = match &args.config {
        Some(path) => ConfigSource::from_file(path)?,
        None => ConfigSource::default(),
    };
    let unknown = file.unknown_keys().into_iter().map(str::to_owned).collect();
    let options = |pairs: &[(String, String)]| {
        (!pairs.is_empty()).then(|| pairs.iter().cloned().collect::<BTreeMap<_, _>>())
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
        ..ConfigSource::default()
    };
    let config = file.overlay(flags).validate()?;
    Ok((config, unknown))
}

/// The validated configuration the agent runs with.
#[derive(Debug, Clone)]
pub(crate) struct AgentConfig {
    /// `cpuManagerPolicy`: "none" or "static".
    pub(crate) cpu_manager_policy: String,
    /// `cpuManagerPolicyOptions`, checked by the CPU manager when it is built.
    pub(crate) cpu_manager_policy_options: BTreeMap<String, String>,
    /// `cpuManagerReconcilePeriod`.
    pub(crate) cpu_manager_reconcile_period: Duration,
    /// `reservedSystemCPUs`.
    pub(crate) reserved_system_cpus: Option<CpuSet>,
    /// `kubeReserved.cpu` + `systemReserved.cpu`, in millicores.
    pub(crate) reserved_cpu_millis: i64,
    /// The topology manager's policy, scope and options.
    pub(crate) topology: ManagerConfig,
    /// `containerRuntimeEndpoint` (CRI socket), when CPU reconcile should push cpusets.
    pub(crate) container_runtime_endpoint: Option<PathBuf>,
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

    fn reserved_cpu(&mut self, key: &str, value: Option<&BTreeMap<String, String>>) -> i64 {
        let Some(cpu) = value.and_then(|map| map.get("cpu")) else {
            return 0;
        };
        match corral_topology::parse_cpu_millis(cpu) {
            Ok(millis) if millis >= 0 => millis,
            Ok(_) => {
                self.push(
                    &format!("{key}.cpu"),
                    cpu,
                    "a non-negative CPU quantity like \"500m\" or \"1\"",
                );
                0
            }
            Err(err) => {
                self.push(
                    &format!("{key}.cpu"),
                    cpu,
                    &format!("a CPU quantity like \"500m\" or \"1\" ({err})"),
                );
                0
            }
        }
    }
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
