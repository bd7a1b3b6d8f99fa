//! Upstream `takeByTopologyNUMADistributed` (KEP-2902), with bounded remainder loops and a
//! bounded combination search (see [`take_by_topology_numa_distributed`]).

use corral_topology::CpuSet;
use corral_topology::topologymanager::{DECISION_STEPS, bounded};

use self::search::{Combos, Reading, Search, Walk};
use super::accumulator::Accumulator;
use super::{CpuSortingStrategy, TakeError, UncoreCacheAlignment, take_by_topology_numa_packed};
use crate::hints::SocketAlignment;
use crate::index::{Level, TopologyIndex};

/// `num_cpus` CPUs from `available`, spread evenly (in groups of `cpu_group_size`) over the
/// fewest NUMA nodes that can hold them (upstream `takeByTopologyNUMADistributed` as of
/// v1.32–v1.37, Go slice aliasing included: what the conformance vectors record; the static
/// policy uses v1.38's [`take_by_topology_numa_distributed_with`]).
///
/// Falls back to [`take_by_topology_numa_packed`] (without uncore preference) when the
/// request is not a multiple of the group size or no NUMA combination balances.
///
/// # Bounded search
///
/// Upstream walks every `k`-combination of the NUMA nodes with free CPUs (for the smallest
/// `k` that has a fitting one), and for each the subsets of it that could take the
/// remainder: exponential in the number of NUMA nodes. Here every combination scored, and
/// every remainder subset visited, draws steps in proportion to its work (its size plus
/// the number of nodes, see `Search::cost`) from the
/// [step budget](corral_topology::topologymanager::bounded) open on this thread — called
/// outside one, this function opens one of [`DECISION_STEPS`] (the CPU manager gives each
/// allocation a budget of its own). While the budget lasts the answer is upstream's, byte
/// for byte (its Go slice aliasing included); upstream's conformance vectors take at most a
/// few thousand steps. When a step is refused the walk stops (deterministically: the walk
/// order is fixed) and:
///
/// - if some combination was scored for this `k`, the best scored so far is taken — the
///   combination and remainder subset that were actually scored together (not upstream's
///   aliased reading of them, which only means something for a finished walk);
/// - otherwise (no combination fitted before the budget ran out), the first combination in
///   upstream's walk order that fits, for the smallest `k` from here on that has one, found
///   directly, without walking (a greedy, lexicographic choice with an exact feasibility
///   test, polynomial in the number of nodes), with the whole remainder set (every node of
///   it that can still give a group: the first subset upstream's remainder walk tries, and
///   one that always takes the remainder). "Fits" is exactly upstream's test, so this is a
///   combination upstream scores, the `k` is the `k` upstream would settle on, and the
///   result is a valid allocation: `num_cpus` CPUs of `available`, `distribution` on each
///   node of the combination and the remainder in groups.
///
/// ```
/// use corral_cpumgr::{CpuSortingStrategy, TopologyIndex, take_by_topology_numa_distributed};
/// use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology};
///
/// // Two NUMA nodes of 4 single-thread cores each.
/// let records: Vec<CpuRecord> = (0..8)
///     .map(|cpu| CpuRecord { cpu, info: CpuInfo { core: cpu, socket: cpu / 4, numa: cpu / 4, uncore: 0 } })
///     .collect();
/// let index = TopologyIndex::new(&CpuTopology::new(&records)?);
/// // 4 free on node 0, 2 on node 1: 6 CPUs cannot fit one node, so 3 + 3 would be even,
/// // but node 1 has only 2; the best balance takes 4 + 2.
/// let free: CpuSet = "0-3,4-5".parse()?;
/// let got = take_by_topology_numa_distributed(&index, &free, 6, 1, CpuSortingStrategy::Packed)?;
/// assert_eq!(got.len(), 6);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn take_by_topology_numa_distributed(
    index: &TopologyIndex,
    available: &CpuSet,
    num_cpus: usize,
    cpu_group_size: usize,
    strategy: CpuSortingStrategy,
) -> Result<CpuSet, TakeError> {
    let options = DistributedOptions::new(cpu_group_size, strategy);
    bounded(DECISION_STEPS, || {
        take_distributed(index, available, num_cpus, options, Reading::GoAliased)
    })
    .0
}

