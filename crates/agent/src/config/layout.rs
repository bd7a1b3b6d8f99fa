//! Where the agent's sockets and state files live: everything hangs off one root, in the
//! kubelet's relative layout beneath it, so `--kubelet-layout` (root `/var/lib/kubelet`)
//! puts every file where a kubelet keeps it.

use std::path::{Path, PathBuf};

/// The kubelet's root directory.
pub(crate) const KUBELET_ROOT: &str = "/var/lib/kubelet";
/// The root used when none is given: a local directory, so the agent runs as any user.
pub(crate) const DEFAULT_LOCAL_ROOT: &str = ".corral";

/// Paths of every socket and state file, derived from one root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    root: PathBuf,
}

impl Layout {
    /// `root` when given; `/var/lib/kubelet` with `kubelet_layout`; else `./.corral`.
    /// Giving both a root and the kubelet layout is a contradiction.
    pub(crate) fn new(root: Option<PathBuf>, kubelet_layout: bool) -> Result<Self, String> {
        let root = match (root, kubelet_layout) {
            (Some(root), true) if root != Path::new(KUBELET_ROOT) => {
                return Err(format!(
                    "either a root or the kubelet layout ({KUBELET_ROOT}), not both"
                ));
            }
            (Some(root), _) => root,
            (None, true) => PathBuf::from(KUBELET_ROOT),
            (None, false) => PathBuf::from(DEFAULT_LOCAL_ROOT),
        };
        Ok(Self { root })
    }

    /// The root directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The device-plugin directory (`kubelet.sock`, plugin sockets, the device checkpoint).
    pub(crate) fn device_plugins_dir(&self) -> PathBuf {
        self.root.join("device-plugins")
    }

    /// The plugin registration directory DRA drivers register through.
    pub(crate) fn plugins_registry_dir(&self) -> PathBuf {
        self.root.join("plugins_registry")
    }

    /// The pod-resources socket.
    pub(crate) fn pod_resources_socket(&self) -> PathBuf {
        self.root.join("pod-resources/kubelet.sock")
    }

    /// The agent's own admission API socket.
    pub(crate) fn agent_socket(&self) -> PathBuf {
        self.root.join("corral/agent.sock")
    }

    /// The admitted pods, persisted by the agent (one file per pod).
    pub(crate) fn pods_dir(&self) -> PathBuf {
        self.root.join("corral/pods")
    }

    /// The directory of `cpu_manager_state`, `dra_manager_state` (the kubelet's root).
    pub(crate) fn state_dir(&self) -> &Path {
        &self.root
    }
}
