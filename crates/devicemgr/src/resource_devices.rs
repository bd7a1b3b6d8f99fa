//! [`ResourceDevices`]: everything the manager knows about one resource's devices — the
//! plugin's last list (upstream `allDevices[resource]`), the healthy and unhealthy sets and
//! the allocated set — indexed so the hot path works on bitsets.
//!
//! Devices are interned: each id gets an index; the table is rebuilt (ids sorted byte-wise)
//! on every list the plugin sends, keeping ids that are still allocated, so ids a plugin
//! stops reporting do not accumulate.

use std::collections::HashMap;

use corral_topology::NumaIds;

use crate::Device;
use crate::bitset::BitSet;

/// Placement of one interned device, as the hot path needs it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Slot {
    /// NUMA ids as reported (`None`: nil topology, or not in the plugin's current list).
    pub(crate) nodes: Option<Vec<i64>>,
    /// Mask bits of the reported ids that have one ([`NumaIds::bit`]: with upstream's
    /// numbering, the ids in 0–63; upstream's `AnySet` ignores the others). An id without a
    /// bit meets no mask, as an unknown id meets none upstream.
    pub(crate) bits: u64,
    /// Some id other than -1 is present (an unaligned candidate when not in the affinity).
    pub(crate) has_real_node: bool,
    /// Reported healthy in the plugin's current list.
    pub(crate) reported_healthy: bool,
}

/// The mask bits of reported NUMA ids (ids without a bit are left out).
fn bits_of(ids: &[i64], numa_ids: &NumaIds) -> u64 {
    ids.iter()
        .filter_map(|&id| numa_ids.bit_of_signed(id))
        .fold(0, |acc, bit| acc | 1 << bit)
}

impl Slot {
    fn of(device: &Device, numa_ids: &NumaIds) -> Slot {
        let nodes = device.numa_nodes.clone();
        let ids = nodes.as_deref().unwrap_or_default();
        Slot {
            bits: bits_of(ids, numa_ids),
            has_real_node: ids.iter().any(|&id| id != -1),
            nodes,
            reported_healthy: device.healthy,
        }
    }

    /// Topology present with at least one node.
    pub(crate) fn has_topology(&self) -> bool {
        self.nodes.as_ref().is_some_and(|n| !n.is_empty())
    }
}

/// Devices of one resource.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResourceDevices {
    ids: Vec<String>,
    index: HashMap<String, usize>,
    slots: Vec<Slot>,
    /// In the plugin's current list (upstream `allDevices[resource]`).
    pub(crate) listed: BitSet,
    /// Upstream `healthyDevices[resource]`.
    pub(crate) healthy: BitSet,
    /// Upstream `unhealthyDevices[resource]`.
    pub(crate) unhealthy: BitSet,
    /// Upstream `allocatedDevices[resource]`.
    pub(crate) allocated: BitSet,
    /// `allDevices` has an entry for the resource.
    pub(crate) has_all: bool,
    /// `healthyDevices` has an entry (the resource is registered).
    pub(crate) has_healthy: bool,
    /// `unhealthyDevices` has an entry.
    pub(crate) has_unhealthy: bool,
    /// `allocatedDevices` has an entry.
    pub(crate) has_allocated: bool,
    /// Some listed device has a NUMA node (upstream `deviceHasTopologyAlignment`).
    pub(crate) topology_aligned: bool,
    /// Listed devices grouped by NUMA bits, for hint generation.
    pub(crate) placements: crate::hints::PlacementCounts,
}

impl ResourceDevices {
    /// The index of `id`, if interned.
    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// The index of `id`, interning it (with no topology) if new.
    pub(crate) fn intern(&mut self, id: &str) -> usize {
        if let Some(&i) = self.index.get(id) {
            return i;
        }
        let i = self.ids.len();
        self.ids.push(id.to_owned());
        self.index.insert(id.to_owned(), i);
        self.slots.push(Slot::default());
        i
    }

    /// The id at `index`.
    pub(crate) fn id(&self, index: usize) -> &str {
        &self.ids[index]
    }

    /// The placement at `index`.
    pub(crate) fn slot(&self, index: usize) -> &Slot {
        &self.slots[index]
    }