/// How [`take_by_topology_numa_distributed_with`] distributes, beyond the request's size:
/// what upstream v1.38's static policy passes `takeByTopologyNUMADistributed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DistributedOptions {
    /// CPUs taken together (CPUs per core with `full-pcpus-only`, else 1).
    pub cpu_group_size: usize,
    /// How single CPUs are picked inside a NUMA node.
    pub strategy: CpuSortingStrategy,
    /// The fewest NUMA nodes to spread over (upstream v1.38's `minNUMAsFromHint`, #139456:
    /// the static policy passes the topology manager's affinity's NUMA count, so an affinity
    /// chosen for devices on several nodes is kept rather than shrunk to the fewest nodes
    /// that hold the request). Ignored when `available` has CPUs on fewer nodes; above the
    /// number of groups requested it leaves no combination size to try, and the request is
    /// packed, as upstream's loop over sizes does. 0: no floor.
    pub min_numas: usize,
    /// With [`SocketAlignment::Prefer`] (`align-by-socket`), a combination of a size whose
    /// nodes all lie on one socket beats every combination spanning sockets (upstream
    /// v1.38, #139778 and #141238 / issue #141237).
    pub socket_alignment: SocketAlignment,
}

impl DistributedOptions {
    /// Groups of `cpu_group_size`, picked with `strategy`; no floor, sockets ignored.
    pub const fn new(cpu_group_size: usize, strategy: CpuSortingStrategy) -> DistributedOptions {
        DistributedOptions {
            cpu_group_size,
            strategy,
            min_numas: 0,
            socket_alignment: SocketAlignment::Ignore,
        }
    }
}

/// Upstream v1.38's `takeByTopologyNUMADistributed`: [`take_by_topology_numa_distributed`]
/// with [`DistributedOptions`] (the NUMA floor, socket alignment), the best combination and
/// remainder subset taken as they were scored — v1.38 copies them (#141238, issue #141237),
/// where earlier releases read slices whose tails later candidates had overwritten, which
/// could swap a node of the best combination for one of another socket.
///
/// ```
/// use corral_cpumgr::{
///     CpuSortingStrategy, DistributedOptions, TopologyIndex,
///     take_by_topology_numa_distributed_with,
/// };
/// use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology};
///
/// // Four NUMA nodes of 4 single-thread cores each.
/// let records: Vec<CpuRecord> = (0..16)
///     .map(|cpu| CpuRecord { cpu, info: CpuInfo { core: cpu, socket: 0, numa: cpu / 4, uncore: 0 } })
///     .collect();
/// let index = TopologyIndex::new(&CpuTopology::new(&records)?);
/// let all = CpuSet::from_range(0, 15);
/// // 4 CPUs fit one node; an affinity of all four nodes spreads them one per node.
/// let options = DistributedOptions {
///     min_numas: 4,
///     ..DistributedOptions::new(1, CpuSortingStrategy::Packed)
/// };
/// let got = take_by_topology_numa_distributed_with(&index, &all, 4, options)?;
/// assert_eq!(got.to_string(), "0,4,8,12");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn take_by_topology_numa_distributed_with(
    index: &TopologyIndex,
    available: &CpuSet,
    num_cpus: usize,
    options: DistributedOptions,
) -> Result<CpuSet, TakeError> {
    bounded(DECISION_STEPS, || {
        take_distributed(index, available, num_cpus, options, Reading::AsScored)
    })
    .0
}

