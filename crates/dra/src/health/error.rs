//! Why keeping device health failed.

use std::path::PathBuf;

use corral_checkpoint::CheckpointError;

/// Why the health cache could not be opened or kept on disk.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HealthError {
    /// The state directory cannot be used.
    #[error("cannot use DRA health state directory {}", dir.display())]
    Open {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: CheckpointError,
    },
    /// The health map could not be encoded.
    #[error("cannot encode the DRA health state")]
    Encode(#[source] CheckpointError),
    /// The file could not be written; the cache in memory is current.
    #[error("cannot write DRA health state {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: CheckpointError,
    },
}
