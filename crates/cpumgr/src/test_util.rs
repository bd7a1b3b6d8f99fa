//! Test support (feature `test-util`, off by default): a [`TopologyIndex`] from a machine
//! given as plain ids, the shape of `corral-testkit`'s upstream topologies and conformance
//! files (that crate knows no corral type, so every crate builds its own from them).

use std::sync::Arc;

use corral_topology::{CpuInfo, CpuRecord, CpuTopology, TopologyCounts};

use crate::TopologyIndex;

/// The index of a machine whose CPUs are `[cpu, core, socket, numa, uncore]` ids, with the
/// counts `[cpus, cores, sockets, numa_nodes, uncore_caches]` used as given (upstream divides
/// by them, so fixtures state them).
///
/// # Panics
///
/// When the records are not a topology (a CPU listed twice, an id too large): fixtures are
/// test inputs.
///
/// ```
/// use corral_cpumgr::test_util::topology_index;
///
/// // 1 socket, 2 cores × 2 threads.
/// let cpus = [[0, 0, 0, 0, 0], [1, 1, 0, 0, 0], [2, 0, 0, 0, 0], [3, 1, 0, 0, 0]];
/// let index = topology_index(cpus, [4, 2, 1, 1, 1]);
/// assert_eq!(index.all_cpus().to_string(), "0-3");
/// ```
pub fn topology_index(
    cpus: impl IntoIterator<Item = [usize; 5]>,
    counts: [usize; 5],
) -> Arc<TopologyIndex> {
    let [
        num_cpus,
        num_cores,
        num_sockets,
        num_numa_nodes,
        num_uncore_caches,
    ] = counts;
    let records: Vec<CpuRecord> = cpus
        .into_iter()
        .map(|[cpu, core, socket, numa, uncore]| CpuRecord {
            cpu,
            info: CpuInfo {
                core,
                socket,
                numa,
                uncore,
            },
        })
        .collect();
    let topology = CpuTopology::new(&records)
        .unwrap_or_else(|e| panic!("fixture topology: {e}"))
        .with_counts(TopologyCounts {
            num_cpus,
            num_cores,
            num_sockets,
            num_numa_nodes,
            num_uncore_caches,
        });
    Arc::new(TopologyIndex::new(&topology))
}
