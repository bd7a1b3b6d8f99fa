//! Upstream `takeByTopologyNUMAPacked`.

use corral_topology::CpuSet;

use super::accumulator::Accumulator;
use super::{CpuSortingStrategy, TakeError, UncoreCacheAlignment};
use crate::index::TopologyIndex;

/// `num_cpus` CPUs from `available`, packed onto as few NUMA nodes, sockets, (uncore caches,)
/// and cores as possible (upstream `takeByTopologyNUMAPacked`).
///
/// Steps, each skipped once the request is met: whole NUMA nodes or sockets (the level
/// higher in the hierarchy first), whole uncore caches or a fitting part of one (with
/// [`UncoreCacheAlignment::Prefer`]), whole cores (not when the strategy [spreads](CpuSortingStrategy::spreads)),
/// then single CPUs in the strategy's order.
///
/// ```
/// use corral_cpumgr::{
///     CpuSortingStrategy, TopologyIndex, UncoreCacheAlignment, take_by_topology_numa_packed,
/// };
/// use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology};
///
/// // One socket, 4 cores × 2 threads: CPU n and n+4 share core n.
/// let records: Vec<CpuRecord> = (0..8)
///     .map(|cpu| CpuRecord { cpu, info: CpuInfo { core: cpu % 4, socket: 0, numa: 0, uncore: 0 } })
///     .collect();
/// let index = TopologyIndex::new(&CpuTopology::new(&records)?);
/// let all = CpuSet::from_range(0, 7);
/// let (packed, spread) = (CpuSortingStrategy::Packed, CpuSortingStrategy::Spread);
/// let got = take_by_topology_numa_packed(&index, &all, 2, packed, UncoreCacheAlignment::Ignore)?;
/// assert_eq!(got.to_string(), "0,4");
/// let got = take_by_topology_numa_packed(&index, &all, 2, spread, UncoreCacheAlignment::Ignore)?;
/// assert_eq!(got.to_string(), "0-1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn take_by_topology_numa_packed(
    index: &TopologyIndex,
    available: &CpuSet,
    num_cpus: usize,
    strategy: CpuSortingStrategy,
    uncore_cache: UncoreCacheAlignment,
) -> Result<CpuSet, TakeError> {
    let Some(mut acc) = Accumulator::start(index, available, num_cpus, strategy)? else {
        return Ok(CpuSet::new());
    };
    // Upstream's steps in order, each only when it applies, until the request is met.
    let steps: [(bool, fn(&mut _)); 5] = [
        (true, Accumulator::take_full_first_level),
        (true, Accumulator::take_full_second_level),
        (
            uncore_cache == UncoreCacheAlignment::Prefer,
            Accumulator::take_uncore_cache,
        ),
        (!strategy.spreads(), Accumulator::take_full_cores),
        (true, Accumulator::take_remaining_cpus),
    ];
    for (applies, step) in steps {
        if applies {
            step(&mut acc);
            if acc.is_satisfied() {
                return Ok(acc.result);
            }
        }
    }
    Err(TakeError::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::topology_index;

    /// Found by an adversarial run: two sockets of four NUMA nodes, node 0 with 9
    /// single-thread cores and the others 8 (socket 0: CPUs 0-32, socket 1: 33-64), CPU 0
    /// reserved. Socket 0 then has 32 free CPUs, `65 / 2` — upstream's test for a free
    /// socket — and upstream's `takeFullSockets` takes the topology's 33 CPUs of it, CPU 0
    /// included. corral takes only the free ones.
    #[test]
    fn a_free_socket_of_an_uneven_machine_gives_only_its_free_cpus() {
        let numa_of = |c: usize| if c < 9 { 0 } else { 1 + (c - 9) / 8 };
        let cpus = (0..65).map(|c| [c, c, numa_of(c) / 4, numa_of(c), numa_of(c)]);
        let index = topology_index(cpus, [65, 65, 2, 8, 8]);
        let available: CpuSet = (1..65).collect();
        for request in [32, 33, 64] {
            let got = take_by_topology_numa_packed(
                &index,
                &available,
                request,
                CpuSortingStrategy::Packed,
                UncoreCacheAlignment::Ignore,
            )
            .unwrap();
            assert_eq!(got.len(), request, "{got}");
            assert!(got.is_subset_of(&available), "{request}: {got}");
        }
    }
}
