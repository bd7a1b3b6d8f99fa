//! `nri`, `nriSocket`, `nriPluginIndex`, `kubeletPodResourcesSocket`,
//! `nriGuardPinnedCpusets`, `nriDisconnectedGracePeriod`: whether corral runs as the container runtime's NRI plugin, and
//! how.

use std::path::PathBuf;
use std::time::Duration;

use super::{ConfigErrors, ConfigSource};

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
    /// `nriGuardPinnedCpusets`: whether another plugin may change the cpuset of a
    /// container corral pinned.
    pub(crate) pinned_cpusets: PinnedCpusets,
    /// `nriDisconnectedGracePeriod`: how long corral may be without a synchronized
    /// connection before `/healthz` fails.
    pub(crate) disconnected_grace: Duration,
}

/// The default `nriDisconnectedGracePeriod`: longer than the redial backoff's 30 s cap, so
/// one lost connection redialed at the cap still reconnects in time.
pub(crate) const DEFAULT_NRI_DISCONNECTED_GRACE: Duration = Duration::from_secs(60);

/// Whether corral, as an NRI validator (v0.10 runtimes on), rejects another plugin's
/// adjustment that changes the cpuset CPUs or memory nodes corral gave a pinned container
/// (`nriGuardPinnedCpusets`, on by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum PinnedCpusets {
    /// Rejected: the container is not created (subscribes to
    /// `VALIDATE_CONTAINER_ADJUSTMENT`).
    #[default]
    Guarded,
    /// Let through: corral does not validate.
    Open,
}

impl ConfigSource {
    /// `nri`, `nriSocket`, `nriPluginIndex`: the NRI plugin corral runs as, when `nri`.
    pub(super) fn nri_mode(&self, errors: &mut ConfigErrors) -> NriMode {
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
        let pinned_cpusets = match self.nri_guard_pinned_cpusets {
            Some(false) => PinnedCpusets::Open,
            Some(true) | None => PinnedCpusets::Guarded,
        };
        let disconnected_grace = errors.duration(
            "nriDisconnectedGracePeriod",
            self.nri_disconnected_grace_period.as_deref(),
            DEFAULT_NRI_DISCONNECTED_GRACE,
        );
        NriMode::Plugin(NriSettings {
            plugin,
            kubelet_pod_resources,
            pinned_cpusets,
            disconnected_grace,
        })
    }
}
