//! Searches over NUMA masks that never enumerate every subset: the machinery behind
//! [`HintFamily`](super::HintFamily) and the merge of families.
//!
//! Every question the merge asks of a family is "the best mask of exactly `size` nodes, by a
//! [`MaskOrder`], that satisfies a monotone constraint". [`best_of_size`] answers it with a
//! depth-first branch and bound over the candidate nodes, highest id first, leaving a node
//! out before keeping it, each in one way, so leaves are reached in increasing integer
//! value: under `Narrowest` the first accepted leaf is the answer; under `Closest` a
//! greedy closest-first seed starts the search (when the constraint can judge a mask
//! alone), and a leaf replaces the best only with a smaller distance sum, or an equal sum
//! and a lower mask. A subtree is cut as soon as a [`Constraint`]'s relaxation says no
//! completion can be accepted (per demand, and jointly over several: [`Intersection`]),
//! or (under `Closest`) its distance lower bound cannot beat the best leaf. The
//! relaxations never cut a subtree that holds an accepted leaf, so the answer is exact.
//! [`Split`] (masks several families' cores share) asks once per finished mask whether its
//! left-out nodes can be shared among the cores, a small search of its own; both live in
//! [`joint`].
//!
//! Cost: linear in the nodes times the constraint's work per step when the relaxations are
//! tight — for per-node capacities, for resources pulling apart, and on every machine
//! shape corral's fixtures and property tests cover. Adversarial inputs (distances with
//! many near-ties, capacities that interlock like a subset-sum instance) can still make it
//! exponential in the number of nodes: every node decided is a [`budget`] step, and out of
//! budget a search answers the best it has proven.

mod joint;

use super::budget;
use super::numa_info::NumaInfo;
use super::order::MaskOrder;
use crate::NumaMask;

pub(crate) use joint::{Intersection, Split};

/// A capacity requirement: the amounts of the groups a mask touches must reach `need`.
///
/// A group is a set of NUMA nodes holding some amount (CPUs, bytes, devices); a mask gets a
/// group's amount when it holds any of the group's nodes (upstream counts a device on
/// several nodes for every mask that meets them). Per-node capacities are groups of one
/// node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Demand {
    groups: Vec<(u64, u64)>,
    need: u64,
}

impl Demand {
    /// Per-node amounts (ids ≥ 64 and zero amounts are dropped; amounts of one id add up).
    pub fn per_node(amounts: impl IntoIterator<Item = (usize, u64)>, need: u64) -> Demand {
        Demand::coverage(
            amounts
                .into_iter()
                .filter(|&(id, _)| id < 64)
                .map(|(id, amount)| (NumaMask::from_u64(1 << id), amount)),
            need,
        )
    }

    /// Amounts per group of nodes (groups with no node or no amount are dropped; amounts of
    /// one group add up).
    pub fn coverage(groups: impl IntoIterator<Item = (NumaMask, u64)>, need: u64) -> Demand {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (mask, amount) in groups {
            if mask.is_empty() || amount == 0 {
                continue;
            }
            match out.iter_mut().find(|(bits, _)| *bits == mask.as_u64()) {
                Some((_, total)) => *total = total.saturating_add(amount),
                None => out.push((mask.as_u64(), amount)),
            }
        }
        out.sort_unstable();
        Demand { groups: out, need }
    }

    /// What `mask` holds: the sum of the groups it touches (saturating).
    pub fn supplied(&self, mask: NumaMask) -> u64 {
        self.groups
            .iter()
            .filter(|(bits, _)| bits & mask.as_u64() != 0)
            .fold(0u64, |sum, (_, amount)| sum.saturating_add(*amount))
    }

    /// Whether `mask` holds at least the need.
    pub fn is_met(&self, mask: NumaMask) -> bool {
        self.need == 0 || self.supplied(mask) >= self.need
    }

    /// The amount needed.
    pub fn need(&self) -> u64 {
        self.need
    }

    /// A lower bound on how many nodes of `rest` must join `base` to meet the need (`None`:
    /// even all of `rest` is not enough). Each node is credited with every untouched group it
    /// meets, so the bound is exact for per-node amounts.
    fn more_nodes(&self, base: u64, rest: u64) -> Option<usize> {
        let mut gain = [0u64; 64];
        let mut have = self.gains(base, rest, &mut gain);
        if have >= self.need {
            return Some(0);
        }
        let (mut gains, len) = gather(&gain, rest);
        let gains = &mut gains[..len];
        gains.sort_unstable_by(|a, b| b.cmp(a));
        let mut count = 0;
        for &mut g in gains {
            if have >= self.need {
                break;
            }
            have = have.saturating_add(g);
            count += 1;
        }
        (have >= self.need).then_some(count)
    }

