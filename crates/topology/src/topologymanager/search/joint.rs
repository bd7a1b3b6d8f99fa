//! The constraints over several [`Core`]s at once: [`Intersection`] (masks that are members
//! of every core) and [`Split`] (masks several cores' members share, the left-out nodes
//! shared among the cores).

use super::{Constraint, Core, Demand, budget, gather, jointly_reachable};
use crate::NumaMask;

/// Masks that are members of every one of several cores at once (and of extra demands).
pub(crate) struct Intersection<'a> {
    pub(crate) required: NumaMask,
    pub(crate) demands: Vec<&'a Demand>,
    pub(crate) no_singletons: NumaMask,
}

impl Constraint for Intersection<'_> {
    type State = ();
    const ONE_WAY_TO_LEAVE_OUT: bool = true;

    fn start(&self) {}

    fn leave_out(&self, _: &(), node: usize, out: &mut Vec<()>) {
        if !self.required.is_set(node) {
            out.push(());
        }
    }

    fn may_complete(&self, _: &(), kept: u64, rest: u64, more: usize) -> bool {
        let required_left = (self.required.as_u64() & rest).count_ones() as usize;
        if required_left > more {
            return false;
        }
        self.demands
            .iter()
            .all(|d| d.more_nodes(kept, rest).is_some_and(|n| n <= more))
            && (self.demands.len() < 2 || jointly_reachable(&self.demands, kept, rest, more))
    }

    fn cost(&self) -> u64 {
        // The distance bound, and each demand's bound (the joint one with them).
        1 + self.demands.len() as u64
    }

    fn accepts(&self, mask: u64) -> Option<bool> {
        Some(mask != 0 && self.accept(&(), mask))
    }

    fn accept(&self, _: &(), kept: u64) -> bool {
        let mask = NumaMask::from_u64(kept);
        kept != 0
            && mask.and(self.required) == self.required
            && !(mask.count() == 1 && mask.and(self.no_singletons) == mask)
            && self.demands.iter().all(|d| d.is_met(mask))
    }
}

/// Masks `X` inside `top` (the nodes every core may hold) that are the intersection of one
/// member of each core: the nodes of `top` that `X` leaves out can be shared among the
/// cores so that each core's top (`within` minus what it drops) stays a member.
///
/// The search decides which nodes `X` keeps, each in one way; whether a finished `X`'s
/// left-out nodes can be shared is asked of [`Split::splittable`] once per `X` (a search of
/// its own over which core drops which node, drawing on the same budget). Deciding the
/// sharing along the way instead branched once per core at every left-out node and walked
/// the same `X` once per way of sharing it.
pub(crate) struct Split<'a> {
    cores: Vec<&'a Core>,
    top: u64,
    /// The nodes some core can drop alone.
    alone: u64,
}

