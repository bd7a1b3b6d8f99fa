//! `corral-cpumgr`: the kubelet CPU manager as a library.
#![deny(missing_docs)]

mod assignment;
mod hints;
mod index;

pub use assignment::{
    CpuSortingStrategy, TakeError, take_by_topology_numa_distributed, take_by_topology_numa_packed,
};
pub use hints::generate_cpu_topology_hints;
pub use index::TopologyIndex;
