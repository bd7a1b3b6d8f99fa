//! Device topology hints: upstream `generateDeviceTopologyHints` (every NUMA mask, in
//! `IterateBitMasks` order, that can hold the request given the available and reusable
//! devices; preferred when as narrow as the narrowest mask that *all* devices could fill).
//!
//! Upstream counts devices per mask by walking every device for every mask. Here devices are
//! first grouped by their NUMA bits, so each mask is checked against the few distinct
//! placements instead of thousands of devices; the answer is the same.

use corral_topology::topologymanager::{Demand, HintFamily, Preferred, min_affinity_size};
use corral_topology::{NumaMask, TopologyHint};

/// Devices grouped by NUMA bits: `(bits, count)`. Machines have few distinct placements,
/// so a short vector searched linearly is fastest; a plugin reporting many distinct
/// placements moves the groups into a hash map.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlacementCounts {
    groups: Vec<(u64, usize)>,
    many: Option<std::collections::HashMap<u64, usize>>,
}

/// Distinct placements kept in the vector before switching to the map.
const FEW: usize = 32;

impl PlacementCounts {
    /// Count one device with these NUMA bits.
    pub(crate) fn add(&mut self, bits: u64) {
        if let Some(many) = &mut self.many {
            *many.entry(bits).or_default() += 1;
            return;
        }
        if let Some((_, n)) = self.groups.iter_mut().find(|(b, _)| *b == bits) {
            *n += 1;
        } else if self.groups.len() < FEW {
            self.groups.push((bits, 1));
        } else {
            let mut many: std::collections::HashMap<u64, usize> = self.groups.drain(..).collect();
            many.insert(bits, 1);
            self.many = Some(many);
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = (u64, usize)> + '_> {
        match &self.many {
            Some(many) => Box::new(many.iter().map(|(b, n)| (*b, *n))),
            None => Box::new(self.groups.iter().copied()),
        }
    }

    /// Devices with any bit in `mask`.
    fn in_mask(&self, mask: u64) -> usize {
        self.iter()
            .filter(|(bits, _)| bits & mask != 0)
            .map(|(_, n)| n)
            .sum()
    }

    /// Whether every group has a bit in `mask`.
    fn all_in(&self, mask: u64) -> bool {
        self.iter().all(|(bits, _)| bits & mask != 0)
    }

    /// Total devices.
    fn total(&self) -> usize {
        self.iter().map(|(_, n)| n).sum()
    }
}

impl PlacementCounts {
    /// The placements as a [`Demand`] of `need` devices.
    fn demand(&self, need: usize) -> Demand {
        Demand::coverage(
            self.iter()
                .map(|(bits, n)| (NumaMask::from_u64(bits), n as u64)),
            need as u64,
        )
    }
}

/// What hint generation needs to know about one resource and one request.
#[derive(Debug, Clone, Default)]
pub(crate) struct HintInput {
    /// Every device of the resource (upstream `allDevices[resource]`), by NUMA bits.
    pub(crate) all: PlacementCounts,
    /// Available devices (each counted when its bits meet the mask).
    pub(crate) available: PlacementCounts,
    /// Reusable devices that have a topology (nil-topology ones are skipped upstream): every
    /// one must meet the mask.
    pub(crate) reusable: PlacementCounts,
}

/// Upstream `generateDeviceTopologyHints` over the machine's NUMA ids.
pub(crate) fn generate(
    numa_nodes: &[usize],
    input: &HintInput,
    request: usize,
) -> Vec<TopologyHint> {
    let mut min_affinity_size = numa_nodes.len();
    let mut masks = Vec::new();
    NumaMask::iterate_masks(numa_nodes, |mask| {
        let bits = mask.as_u64();
        if input.all.in_mask(bits) >= request && mask.count() < min_affinity_size {
            min_affinity_size = mask.count();
        }
        if !input.reusable.all_in(bits) {
            return;
        }
        let matching = input.reusable.total() + input.available.in_mask(bits);
        if matching < request {
            return;
        }
        masks.push(mask);
    });
    masks
        .into_iter()
        .map(|mask| TopologyHint::new(Some(mask), mask.count() == min_affinity_size))
        .collect()
}

/// [`generate`] as the [`HintFamily`] its list is, without walking every set of NUMA nodes:
/// masks that meet every reusable device's nodes and whose available devices (plus the
/// reusable ones) reach the request; preferred with as many nodes as the fewest that all
/// devices could fill the request from. `family(…).to_hints() == generate(…)`.
pub(crate) fn family(numa_nodes: &[usize], input: &HintInput, request: usize) -> HintFamily {
    let min_size = min_affinity_size(numa_nodes, &[input.all.demand(request)]);
    // Every reusable placement must be met: one unit per distinct placement.
    let placements: Vec<u64> = input.reusable.iter().map(|(bits, _)| bits).collect();
    let meet_all = Demand::coverage(
        placements.iter().map(|&bits| (NumaMask::from_u64(bits), 1)),
        placements.len() as u64,
    );
    let need = request.saturating_sub(input.reusable.total());
    HintFamily::upward(
        numa_nodes,
        NumaMask::from_u64(u64::MAX),
        NumaMask::EMPTY,
        vec![meet_all, input.available.demand(need)],
        Preferred::Size(min_size),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(bits: &[u64]) -> PlacementCounts {
        let mut c = PlacementCounts::default();
        bits.iter().for_each(|&b| c.add(b));
        c
    }

    fn hint(ids: &[usize], preferred: bool) -> TopologyHint {
        TopologyHint::new(Some(NumaMask::new(ids.iter().copied()).unwrap()), preferred)
    }

    #[test]
    fn two_devices_on_two_nodes() {
        // Upstream TestGetTopologyHints "Request for 2, one device per NUMA node".
        let input = HintInput {
            all: counts(&[0b01, 0b10]),
            available: counts(&[0b01, 0b10]),
            reusable: PlacementCounts::default(),
        };
        assert_eq!(generate(&[0, 1], &input, 2), vec![hint(&[0, 1], true)]);
        assert_eq!(
            generate(&[0, 1], &input, 1),
            vec![hint(&[0], true), hint(&[1], true), hint(&[0, 1], false)]
        );
    }

    #[test]
    fn many_placements_switch_to_a_map() {
        let mut c = PlacementCounts::default();
        for bits in 0..100u64 {
            c.add(bits);
            c.add(bits);
        }
        assert_eq!(c.total(), 200);
        assert_eq!(c.in_mask(1), 100);
        assert!(!c.all_in(u64::MAX), "bits 0 meets no mask");
    }

    #[test]
    fn reusable_without_node_excludes_every_mask() {
        let input = HintInput {
            all: counts(&[0b01]),
            available: counts(&[0b01]),
            reusable: counts(&[0]),
        };
        assert!(generate(&[0, 1], &input, 1).is_empty());
    }
}

#[cfg(test)]
mod family_tests {
    use proptest::prelude::*;

    use super::*;

    /// Placements over the nodes `ids`: mostly one node, sometimes several or none.
    fn placements(ids: &[usize], raw: &[(u8, u64)]) -> Vec<u64> {
        raw.iter()
            .map(|&(kind, bits)| {
                let pick = |b: u64| {
                    ids.iter()
                        .enumerate()
                        .filter(|(i, _)| b & (1 << i) != 0)
                        .fold(0u64, |m, (_, &id)| m | 1 << id)
                };
                match kind {
                    0 => 0,
                    1 => pick(bits),
                    _ => 1 << ids[(bits as usize) % ids.len()],
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The family lists exactly upstream's `generateDeviceTopologyHints`.
        #[test]
        fn family_lists_upstreams_hints(
            ids in prop::collection::btree_set(0usize..64, 1..=8),
            raw in prop::collection::vec((0u8..6, any::<u64>()), 0..12),
            free in prop::collection::vec(any::<bool>(), 12),
            reuse in prop::collection::vec(prop::bool::weighted(0.15), 12),
            request in 0usize..8,
        ) {
            let ids: Vec<usize> = ids.into_iter().collect();
            let devices = placements(&ids, &raw);
            let mut input = HintInput::default();
            for (i, &bits) in devices.iter().enumerate() {
                input.all.add(bits);
                if reuse[i] {
                    input.reusable.add(bits);
                } else if free[i] {
                    input.available.add(bits);
                }
            }
            prop_assert_eq!(family(&ids, &input, request).to_hints(), generate(&ids, &input, request));
        }
    }
}
