//! Upstream `takeByTopologyNUMADistributed` (KEP-2902), with bounded remainder loops and a
//! bounded combination search (see [`take_by_topology_numa_distributed`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use corral_topology::CpuSet;
use corral_topology::topologymanager::{DECISION_STEPS, bounded, spend};

use super::accumulator::Accumulator;
use super::combinations::{GoSlices, Loop, SliceRef, iterate_combinations};
use super::{CpuSortingStrategy, TakeError, UncoreCacheAlignment, take_by_topology_numa_packed};
use crate::index::{Level, TopologyIndex};

/// Upstream `mean`: rounded to 1/1000.
fn mean(xs: impl Iterator<Item = i64> + Clone) -> f64 {
    let (mut sum, mut n) = (0.0f64, 0usize);
    for x in xs {
        sum += x as f64;
        n += 1;
    }
    let m = sum / n as f64;
    (m * 1000.0).round() / 1000.0
}

/// Upstream `standardDeviation`: rounded to 1/1000.
fn standard_deviation(xs: impl Iterator<Item = i64> + Clone) -> f64 {
    let m = mean(xs.clone());
    let (mut sum, mut n) = (0.0f64, 0usize);
    for x in xs {
        let d = x as f64 - m;
        sum += d * d;
        n += 1;
    }
    let s = (sum / n as f64).sqrt();
    (s * 1000.0).round() / 1000.0
}

/// `num_cpus` CPUs from `available`, spread evenly (in groups of `cpu_group_size`) over the
/// fewest NUMA nodes that can hold them (upstream `takeByTopologyNUMADistributed`).
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
    take_by_topology_numa_distributed_over_at_least(
        index,
        available,
        num_cpus,
        cpu_group_size,
        strategy,
        0,
    )
}

/// [`take_by_topology_numa_distributed`] spreading over at least `min_numas` NUMA nodes
/// (upstream v1.38's `minNUMAsFromHint`, #139456): the static policy passes the number of
/// NUMA nodes of the topology manager's affinity, so a multi-NUMA affinity chosen for
/// devices is kept rather than shrunk to the fewest nodes that hold the request.
///
/// The floor is ignored (0 behaves as [`take_by_topology_numa_distributed`]) when more
/// nodes are asked for than `available` has CPUs on. A floor above the number of groups
/// requested leaves no combination size to try, and the request is packed, as upstream's
/// loop over sizes does.
///
/// ```
/// use corral_cpumgr::{CpuSortingStrategy, take_by_topology_numa_distributed_over_at_least};
/// use corral_cpumgr::{TopologyIndex};
/// use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology};
///
/// // Four NUMA nodes of 4 single-thread cores each.
/// let records: Vec<CpuRecord> = (0..16)
///     .map(|cpu| CpuRecord { cpu, info: CpuInfo { core: cpu, socket: 0, numa: cpu / 4, uncore: 0 } })
///     .collect();
/// let index = TopologyIndex::new(&CpuTopology::new(&records)?);
/// let all = CpuSet::from_range(0, 15);
/// // 4 CPUs fit one node; an affinity of all four nodes spreads them one per node.
/// let got = take_by_topology_numa_distributed_over_at_least(
///     &index, &all, 4, 1, CpuSortingStrategy::Packed, 4,
/// )?;
/// assert_eq!(got.to_string(), "0,4,8,12");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn take_by_topology_numa_distributed_over_at_least(
    index: &TopologyIndex,
    available: &CpuSet,
    num_cpus: usize,
    cpu_group_size: usize,
    strategy: CpuSortingStrategy,
    min_numas: usize,
) -> Result<CpuSet, TakeError> {
    let request = Request {
        num_cpus,
        cpu_group_size,
        strategy,
        min_numas,
    };
    bounded(DECISION_STEPS, || {
        take_distributed(index, available, request)
    })
    .0
}

/// One distributed request.
#[derive(Clone, Copy)]
struct Request {
    num_cpus: usize,
    cpu_group_size: usize,
    strategy: CpuSortingStrategy,
    /// The fewest NUMA nodes to spread over (0: no floor).
    min_numas: usize,
}

