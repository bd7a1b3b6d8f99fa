//! Hint merging: upstream `HintMerger` decisions, computed without the exhaustive walk.
//!
//! Upstream walks the cross product of every provider's hints, merges each permutation
//! (AND of the non-nil affinities with the machine's default mask; preferred only if every
//! hint is preferred and every non-nil affinity is equal) and keeps the best by `compare`.
//! `compare` is a strict total order on (preferred, mask) pairs — preferred beats
//! non-preferred; among preferred, the narrower (or, with prefer-closest, the closer) mask;
//! among non-preferred, the count closest to `bestNonPreferredAffinityCount` from below, then
//! the narrower/closer mask — so the walk's result is simply the maximum of that order over the
//! set of merged hints that some permutation produces, whatever the walk order. This module
//! computes that set directly:
//!
//! 1. Preferred candidates: a permutation is preferred with affinity `A` exactly when every
//!    list has a preferred hint that is nil or equal to `A`; all-nil gives the default mask.
//!    Checking each distinct preferred `A` against every list is linear in the hints.
//! 2. Only when no preferred candidate has a non-empty mask: every non-empty merged mask is
//!    non-preferred, and the set of reachable AND-masks is built provider by provider,
//!    de-duplicated at each step (at most 2^nodes masks, dropping empty ones, which can never
//!    win and stay empty under further ANDs).
//!
//! The exhaustive walk is kept as [`reference_merge`] and property tests check that both agree.

use std::borrow::Cow;

use super::budget;
use super::hint::TopologyHint;
pub(crate) use super::order::MaskOrder;
use crate::NumaMask;

/// Upstream `HintMerger.compare`: whether `candidate` replaces `current` (`None` = no best
/// yet). A nil merged affinity never occurs (merged hints always carry a mask).
pub(crate) fn candidate_wins(
    order: &MaskOrder<'_>,
    best_non_preferred_count: usize,
    current: Option<(NumaMask, bool)>,
    candidate: (NumaMask, bool),
) -> bool {
    let (mask, preferred) = candidate;
    if mask.is_empty() {
        return false;
    }
    let Some((cur_mask, cur_preferred)) = current else {
        return true;
    };
    if !cur_preferred && preferred {
        return true;
    }
    if cur_preferred && !preferred {
        return false;
    }
    if cur_preferred && preferred {
        return order.candidate_wins(cur_mask, mask);
    }
    let b = best_non_preferred_count;
    let (cc, kc) = (cur_mask.count(), mask.count());
    if cc > b {
        return order.candidate_wins(cur_mask, mask);
    }
    if cc == b {
        return kc == b && order.candidate_wins(cur_mask, mask);
    }
    if kc > b {
        return false;
    }
    if kc == b {
        return true;
    }
    if kc != cc {
        return kc > cc;
    }
    order.candidate_wins(cur_mask, mask)
}