    /// The placement of `id` as upstream's `allDevices[resource][id]` sees it (a device
    /// not in the current list has no topology).
    pub(crate) fn slot_of(&self, id: &str) -> Option<&Slot> {
        self.index_of(id)
            .filter(|&i| self.listed.contains(i))
            .map(|i| &self.slots[i])
    }

    /// Replace the plugin's list (upstream `genericDeviceUpdateCallback`): the listed,
    /// healthy and unhealthy sets are rebuilt from `devices`, their NUMA ids turned into mask
    /// bits through `numa_ids`; allocated ids are kept. A duplicate id takes its last
    /// occurrence. Returns the number of duplicates dropped.
    pub(crate) fn replace_devices(&mut self, devices: &[Device], numa_ids: &NumaIds) -> usize {
        let mut latest: HashMap<&str, &Device> = HashMap::with_capacity(devices.len());
        for device in devices {
            latest.insert(device.id.as_str(), device);
        }
        let duplicates = devices.len() - latest.len();
        let allocated: Vec<String> = self
            .allocated
            .iter()
            .map(|i| self.ids[i].clone())
            .filter(|id| !latest.contains_key(id.as_str()))
            .collect();
        let mut listed: Vec<&Device> = latest.into_values().collect();
        listed.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let mut ids: Vec<String> = Vec::with_capacity(listed.len() + allocated.len());
        let mut slots = Vec::with_capacity(listed.len() + allocated.len());
        let mut listed_bits = BitSet::with_len(listed.len());
        let mut healthy = BitSet::with_len(listed.len());
        let mut unhealthy = BitSet::with_len(listed.len());
        let mut aligned = false;
        let mut placements = crate::hints::PlacementCounts::default();
        for (i, device) in listed.iter().enumerate() {
            ids.push(device.id.clone());
            let slot = Slot::of(device, numa_ids);
            placements.add(slot.bits);
            aligned |= slot.has_topology();
            slots.push(slot);
            listed_bits.insert(i);
            if device.healthy {
                healthy.insert(i);
            } else {
                unhealthy.insert(i);
            }
        }
        let previously_allocated: Vec<String> =
            self.allocated.iter().map(|i| self.ids[i].clone()).collect();
        for id in allocated {
            ids.push(id);
            slots.push(Slot::default());
        }
        self.index = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect();
        self.ids = ids;
        self.slots = slots;
        self.listed = listed_bits;
        self.healthy = healthy;
        self.unhealthy = unhealthy;
        self.allocated = BitSet::with_len(self.ids.len());
        for id in previously_allocated {
            if let Some(&i) = self.index.get(&id) {
                self.allocated.insert(i);
            }
        }
        self.topology_aligned = aligned;
        self.placements = placements;
        self.has_all = true;
        self.has_healthy = true;
        self.has_unhealthy = true;
        duplicates
    }

    /// Recompute the mask bits of the listed devices for another NUMA table.
    pub(crate) fn renumber(&mut self, numa_ids: &NumaIds) {
        let mut placements = crate::hints::PlacementCounts::default();
        for i in self.listed.iter() {
            let slot = &mut self.slots[i];
            slot.bits = bits_of(slot.nodes.as_deref().unwrap_or_default(), numa_ids);
            placements.add(slot.bits);
        }
        self.placements = placements;
    }

    /// Ids of the indices in `set`, in index order.
    pub(crate) fn ids_of(&self, set: &BitSet) -> Vec<String> {
        set.iter().map(|i| self.ids[i].clone()).collect()
    }

    /// The devices of the plugin's current list.
    pub(crate) fn listed_devices(&self) -> Vec<Device> {
        self.listed
            .iter()
            .map(|i| Device {
                id: self.ids[i].clone(),
                healthy: self.slots[i].reported_healthy,
                numa_nodes: self.slots[i].nodes.clone(),
            })
            .collect()
    }

    /// Indices of `ids`, skipping ids that are not interned.
    pub(crate) fn known<'a>(
        &'a self,
        ids: impl IntoIterator<Item = &'a String> + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        ids.into_iter().filter_map(|id| self.index_of(id))
    }
}