impl<'a> Split<'a> {
    /// The masks inside `top` shared by `cores` (non-empty).
    pub(crate) fn new(cores: Vec<&'a Core>, top: NumaMask) -> Split<'a> {
        let top = top.as_u64();
        let alone = NumaMask::from_u64(top)
            .iter()
            .filter(|&n| {
                (0..cores.len()).any(|c| Self::can_drop(cores[c], cores[c].within.as_u64(), n))
            })
            .fold(0u64, |m, n| m | 1 << n);
        Split { cores, top, alone }
    }

    /// Whether `core`, its top now `top`, can also drop `node` and stay a member's top.
    fn can_drop(core: &Core, top: u64, node: usize) -> bool {
        !core.required.is_set(node)
            && core
                .demands
                .iter()
                .all(|d| d.is_met(NumaMask::from_u64(top & !(1 << node))))
    }

    /// Whether the nodes `left` can be shared among the cores, each core's top staying a
    /// member: a depth-first search, nodes that fewest cores can drop first, failures
    /// remembered; one [`budget`] step per core tried. Out of budget: not proven (false).
    fn splittable(&self, left: u64) -> bool {
        let mut nodes: Vec<(usize, usize)> = NumaMask::from_u64(left)
            .iter()
            .map(|n| {
                let ways = self
                    .cores
                    .iter()
                    .filter(|c| Self::can_drop(c, c.within.as_u64(), n))
                    .count();
                (ways, n)
            })
            .collect();
        if nodes.iter().any(|&(ways, _)| ways == 0) {
            return false;
        }
        nodes.sort_unstable();
        let order: Vec<usize> = nodes.into_iter().map(|(_, n)| n).collect();
        let mut tops: Vec<u64> = self.cores.iter().map(|c| c.within.as_u64()).collect();
        let mut failed = std::collections::HashSet::new();
        self.share(&order, &mut tops, &mut failed)
    }

    fn share(
        &self,
        order: &[usize],
        tops: &mut Vec<u64>,
        failed: &mut std::collections::HashSet<(usize, Vec<u64>)>,
    ) -> bool {
        let Some((&node, later)) = order.split_first() else {
            return self
                .cores
                .iter()
                .zip(tops.iter())
                .all(|(core, &top)| core.contains(NumaMask::from_u64(top)));
        };
        if !budget::spend(self.cores.len() as u64) || failed.contains(&(later.len(), tops.clone()))
        {
            return false;
        }
        for c in 0..self.cores.len() {
            if Self::can_drop(self.cores[c], tops[c], node) {
                tops[c] &= !(1 << node);
                let shared = self.share(later, tops, failed);
                tops[c] |= 1 << node;
                if shared {
                    return true;
                }
            }
        }
        failed.insert((later.len(), tops.clone()));
        false
    }
}

impl Constraint for Split<'_> {
    type State = ();
    const ONE_WAY_TO_LEAVE_OUT: bool = true;

    fn start(&self) {}

    fn cost(&self) -> u64 {
        // Per core, each demand's sorted slack.
        1 + self
            .cores
            .iter()
            .map(|c| 1 + c.demands.len() as u64)
            .sum::<u64>()
    }

    fn leave_out(&self, _: &(), node: usize, out: &mut Vec<()>) {
        if self.alone & 1 << node != 0 {
            out.push(());
        }
    }

    /// A relaxation: every core as if it had dropped nothing yet, asked to let go of the
    /// nodes left out so far and those still to leave out.
    fn may_complete(&self, _: &(), kept: u64, rest: u64, more: usize) -> bool {
        let left = self.top & !kept & !rest;
        let to_drop = (left | rest).count_ones() as usize - more;
        if to_drop == 0 {
            return true;
        }
        let open = left | rest;
        let mut droppable = 0usize;
        let mut anyone = 0u64;
        let mut sole = [0u64; 64];
        for core in &self.cores {
            let top = core.within.as_u64();
            let free = open & !core.required.as_u64();
            anyone |= free;
            // The most nodes of `free` this core can drop: for each demand, the cheapest
            // nodes by what only they hold, within the demand's slack.
            let mut most = free.count_ones() as usize;
            for demand in &core.demands {
                if demand.need == 0 {
                    continue;
                }
                let supplied = demand.supplied(NumaMask::from_u64(top));
                let Some(slack) = supplied.checked_sub(demand.need) else {
                    return false;
                };
                demand.sole_amounts(top, free, &mut sole);
                let (mut costs, len) = gather(&sole, free);
                let costs = &mut costs[..len];
                costs.sort_unstable();
                let mut spent = 0u64;
                let mut count = 0;
                for &mut c in costs {
                    spent = spent.saturating_add(c);
                    if spent > slack {
                        break;
                    }
                    count += 1;
                }
                most = most.min(count);
            }
            droppable += most;
        }
        droppable.min(anyone.count_ones() as usize) >= to_drop
    }

    fn accept(&self, _: &(), kept: u64) -> bool {
        kept != 0 && self.splittable(self.top & !kept)
    }

    fn accepts(&self, mask: u64) -> Option<bool> {
        Some(mask != 0 && mask & !self.top == 0 && self.splittable(self.top & !mask))
    }
}
