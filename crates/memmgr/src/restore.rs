//! Restoring the machine state from a checkpoint: upstream's `validateState`.

use crate::error::RestoreError;
use std::collections::BTreeMap;

use crate::machine_state::{Assignments, Block, MachineState};

/// The machine state to run with, given the checkpoint's `restored` state and
/// `assignments`, and `default` (the machine's state with nothing assigned, from
/// [`default_machine_state`](crate::default_machine_state)):
///
/// - no restored state: `default`, unless there are assignments
///   ([`RestoreError::EmptyMachineState`]);
/// - otherwise `restored`, once `default` with every block of `assignments` taken as
///   upstream replays them (each block's nodes in its order, each node's free memory used
///   first, a node's `cells` set to the block's nodes) matches it as upstream's
///   `areMachineStatesEqual` compares ([`RestoreError::MachineStateDiffers`]): the same
///   nodes, assignment counts and `cells` (as sets); per resource the same total, system
///   reserved and allocatable; and, summed over each node's `cells` group, the same free
///   and reserved memory (a group's blocks may sit on its nodes in any proportion). Memory
///   added or removed, or reservations changed since the checkpoint was written, refuse
///   the state rather than guess.
pub fn restore_machine_state(
    restored: &MachineState,
    assignments: &Assignments,
    default: MachineState,
) -> Result<MachineState, RestoreError> {
    restore_machine_state_with_pods(restored, assignments, &BTreeMap::new(), default)
}

/// [`restore_machine_state`] where the pods of `pod_blocks` (managed at pod level) count
/// their pod's blocks instead of their containers', as upstream's `validateState` does while
/// `PodLevelResourceManagers` is on — a pod with container entries only: the blocks of a
/// pod without any hold nothing.
pub fn restore_machine_state_with_pods(
    restored: &MachineState,
    assignments: &Assignments,
    pod_blocks: &BTreeMap<String, Vec<Block>>,
    default: MachineState,
) -> Result<MachineState, RestoreError> {
    if restored.is_empty() {
        if assignments
            .values()
            .any(|containers| !containers.is_empty())
        {
            return Err(RestoreError::EmptyMachineState);
        }
        return Ok(default);
    }
    let mut expected = default;
    for (pod, containers) in assignments {
        // A pod's blocks count only with container entries: those of a pod listed with
        // none are dropped at start (`StaticPolicy::restore_with_pods`), so counting them
        // would let a reservation nobody holds pass (upstream PR #141994, open).
        let of_pod = pod_blocks
            .get(pod)
            .filter(|blocks| !blocks.is_empty() && !containers.is_empty());
        let held: Vec<(&str, &Vec<Block>)> = match of_pod {
            Some(blocks) => vec![("", blocks)],
            None => containers.iter().map(|(c, b)| (c.as_str(), b)).collect(),
        };
        for (container, blocks) in held {
            for block in blocks {
                let mut requested = block.size;
                for node in &block.numa_affinity {
                    let Some(state) = expected.get_mut(node) else {
                        return Err(missing(pod, container, Missing::Node));
                    };
                    state.number_of_assignments += 1;
                    state.cells.clone_from(&block.numa_affinity);
                    let Some(table) = state.memory.get_mut(&block.resource) else {
                        return Err(missing(pod, container, Missing::Resource));
                    };
                    table.reserve(&mut requested);
                }
            }
        }
    }
    if !machine_states_equal(restored, &expected) {
        return Err(RestoreError::MachineStateDiffers);
    }
    Ok(restored.clone())
}

/// Upstream's `areMachineStatesEqual`.
fn machine_states_equal(stored: &MachineState, expected: &MachineState) -> bool {
    if !stored.keys().eq(expected.keys()) {
        return false;
    }
    stored.iter().all(|(id, node)| {
        let other = &expected[id];
        let sorted = |cells: &[usize]| {
            let mut cells = cells.to_vec();
            cells.sort_unstable();
            cells
        };
        node.number_of_assignments == other.number_of_assignments
            && sorted(&node.cells) == sorted(&other.cells)
            && node.memory.len() == other.memory.len()
            && node.memory.iter().all(|(resource, table)| {
                let Some(want) = other.memory.get(resource) else {
                    return false;
                };
                let group_sums = |state: &MachineState| {
                    let mut sums = (0u64, 0u64);
                    for cell in &node.cells {
                        let table = state.get(cell).and_then(|n| n.memory.get(resource))?;
                        sums.0 = sums.0.checked_add(table.free)?;
                        sums.1 = sums.1.checked_add(table.reserved)?;
                    }
                    Some(sums)
                };
                table.total == want.total
                    && table.system_reserved == want.system_reserved
                    && table.allocatable == want.allocatable
                    && group_sums(stored).is_some()
                    && group_sums(stored) == group_sums(expected)
            })
    })
}

/// What a block names that the machine does not have.
enum Missing {
    Node,
    Resource,
}

fn missing(pod: &str, container: &str, what: Missing) -> RestoreError {
    let (pod, container) = (pod.to_owned(), container.to_owned());
    match what {
        Missing::Node => RestoreError::UnknownNode { pod, container },
        Missing::Resource => RestoreError::UnknownResource { pod, container },
    }
}