/// Upstream `maxOfMinAffinityCounts`: the largest, over the lists, of the size of the list's
/// narrowest non-nil affinity.
pub(crate) fn max_of_min_affinity_counts(lists: &[Cow<'_, [TopologyHint]>]) -> usize {
    lists
        .iter()
        .filter_map(|list| {
            let mut narrowest: Option<NumaMask> = None;
            for mask in list.iter().filter_map(|h| h.numa_affinity) {
                match narrowest {
                    Some(n) if !mask.is_narrower_than(n) => {}
                    _ => narrowest = Some(mask),
                }
            }
            narrowest.map(NumaMask::count)
        })
        .max()
        .unwrap_or(0)
}

/// The fast merge over filtered hint lists; same result as [`reference_merge_filtered`].
pub(crate) fn merge_filtered(
    lists: &[Cow<'_, [TopologyHint]>],
    default: NumaMask,
    order: &MaskOrder<'_>,
) -> TopologyHint {
    let b = max_of_min_affinity_counts(lists);
    let mut best: Option<(NumaMask, bool)> = None;
    let consider = |mask: NumaMask, preferred: bool, best: &mut Option<(NumaMask, bool)>| {
        if candidate_wins(order, b, *best, (mask, preferred)) {
            *best = Some((mask, preferred));
        }
    };

    // 1. Preferred permutations.
    let has_preferred_nil = |list: &[TopologyHint]| {
        list.iter()
            .any(|h| h.preferred && h.numa_affinity.is_none())
    };
    let has_preferred = |list: &[TopologyHint], a: NumaMask| {
        list.iter()
            .any(|h| h.preferred && h.numa_affinity.is_none_or(|m| m == a))
    };
    // Lists without a preferred nil hint constrain A to their own preferred masks.
    let seed = lists
        .iter()
        .filter(|l| !has_preferred_nil(l))
        .min_by_key(|l| l.len());
    match seed {
        None => {
            // Every list can say "don't care": all-nil gives the default mask, and every
            // preferred mask of any list combines with the others' nil hints.
            consider(default, true, &mut best);
            for list in lists {
                for mask in list
                    .iter()
                    .filter(|h| h.preferred)
                    .filter_map(|h| h.numa_affinity)
                {
                    consider(default.and(mask), true, &mut best);
                }
            }
        }
        Some(seed) => {
            for mask in seed
                .iter()
                .filter(|h| h.preferred)
                .filter_map(|h| h.numa_affinity)
            {
                if lists.iter().all(|l| has_preferred(l, mask)) {
                    consider(default.and(mask), true, &mut best);
                }
            }
        }
    }
    if let Some((mask, preferred)) = best {
        return TopologyHint::new(Some(mask), preferred);
    }

    // 2. Every non-empty merged mask is non-preferred: walk the reachable AND-masks.
    let reachable = reachable_masks(lists, default);
    for mask in reachable {
        consider(mask, false, &mut best);
    }
    match best {
        Some((mask, preferred)) => TopologyHint::new(Some(mask), preferred),
        None => TopologyHint::new(Some(default), false),
    }
}

/// Masks at or below this value are de-duplicated with an on-stack bitmap.
const BITMAP_BITS: usize = 4096;

/// Every non-empty `default & a1 & a2 & …` some permutation produces (nil = no constraint).
fn reachable_masks(lists: &[Cow<'_, [TopologyHint]>], default: NumaMask) -> Vec<NumaMask> {
    if default.is_empty() {
        return Vec::new();
    }
    let small = (default.as_u64() as u128) < BITMAP_BITS as u128;
    let mut current = vec![default.as_u64()];
    let mut choices: Vec<u64> = Vec::new();
    let mut next: Vec<u64> = Vec::new();
    for list in lists {
        choices.clear();
        choices.extend(list.iter().map(|h| {
            h.numa_affinity
                .map_or(default.as_u64(), |m| m.as_u64() & default.as_u64())
        }));
        choices.sort_unstable();
        choices.dedup();
        next.clear();
        if small {
            let mut seen = [0u64; BITMAP_BITS / 64];
            for &s in &current {
                for &c in &choices {
                    let m = (s & c) as usize;
                    seen[m / 64] |= 1 << (m % 64);
                }
            }
            seen[0] &= !1; // drop the empty mask
            for (w, &word) in seen.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    next.push((w * 64 + word.trailing_zeros() as usize) as u64);
                    word &= word - 1;
                }
            }
        } else {
            for &s in &current {
                // Out of budget: no mask proven reachable (the merge answers the default).
                if !budget::step() {
                    return Vec::new();
                }
                for &c in &choices {
                    if s & c != 0 {
                        next.push(s & c);
                    }
                }
            }
            next.sort_unstable();
            next.dedup();
        }
        std::mem::swap(&mut current, &mut next);
        if current.is_empty() {
            break;
        }
    }
    current.into_iter().map(NumaMask::from_u64).collect()
}

/// Upstream `mergePermutation`.
fn merge_permutation(default: NumaMask, permutation: &[TopologyHint]) -> (NumaMask, bool) {
    let mut preferred = true;
    let mut first: Option<NumaMask> = None;
    let mut merged = default;
    for hint in permutation {
        if let Some(mask) = hint.numa_affinity {
            let first = *first.get_or_insert(mask);
            if mask != first {
                preferred = false;
            }
            merged = merged.and(mask);
        }
        if !hint.preferred {
            preferred = false;
        }
    }
    (merged, preferred)
}

/// Upstream's exhaustive `HintMerger.Merge` over filtered lists.
pub(crate) fn reference_merge_filtered(
    lists: &[Cow<'_, [TopologyHint]>],
    default: NumaMask,
    order: &MaskOrder<'_>,
) -> TopologyHint {
    fn walk(
        lists: &[Cow<'_, [TopologyHint]>],
        accum: &mut Vec<TopologyHint>,
        visit: &mut dyn FnMut(&[TopologyHint]),
    ) {
        match lists.split_first() {
            None => visit(accum),
            Some((first, rest)) => {
                for hint in first.iter() {
                    accum.push(*hint);
                    walk(rest, accum, visit);
                    accum.pop();
                }
            }
        }
    }
    let b = max_of_min_affinity_counts(lists);
    let mut best: Option<(NumaMask, bool)> = None;
    walk(
        lists,
        &mut Vec::with_capacity(lists.len()),
        &mut |permutation| {
            let merged = merge_permutation(default, permutation);
            if candidate_wins(order, b, best, merged) {
                best = Some(merged);
            }
        },
    );
    let (mask, preferred) = best.unwrap_or((default, false));
    TopologyHint::new(Some(mask), preferred)
}

#[cfg(test)]
mod tests;
