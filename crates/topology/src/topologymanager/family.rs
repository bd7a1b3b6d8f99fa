//! [`HintFamily`]: a provider's hints for one resource without their list.
//!
//! Every upstream hint generator (CPU, device, memory manager) walks every set of NUMA
//! nodes and keeps a set when it holds what the request needs; preferred are the kept sets
//! of the smallest size any set could fill the request with (CPU: or spanning the fewest
//! sockets). What it keeps is an *upward-closed* family — add a node to a kept set and it
//! is still kept — except for a few explicit sets (the memory manager's groups and reusable
//! init-container memory). A `HintFamily` is that description: the core (nodes it may
//! use, nodes it must hold, capacity [`Demand`]s), the extra sets, and the preferred rule.
//! [`to_hints`](HintFamily::to_hints) gives upstream's list back, in `IterateBitMasks`
//! order; the merge ([`Policy::merge_sets`](super::Policy::merge_sets)) works on the
//! description and never lists it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::budget::{DECISION_STEPS, bounded};
use super::hint::{ProviderHints, TopologyHint};
use super::order::MaskOrder;
use super::search::{Core, Intersection, best_of_size, min_size};
use crate::NumaMask;

pub use super::search::Demand;

/// Which members of a [`HintFamily`] are preferred.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Preferred {
    /// Members of exactly this many nodes (upstream's `minAffinitySize`).
    Size(usize),
    /// Members of `size` nodes, and members spanning exactly `sockets.min_sockets` sockets
    /// (the CPU manager's `align-by-socket`, upstream `isHintSocketAligned`).
    SizeOrSockets {
        /// The preferred size.
        size: usize,
        /// The nodes' sockets and the span preferred.
        sockets: SocketSpan,
    },
}

/// The sockets of each NUMA node and the socket span `align-by-socket` prefers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SocketSpan {
    /// Per NUMA node (mask bit), its sockets as a bitmask of socket indices (below 64).
    node_sockets: Vec<(usize, u64)>,
    /// The span preferred.
    min_sockets: usize,
}

impl SocketSpan {
    /// `node_sockets`: each node's sockets as bits of socket indices (indices ≥ 64 are
    /// dropped, as are node ids ≥ 64); `min_sockets`: the span preferred.
    pub fn new(node_sockets: impl IntoIterator<Item = (usize, u64)>, min_sockets: usize) -> Self {
        SocketSpan {
            node_sockets: node_sockets.into_iter().filter(|&(n, _)| n < 64).collect(),
            min_sockets,
        }
    }

    /// The sockets `mask`'s nodes span.
    fn sockets_of(&self, mask: NumaMask) -> u64 {
        self.node_sockets
            .iter()
            .filter(|(n, _)| mask.is_set(*n))
            .fold(0, |all, (_, s)| all | s)
    }

    fn all_sockets(&self) -> u64 {
        self.node_sockets.iter().fold(0, |all, (_, s)| all | s)
    }

    /// Whether `mask` spans exactly the preferred number of sockets.
    pub fn is_aligned(&self, mask: NumaMask) -> bool {
        self.sockets_of(mask).count_ones() as usize == self.min_sockets
    }

    /// Every way of spanning the preferred number of sockets: per choice of sockets, the
    /// nodes allowed (those on no other socket) and one demand per socket to touch it.
    pub(crate) fn choices(&self) -> Vec<(NumaMask, Vec<Demand>)> {
        let all: Vec<usize> = NumaMask::from_u64(self.all_sockets()).iter().collect();
        let mut out = Vec::new();
        combinations(&all, self.min_sockets, 0, &mut |chosen| {
            let allowed = self
                .node_sockets
                .iter()
                .filter(|(_, s)| s & !chosen.as_u64() == 0)
                .fold(0u64, |m, (n, _)| m | 1 << n);
            let touch = chosen
                .iter()
                .map(|socket| {
                    let nodes = self
                        .node_sockets
                        .iter()
                        .filter(|(_, s)| s & (1 << socket) != 0)
                        .fold(0u64, |m, (n, _)| m | 1 << n);
                    Demand::coverage([(NumaMask::from_u64(nodes), 1)], 1)
                })
                .collect();
            out.push((NumaMask::from_u64(allowed), touch));
        });
        out
    }
}

