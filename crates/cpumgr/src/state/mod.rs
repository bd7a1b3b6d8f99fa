//! CPU manager state (upstream `cpumanager/state`): the in-memory [`CpuState`] the policies
//! change, the [`StateBackend`] edge that persists it, and [`restore`], which reads a
//! kubelet-compatible `cpu_manager_state` back with upstream's rules.

mod backend;
mod memory;
mod restore;

pub use backend::{CheckpointBackend, CpuStateFile, MemoryBackend, StateBackend, StateIoError};
pub use memory::{ContainerCpuAssignments, CpuState, CpuStateFileVersion};
pub use restore::{RestoreError, Restored, restore, restore_writing};
