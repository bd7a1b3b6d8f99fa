//! Reading `kubelet_internal_checkpoint` as the kubelet may have left it: the current
//! format, or the pre-1.20 one (devices without NUMA nodes), converted to the current one.
//! [`crate::checkpoint_state`] turns the result into the state.

use corral_checkpoint::{
    Checkpoint, CheckpointError, DeviceManagerCheckpoint, DeviceManagerCheckpointV1, StateFile,
};

/// Read `kubelet_internal_checkpoint` in the current or the pre-1.20 format; `None` when
/// there is none. A file neither format reads is an error naming the current format's
/// problem, unless only the legacy format's checksum failed.
pub(crate) fn read_checkpoint(
    file: &StateFile,
) -> Result<Option<DeviceManagerCheckpoint>, CheckpointError> {
    let Some(bytes) = file.load()? else {
        return Ok(None);
    };
    let path = std::path::PathBuf::from(file.to_string());
    match DeviceManagerCheckpoint::decode(&bytes) {
        Ok(current) => Ok(Some(current)),
        Err(current_err) => match DeviceManagerCheckpointV1::decode(&bytes) {
            Ok(legacy) => {
                tracing::info!(path = %path.display(), "read a pre-1.20 device manager checkpoint");
                Ok(Some(legacy.to_current()))
            }
            Err(legacy_err)
                if legacy_err.is_checksum_mismatch() && !current_err.is_checksum_mismatch() =>
            {
                Err(legacy_err.with_path(&path))
            }
            Err(_) => Err(current_err.with_path(&path)),
        },
    }
}