/// Calls `f` with every mask of `size` of `ids` (no mask when `size` is 0 or too large).
fn combinations(ids: &[usize], size: usize, acc: u64, f: &mut dyn FnMut(NumaMask)) {
    if size == 0 {
        if acc != 0 {
            f(NumaMask::from_u64(acc));
        }
        return;
    }
    for (i, &id) in ids.iter().enumerate() {
        if ids.len() - i < size {
            break;
        }
        combinations(&ids[i + 1..], size - 1, acc | 1 << id, f);
    }
}

/// A provider's hints for one resource as the family they are (see the module docs).
///
/// ```
/// use corral_topology::topologymanager::{Demand, HintFamily, Preferred};
/// use corral_topology::NumaMask;
///
/// // Three nodes with 4, 4 and 8 free CPUs; 6 requested: one node (2) suffices.
/// let free = Demand::per_node([(0, 4), (1, 4), (2, 8)], 6);
/// let family = HintFamily::upward(&[0, 1, 2], NumaMask::new([0, 1, 2])?, NumaMask::EMPTY, vec![free], Preferred::Size(1));
/// let hints: Vec<_> = family.to_hints().iter().map(|h| (h.numa_affinity.unwrap().get_bits(), h.preferred)).collect();
/// assert_eq!(hints, vec![(vec![2], true), (vec![0, 1], false), (vec![0, 2], false), (vec![1, 2], false), (vec![0, 1, 2], false)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HintFamily {
    /// The provider's node ids, in the order its list iterates them.
    ids: Vec<usize>,
    universe: NumaMask,
    /// `None`: no member outside `extras`.
    core: Option<Core>,
    /// Members outside the core, ascending, each inside `universe`.
    extras: Vec<NumaMask>,
    preferred: Preferred,
}

impl HintFamily {
    /// The masks of nodes of `within` that hold `required` and meet every demand; the
    /// provider iterates `ids` (masks outside `within` are no members).
    pub fn upward(
        ids: &[usize],
        within: NumaMask,
        required: NumaMask,
        demands: Vec<Demand>,
        preferred: Preferred,
    ) -> HintFamily {
        let universe =
            NumaMask::new(ids.iter().copied().filter(|&id| id < 64)).unwrap_or(NumaMask::EMPTY);
        let core = Core {
            within: within.and(universe),
            required,
            demands,
            no_singletons: NumaMask::EMPTY,
        };
        HintFamily {
            ids: ids.to_vec(),
            universe,
            core: (!core.is_empty()).then_some(core),
            extras: Vec::new(),
            preferred,
        }
    }

    /// No member at all (upstream's empty list).
    pub fn empty(ids: &[usize]) -> HintFamily {
        HintFamily::upward(
            ids,
            NumaMask::EMPTY,
            NumaMask::EMPTY,
            Vec::new(),
            Preferred::Size(0),
        )
    }

    /// The same family without the single-node masks of `nodes` in its core.
    #[must_use]
    pub fn without_singletons(mut self, nodes: NumaMask) -> HintFamily {
        if let Some(core) = &mut self.core {
            core.no_singletons = core.no_singletons.or(nodes);
            if core.is_empty() {
                self.core = None;
            }
        }
        self
    }

    /// The family plus the masks `extras` (non-empty masks inside the provider's nodes).
    #[must_use]
    pub fn with_extras(mut self, extras: impl IntoIterator<Item = NumaMask>) -> HintFamily {
        let universe = self.universe;
        self.extras.extend(
            extras
                .into_iter()
                .filter(|m| !m.is_empty() && m.and(universe) == *m),
        );
        self.extras.sort_unstable();
        self.extras.dedup();
        self
    }

