//! The merge over hint lists *and* [`HintFamily`]s: upstream `HintMerger.Merge`'s answer
//! when providers describe their hints as families, without listing them.
//!
//! As in [`merge`](super::merge), the answer is the maximum of `compare` over the set of
//! merged hints the cross product produces, computed directly:
//!
//! 1. **Preferred.** A preferred merged hint is a mask `A` every list holds as a preferred
//!    hint (or a preferred nil). With a non-wildcard list, its preferred masks are the
//!    candidates, each checked against the others (families answer membership in O(nodes)).
//!    With only families constraining `A`, the candidates are each family's extra sets, and
//!    the masks in every family's core: sizes ascending, the best mask of the first size
//!    that has one, found by [`best_of_size`] (a size every size-preferring family agrees
//!    on; with `align-by-socket`, per choice of sockets).
//! 2. **Non-preferred**, only when there is no preferred one. Every choice of one hint per
//!    list is a *state* `(e, S)`: `e` the AND of the explicit masks chosen (lists and
//!    families' extra sets), `S` the families whose core was chosen. The merged masks of a
//!    state are `e ∩ A₁ ∩ … ` over members `Aᵢ` of the cores in `S`: an upward-closed set
//!    inside `W = e ∩ withinᵢ…` (add a node to the result by adding it to every `Aᵢ`), so
//!    its sizes are an interval ending at `|W|`. `compare` ranks non-preferred masks by
//!    size first (`bestNonPreferredAffinityCount` = `b`, then the largest size below, then
//!    the smallest above), so each state offers one candidate: its best mask of size `b`,
//!    or `W` when `|W| < b`, or its best mask of the smallest size above `b`; a mask is in
//!    the state when the nodes of `W` it leaves out can be shared among the cores, each
//!    core keeping a member ([`Split`]). States are de-duplicated as they are built, so
//!    explicit lists cost what they cost in the list merge.
//!
//! A family whose nodes reach outside the machine's default mask, or beyond the 64th family,
//! is listed instead (exact, exponential): providers never build one.

use std::borrow::Cow;
use std::collections::HashSet;

use super::budget;
use super::family::{HintFamily, HintSet, Preferred, ProviderHintSets};
use super::hint::TopologyHint;
use super::merge::{candidate_wins, max_of_min_affinity_counts, merge_filtered};
use super::order::MaskOrder;
use super::search::{Core, Intersection, Split, best_of_size};
use crate::NumaMask;

/// One filtered hint list of the merge: a list, or a family.
#[derive(Debug, Clone)]
pub(crate) enum Input<'a> {
    /// Hints as a list.
    List(Cow<'a, [TopologyHint]>),
    /// Hints as a non-empty family whose nodes are inside the default mask.
    Family(&'a HintFamily),
}

/// The single preferred "don't care" hint for providers without a preference.
const NO_PREFERENCE: &[TopologyHint] = &[TopologyHint::new(None, true)];
/// The single non-preferred hint for resources that cannot be satisfied.
const CANNOT_SATISFY: &[TopologyHint] = &[TopologyHint::new(None, false)];

/// Families merged as families at most (the merge tracks them in a 64-bit set); more are
/// listed.
const MAX_FAMILIES: usize = 64;

/// Upstream `filterProvidersHints` over hint sets; an empty family is upstream's empty
/// list, and a family reaching outside `default` (or beyond the 64th) is listed.
pub(crate) fn filter_provider_sets(
    providers: &[ProviderHintSets],
    default: NumaMask,
) -> Vec<Input<'_>> {
    let mut families = 0;
    let mut all = Vec::with_capacity(providers.len());
    for provider in providers {
        match provider {
            Some(resources) if !resources.is_empty() => {
                for set in resources.values() {
                    all.push(match set {
                        None => Input::List(Cow::Borrowed(NO_PREFERENCE)),
                        Some(HintSet::List(list)) if list.is_empty() => {
                            Input::List(Cow::Borrowed(CANNOT_SATISFY))
                        }
                        Some(HintSet::List(list)) => Input::List(Cow::Borrowed(list)),
                        Some(HintSet::Family(f)) if f.is_empty() => {
                            Input::List(Cow::Borrowed(CANNOT_SATISFY))
                        }
                        Some(HintSet::Family(f))
                            if f.universe().and(default) != f.universe()
                                || families == MAX_FAMILIES =>
                        {
                            Input::List(Cow::Owned(f.to_hints()))
                        }
                        Some(HintSet::Family(f)) => {
                            families += 1;
                            Input::Family(f)
                        }
                    });
                }
            }
            _ => all.push(Input::List(Cow::Borrowed(NO_PREFERENCE))),
        }
    }
    all
}

