//! Device topology hints: upstream `generateDeviceTopologyHints` (every NUMA mask, in
//! `IterateBitMasks` order, that can hold the request given the available and reusable
//! devices; preferred when as narrow as the narrowest mask that *all* devices could fill).
//!
//! Upstream counts devices per mask by walking every device for every mask. Here devices are
//! first grouped by their NUMA bits, so each mask is checked against the few distinct
//! placements instead of thousands of devices; the answer is the same.

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