    /// The nodes the provider iterates.
    pub fn universe(&self) -> NumaMask {
        self.universe
    }

    /// The preferred rule.
    pub fn preferred_rule(&self) -> &Preferred {
        &self.preferred
    }

    pub(crate) fn core(&self) -> Option<&Core> {
        self.core.as_ref()
    }

    pub(crate) fn extras(&self) -> &[NumaMask] {
        &self.extras
    }

    /// Whether `mask` is one of the hints.
    pub fn contains(&self, mask: NumaMask) -> bool {
        mask.and(self.universe) == mask
            && !mask.is_empty()
            && (self.core.as_ref().is_some_and(|c| c.contains(mask))
                || self.extras.binary_search(&mask).is_ok())
    }

    /// Whether a member of `mask`'s size or span would be preferred.
    pub fn prefers(&self, mask: NumaMask) -> bool {
        match &self.preferred {
            Preferred::Size(size) => mask.count() == *size,
            Preferred::SizeOrSockets { size, sockets } => {
                mask.count() == *size || sockets.is_aligned(mask)
            }
        }
    }

    /// The hint for `mask`, when it is one.
    pub fn hint(&self, mask: NumaMask) -> Option<TopologyHint> {
        self.contains(mask)
            .then(|| TopologyHint::new(Some(mask), self.prefers(mask)))
    }

    /// Whether the family has no member (upstream: an empty list).
    pub fn is_empty(&self) -> bool {
        self.core.is_none() && self.extras.is_empty()
    }

    /// The list upstream's generator returns: every member, in `IterateBitMasks` order over
    /// the provider's ids. Exponential in the nodes: for tests, conformance and small
    /// machines.
    pub fn to_hints(&self) -> Vec<TopologyHint> {
        let mut out = Vec::new();
        NumaMask::iterate_masks(&self.ids, |mask| {
            if let Some(hint) = self.hint(mask) {
                out.push(hint);
            }
        });
        out
    }

    /// The size of the narrowest member (upstream's `maxOfMinAffinityCounts` reads it); out
    /// of [budget](super::bounded), a lower bound.
    pub fn narrowest_size(&self) -> Option<usize> {
        bounded(DECISION_STEPS, || self.narrowest_size_unbounded()).0
    }