    /// What `base` holds; and in `gain`, per node of `rest`, the amounts of the groups
    /// untouched by `base` it meets (each node credited with all of them).
    fn gains(&self, base: u64, rest: u64, gain: &mut [u64; 64]) -> u64 {
        let mut have = 0u64;
        *gain = [0; 64];
        for &(bits, amount) in &self.groups {
            if bits & base != 0 {
                have = have.saturating_add(amount);
                continue;
            }
            let mut on = bits & rest;
            while on != 0 {
                let n = on.trailing_zeros() as usize;
                gain[n] = gain[n].saturating_add(amount);
                on &= on - 1;
            }
        }
        have
    }

    /// What `top` loses at least when each node of `nodes` leaves it: per node, the groups it
    /// is the only node of `top` for.
    fn sole_amounts(&self, top: u64, nodes: u64, out: &mut [u64; 64]) {
        *out = [0; 64];
        for &(bits, amount) in &self.groups {
            let inside = bits & top;
            if inside.count_ones() == 1 && inside & nodes != 0 {
                let n = inside.trailing_zeros() as usize;
                out[n] = out[n].saturating_add(amount);
            }
        }
    }
}

/// An upward-closed set of masks: non-empty masks inside `within` that hold `required`, meet
/// every demand and are not a single node of `no_singletons`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Core {
    pub(crate) within: NumaMask,
    pub(crate) required: NumaMask,
    pub(crate) demands: Vec<Demand>,
    pub(crate) no_singletons: NumaMask,
}

impl Core {
    pub(crate) fn contains(&self, mask: NumaMask) -> bool {
        !mask.is_empty()
            && mask.and(self.within) == mask
            && mask.and(self.required) == self.required
            && !(mask.count() == 1 && mask.and(self.no_singletons) == mask)
            && self.demands.iter().all(|d| d.is_met(mask))
    }

    /// Whether the core has no member (then not even `within` is one).
    pub(crate) fn is_empty(&self) -> bool {
        !self.contains(self.within)
    }
}

/// What a search checks while it decides node by node which nodes a mask keeps.
pub(crate) trait Constraint {
    /// Whether a node is left out in at most one way, so that the first mask a
    /// narrowest-first search accepts is the narrowest (false when several ways to leave a
    /// node out open sibling branches with the same kept nodes: the search then goes on and
    /// keeps the lowest mask).
    const ONE_WAY_TO_LEAVE_OUT: bool;

    /// What the constraint tracks along a branch.
    type State: Clone;
    /// The state before any decision.
    fn start(&self) -> Self::State;
    /// The states after leaving `node` out (none: it must be kept).
    fn leave_out(&self, state: &Self::State, node: usize, out: &mut Vec<Self::State>);
    /// Whether some completion may be accepted: `kept` decided in, `rest` undecided, exactly
    /// `more` of `rest` still to keep. Must never say no when one would be accepted.
    fn may_complete(&self, state: &Self::State, kept: u64, rest: u64, more: usize) -> bool;
    /// Whether the finished mask `kept` is accepted.
    fn accept(&self, state: &Self::State, kept: u64) -> bool;

    /// What deciding one node costs, in [`budget`] steps: about one per node-sized scan
    /// the constraint makes there.
    fn cost(&self) -> u64;

    /// Whether `mask` is accepted, for a constraint that can tell without the decisions
    /// that led to it (`None`: it cannot; no closest-first seed is tried).
    fn accepts(&self, _mask: u64) -> Option<bool> {
        None
    }
}

/// The best mask of exactly `size` nodes of `candidates` by `order` that `constraint`
/// accepts. Each node decided is a [`budget`] step; when the budget runs out, the answer
/// is the best mask accepted so far (an accepted mask, maybe not the best; `None` when none
/// was reached yet).
pub(crate) fn best_of_size<C: Constraint>(
    constraint: &C,
    candidates: NumaMask,
    size: usize,
    order: &MaskOrder<'_>,
) -> Option<NumaMask> {
    if size == 0 || size > candidates.count() {
        return None;
    }
    let mut nodes: Vec<usize> = candidates.iter().collect();
    nodes.reverse();
    let mut min_pair = 0;
    if let MaskOrder::Closest(info) = order {
        min_pair = u64::MAX;
        for &a in &nodes {
            for &b in &nodes {
                if a != b {
                    min_pair = min_pair.min(info.distance(a, b));
                }
            }
        }
        if min_pair == u64::MAX {
            min_pair = 0;
        }
    }
    let best = match order {
        MaskOrder::Closest(info) => closest_seed(constraint, &nodes, size, info),
        MaskOrder::Narrowest => None,
    };
    let mut search = Search {
        constraint,
        nodes,
        size,
        order: *order,
        seeded: best.is_some(),
        best,
        done: false,
        min_pair,
    };
    let start = constraint.start();
    search.visit(0, 0, start, 0, &[0; 64]);
    search.best.map(|(mask, _)| NumaMask::from_u64(mask))
}

