//! Restoring the machine state from a checkpoint: upstream's `validateState`.

use crate::error::RestoreError;
use crate::machine_state::{Assignments, MachineState};

/// The machine state to run with, given the checkpoint's `restored` state and
/// `assignments`, and `default` (the machine's state with nothing assigned, from
/// [`default_machine_state`](crate::default_machine_state)):
///
/// - no restored state: `default`, unless there are assignments
///   ([`RestoreError::EmptyMachineState`]);
/// - otherwise `default` with every block of `assignments` taken as upstream replays them
///   (each block's nodes in its order, each node's free memory used first, a node's
///   `cells` set to the block's nodes), which must equal `restored`
///   ([`RestoreError::MachineStateDiffers`]): memory added or removed, or reservations
///   changed since the checkpoint was written, refuse the state rather than guess.
pub fn restore_machine_state(
    restored: &MachineState,
    assignments: &Assignments,
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
        for (container, blocks) in containers {
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
                    if requested == 0 || table.free == 0 {
                        continue;
                    }
                    let taken = requested.min(table.free);
                    table.reserved += taken;
                    table.free -= taken;
                    requested -= taken;
                }
            }
        }
    }
    if expected != *restored {
        return Err(RestoreError::MachineStateDiffers);
    }
    Ok(expected)
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
