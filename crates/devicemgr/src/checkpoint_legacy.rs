//! Reading `kubelet_internal_checkpoint` as the kubelet may have left it: the current
//! format, or the pre-1.20 one (devices without NUMA nodes), converted to the current one.
//! [`crate::checkpoint_state`] turns the result into the state.

use corral_checkpoint::{
    Checkpoint, CheckpointError, CheckpointStore, DEVICE_MANAGER_FILE, DeviceManagerCheckpoint,
    DeviceManagerCheckpointV1,
};

/// Read `kubelet_internal_checkpoint` in the current or the pre-1.20 format; `None` when
/// there is none. A file neither format reads is an error naming the current format's
/// problem, unless only the legacy format's checksum failed.
pub(crate) fn read_checkpoint(
    store: &CheckpointStore,
) -> Result<Option<DeviceManagerCheckpoint>, CheckpointError> {
    let bytes = match store.read_bytes(DEVICE_MANAGER_FILE) {
        Ok(bytes) => bytes,
        Err(CheckpointError::NotFound { .. }) => return Ok(None),
        Err(err) => return Err(err),
    };
    let path = store.path_of(DEVICE_MANAGER_FILE)?;
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