struct Search<'c, 'o, C: Constraint> {
    constraint: &'c C,
    /// Candidate nodes, highest first.
    nodes: Vec<usize>,
    size: usize,
    order: MaskOrder<'o>,
    /// The best accepted mask and its distance sum.
    best: Option<(u64, u64)>,
    /// Whether `best` started as a seed (then it need not be the lowest of its sum).
    seeded: bool,
    done: bool,
    /// The shortest distance between two distinct candidates (0 without distances).
    min_pair: u64,
}

impl<C: Constraint> Search<'_, '_, C> {
    /// A lower bound on the distance sum of any completion: `kept`'s sum, the cheapest
    /// `more` joining costs (diagonal included) and the shortest distance for every ordered
    /// pair among the nodes still to join.
    fn lower_bound(
        &self,
        info: &NumaInfo,
        sum: u64,
        rest: u64,
        more: usize,
        join: &[u64; 64],
    ) -> u64 {
        if more == 0 {
            return sum;
        }
        let mut costs = [0u64; 64];
        let mut len = 0;
        let mut on = rest;
        while on != 0 {
            let n = on.trailing_zeros() as usize;
            costs[len] = join[n].saturating_add(info.distance(n, n));
            len += 1;
            on &= on - 1;
        }
        let costs = &mut costs[..len];
        let cheapest = if more < len {
            costs.select_nth_unstable(more - 1);
            &costs[..more]
        } else {
            &costs[..]
        };
        let pairs = (more * (more - 1)) as u64;
        cheapest
            .iter()
            .fold(sum, |acc, c| acc.saturating_add(*c))
            .saturating_add(pairs.saturating_mul(self.min_pair))
    }

    fn visit(&mut self, depth: usize, kept: u64, state: C::State, sum: u64, join: &[u64; 64]) {
        if self.done {
            return;
        }
        if !budget::spend(self.constraint.cost()) {
            // Out of steps: the best leaf so far is the answer (see `best_of_size`).
            self.done = true;
            return;
        }
        let rest_nodes = &self.nodes[depth..];
        let rest = rest_nodes.iter().fold(0u64, |m, &n| m | 1 << n);
        let more = self.size - kept.count_ones() as usize;
        if more > rest_nodes.len() || !self.constraint.may_complete(&state, kept, rest, more) {
            return;
        }
        if let MaskOrder::Closest(info) = self.order
            && let Some((best, best_sum)) = self.best
        {
            // Equal sums tie-break on the lower mask; with one way per node the first such
            // leaf found is already the lowest.
            let bound = self.lower_bound(info, sum, rest, more, join);
            if bound > best_sum
                || (bound == best_sum
                    && ((C::ONE_WAY_TO_LEAVE_OUT && !self.seeded)
                        || lowest_completion(kept, rest, more) >= best))
            {
                return;
            }
        }
        // Narrowest, several branches per kept prefix: a completion can be no lower than
        // the kept nodes plus the lowest `more` nodes still open.
        if matches!(self.order, MaskOrder::Narrowest)
            && let Some((best, _)) = self.best
            && lowest_completion(kept, rest, more) >= best
        {
            return;
        }
        let Some(&node) = rest_nodes.first() else {
            if self.constraint.accept(&state, kept) {
                match self.order {
                    MaskOrder::Narrowest => {
                        if self.best.is_none_or(|(best, _)| kept < best) {
                            self.best = Some((kept, sum));
                        }
                        self.done = C::ONE_WAY_TO_LEAVE_OUT;
                    }
                    MaskOrder::Closest(_) => {
                        if self
                            .best
                            .is_none_or(|(best, s)| sum < s || (sum == s && kept < best))
                        {
                            self.best = Some((kept, sum));
                        }
                    }
                }
            }
            return;
        };
        if more < rest_nodes.len() {
            let mut options = Vec::new();
            self.constraint.leave_out(&state, node, &mut options);
            for option in options {
                self.visit(depth + 1, kept, option, sum, join);
                if self.done {
                    return;
                }
            }
        }
        if more > 0 {
            let (sum, join) = match self.order {
                MaskOrder::Closest(info) => {
                    // `join[n]`: n's pairs with the kept nodes, both ways, diagonal excluded.
                    let mut next = *join;
                    for n in NumaMask::from_u64(rest).iter() {
                        next[n] = next[n]
                            .saturating_add(info.distance(node, n))
                            .saturating_add(info.distance(n, node));
                    }
                    let own = join[node].saturating_add(info.distance(node, node));
                    (sum.saturating_add(own), next)
                }
                MaskOrder::Narrowest => (sum, *join),
            };
            self.visit(depth + 1, kept | 1 << node, state, sum, &join);
        }
    }
}

/// One demand's whole need in [`jointly_reachable`]'s fixed point.
const WHOLE: u64 = 1 << 32;