/// Upstream `filterSingleNumaHints` over the inputs: a family becomes the list of its
/// preferred single-node hints (at most 64).
pub(crate) fn single_numa_lists<'a>(inputs: Vec<Input<'a>>) -> Vec<Cow<'a, [TopologyHint]>> {
    inputs
        .into_iter()
        .map(|input| match input {
            Input::List(list) => list,
            Input::Family(family) => Cow::Owned(
                family
                    .universe()
                    .iter()
                    .filter_map(|n| family.hint(NumaMask::from_u64(1 << n)))
                    .filter(|h| h.preferred)
                    .collect(),
            ),
        })
        .collect()
}

/// The merge over lists and families (best-effort and restricted); same result as the
/// exhaustive walk over the families' lists.
pub(crate) fn merge_inputs(
    inputs: &[Input<'_>],
    default: NumaMask,
    order: &MaskOrder<'_>,
) -> TopologyHint {
    let families: Vec<&HintFamily> = inputs
        .iter()
        .filter_map(|i| match i {
            Input::Family(f) => Some(*f),
            Input::List(_) => None,
        })
        .collect();
    let lists: Vec<Cow<'_, [TopologyHint]>> = inputs
        .iter()
        .filter_map(|i| match i {
            Input::List(l) => Some(l.clone()),
            Input::Family(_) => None,
        })
        .collect();
    if families.is_empty() {
        return merge_filtered(&lists, default, order);
    }
    let b = families
        .iter()
        .filter_map(|f| f.narrowest_size())
        .max()
        .unwrap_or(0)
        .max(max_of_min_affinity_counts(&lists));
    let mut best: Option<(NumaMask, bool)> = None;
    let consider = |mask: NumaMask, preferred: bool, best: &mut Option<(NumaMask, bool)>| {
        if candidate_wins(order, b, *best, (mask, preferred)) {
            *best = Some((mask, preferred));
        }
    };

    // 1. Preferred.
    let has_preferred_nil = |list: &[TopologyHint]| {
        list.iter()
            .any(|h| h.preferred && h.numa_affinity.is_none())
    };
    let preferred_everywhere = |mask: NumaMask| {
        lists.iter().all(|l| {
            l.iter()
                .any(|h| h.preferred && h.numa_affinity.is_none_or(|m| m == mask))
        }) && families.iter().all(|f| f.contains(mask) && f.prefers(mask))
    };
    let seed = lists
        .iter()
        .filter(|l| !has_preferred_nil(l))
        .min_by_key(|l| l.len());
    match seed {
        Some(seed) => {
            for mask in seed
                .iter()
                .filter(|h| h.preferred)
                .filter_map(|h| h.numa_affinity)
            {
                if preferred_everywhere(mask) {
                    consider(default.and(mask), true, &mut best);
                }
            }
        }
        None => {
            for &extra in families.iter().flat_map(|f| f.extras()) {
                if preferred_everywhere(extra) {
                    consider(extra, true, &mut best);
                }
            }
            if let Some(mask) = preferred_in_every_core(&families, order) {
                consider(mask, true, &mut best);
            }
        }
    }
    if let Some((mask, preferred)) = best {
        return TopologyHint::new(Some(mask), preferred);
    }

    // 2. Non-preferred (out of budget before every state is built: upstream's starting
    // hint, the default mask, not preferred).
    for state in states(inputs, default).unwrap_or_default() {
        if let Some(mask) = state_candidate(&state, &families, b, order) {
            consider(mask, false, &mut best);
        }
    }
    match best {
        Some((mask, preferred)) => TopologyHint::new(Some(mask), preferred),
        None => TopologyHint::new(Some(default), false),
    }
}

/// The best mask in every family's core that every family prefers.
fn preferred_in_every_core(families: &[&HintFamily], order: &MaskOrder<'_>) -> Option<NumaMask> {
    let cores: Vec<&Core> = families
        .iter()
        .map(|f| f.core())
        .collect::<Option<Vec<_>>>()?;
    let candidates = cores
        .iter()
        .fold(NumaMask::from_u64(u64::MAX), |m, c| m.and(c.within));
    let base = Intersection {
        required: cores.iter().fold(NumaMask::EMPTY, |m, c| m.or(c.required)),
        demands: cores.iter().flat_map(|c| c.demands.iter()).collect(),
        no_singletons: cores
            .iter()
            .fold(NumaMask::EMPTY, |m, c| m.or(c.no_singletons)),
    };
    for size in 1..=candidates.count() {
        // Families preferring this size agree; the others must be socket-aligned.
        let mut spans = Vec::new();
        let mut possible = true;
        for family in families {
            match family.preferred_rule() {
                Preferred::Size(s) if *s == size => {}
                Preferred::SizeOrSockets { size: s, .. } if *s == size => {}
                Preferred::Size(_) => possible = false,
                Preferred::SizeOrSockets { sockets, .. } => spans.push(sockets.choices()),
            }
        }
        if !possible {
            continue;
        }
        let mut found: Option<NumaMask> = None;
        for_each_choice(&spans, &mut Vec::new(), &mut |choice| {
            let mut allowed = candidates;
            let mut fit = Intersection {
                required: base.required,
                demands: base.demands.clone(),
                no_singletons: base.no_singletons,
            };
            for (nodes, touch) in choice {
                allowed = allowed.and(*nodes);
                fit.demands.extend(touch.iter());
            }
            if let Some(mask) = best_of_size(&fit, allowed, size, order)
                && found.is_none_or(|f| order.candidate_wins(f, mask))
            {
                found = Some(mask);
            }
        });
        // Out of budget: the best found, or none (not proven: the merge goes on to the
        // non-preferred masks, which a policy that must align refuses).
        if found.is_some() || budget::exhausted() {
            return found;
        }
    }
    None
}

type SpanChoice = (NumaMask, Vec<super::family::Demand>);

/// Calls `f` with every combination of one choice per entry of `spans`.
fn for_each_choice<'a>(
    spans: &'a [Vec<SpanChoice>],
    chosen: &mut Vec<&'a SpanChoice>,
    f: &mut dyn FnMut(&[&'a SpanChoice]),
) {
    match spans.split_first() {
        None => f(chosen),
        Some((first, rest)) => {
            for choice in first {
                chosen.push(choice);
                for_each_choice(rest, chosen, f);
                chosen.pop();
            }
        }
    }
}

/// A choice of hints per input: the AND of the explicit masks chosen and the families
/// (bits, by position among the families) whose core was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct State {
    explicit: u64,
    cores: u64,
}

/// Every state some choice reaches with a non-empty explicit mask, de-duplicated (`None`
/// when the [`budget`] runs out: each state extended by an input is a step).
fn states(inputs: &[Input<'_>], default: NumaMask) -> Option<Vec<State>> {
    let mut current: HashSet<State> = HashSet::from([State {
        explicit: default.as_u64(),
        cores: 0,
    }]);
    let mut family_index = 0;
    for input in inputs {
        let mut next = HashSet::new();
        for state in &current {
            if !budget::step() {
                return None;
            }
            let mut push = |explicit: u64, cores: u64| {
                if explicit != 0 {
                    next.insert(State { explicit, cores });
                }
            };
            match input {
                Input::List(list) => {
                    for hint in list.iter() {
                        let mask = hint
                            .numa_affinity
                            .map_or(default.as_u64(), |m| m.as_u64() & default.as_u64());
                        push(state.explicit & mask, state.cores);
                    }
                }
                Input::Family(family) => {
                    for extra in family.extras() {
                        push(state.explicit & extra.as_u64(), state.cores);
                    }
                    if family.core().is_some() {
                        push(state.explicit, state.cores | 1 << family_index);
                    }
                }
            }
        }
        if matches!(input, Input::Family(_)) {
            family_index += 1;
        }
        current = next;
        if current.is_empty() {
            break;
        }
    }
    let mut all: Vec<State> = current.into_iter().collect();
    // In a fixed order, so that a budget running out mid-way cuts the same work anywhere.
    all.sort_unstable_by_key(|s| (s.explicit, s.cores));
    Some(all)
}

/// The state's best non-preferred mask by `compare` with `bestNonPreferredAffinityCount`
/// `b` (see the module docs).
fn state_candidate(
    state: &State,
    families: &[&HintFamily],
    b: usize,
    order: &MaskOrder<'_>,
) -> Option<NumaMask> {
    let cores: Vec<&Core> = families
        .iter()
        .enumerate()
        .filter(|(i, _)| state.cores & (1 << i) != 0)
        .filter_map(|(_, f)| f.core())
        .collect();
    let top = cores
        .iter()
        .fold(state.explicit, |m, c| m & c.within.as_u64());
    let top = NumaMask::from_u64(top);
    if top.is_empty() {
        return None;
    }
    if cores.is_empty() || top.count() < b {
        return Some(top);
    }
    let split = Split::new(cores, top);
    for size in b.max(1)..=top.count() {
        if let Some(mask) = best_of_size(&split, top, size, order) {
            return Some(mask);
        }
        if budget::exhausted() {
            // Not proven: the state's widest mask, always one of its merged masks.
            return Some(top);
        }
    }
    None
}
