//! Upstream `takeByTopologyNUMADistributed` (KEP-2902), with bounded remainder loops.

use corral_topology::CpuSet;

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
    if cpu_group_size == 0 {
        return Err(TakeError::ZeroGroupSize);
    }
    if !num_cpus.is_multiple_of(cpu_group_size) {
        return take_by_topology_numa_packed(
            index,
            available,
            num_cpus,
            strategy,
            UncoreCacheAlignment::Ignore,
        );
    }
    let Some(mut acc) = Accumulator::start(index, available, num_cpus, strategy)? else {
        return Ok(CpuSet::new());
    };
    let numas = acc.sort(Level::Numa);
    let (min_numas, max_numas) = range_numas_needed(&acc, cpu_group_size);
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
    for k in min_numas..=max_numas {
        let Some((combo, remainder_set)) = search.best_combination(k) else {
            continue;
        };
        let group = cpu_group_size as i64;
        let distribution = (search.num_cpus / combo.len() as i64 / group) * group;
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
        return Ok(acc.result);
    }
    take_by_topology_numa_packed(
        index,
        available,
        num_cpus,
        strategy,
        UncoreCacheAlignment::Ignore,
    )
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

impl Search<'_> {
    fn balance(&self, after: &[i64]) -> f64 {
        standard_deviation(self.numas.iter().map(|&n| after[n]))
    }

    /// The best `k`-combination of NUMA nodes and its remainder subset, as upstream reads
    /// them after its iteration (tails possibly overwritten, see [`super::combinations`]).
    fn best_combination(&self, k: usize) -> Option<(Vec<usize>, Vec<usize>)> {
        let mut slices = GoSlices::new();
        let mut best_balance = f64::MAX;
        let mut best_remainder: Vec<usize> = Vec::new();
        let mut best_combo: Option<SliceRef> = None;
        iterate_combinations(&mut slices, self.numas, k, &mut |slices, combo_ref| {
            if best_balance == 0.0 {
                return Loop::Break;
            }
            let combo = slices.get(combo_ref);
            if let Some((balance, remainder)) = self.score(combo)
                && balance < best_balance
            {
                best_balance = balance;
                best_remainder = remainder;
                best_combo = Some(combo_ref);
            }
            Loop::Continue
        });
        best_combo.map(|r| (slices.get(r).to_vec(), best_remainder))
    }

    /// Upstream's per-combination check and balance score: `None` when the combination
    /// cannot take the request evenly, else the best balance and remainder subset.
    fn score(&self, combo: &[usize]) -> Option<(f64, Vec<usize>)> {
        let group = self.group;
        let total: i64 = combo.iter().map(|&n| self.free[n]).sum();
        if total < self.num_cpus {
            return None;
        }
        let groups: i64 = combo.iter().map(|&n| self.free[n] / group).sum();
        if groups * group < self.num_cpus {
            return None;
        }
        let distribution = (self.num_cpus / combo.len() as i64 / group) * group;
        if combo.iter().any(|&n| self.free[n] < distribution) {
            return None;
        }
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
        if remainder == 0 {
            best_local = self.balance(&after);
        }
        let mut size = remainder_combo.len();
        while remainder > 0 && size >= 1 {
            let mut slices = GoSlices::new();
            let mut best_here: Option<SliceRef> = None;
            let mut scratch = after.clone();
            iterate_combinations(&mut slices, &remainder_combo, size, &mut |slices, r| {
                let subset = slices.get(r);
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
                }
                Loop::Continue
            });
            if let Some(r) = best_here {
                best_local_remainder = slices.get(r).to_vec();
            }
            size -= 1;
        }
        (best_local < f64::MAX).then_some((best_local, best_local_remainder))
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
mod tests {
    use super::*;

    #[test]
    fn rounding_matches_upstream() {
        assert_eq!(mean([1, 2].into_iter()), 1.5);
        assert_eq!(mean([1, 1, 2].into_iter()), 1.333);
        assert_eq!(
            standard_deviation([2, 4, 4, 4, 5, 5, 7, 9].into_iter()),
            2.0
        );
        assert_eq!(standard_deviation([0, 1].into_iter()), 0.5);
        assert_eq!(standard_deviation([1, 1, 2].into_iter()), 0.471);
    }

    #[test]
    fn hand_out_detects_no_progress() {
        let mut after = vec![3, 3];
        assert!(!hand_out(&mut after, &[0, 1], 6, 2));
        let mut after = vec![4, 4];
        assert!(hand_out(&mut after, &[0, 1], 6, 2));
        assert_eq!(after, vec![0, 2]);
    }
}
