//! The combination search of one distributed call (upstream `takeByTopologyNUMADistributed`'s
//! walk over NUMA combinations and remainder subsets, with its balance score), bounded by
//! the decision's step budget.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use corral_topology::topologymanager::spend;

use crate::assignment::combinations::{GoSlices, Loop, SliceRef, iterate_combinations};

/// Upstream `mean`: rounded to 1/1000.
pub(super) fn mean(xs: impl Iterator<Item = i64> + Clone) -> f64 {
    let (mut sum, mut n) = (0.0f64, 0usize);
    for x in xs {
        sum += x as f64;
        n += 1;
    }
    let m = sum / n as f64;
    (m * 1000.0).round() / 1000.0
}

/// Upstream `standardDeviation`: rounded to 1/1000.
pub(super) fn standard_deviation(xs: impl Iterator<Item = i64> + Clone) -> f64 {
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

/// The combination search of one call.
pub(super) struct Search<'s> {
    /// NUMA nodes with free CPUs, in upstream's sorted order (dense indices).
    pub(super) numas: &'s [usize],
    /// Free CPUs per NUMA node (dense index).
    pub(super) free: &'s [i64],
    /// The socket of each NUMA node whose CPUs lie on one (dense indices).
    pub(super) socket_of: &'s [Option<usize>],
    /// How the best pair of a finished walk is read.
    pub(super) reading: Reading,
    pub(super) num_cpus: i64,
    pub(super) group: i64,
}

/// Which `k`-combinations a walk scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Combos {
    /// Every one (upstream's walk).
    Any,
    /// Only those whose nodes all lie on one socket (`align-by-socket`, v1.38).
    InOneSocket,
}

/// How the best combination and remainder subset of a finished walk are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// As upstream before v1.38 read them: slices sharing a backing array with later
    /// candidates, tails possibly overwritten (see [`crate::assignment::combinations`]).
    GoAliased,
    /// As they were scored: upstream v1.38 copies them (#141238, issue #141237).
    AsScored,
}

/// A NUMA combination and the subset of it that takes the remainder.
pub(super) type Pair = (Vec<usize>, Vec<usize>);

/// What the walk over the `k`-combinations found.
pub(super) enum Walk {
    /// The walk finished: upstream's answer (as upstream reads it), `None` when no
    /// combination fits.
    Finished(Option<Pair>),
    /// The step budget ran out: the best pair scored before, if any.
    Cut(Option<Pair>),
}

/// One combination's score.
pub(super) struct Scored {
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
    pub(super) fn distribution(&self, k: usize) -> i64 {
        (self.num_cpus / k as i64 / self.group) * self.group
    }

    /// The best `k`-combination of NUMA nodes and its remainder subset, read after the walk
    /// as `self.reading` says; cut short, the best pair scored before the budget ran out.
    pub(super) fn best_combination(&self, k: usize, combos: Combos) -> Walk {
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
            if combos == Combos::InOneSocket && !self.in_one_socket(combo) {
                return Loop::Continue;
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
        if self.reading == Reading::AsScored {
            return Walk::Finished(scored);
        }
        Walk::Finished(best_combo.map(|r| (slices.get(r).to_vec(), best_remainder)))
    }

    /// Upstream's per-combination check and balance score: `None` when the combination
    /// cannot take the request evenly, else the best balance and remainder subset; and
    /// whether the remainder walk finished (else the score is the best found before the
    /// budget ran out, `None` if none was).
    pub(super) fn score(&self, combo: &[usize]) -> (Option<Scored>, bool) {
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
    pub(super) fn fits(&self, combo: &[usize]) -> bool {
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
    pub(super) fn first_fitting(&self, k: usize) -> Option<Vec<usize>> {
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

    /// Whether every node of `combo` lies on one socket.
    fn in_one_socket(&self, combo: &[usize]) -> bool {
        let mut sockets = combo.iter().map(|&n| self.socket_of[n]);
        match sockets.next() {
            Some(Some(first)) => sockets.all(|s| s == Some(first)),
            _ => false,
        }
    }

    /// [`Self::first_fitting`] among the nodes of one socket: the first socket (in id order)
    /// with a fitting `k`-combination, and that combination.
    pub(super) fn first_fitting_in_one_socket(&self, k: usize) -> Option<Vec<usize>> {
        let mut sockets: Vec<usize> = self
            .numas
            .iter()
            .filter_map(|&n| self.socket_of[n])
            .collect();
        sockets.sort_unstable();
        sockets.dedup();
        sockets.into_iter().find_map(|socket| {
            let nodes: Vec<usize> = self
                .numas
                .iter()
                .copied()
                .filter(|&n| self.socket_of[n] == Some(socket))
                .collect();
            Search {
                numas: &nodes,
                ..*self
            }
            .first_fitting(k)
        })
    }

    /// The nodes of `combo` that can still give a group after the distribution: the first
    /// remainder subset upstream's walk tries, which always takes the remainder of a
    /// combination that [fits](Self::fits).
    pub(super) fn whole_remainder_set(&self, combo: &[usize]) -> Vec<usize> {
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
pub(super) fn hand_out(
    after: &mut [i64],
    subset: &[usize],
    mut remainder: i64,
    group: i64,
) -> bool {
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
