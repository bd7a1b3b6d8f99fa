//! The static policy's topology hints (upstream `calculateHints`, `regenerateHints`,
//! `findBestHint`): pure functions of the machine state and a request.

use std::collections::BTreeMap;

use corral_topology::NumaMask;
use corral_topology::topologymanager::{
    Demand, HintFamily, HintSet, Preferred, TopologyHint, min_affinity_size,
};

use crate::machine_state::{Block, MachineState};

/// Bytes requested per resource (`memory`, `hugepages-<size>`).
pub type Requested = BTreeMap<String, u64>;

/// Hints per resource: every resource gets the same list (upstream's map of hint lists).
pub type MemoryHints = BTreeMap<String, Vec<TopologyHint>>;

/// Upstream `calculateHints`: every set of NUMA nodes (smallest first, then lowest ids)
/// whose allocatable memory could hold `requested` and whose free memory (plus what the
/// pod's earlier init containers leave there, `reusable`) holds it now, respecting the
/// groups (`cells`): a node of a multi-node group is no single-node hint, and a used node
/// joins no other group. Preferred hints have as few nodes as the smallest set whose
/// allocatable memory could hold the request, whatever is free. No set: no key at all.
pub fn calculate_hints(
    state: &MachineState,
    requested: &Requested,
    reusable: impl Fn(NumaMask, &str) -> u64,
) -> MemoryHints {
    let ids: Vec<usize> = state.keys().copied().collect();
    // Per node (by id, below 64 as masks are) and requested resource: (allocatable, free),
    // read once rather than once per set of nodes.
    let mut sizes = vec![Vec::new(); ids.last().map_or(0, |&id| id + 1).min(64)];
    for (&id, node) in state.range(..64) {
        sizes[id] = requested
            .keys()
            .map(|resource| {
                node.memory
                    .get(resource)
                    .map_or((0, 0), |t| (t.allocatable, t.free))
            })
            .collect::<Vec<(u64, u64)>>();
    }
    let sum = |mask: NumaMask, i: usize, free: bool| -> u64 {
        mask.iter()
            .filter_map(|n| sizes.get(n)?.get(i))
            .map(|&(allocatable, f)| if free { f } else { allocatable })
            .fold(0u64, u64::saturating_add)
    };
    let mut min_size = ids.len();
    let mut masks = Vec::new();
    NumaMask::iterate_masks(&ids, |mask| {
        let short = |free: bool| {
            requested.iter().enumerate().any(|(i, (resource, &want))| {
                let extra = if free { reusable(mask, resource) } else { 0 };
                sum(mask, i, free).saturating_add(extra) < want
            })
        };
        if short(false) {
            return;
        }
        min_size = min_size.min(mask.count());
        if fits_groups(state, &mask.get_bits()) && !short(true) {
            masks.push(mask);
        }
    });
    let hints: Vec<TopologyHint> = masks
        .into_iter()
        .map(|mask| TopologyHint {
            numa_affinity: Some(mask),
            preferred: mask.count() == min_size,
        })
        .collect();
    if hints.is_empty() {
        return MemoryHints::new();
    }
    requested
        .keys()
        .map(|resource| (resource.clone(), hints.clone()))
        .collect()
}