/// Whether `more` nodes of `rest` joining `kept` may meet every demand at once: each node
/// is weighed by the fractions of the demands' unmet needs it could supply (rounded up,
/// each capped at the whole), and the `more` heaviest must reach one whole per unmet
/// demand. A relaxation of all demands together: two demands that each `more` nodes
/// could meet alone, but no `more` nodes both (resources pulling apart), are told apart
/// here where [`Demand::more_nodes`] passes each.
fn jointly_reachable(demands: &[&Demand], kept: u64, rest: u64, more: usize) -> bool {
    let mut weight = [0u64; 64];
    let mut gain = [0u64; 64];
    let mut unmet = 0u64;
    for demand in demands {
        let have = demand.gains(kept, rest, &mut gain);
        let Some(short) = demand.need.checked_sub(have).filter(|&s| s > 0) else {
            continue;
        };
        unmet += 1;
        let mut on = rest;
        while on != 0 {
            let n = on.trailing_zeros() as usize;
            let part = u128::from(gain[n].min(short)) * u128::from(WHOLE);
            // Rounded up, so the relaxation never cuts a mask that meets the demand.
            weight[n] += part.div_ceil(u128::from(short)) as u64;
            on &= on - 1;
        }
    }
    if unmet == 0 {
        return true;
    }
    let (mut weights, len) = gather(&weight, rest);
    let weights = &mut weights[..len];
    let heaviest = if more > 0 && more < len {
        weights.select_nth_unstable_by(more - 1, |a, b| b.cmp(a));
        &weights[..more]
    } else {
        &weights[..more.min(len)]
    };
    heaviest.iter().sum::<u64>() >= unmet * WHOLE
}

/// `per_node`'s values at the nodes of `nodes`, ascending by node, and how many.
fn gather(per_node: &[u64; 64], nodes: u64) -> ([u64; 64], usize) {
    let mut out = [0u64; 64];
    let mut len = 0;
    let mut on = nodes;
    while on != 0 {
        out[len] = per_node[on.trailing_zeros() as usize];
        len += 1;
        on &= on - 1;
    }
    (out, len)
}

/// A first leaf for a closest-first search, so that its distance bound prunes from the
/// start: from each node, the nodes closest to those taken so far, added one at a time
/// (ties to the lowest id); the accepted mask of the smallest sum (then the lowest). One
/// [`budget`] step per start.
fn closest_seed<C: Constraint>(
    constraint: &C,
    nodes: &[usize],
    size: usize,
    info: &NumaInfo,
) -> Option<(u64, u64)> {
    constraint.accepts(0)?;
    let mut ascending = nodes.to_vec();
    ascending.sort_unstable();
    let mut best: Option<(u64, u64)> = None;
    for &start in &ascending {
        if !budget::step() {
            break;
        }
        let mut mask = 1u64 << start;
        let mut sum = info.distance(start, start);
        // Per node, what joining the mask costs: its pairs with the mask, both ways.
        let mut join = [0u64; 64];
        let mut last = start;
        for _ in 1..size {
            for &n in &ascending {
                join[n] = join[n]
                    .saturating_add(info.distance(n, last))
                    .saturating_add(info.distance(last, n));
            }
            let Some(&next) = ascending
                .iter()
                .filter(|&&n| mask & 1 << n == 0)
                .min_by_key(|&&n| (join[n].saturating_add(info.distance(n, n)), n))
            else {
                break;
            };
            sum = sum
                .saturating_add(join[next])
                .saturating_add(info.distance(next, next));
            mask |= 1 << next;
            last = next;
        }
        if mask.count_ones() as usize == size
            && constraint.accepts(mask) == Some(true)
            && best.is_none_or(|(b, s)| sum < s || (sum == s && mask < b))
        {
            best = Some((mask, sum));
        }
    }
    best
}

/// `kept` plus the `more` lowest nodes of `rest`: the lowest mask a branch can still reach.
fn lowest_completion(kept: u64, mut rest: u64, more: usize) -> u64 {
    let mut mask = kept;
    for _ in 0..more {
        if rest == 0 {
            break;
        }
        mask |= rest & rest.wrapping_neg();
        rest &= rest - 1;
    }
    mask
}

/// The fewest nodes of `candidates` a mask accepted by `constraint` can have, from `from`
/// up (`None`: no size works). When the [`budget`] runs out, the first size not proven
/// empty: a lower bound.
pub(crate) fn min_size<C: Constraint>(
    constraint: &C,
    candidates: NumaMask,
    from: usize,
) -> Option<usize> {
    (from.max(1)..=candidates.count()).find(|&size| {
        best_of_size(constraint, candidates, size, &MaskOrder::Narrowest).is_some()
            || budget::exhausted()
    })
}

#[cfg(test)]
mod tests;
