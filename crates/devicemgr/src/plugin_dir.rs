//! The plugin directory at start (upstream `CleanupPluginDirectory`): created if missing,
//! emptied of the sockets earlier plugins left.

use std::os::unix::fs::FileTypeExt;

use corral_checkpoint::DEVICE_MANAGER_FILE;

use crate::config::DeviceManagerConfig;
use crate::error::DeviceManagerError;

/// Remove sockets left in the plugin directory, except the checkpoint file and a
/// registration socket a live server still answers on (binding refuses that one).
pub(crate) fn cleanup(config: &DeviceManagerConfig) -> Result<(), DeviceManagerError> {
    let dir = &config.plugin_dir;
    let io = |source| DeviceManagerError::PluginDir {
        path: dir.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let kubelet_sock = config.kubelet_socket();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        if path == kubelet_sock || entry.file_name() == DEVICE_MANAGER_FILE {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_socket()
            && let Err(err) = std::fs::remove_file(&path)
        {
            tracing::warn!(path = %path.display(), %err, "cannot remove stale plugin socket");
        }
    }
    Ok(())
}
