//! The machine state and assignments as `memory_manager_state` stores them
//! ([`corral_checkpoint::MemoryManagerCheckpoint`]): NUMA ids as Go `int`, nil maps and
//! slices as `None`, values behind Go pointers as `Option`.

use std::collections::BTreeMap;

use corral_checkpoint::{self as cp, MemoryManagerCheckpoint};

use crate::machine_state::{Assignments, Block, MachineState, MemoryTable, NodeState};

/// Why a checkpoint's content cannot be a machine state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("memory_manager_state holds {what} {value}, which no machine has")]
pub struct CheckpointValueError {
    /// What holds the value: "a NUMA node id", "an assignment count".
    pub what: &'static str,
    /// The value.
    pub value: i64,
}

fn node_id(id: i64) -> Result<usize, CheckpointValueError> {
    usize::try_from(id).map_err(|_| CheckpointValueError {
        what: "a NUMA node id",
        value: id,
    })
}

/// The machine state and assignments a checkpoint holds.
pub fn from_checkpoint(
    checkpoint: &MemoryManagerCheckpoint,
) -> Result<(MachineState, Assignments), CheckpointValueError> {
    let mut state = MachineState::new();
    for (&id, node) in checkpoint.machine_state.iter().flatten() {
        let node = node.clone().unwrap_or_default();
        let number_of_assignments =
            u64::try_from(node.number_of_assignments).map_err(|_| CheckpointValueError {
                what: "an assignment count",
                value: node.number_of_assignments,
            })?;
        let memory = node
            .memory_map
            .unwrap_or_default()
            .into_iter()
            .map(|(resource, table)| {
                let t = table.unwrap_or_default();
                let table = MemoryTable {
                    total: t.total_mem_size,
                    system_reserved: t.system_reserved,
                    allocatable: t.allocatable,
                    reserved: t.reserved,
                    free: t.free,
                };
                (resource, table)
            })
            .collect();
        let cells: Result<Vec<usize>, _> = node.cells.into_iter().flatten().map(node_id).collect();
        let cells = cells?;
        let node_state = NodeState {
            number_of_assignments,
            memory,
            cells,
        };
        state.insert(node_id(id)?, node_state);
    }
    let mut assignments = Assignments::new();
    for (pod, containers) in checkpoint.entries.iter().flatten() {
        let entry: &mut BTreeMap<String, Vec<Block>> = assignments.entry(pod.clone()).or_default();
        for (container, blocks) in containers.iter().flatten() {
            let blocks = blocks
                .iter()
                .flatten()
                .map(block_from)
                .collect::<Result<_, CheckpointValueError>>()?;
            entry.insert(container.clone(), blocks);
        }
    }
    Ok((state, assignments))
}

/// The checkpoint of `policy_name` holding `state` and `assignments`.
pub fn to_checkpoint(
    policy_name: &str,
    state: &MachineState,
    assignments: &Assignments,
) -> MemoryManagerCheckpoint {
    let ids = |ids: &[usize]| ids.iter().map(|&id| id as i64).collect::<Vec<_>>();
    let machine_state = state
        .iter()
        .map(|(&id, node)| {
            let memory_map = node
                .memory
                .iter()
                .map(|(resource, t)| {
                    let table = cp::MemoryTable {
                        total_mem_size: t.total,
                        system_reserved: t.system_reserved,
                        allocatable: t.allocatable,
                        reserved: t.reserved,
                        free: t.free,
                    };
                    (resource.clone(), Some(table))
                })
                .collect();
            let node_state = cp::NumaNodeState {
                number_of_assignments: node.number_of_assignments as i64,
                memory_map: Some(memory_map),
                cells: Some(ids(&node.cells)),
            };
            (id as i64, Some(node_state))
        })
        .collect();
    let entries = assignments
        .iter()
        .map(|(pod, containers)| {
            let containers = containers
                .iter()
                .map(|(name, blocks)| (name.clone(), Some(blocks.iter().map(block_to).collect())))
                .collect();
            (pod.clone(), Some(containers))
        })
        .collect();
    MemoryManagerCheckpoint {
        policy_name: policy_name.to_owned(),
        machine_state: Some(machine_state),
        entries: Some(entries),
    }
}

fn block_from(b: &cp::Block) -> Result<Block, CheckpointValueError> {
    let numa_affinity = b
        .numa_affinity
        .iter()
        .flatten()
        .map(|&id| node_id(id))
        .collect::<Result<_, _>>()?;
    Ok(Block {
        numa_affinity,
        resource: b.resource.clone(),
        size: b.size,
    })
}

fn block_to(b: &Block) -> cp::Block {
    cp::Block {
        numa_affinity: Some(b.numa_affinity.iter().map(|&id| id as i64).collect()),
        resource: b.resource.clone(),
        size: b.size,
    }
}

/// The pods' pod-level blocks a v2/v3 checkpoint holds (pods with none left out).
pub fn from_pod_entries<'a>(
    entries: impl IntoIterator<Item = (&'a String, &'a cp::PodMemoryEntry)>,
) -> Result<BTreeMap<String, Vec<Block>>, CheckpointValueError> {
    let mut pods = BTreeMap::new();
    for (pod, entry) in entries {
        let blocks: Vec<Block> = entry
            .memory_blocks
            .iter()
            .flatten()
            .map(block_from)
            .collect::<Result<_, _>>()?;
        if !blocks.is_empty() {
            pods.insert(pod.clone(), blocks);
        }
    }
    Ok(pods)
}

/// The pod entries of a v2/v3 checkpoint for the pods' pod-level blocks.
pub fn to_pod_entries<'a>(
    pods: impl IntoIterator<Item = (&'a String, &'a Vec<Block>)>,
) -> cp::PodMemoryEntries {
    pods.into_iter()
        .map(|(pod, blocks)| {
            let memory_blocks = Some(blocks.iter().map(block_to).collect());
            (pod.clone(), cp::PodMemoryEntry { memory_blocks })
        })
        .collect()
}
