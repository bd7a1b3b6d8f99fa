//! CPU manager state (upstream `cpumanager/state`): the in-memory [`CpuState`] the policies
//! change, what it writes in its [`StateFile`](corral_checkpoint::StateFile)
//! ([`CpuStateFile`]), and [`restore()`], which reads a kubelet-compatible
//! `cpu_manager_state` back with upstream's rules.

mod file;
mod memory;
mod restore;

pub(crate) use file::stage;
pub use file::{CpuStateFile, StateIoError};
pub use memory::{ContainerCpuAssignments, CpuState, CpuStateFileVersion};
pub use restore::{RestoreError, Restored, restore, restore_writing};
