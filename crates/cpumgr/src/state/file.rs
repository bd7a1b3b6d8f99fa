//! What the CPU manager writes in its [`StateFile`] (`cpu_manager_state` through
//! `corral-checkpoint`: byte-compatible with a kubelet; or memory), and its I/O errors.

use corral_checkpoint::{
    Checkpoint, CheckpointError, CpuManagerCheckpoint, CpuManagerCheckpointV3, StateFile,
};

/// A `cpu_manager_state` to write, in the version the configuration asks for: v2 while
/// `PodLevelResourceManagers` is off (what every kubelet up to 1.36 reads), v3 while it is
/// on (as a v1.36 kubelet with the gate on writes).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CpuStateFile {
    /// v2.
    V2(CpuManagerCheckpoint),
    /// v3 (pod entries).
    V3(CpuManagerCheckpointV3),
}

impl CpuStateFile {
    /// The file's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, CheckpointError> {
        match self {
            CpuStateFile::V2(v2) => v2.encode(),
            CpuStateFile::V3(v3) => v3.encode(),
        }
    }
}

impl From<CpuManagerCheckpoint> for CpuStateFile {
    fn from(v2: CpuManagerCheckpoint) -> Self {
        CpuStateFile::V2(v2)
    }
}

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("CPU manager state {location}")]
pub struct StateIoError {
    /// The file (or other location) involved.
    pub location: String,
    /// What failed.
    #[source]
    pub source: CheckpointError,
}

/// `file`'s bytes, `None` when there is none yet.
pub(crate) fn load(file: &StateFile) -> Result<Option<Vec<u8>>, StateIoError> {
    file.load().map_err(|source| StateIoError {
        location: file.to_string(),
        source,
    })
}

/// Stage `content` in `file`.
pub(crate) fn stage(file: &StateFile, content: &CpuStateFile) -> Result<(), StateIoError> {
    let staged = match content {
        CpuStateFile::V2(v2) => file.stage_checkpoint(v2),
        CpuStateFile::V3(v3) => file.stage_checkpoint(v3),
    };
    staged.map_err(|source| StateIoError {
        location: file.to_string(),
        source,
    })
}