/// [`calculate_hints`] as the [`HintFamily`] its list is, without walking every set of
/// nodes: the sets of unused nodes whose allocatable and free memory hold the request (a
/// node of a multi-node group is no single-node set), plus the few sets only the groups or
/// reusable memory admit — single used nodes, the groups themselves and `reusable_masks`
/// (the masks `reusable` may answer for), each checked as upstream checks it. Preferred:
/// as many nodes as the fewest whose allocatable memory could hold the request. An empty
/// family is upstream's "no hints" (then no resource has a key).
pub fn calculate_hint_family(
    state: &MachineState,
    requested: &Requested,
    reusable: impl Fn(NumaMask, &str) -> u64,
    reusable_masks: impl IntoIterator<Item = NumaMask>,
) -> HintFamily {
    let ids: Vec<usize> = state.keys().copied().collect();
    let demand = |free: bool, resource: &str, want: u64| {
        Demand::per_node(
            state.range(..64).map(|(&id, node)| {
                let table = node.memory.get(resource);
                (
                    id,
                    table.map_or(0, |t| if free { t.free } else { t.allocatable }),
                )
            }),
            want,
        )
    };
    let allocatable: Vec<Demand> = requested
        .iter()
        .map(|(resource, &want)| demand(false, resource, want))
        .collect();
    let free: Vec<Demand> = requested
        .iter()
        .map(|(resource, &want)| demand(true, resource, want))
        .collect();
    let min_size = min_affinity_size(&ids, &allocatable);
    let unused = state
        .range(..64)
        .filter(|(_, node)| node.number_of_assignments == 0)
        .fold(0u64, |m, (&id, _)| m | 1 << id);
    let grouped = state
        .range(..64)
        .filter(|(_, node)| node.cells.len() > 1)
        .fold(0u64, |m, (&id, _)| m | 1 << id);
    // Sets outside the core that upstream may keep, each checked as upstream does.
    let mut candidates: Vec<NumaMask> = reusable_masks.into_iter().collect();
    for (&id, node) in state.range(..64) {
        if node.number_of_assignments > 0 {
            candidates.push(NumaMask::from_u64(1 << id));
            if let Ok(cells) = NumaMask::new(node.cells.iter().copied()) {
                candidates.push(cells);
            }
        }
    }
    let extras: Vec<NumaMask> = candidates
        .into_iter()
        .filter(|&mask| {
            let bits = mask.get_bits();
            !mask.is_empty()
                && bits.iter().all(|n| state.contains_key(n))
                && allocatable.iter().all(|d| d.is_met(mask))
                && fits_groups(state, &bits)
                && requested.iter().zip(&free).all(|((resource, &want), d)| {
                    d.supplied(mask).saturating_add(reusable(mask, resource)) >= want
                })
        })
        .collect();
    let mut demands = allocatable;
    demands.extend(free);
    HintFamily::upward(
        &ids,
        NumaMask::from_u64(unused),
        NumaMask::EMPTY,
        demands,
        Preferred::Size(min_size),
    )
    .without_singletons(NumaMask::from_u64(grouped))
    .with_extras(extras)
}

/// Per resource, the same family: `calculate_hints`' shape, as hint sets (no key at all for
/// an empty family, as upstream).
pub type MemoryHintSets = BTreeMap<String, HintSet>;

/// `family` for every requested resource, or no key when it has no member.
pub fn family_hint_sets(family: HintFamily, requested: &Requested) -> MemoryHintSets {
    if family.is_empty() {
        return MemoryHintSets::new();
    }
    requested
        .keys()
        .map(|resource| (resource.clone(), HintSet::Family(family.clone())))
        .collect()
}

/// Whether a set of nodes may hold a new allocation given the groups already formed.
fn fits_groups(state: &MachineState, bits: &[usize]) -> bool {
    if let [single] = bits {
        return state.get(single).is_none_or(|node| node.cells.len() <= 1);
    }
    bits.iter().all(|n| {
        let Some(node) = state.get(n) else {
            return true;
        };
        node.number_of_assignments == 0 || (node.cells.len() > 1 && same_set(&node.cells, bits))
    })
}

/// `a` and `b` hold the same nodes.
pub(crate) fn same_set(a: &[usize], b: &[usize]) -> bool {
    let sorted = |v: &[usize]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v.dedup();
        v
    };
    sorted(a) == sorted(b)
}

/// Upstream `regenerateHints`, for a container already holding `blocks`: each block's
/// nodes as the one preferred hint of its resource; `None` when the blocks are not exactly
/// the request (then the topology manager gets no preference from memory).
pub fn regenerate_hints(blocks: &[Block], requested: &Requested) -> Option<MemoryHints> {
    if blocks.len() != requested.len() {
        return None;
    }
    let mut hints: MemoryHints = requested.keys().map(|r| (r.clone(), Vec::new())).collect();
    for block in blocks {
        if requested.get(&block.resource) != Some(&block.size) {
            return None;
        }
        let mask = NumaMask::new(block.numa_affinity.iter().copied()).ok()?;
        hints.get_mut(&block.resource)?.push(TopologyHint {
            numa_affinity: Some(mask),
            preferred: true,
        });
    }
    Some(hints)
}

/// Upstream `findBestHint`: preferred over not, then the narrowest (fewest nodes, then the
/// lowest ids); the first of `hints` among equals.
pub fn find_best_hint(hints: &[TopologyHint]) -> Option<TopologyHint> {
    let mut best = *hints.first()?;
    for hint in &hints[1..] {
        let narrower = match (hint.numa_affinity, best.numa_affinity) {
            (Some(h), Some(b)) => h.is_narrower_than(b),
            _ => false,
        };
        if (hint.preferred && !best.preferred) || (hint.preferred == best.preferred && narrower) {
            best = *hint;
        }
    }
    Some(best)
}
