//! corral-topology's integration tests, one binary: upstream's own tests of the vocabulary
//! and the topology manager (`upstream_*`, table for table), the topology_merge conformance
//! vectors, sysfs fixtures of real machines, sparse NUMA ids, property tests, the `fuzz_*`
//! parsers and error sources.

mod error_sources;
mod family_merge;
mod fuzz;
mod grants;
mod merge_conformance;
mod properties;
#[cfg(feature = "sysfs")]
mod sparse_numa;
mod support;
#[cfg(feature = "sysfs")]
mod sysfs_fixtures;
mod sysfs_memory;
mod upstream_bitmask;
mod upstream_cpu_topology;
mod upstream_cpuset;
mod upstream_numa_info;
mod upstream_policy_best_effort;
mod upstream_policy_none;
mod upstream_policy_options;
mod upstream_policy_restricted;
mod upstream_policy_single_numa_node;
mod upstream_scope;
mod upstream_topology_manager;
