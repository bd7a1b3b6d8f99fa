//! The per-NUMA machine state and how the static policy builds its default
//! (`getDefaultMachineState`).

use std::collections::BTreeMap;

use corral_topology::memory::NumaMemory;

use crate::error::MachineStateError;

/// The resource name of regular memory.
pub const MEMORY: &str = "memory";

/// One resource's memory on one NUMA node, in bytes (upstream `state.MemoryTable`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryTable {
    /// Everything the node has of the resource.
    pub total: u64,
    /// Kept for the system (`reservedMemory`).
    pub system_reserved: u64,
    /// What containers may have: total less system reserved (and, for `memory`, less the
    /// huge pages).
    pub allocatable: u64,
    /// Assigned to containers.
    pub reserved: u64,
    /// Allocatable and not assigned.
    pub free: u64,
}

impl MemoryTable {
    /// Moves up to `*left` bytes from free to reserved, counting them off `left`. Reserved
    /// saturates: a restored table's free and reserved are checked only as sums over the
    /// node's group, so one node's may add up past 2^64.
    pub(crate) fn reserve(&mut self, left: &mut u64) {
        let taken = (*left).min(self.free);
        self.free -= taken;
        self.reserved = self.reserved.saturating_add(taken);
        *left -= taken;
    }

    /// Moves up to `*left` bytes from reserved back to free, counting them off `left`
    /// (free saturates, as reserved in [`reserve`](Self::reserve)).
    pub(crate) fn release(&mut self, left: &mut u64) {
        let back = (*left).min(self.reserved);
        self.reserved -= back;
        self.free = self.free.saturating_add(back);
        *left -= back;
    }
}

/// One NUMA node (upstream `state.NUMANodeState`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeState {
    /// Memory blocks assigned on this node.
    pub number_of_assignments: u64,
    /// By resource name: `memory`, `hugepages-<size>`.
    pub memory: BTreeMap<String, MemoryTable>,
    /// The nodes this one is grouped with (itself alone by default).
    pub cells: Vec<usize>,
}

/// Every NUMA node, by id (upstream `state.NUMANodeMap`).
pub type MachineState = BTreeMap<usize, NodeState>;

/// Memory of one resource assigned to a container, from `numa_affinity` (upstream
/// `state.Block`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The NUMA nodes it comes from.
    pub numa_affinity: Vec<usize>,
    /// `memory` or `hugepages-<size>`.
    pub resource: String,
    /// Bytes.
    pub size: u64,
}

/// What the topology manager's admission reports a container was given: the block's
/// resource, bytes and NUMA nodes.
impl From<&Block> for corral_topology::topologymanager::MemoryGrant {
    fn from(block: &Block) -> Self {
        corral_topology::topologymanager::MemoryGrant::new(
            block.resource.clone(),
            block.size,
            block.numa_affinity.clone(),
        )
    }
}

/// Pod uid → container name → blocks (upstream `state.ContainerMemoryAssignments`).
pub type Assignments = BTreeMap<String, BTreeMap<String, Vec<Block>>>;

/// Per NUMA node, bytes reserved for the system by resource (the `reservedMemory`
/// configuration, converted as upstream's `convertReserved`).
pub type SystemReserved = BTreeMap<usize, BTreeMap<String, u64>>;

/// The static policy's machine state before any assignment: per node, each huge page size
/// (total = pages × size, allocatable = total − reserved) and `memory` (total = the node's
/// memory, allocatable = total − reserved − the node's huge pages), each node its own cell.
pub fn default_machine_state(
    nodes: &BTreeMap<usize, NumaMemory>,
    reserved: &SystemReserved,
) -> Result<MachineState, MachineStateError> {
    if let Some(&unknown) = reserved.keys().find(|node| !nodes.contains_key(node)) {
        return Err(MachineStateError::UnknownNode(unknown));
    }
    if let Some(&large) = nodes.keys().find(|&&id| id > 63) {
        return Err(MachineStateError::NodeIdTooLarge(large));
    }
    let mut state = MachineState::new();
    for (&id, node) in nodes {
        let reserved_of = |resource: &str| {
            reserved
                .get(&id)
                .and_then(|r| r.get(resource))
                .copied()
                .unwrap_or(0)
        };
        let mut memory = BTreeMap::new();
        let mut huge_page_bytes = 0u64;
        for pages in &node.huge_pages {
            let resource = pages.resource_name();
            let total = pages.bytes();
            let system_reserved = reserved_of(&resource);
            let allocatable =
                allocatable(id, &resource, total, system_reserved, "system reserved")?;
            huge_page_bytes = huge_page_bytes.saturating_add(total);
            memory.insert(resource, table(total, system_reserved, allocatable));
        }
        let total = node.memory_bytes;
        let system_reserved = reserved_of(MEMORY);
        let taken = system_reserved.saturating_add(huge_page_bytes);
        let what = "system reserved and huge pages";
        let allocatable = allocatable(id, MEMORY, total, taken, what)?;
        memory.insert(
            MEMORY.to_owned(),
            table(total, system_reserved, allocatable),
        );
        let node_state = NodeState {
            number_of_assignments: 0,
            memory,
            cells: vec![id],
        };
        state.insert(id, node_state);
    }
    Ok(state)
}

fn allocatable(
    node: usize,
    resource: &str,
    total: u64,
    taken: u64,
    what: &'static str,
) -> Result<u64, MachineStateError> {
    total
        .checked_sub(taken)
        .ok_or_else(|| MachineStateError::Overcommitted {
            node,
            resource: resource.to_owned(),
            what,
            taken,
            total,
        })
}

fn table(total: u64, system_reserved: u64, allocatable: u64) -> MemoryTable {
    MemoryTable {
        total,
        system_reserved,
        allocatable,
        reserved: 0,
        free: allocatable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A restored table whose reserved and free add up past 2^64 (possible where only the
    /// group's sums are checked) used to overflow moving memory between them.
    #[test]
    fn moving_memory_saturates() {
        let mut table = MemoryTable {
            free: 10,
            reserved: u64::MAX - 5,
            ..MemoryTable::default()
        };
        let mut left = 20;
        table.reserve(&mut left);
        assert_eq!((table.free, table.reserved, left), (0, u64::MAX, 10));
        let mut table = MemoryTable {
            free: u64::MAX - 5,
            reserved: 10,
            ..MemoryTable::default()
        };
        let mut left = 10;
        table.release(&mut left);
        assert_eq!((table.free, table.reserved, left), (u64::MAX, 0, 0));
    }
}