    fn narrowest_size_unbounded(&self) -> Option<usize> {
        let core = self.core.as_ref().and_then(|core| {
            let fit = Intersection {
                required: core.required,
                demands: core.demands.iter().collect(),
                no_singletons: core.no_singletons,
            };
            min_size(&fit, core.within, core.required.count())
        });
        let extra = self.extras.iter().map(|m| m.count()).min();
        match (core, extra) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The best member holding `nodes`, as the memory manager's `findBestHint` picks it:
    /// preferred over not, then the narrowest. Out of [budget](super::bounded), the best
    /// member found (`None` when none was).
    pub fn best_containing(&self, nodes: NumaMask) -> Option<TopologyHint> {
        bounded(DECISION_STEPS, || self.best_containing_unbounded(nodes)).0
    }

    fn best_containing_unbounded(&self, nodes: NumaMask) -> Option<TopologyHint> {
        let mut best: Option<TopologyHint> = None;
        let mut offer = |mask: NumaMask| {
            let hint = TopologyHint::new(Some(mask), self.prefers(mask));
            let wins = match best {
                None => true,
                Some(b) => {
                    (hint.preferred && !b.preferred)
                        || (hint.preferred == b.preferred
                            && mask.is_narrower_than(b.numa_affinity.unwrap_or_default()))
                }
            };
            if wins {
                best = Some(hint);
            }
        };
        for &extra in &self.extras {
            if extra.and(nodes) == nodes {
                offer(extra);
            }
        }
        if let Some(core) = &self.core
            && nodes.and(core.within) == nodes
        {
            let fit = Intersection {
                required: core.required.or(nodes),
                demands: core.demands.iter().collect(),
                no_singletons: core.no_singletons,
            };
            let order = MaskOrder::Narrowest;
            // Preferred members first: by size, and (CPU) by socket span.
            let mut found_preferred = false;
            if let Preferred::Size(size) | Preferred::SizeOrSockets { size, .. } = &self.preferred
                && let Some(mask) = best_of_size(&fit, core.within, *size, &order)
            {
                offer(mask);
                found_preferred = true;
            }
            if let Preferred::SizeOrSockets { sockets, .. } = &self.preferred {
                for (allowed, touch) in sockets.choices() {
                    let mut demands = fit.demands.clone();
                    demands.extend(touch.iter());
                    let aligned = Intersection {
                        required: fit.required,
                        demands,
                        no_singletons: fit.no_singletons,
                    };
                    let within = core.within.and(allowed);
                    for size in 1..=within.count() {
                        if let Some(mask) = best_of_size(&aligned, within, size, &order) {
                            offer(mask);
                            found_preferred = true;
                            break;
                        }
                    }
                }
            }
            if !found_preferred
                && let Some(size) = min_size(&fit, core.within, fit.required.count())
                && let Some(mask) = best_of_size(&fit, core.within, size, &order)
            {
                offer(mask);
            }
        }
        best
    }
}

/// Upstream's `minAffinitySize`: the fewest of `ids` whose masks meet every demand;
/// `ids.len()` when none does. Out of [budget](super::bounded), 0: no size is proven, so
/// a family preferring it prefers nothing (never a hint upstream would not prefer).
pub fn min_affinity_size(ids: &[usize], demands: &[Demand]) -> usize {
    let (size, effort) = bounded(DECISION_STEPS, || min_affinity_size_unbounded(ids, demands));
    if effort.exact { size } else { 0 }
}

fn min_affinity_size_unbounded(ids: &[usize], demands: &[Demand]) -> usize {
    let universe =
        NumaMask::new(ids.iter().copied().filter(|&id| id < 64)).unwrap_or(NumaMask::EMPTY);
    let fit = Intersection {
        required: NumaMask::EMPTY,
        demands: demands.iter().collect(),
        no_singletons: NumaMask::EMPTY,
    };
    min_size(&fit, universe, 1).unwrap_or(ids.len())
}

/// One resource's hints: upstream's list, or the family it describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HintSet {
    /// The hints as a list.
    List(Vec<TopologyHint>),
    /// The hints as a family.
    Family(HintFamily),
}

impl HintSet {
    /// The list (a family's list is built: exponential in its nodes).
    pub fn to_hints(&self) -> Cow<'_, [TopologyHint]> {
        match self {
            HintSet::List(list) => Cow::Borrowed(list),
            HintSet::Family(family) => Cow::Owned(family.to_hints()),
        }
    }
}

/// Per resource, `None` = no preference (as [`ResourceHints`](super::ResourceHints)).
pub type ResourceHintSets = BTreeMap<String, Option<HintSet>>;

/// What one provider returned, as [`ProviderHints`], with families allowed.
pub type ProviderHintSets = Option<ResourceHintSets>;

/// Lists as hint sets.
pub fn hint_sets(hints: ProviderHints) -> ProviderHintSets {
    hints.map(|resources| {
        resources
            .into_iter()
            .map(|(name, list)| (name, list.map(HintSet::List)))
            .collect()
    })
}

/// Hint sets as lists (families listed: exponential in their nodes).
pub fn hint_lists(sets: &ProviderHintSets) -> ProviderHints {
    sets.as_ref().map(|resources| {
        resources
            .iter()
            .map(|(name, set)| {
                (
                    name.clone(),
                    set.as_ref().map(|s| s.to_hints().into_owned()),
                )
            })
            .collect()
    })
}
