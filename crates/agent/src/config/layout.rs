//! Where the agent's sockets and state files live: everything hangs off one root, in the
//! kubelet's relative layout beneath it, so `--kubelet-layout` (root `/var/lib/kubelet`)
//! puts every file where a kubelet keeps it.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The mode the kubelet creates its directories with (`setupDataDirs`: `os.MkdirAll(…, 0750)`).
pub(crate) const DIR_MODE: u32 = 0o750;

/// A directory of the layout that cannot be created.
#[derive(Debug, thiserror::Error)]
#[error("creating {}", path.display())]
pub(crate) struct CreateDirError {
    /// The directory.
    pub(crate) path: PathBuf,
    /// Why.
    #[source]
    pub(crate) source: std::io::Error,
}

/// The kubelet's root directory.
pub(crate) const KUBELET_ROOT: &str = "/var/lib/kubelet";
/// The root used when none is given: a local directory, so the agent runs as any user.
pub(crate) const DEFAULT_LOCAL_ROOT: &str = ".corral";

/// A root given with the kubelet layout, other than the kubelet's root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("either a root or the kubelet layout ({KUBELET_ROOT}), not both")]
pub(crate) struct RootWithKubeletLayout;

/// Paths of every socket and state file, derived from one root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    root: PathBuf,
}

impl Layout {
    /// `root` when given; `/var/lib/kubelet` with `kubelet_layout`; else `./.corral`.
    /// Giving both a root and the kubelet layout is a contradiction.
    pub(crate) fn new(
        root: Option<PathBuf>,
        kubelet_layout: bool,
    ) -> Result<Self, RootWithKubeletLayout> {
        let root = match (root, kubelet_layout) {
            (Some(root), true) if root != Path::new(KUBELET_ROOT) => {
                return Err(RootWithKubeletLayout);
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

    /// The directory DRA drivers and CSI plugins keep their sockets in
    /// (`plugins/<driver>/dra.sock`).
    pub(crate) fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
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

    /// The journal that makes the state files durable with one fsync per admission.
    pub(crate) fn journal_path(&self) -> PathBuf {
        self.root.join("corral/state.journal")
    }

    /// The directory of `cpu_manager_state`, `dra_manager_state` (the kubelet's root).
    pub(crate) fn state_dir(&self) -> &Path {
        &self.root
    }

    /// Create what the kubelet creates at start, mode 0750 where missing (an existing
    /// directory keeps its mode, as with `os.MkdirAll`): the root, `plugins/`,
    /// `plugins_registry/`, `pod-resources/` (`setupDataDirs`) and `device-plugins/` (the
    /// device manager), so a driver or plugin that binds its socket there at once finds its
    /// directory; and corral's own `corral/pods/`.
    pub(crate) fn create_dirs(&self) -> Result<(), CreateDirError> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true).mode(DIR_MODE);
        let pod_resources = self.root.join("pod-resources");
        for dir in [
            self.root.clone(),
            self.plugins_dir(),
            self.plugins_registry_dir(),
            pod_resources,
            self.device_plugins_dir(),
            self.pods_dir(),
        ] {
            builder.create(&dir).map_err(|source| CreateDirError {
                path: dir.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_kubelets_directories_are_created_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(Some(dir.path().join("root")), false).unwrap();
        layout.create_dirs().unwrap();
        for name in [
            "",
            "plugins",
            "plugins_registry",
            "pod-resources",
            "device-plugins",
            "corral/pods",
        ] {
            let meta = std::fs::metadata(layout.root().join(name)).unwrap();
            assert!(meta.is_dir(), "{name}");
            // The process umask may only take bits away.
            assert_eq!(meta.permissions().mode() & 0o7777 & !DIR_MODE, 0, "{name}");
            assert_eq!(meta.permissions().mode() & 0o700, 0o700, "{name}");
        }
        // Again: nothing changes, an existing directory keeps its mode.
        let registry = layout.plugins_registry_dir();
        std::fs::set_permissions(&registry, std::fs::Permissions::from_mode(0o700)).unwrap();
        layout.create_dirs().unwrap();
        let mode = std::fs::metadata(&registry).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_file_in_the_way_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(Some(dir.path().to_path_buf()), false).unwrap();
        std::fs::write(layout.plugins_registry_dir(), b"not a directory").unwrap();
        let err = layout.create_dirs().unwrap_err();
        assert_eq!(err.path, layout.plugins_registry_dir());
        assert!(err.to_string().contains("plugins_registry"), "{err}");
    }
}
