//! [`MemoryManagerError`]: why a memory manager operation failed.

use corral_checkpoint::CheckpointError;

use crate::checkpoint::CheckpointValueError;
use crate::error::{MachineStateError, RestoreError};

use super::config::ConfigError;

/// Why building, starting or changing the memory manager failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryManagerError {
    /// [`MemoryManager::start`](super::MemoryManager::start) was not called (or failed).
    #[error("the memory manager has not been started")]
    NotStarted,
    /// The configuration is invalid (upstream `NewManager`'s errors).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The machine's memory cannot carry the reservation.
    #[error("building the static policy's machine state")]
    MachineState(#[source] MachineStateError),
    /// `memory_manager_state` could not be read or is damaged (upstream's remedy).
    #[error(
        "could not restore state from checkpoint {file}, please drain this node and delete the memory manager checkpoint file {file:?} before restarting"
    )]
    Read {
        /// The checkpoint file.
        file: String,
        /// What failed.
        #[source]
        source: CheckpointError,
    },
    /// `memory_manager_state` holds a value no machine has.
    #[error(
        "could not restore state from checkpoint {file}, please drain this node and delete the memory manager checkpoint file {file:?} before restarting"
    )]
    Value {
        /// The checkpoint file.
        file: String,
        /// The value.
        #[source]
        source: CheckpointValueError,
    },
    /// A v2 or v3 checkpoint holds pod-level assignments (KEP-5526) while
    /// `PodLevelResourceManagers` is off: restoring without them would hand that memory to
    /// other pods.
    #[error(
        "could not restore state from checkpoint {file}: it holds pod-level memory assignments for pods {pods:?}, which only PodLevelResourceManagers on restores; turn the gate on again, or drain this node and delete the memory manager checkpoint file {file:?} before restarting"
    )]
    PodLevelAssignments {
        /// The checkpoint file.
        file: String,
        /// Pods with pod-level assignments.
        pods: Vec<String>,
    },
    /// The checkpoint was written by another policy (upstream's message).
    #[error(
        "[memorymanager] configured policy {configured:?} differs from state checkpoint policy {stored:?}; configure {stored:?} again, or drain this node and delete the memory manager checkpoint file {file:?} before restarting"
    )]
    PolicyMismatch {
        /// The checkpoint file.
        file: String,
        /// The policy configured now.
        configured: String,
        /// The policy that wrote the checkpoint.
        stored: String,
    },
    /// The checkpoint's state does not fit this machine and configuration (upstream's
    /// `validateState`, logged upstream as "Invalid state, please drain node and remove
    /// policy state file").
    #[error("invalid state in {file}, please drain node and remove policy state file")]
    InvalidState {
        /// The checkpoint file.
        file: String,
        /// What is wrong.
        #[source]
        source: RestoreError,
    },
    /// The state could not be persisted; the change was rolled back.
    #[error("the memory manager state was not persisted to {file}; the change was rolled back")]
    Persist {
        /// The checkpoint file.
        file: String,
        /// What failed.
        #[source]
        source: CheckpointError,
    },
}