/// [`take_by_topology_numa_distributed_over_at_least`] on the budget open on this thread.
fn take_distributed(
    index: &TopologyIndex,
    available: &CpuSet,
    request: Request,
) -> Result<CpuSet, TakeError> {
    let Request {
        num_cpus,
        cpu_group_size,
        strategy,
        min_numas: floor,
    } = request;
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
    let search = Search {
        numas: &numas,
        free: &free,
        num_cpus: num_cpus as i64,
        group: cpu_group_size as i64,
    };
    let mut chosen = None;
    for k in min_numas..=max_numas {
        match search.best_combination(k) {
            Walk::Finished(None) => {}
            Walk::Finished(Some(pair)) | Walk::Cut(Some(pair)) => {
                chosen = Some(pair);
                break;
            }
            Walk::Cut(None) => {
                chosen = (k..=max_numas).find_map(|k| {
                    let combo = search.first_fitting(k)?;
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

/// The combination search of one call.
struct Search<'s> {
    /// NUMA nodes with free CPUs, in upstream's sorted order (dense indices).
    numas: &'s [usize],
    /// Free CPUs per NUMA node (dense index).
    free: &'s [i64],
    num_cpus: i64,
    group: i64,
}

/// A NUMA combination and the subset of it that takes the remainder.
type Pair = (Vec<usize>, Vec<usize>);

/// What the walk over the `k`-combinations found.
enum Walk {
    /// The walk finished: upstream's answer (as upstream reads it), `None` when no
    /// combination fits.
    Finished(Option<Pair>),
    /// The step budget ran out: the best pair scored before, if any.
    Cut(Option<Pair>),
}

/// One combination's score.
struct Scored {
    balance: f64,
    /// The best remainder subset as upstream reads it after its walk.
    remainder: Vec<usize>,
    /// The remainder subset that was scored `balance`.
    scored_remainder: Vec<usize>,
}

impl Search<'_> {
    fn balance(&self, after: &[i64]) -> f64 {
        standard_deviation(self.numas.iter().map(|&n| after[n]))
    }

    /// The steps scoring a combination, or visiting a remainder subset, of `len` nodes
    /// draws: its work is a pass over it and, to score a balance, two over every node
    /// (about 0.15 µs for 8 of 32 nodes, 0.2 µs for 18 of 64, on this project's CI
    /// machines), so one step per 32 of them, at least one: about 0.07–0.12 µs a step, at
    /// or below the budget's 0.1–0.3 µs, so a search that runs out took about 3 ms.
    fn cost(&self, len: usize) -> u64 {
        1 + ((len + self.numas.len()) / 32) as u64
    }

    /// CPUs each node of a `k`-combination gets before the remainder (upstream
    /// `distribution`).
    fn distribution(&self, k: usize) -> i64 {
        (self.num_cpus / k as i64 / self.group) * self.group
    }

    /// The best `k`-combination of NUMA nodes and its remainder subset, as upstream reads
    /// them after its iteration (tails possibly overwritten, see [`super::combinations`]);
    /// cut short, the best pair scored before the budget ran out.
    fn best_combination(&self, k: usize) -> Walk {
        let mut slices = GoSlices::new();
        let mut best_balance = f64::MAX;
        let mut best_remainder: Vec<usize> = Vec::new();
        let mut best_combo: Option<SliceRef> = None;
        // The best pair as scored, for a walk cut short.
        let mut scored: Option<Pair> = None;
        let mut cut = false;
        iterate_combinations(&mut slices, self.numas, k, &mut |slices, combo_ref| {
            if best_balance == 0.0 {
                return Loop::Break;
            }
            let combo = slices.get(combo_ref);
            if !spend(self.cost(combo.len())) {
                cut = true;
                return Loop::Break;
            }
            let (score, finished) = self.score(combo);
            if let Some(score) = score
                && score.balance < best_balance
            {
                best_balance = score.balance;
                best_remainder = score.remainder;
                best_combo = Some(combo_ref);
                scored = Some((combo.to_vec(), score.scored_remainder));
            }
            if !finished {
                cut = true;
                return Loop::Break;
            }
            Loop::Continue
        });
        if cut {
            return Walk::Cut(scored);
        }
        Walk::Finished(best_combo.map(|r| (slices.get(r).to_vec(), best_remainder)))
    }

    /// Upstream's per-combination check and balance score: `None` when the combination
    /// cannot take the request evenly, else the best balance and remainder subset; and
    /// whether the remainder walk finished (else the score is the best found before the
    /// budget ran out, `None` if none was).
    fn score(&self, combo: &[usize]) -> (Option<Scored>, bool) {
        let group = self.group;
        if !self.fits(combo) {
            return (None, true);
        }
        let distribution = self.distribution(combo.len());
        let mut after = self.free.to_vec();
        for &n in combo {
            after[n] -= distribution;
        }
        let remainder = self.num_cpus - distribution * combo.len() as i64;
        let remainder_combo: Vec<usize> = combo
            .iter()
            .copied()
            .filter(|&n| after[n] >= group)
            .collect();
        let mut best_local = f64::MAX;
        let mut best_local_remainder = Vec::new();
        let mut scored_remainder = Vec::new();
        if remainder == 0 {
            best_local = self.balance(&after);
        }
        // The free CPUs left on the remainder nodes, largest first: subsets of a size whose
        // largest ones cannot hold the remainder are all skipped by upstream's walk (as are
        // those of every smaller size), so they are not visited.
        let mut largest: Vec<i64> = remainder_combo.iter().map(|&n| after[n]).collect();
        largest.sort_unstable_by(|a, b| b.cmp(a));
        let mut size = remainder_combo.len();
        let mut finished = true;
        while remainder > 0 && size >= 1 && finished {
            if largest[..size].iter().sum::<i64>() < remainder {
                break;
            }
            let mut slices = GoSlices::new();
            let mut best_here: Option<SliceRef> = None;
            let mut scratch = after.clone();
            iterate_combinations(&mut slices, &remainder_combo, size, &mut |slices, r| {
                let subset = slices.get(r);
                if !spend(self.cost(subset.len())) {
                    finished = false;
                    return Loop::Break;
                }
                if subset.iter().map(|&n| after[n]).sum::<i64>() < remainder {
                    return Loop::Continue;
                }
                scratch.copy_from_slice(&after);
                if !hand_out(&mut scratch, subset, remainder, group) {
                    // Upstream loops forever here; this subset cannot take the remainder.
                    return Loop::Continue;
                }
                let balance = self.balance(&scratch);
                if balance < best_local {
                    best_local = balance;
                    best_here = Some(r);
                    scored_remainder.clear();
                    scored_remainder.extend_from_slice(subset);
                }
                Loop::Continue
            });
            if let Some(r) = best_here {
                best_local_remainder = slices.get(r).to_vec();
            }
            size -= 1;
        }
        let score = (best_local < f64::MAX).then_some(Scored {
            balance: best_local,
            remainder: best_local_remainder,
            scored_remainder,
        });
        (score, finished)
    }

    /// Upstream's test of a combination, before any balance: its nodes hold the request,
    /// in whole groups, and each can give the even `distribution`. A combination that
    /// passes always gets a score: its remainder nodes hold the remainder in groups.
    fn fits(&self, combo: &[usize]) -> bool {
        let group = self.group;
        let total: i64 = combo.iter().map(|&n| self.free[n]).sum();
        if total < self.num_cpus {
            return false;
        }
        let groups: i64 = combo.iter().map(|&n| self.free[n] / group).sum();
        if groups * group < self.num_cpus {
            return false;
        }
        let distribution = self.distribution(combo.len());
        combo.iter().all(|&n| self.free[n] >= distribution)
    }

    /// The first `k`-combination in upstream's walk order that [fits](Self::fits), without
    /// walking: position by position, the first node after the last chosen one with which
    /// some completion fits — the completion with the most groups, i.e. the nodes with the
    /// most groups among those able to give the distribution (with the groups there, the
    /// total follows). `O(k · n log n)` for `n` nodes.
    fn first_fitting(&self, k: usize) -> Option<Vec<usize>> {
        if k == 0 || k > self.numas.len() {
            return None;
        }
        let group = self.group;
        let distribution = self.distribution(k);
        // The request is a multiple of the group size (checked before any search).
        let groups_needed = self.num_cpus / group;
        let groups: Vec<Option<i64>> = self
            .numas
            .iter()
            .map(|&n| (self.free[n] >= distribution).then_some(self.free[n] / group))
            .collect();
        let n = self.numas.len();
        let mut chosen = Vec::with_capacity(k);
        let mut have = 0i64;
        let mut start = 0;
        let mut completion: Vec<Option<i64>> = vec![None; n];
        for slot in 0..k {
            let rest = k - slot - 1;
            // completion[i]: the most groups `rest` usable nodes after position i hold.
            let mut heap: BinaryHeap<Reverse<i64>> = BinaryHeap::with_capacity(rest + 1);
            let mut sum = 0i64;
            for i in (start..n).rev() {
                completion[i] = (heap.len() == rest).then_some(sum);
                if let Some(g) = groups[i] {
                    heap.push(Reverse(g));
                    sum += g;
                    if heap.len() > rest
                        && let Some(Reverse(smallest)) = heap.pop()
                    {
                        sum -= smallest;
                    }
                }
            }
            let pick = (start..n).find(|&i| {
                groups[i]
                    .zip(completion[i])
                    .is_some_and(|(g, c)| have + g + c >= groups_needed)
            })?;
            chosen.push(self.numas[pick]);
            have += groups[pick].unwrap_or(0);
            start = pick + 1;
        }
        Some(chosen)
    }

    /// The nodes of `combo` that can still give a group after the distribution: the first
    /// remainder subset upstream's walk tries, which always takes the remainder of a
    /// combination that [fits](Self::fits).
    fn whole_remainder_set(&self, combo: &[usize]) -> Vec<usize> {
        let distribution = self.distribution(combo.len());
        combo
            .iter()
            .copied()
            .filter(|&n| self.free[n] - distribution >= self.group)
            .collect()
    }
}

/// Hand `remainder` CPUs out of `after` over `subset` in groups, round-robin, as upstream
/// simulates it; `false` when a whole round hands out nothing (upstream never terminates).
fn hand_out(after: &mut [i64], subset: &[usize], mut remainder: i64, group: i64) -> bool {
    while remainder > 0 {
        let mut progressed = false;
        for &n in subset {
            if remainder == 0 {
                break;
            }
            if after[n] < group {
                continue;
            }
            after[n] -= group;
            remainder -= group;
            progressed = true;
        }
        if !progressed {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests;
