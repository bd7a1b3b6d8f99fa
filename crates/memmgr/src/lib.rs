//! `corral-memmgr`: the kubelet's memory manager (`pkg/kubelet/cm/memorymanager`) as a
//! library — synchronous and I/O-free, usable without tokio.
//!
//! - [`MachineState`]: per NUMA node, a [`MemoryTable`] for `memory` and each huge page size
//!   (`hugepages-2Mi`, `hugepages-1Gi`…) — total, system reserved, allocatable, reserved,
//!   free — with the node's `cells` group and its number of assignments, as upstream's
//!   `state.NUMANodeMap`. [`default_machine_state`] builds it from the discovered memory
//!   (`corral_topology::sysfs::discover_memory`) and the reserved memory, as the static
//!   policy's `getDefaultMachineState`.
//! - [`restore_machine_state`]: upstream's `validateState` — the machine state recomputed
//!   from a checkpoint's assignments must equal the checkpoint's, with upstream's errors.
//! - [`StaticPolicy`]: upstream's static policy at container scope — hints
//!   ([`hints::calculate_hints`]: every fitting set of nodes, respecting the groups),
//!   allocation with the topology manager's affinity (extended when it does not hold the
//!   request; upstream's errors), init-container memory reuse, release.
//! - [`checkpoint`]: conversions to and from `memory_manager_state`
//!   ([`corral_checkpoint::MemoryManagerCheckpoint`]).
//!
//! ```
//! use std::collections::BTreeMap;
//! use corral_memmgr::{MEMORY, SystemReserved, default_machine_state};
//! use corral_topology::memory::{HugePages, NumaMemory};
//!
//! let node = NumaMemory {
//!     node: 0,
//!     memory_bytes: 8 << 30,
//!     huge_pages: vec![HugePages { page_size_kib: 2048, count: 512 }],
//! };
//! let reserved: SystemReserved = BTreeMap::from([(0, BTreeMap::from([(MEMORY.to_owned(), 1 << 30)]))]);
//! let state = default_machine_state(&BTreeMap::from([(0, node)]), &reserved).unwrap();
//! let memory = &state[&0].memory[MEMORY];
//! // 8 GiB less 1 GiB reserved less the 1 GiB of huge pages.
//! assert_eq!(memory.allocatable, 6 << 30);
//! assert_eq!(state[&0].memory["hugepages-2Mi"].allocatable, 1 << 30);
//! ```
//!
//! **Architecture Invariant:** no I/O and no async; every number is checked (no wrapping
//! subtraction where upstream's `uint64` would wrap).

pub mod checkpoint;
mod error;
pub mod hints;
mod machine_state;
mod manager;
mod pod_level;
mod restore;
mod static_policy;

pub use error::{AllocateError, EmptyPodSharedPoolError, MachineStateError, RestoreError};
pub use machine_state::{
    Assignments, Block, MEMORY, MachineState, MemoryTable, NodeState, SystemReserved,
    default_machine_state,
};
pub use manager::{
    ConfigError, EMPTY_POD_SHARED_POOL_ERROR, EvictionThreshold, MemoryManager,
    MemoryManagerConfig, MemoryManagerError, MemoryManagerMetrics, MemoryPolicy, MemoryReservation,
    MemorySnapshot, check_system_reserved, node_allocatable_reservation,
};
pub use restore::{restore_machine_state, restore_machine_state_with_pods};
pub use static_policy::{StaticPolicy, pod_requested, requested};