/// The distributed take on the budget open on this thread, the walk's best pair read as
/// `reading` says.
fn take_distributed(
    index: &TopologyIndex,
    available: &CpuSet,
    num_cpus: usize,
    options: DistributedOptions,
    reading: Reading,
) -> Result<CpuSet, TakeError> {
    let DistributedOptions {
        cpu_group_size,
        strategy,
        min_numas: floor,
        socket_alignment,
    } = options;
    if cpu_group_size == 0 {
        return Err(TakeError::ZeroGroupSize);
    }
    // Upstream's fallback where the request cannot be distributed.
    let packed = || {
        take_by_topology_numa_packed(
            index,
            available,
            num_cpus,
            strategy,
            UncoreCacheAlignment::Ignore,
        )
    };
    if !num_cpus.is_multiple_of(cpu_group_size) {
        return packed();
    }
    let Some(mut acc) = Accumulator::start(index, available, num_cpus, strategy)? else {
        return Ok(CpuSet::new());
    };
    let numas = acc.sort(Level::Numa);
    let (mut min_numas, max_numas) = range_numas_needed(&acc, cpu_group_size);
    // Upstream v1.38 (#139456): the affinity's node count is the floor, unless `available`
    // has CPUs on fewer nodes than that.
    if floor <= index.dense_ids_of(&acc.free, Level::Numa).len() {
        min_numas = min_numas.max(floor);
    }
    // Free CPUs per NUMA node (dense index); the search does not take anything.
    let mut free = vec![0i64; index.groups(Level::Numa).ids.len()];
    for &numa in &numas {
        free[numa] = acc.free_in(Level::Numa, numa) as i64;
    }
    // The socket of each NUMA node whose CPUs lie on one (dense indices).
    let socket_of: Vec<Option<usize>> = (0..free.len())
        .map(|numa| {
            let sockets = index.sockets_of_numa(numa);
            (sockets.len() == 1).then(|| sockets.min()).flatten()
        })
        .collect();
    let search = Search {
        numas: &numas,
        free: &free,
        socket_of: &socket_of,
        reading,
        num_cpus: num_cpus as i64,
        group: cpu_group_size as i64,
    };
    let align = socket_alignment == SocketAlignment::Prefer;
    let mut chosen = None;
    for k in min_numas..=max_numas {
        let combos = if align && search.first_fitting_in_one_socket(k).is_some() {
            Combos::InOneSocket
        } else {
            Combos::Any
        };
        match search.best_combination(k, combos) {
            Walk::Finished(None) => {}
            Walk::Finished(Some(pair)) | Walk::Cut(Some(pair)) => {
                chosen = Some(pair);
                break;
            }
            Walk::Cut(None) => {
                chosen = (k..=max_numas).find_map(|k| {
                    let in_one_socket = align
                        .then(|| search.first_fitting_in_one_socket(k))
                        .flatten();
                    let combo = in_one_socket.or_else(|| search.first_fitting(k))?;
                    let remainder_set = search.whole_remainder_set(&combo);
                    Some((combo, remainder_set))
                });
                break;
            }
        }
    }
    let Some((combo, remainder_set)) = chosen else {
        return packed();
    };
    let group = cpu_group_size as i64;
    let distribution = search.distribution(combo.len());
    for &numa in &combo {
        let in_numa = acc.free.intersection(index.group_cpus(Level::Numa, numa));
        let cpus = take_by_topology_numa_packed(
            index,
            &in_numa,
            distribution as usize,
            strategy,
            UncoreCacheAlignment::Ignore,
        )
        .unwrap_or_default();
        acc.take(&cpus);
    }
    let mut remainder = search.num_cpus - distribution * combo.len() as i64;
    while remainder > 0 {
        let mut progressed = false;
        for &numa in &remainder_set {
            if remainder == 0 {
                break;
            }
            if (acc.free_in(Level::Numa, numa) as i64) < group {
                continue;
            }
            let in_numa = acc.free.intersection(index.group_cpus(Level::Numa, numa));
            let cpus = take_by_topology_numa_packed(
                index,
                &in_numa,
                cpu_group_size,
                strategy,
                UncoreCacheAlignment::Ignore,
            )
            .unwrap_or_default();
            acc.take(&cpus);
            remainder -= group;
            progressed = true;
        }
        if !progressed {
            return Err(TakeError::RemainderStuck {
                remaining: remainder,
                group_size: cpu_group_size,
            });
        }
    }
    if acc.needed > 0 {
        return Err(TakeError::AccountingNotEnough {
            remaining: acc.needed,
        });
    }
    if acc.needed < 0 {
        return Err(TakeError::AccountingTooMany {
            remaining: acc.needed,
        });
    }
    Ok(acc.result)
}

/// Upstream `rangeNUMANodesNeededToSatisfy`.
fn range_numas_needed(acc: &Accumulator<'_>, group: usize) -> (usize, usize) {
    let ix = acc.ix;
    let numa_nodes = ix.groups(Level::Numa).ids.len().max(1);
    let numa_available = ix.dense_ids_of(&acc.free, Level::Numa).len();
    let cpus = ix.all_cpus().len().max(1);
    let groups = (cpus - 1) / group + 1;
    let groups_per_numa = (groups - 1) / numa_nodes + 1;
    let needed = usize::try_from(acc.needed).unwrap_or(0).max(1);
    let groups_needed = (needed - 1) / group + 1;
    let min = (groups_needed - 1) / groups_per_numa + 1;
    let max = groups_needed.min(numa_available);
    (min, max)
}

mod search;
#[cfg(test)]
mod tests;
