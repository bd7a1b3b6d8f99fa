//! [`CpuManagerError`]: why a CPU manager operation failed.

use crate::policy::{AllocateError, PolicyError, ValidationError};
use crate::state::{RestoreError, StateIoError};

/// Why a manager operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CpuManagerError {
    /// The policy could not be created.
    #[error("new {policy} policy error")]
    Policy {
        /// The policy name.
        policy: String,
        /// Why.
        #[source]
        source: Box<PolicyError>,
    },
    /// The persisted state could not be restored (the message names the file and remedy).
    #[error(transparent)]
    Restore(Box<RestoreError>),
    /// The restored state is inconsistent with the configuration or the machine.
    #[error(
        "static policy invalid state in {file}; {hint}drain this node, delete {file} and restart"
    )]
    InvalidState {
        /// The checkpoint file.
        file: String,
        /// What is wrong.
        #[source]
        source: Box<ValidationError>,
        /// Extra context for the remedy.
        hint: &'static str,
    },
    /// The state could not be persisted; the change was rolled back.
    #[error("the CPU manager state was not persisted; the change was rolled back")]
    Persist(#[source] StateIoError),
    /// Allocation failed.
    #[error(transparent)]
    Allocate(#[from] AllocateError),
    /// [`CpuManager::start`](crate::CpuManager::start) was not called (or failed).
    #[error("the CPU manager has not been started")]
    NotStarted,
}
