//! [`restore`]: read the persisted state back as upstream's `restoreState` does — every
//! version a kubelet up to 1.37 writes, newest first (v4, v3, v2, then v1 with its entries
//! migrated through the runtime's container list) — with two deliberate differences.
//! A v3/v4 file's pod-level assignments (which corral does not make) stop the start
//! instead of being dropped. And a checkpoint written by the `none` policy, restored by the `static` policy,
//! is migrated (it can hold no exclusive assignment) instead of refusing to start — upstream
//! makes people delete `cpu_manager_state` by hand for that. Every other failure names the
//! file and the exact remedy.

use std::collections::BTreeMap;

use corral_checkpoint::{
    CpuManagerCheckpoint, CpuManagerCheckpointV3, CpuManagerState, RestoreOrder,
    restore_cpu_manager_state_as,
};
use corral_topology::{CpuSet, CpuSetParseError};

use corral_checkpoint::StateFile;

use super::file::{self, StateIoError};
use super::memory::{ContainerCpuAssignments, CpuState, CpuStateFileVersion};

/// What [`restore`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The state read (empty when there was no checkpoint or it was migrated).
    pub state: CpuState,
    /// `true` when no checkpoint existed (a fresh one was written).
    pub fresh: bool,
    /// The policy the checkpoint was written by, when corral migrated it to the configured
    /// policy (only `none` → `static`).
    pub migrated_from: Option<String>,
}

/// Why the persisted state could not be restored. Each message names the file and what to
/// do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// The file could not be read, is not a CPU manager checkpoint, or fails its checksum.
    #[error(
        "could not restore CPU manager state from {file}; the file is unreadable or damaged: drain this node, delete {file} and restart"
    )]
    Read {
        /// The checkpoint file.
        file: String,
        /// What failed.
        #[source]
        source: Box<StateIoError>,
    },
    /// A v1 checkpoint names a container the runtime does not know (upstream's message).
    #[error(
        "could not restore CPU manager state from {file}: error migrating v1 checkpoint state to v2 checkpoint state: containerID '{container_id}' not found in initial containers list; drain this node, delete {file} and restart"
    )]
    UnknownV1Container {
        /// The checkpoint file.
        file: String,
        /// The unresolved container id.
        container_id: String,
    },
    /// The checkpoint was written by another policy (upstream's message).
    #[error(
        "could not restore CPU manager state from {file}: configured policy {configured:?} differs from state checkpoint policy {stored:?}; either configure the {stored:?} policy again, or drain this node, delete {file} and restart with the {configured:?} policy"
    )]
    PolicyMismatch {
        /// The checkpoint file.
        file: String,
        /// The policy configured now.
        configured: String,
        /// The policy that wrote the checkpoint.
        stored: String,
    },
    /// The default CPU set does not parse (upstream's message).
    #[error(
        "could not restore CPU manager state from {file}: could not parse default cpu set {text:?}: {}; the file is damaged: drain this node, delete {file} and restart",
        go_parse_message(source)
    )]
    DefaultCpuSet {
        /// The checkpoint file.
        file: String,
        /// The text.
        text: String,
        /// The parse error.
        #[source]
        source: Box<CpuSetParseError>,
    },
    /// A container's CPU set does not parse (upstream's message).
    #[error(
        "could not restore CPU manager state from {file}: could not parse cpuset {text:?} for container {container:?} in pod {pod:?}: {}; the file is damaged: drain this node, delete {file} and restart",
        go_parse_message(source)
    )]
    ContainerCpuSet {
        /// The checkpoint file.
        file: String,
        /// Pod UID.
        pod: String,
        /// Container name.
        container: String,
        /// The text.
        text: String,
        /// The parse error.
        #[source]
        source: Box<CpuSetParseError>,
    },
    /// A v3 or v4 checkpoint holds pod-level CPU assignments (KEP-5526) while
    /// `PodLevelResourceManagers` is off: restoring without them would hand those CPUs to
    /// other pods.
    #[error(
        "could not restore CPU manager state from {file}: it holds pod-level CPU assignments for pods {pods:?}, which PodLevelResourceManagers (off) does not restore; turn the feature gate on again, or drain this node, delete {file} and restart"
    )]
    PodLevelAssignments {
        /// The checkpoint file.
        file: String,
        /// Pods with pod-level assignments.
        pods: Vec<String>,
    },
    /// A pod's pod-level CPU set does not parse.
    #[error(
        "could not restore CPU manager state from {file}: could not parse the pod-level cpuset {text:?} of pod {pod:?}: {}; the file is damaged: drain this node, delete {file} and restart",
        go_parse_message(source)
    )]
    PodCpuSet {
        /// The checkpoint file.
        file: String,
        /// Pod UID.
        pod: String,
        /// The text.
        text: String,
        /// The parse error.
        #[source]
        source: Box<CpuSetParseError>,
    },
    /// The fresh or migrated state could not be written.
    #[error(
        "could not write the initial CPU manager state to {file}; check that the state directory is writable and has space, then restart"
    )]
    Write {
        /// The checkpoint file.
        file: String,
        /// What failed.
        #[source]
        source: Box<StateIoError>,
    },
}

/// The text upstream's `cpuset.Parse` error has (`strconv.Atoi: parsing "1.3": invalid
/// syntax`), so restore errors read as a kubelet's do.
fn go_parse_message(e: &CpuSetParseError) -> String {
    match e {
        CpuSetParseError::InvalidNumber { number, .. } => {
            format!("strconv.Atoi: parsing {number:?}: invalid syntax")
        }
        CpuSetParseError::OutOfRange { number, .. } => {
            format!("strconv.Atoi: parsing {number:?}: value out of range")
        }
        other => other.to_string(),
    }
}

/// Restore the state for `policy_name` from `state_file` (upstream `NewCheckpointState` +
/// `restoreState`). `container_ref` resolves a container id to (pod UID, container name) for
/// v1 checkpoints (upstream: the runtime's initial container list). With no checkpoint, an
/// empty one is written.
pub fn restore(
    state_file: &StateFile,
    policy_name: &str,
    container_ref: &dyn Fn(&str) -> Option<(String, String)>,
) -> Result<Restored, RestoreError> {
    restore_writing(
        state_file,
        policy_name,
        container_ref,
        CpuStateFileVersion::V2,
    )
}

/// [`restore`], writing a fresh or migrated file in `version`.
pub fn restore_writing(
    state_file: &StateFile,
    policy_name: &str,
    container_ref: &dyn Fn(&str) -> Option<(String, String)>,
    version: CpuStateFileVersion,
) -> Result<Restored, RestoreError> {
    let file = state_file.to_string();
    let Some(bytes) = file::load(state_file).map_err(|source| RestoreError::Read {
        file: file.clone(),
        source: Box::new(source),
    })?
    else {
        let state = CpuState::default();
        write(state_file, &state, policy_name, version, &file)?;
        return Ok(Restored {
            state,
            fresh: true,
            migrated_from: None,
        });
    };
    let mut pod_cpus = BTreeMap::new();
    let checkpoint = match restore_cpu_manager_state_as(&bytes, RestoreOrder::Any) {
        Ok(CpuManagerState::V2(v2)) => v2,
        Ok(CpuManagerState::V3(v3)) => split_pod_entries(v3, version, &file, &mut pod_cpus)?,
        Ok(CpuManagerState::V4(v4)) => split_pod_entries(v4.0, version, &file, &mut pod_cpus)?,
        Ok(CpuManagerState::V1(v1)) => v1.to_current(container_ref).map_err(|_| {
            let container_id = v1
                .entries
                .iter()
                .flatten()
                .map(|(id, _)| id)
                .find(|id| container_ref(id).is_none())
                .cloned()
                .unwrap_or_default();
            RestoreError::UnknownV1Container {
                file: file.clone(),
                container_id,
            }
        })?,
        Ok(other) => {
            // A version this corral does not know yet.
            return Err(RestoreError::Read {
                file: file.clone(),
                source: Box::new(StateIoError {
                    location: file,
                    source: corral_checkpoint::CheckpointError::UnknownFormat {
                        path: None,
                        why: format!("cpu_manager_state {} is not supported", other.version()),
                    },
                }),
            });
        }
        Err(e) => {
            return Err(RestoreError::Read {
                file: file.clone(),
                source: Box::new(StateIoError {
                    location: file,
                    source: e,
                }),
            });
        }
    };
    if checkpoint.policy_name != policy_name {
        let no_entries = checkpoint
            .entries
            .iter()
            .flatten()
            .all(|(_, containers)| containers.as_ref().is_none_or(|c| c.is_empty()));
        if checkpoint.policy_name == "none" && policy_name == "static" && no_entries {
            let state = CpuState::default();
            write(state_file, &state, policy_name, version, &file)?;
            return Ok(Restored {
                state,
                fresh: false,
                migrated_from: Some(checkpoint.policy_name),
            });
        }
        return Err(RestoreError::PolicyMismatch {
            file,
            configured: policy_name.to_owned(),
            stored: checkpoint.policy_name,
        });
    }
    let mut state = parse(&checkpoint, &file)?;
    for (pod, text) in pod_cpus {
        let cpus = text.parse().map_err(|source| RestoreError::PodCpuSet {
            file: file.clone(),
            pod: pod.clone(),
            text: text.clone(),
            source: Box::new(source),
        })?;
        state.set_pod_cpu_set(&pod, cpus);
    }
    Ok(Restored {
        state,
        fresh: false,
        migrated_from: None,
    })
}

/// The v2 content of a v3 (or v4) checkpoint; its pod-level assignments go to
/// `pod_cpus` when `version` is v3 (the gate on) and must be absent otherwise.
fn split_pod_entries(
    v3: CpuManagerCheckpointV3,
    version: CpuStateFileVersion,
    file: &str,
    pod_cpus: &mut BTreeMap<String, String>,
) -> Result<CpuManagerCheckpoint, RestoreError> {
    let held: BTreeMap<String, String> = v3
        .pod_entries
        .into_iter()
        .flatten()
        .filter(|(_, entry)| !entry.cpu_set.is_empty())
        .map(|(pod, entry)| (pod, entry.cpu_set))
        .collect();
    if version != CpuStateFileVersion::V3 && !held.is_empty() {
        return Err(RestoreError::PodLevelAssignments {
            file: file.to_owned(),
            pods: held.into_keys().collect(),
        });
    }
    pod_cpus.extend(held);
    Ok(CpuManagerCheckpoint {
        policy_name: v3.policy_name,
        default_cpu_set: v3.default_cpu_set,
        entries: v3.entries,
    })
}

fn write(
    state_file: &StateFile,
    state: &CpuState,
    policy_name: &str,
    version: CpuStateFileVersion,
    file: &str,
) -> Result<(), RestoreError> {
    file::stage(state_file, &state.to_file(policy_name, version)).map_err(|source| {
        RestoreError::Write {
            file: file.to_owned(),
            source: Box::new(source),
        }
    })
}

fn parse(checkpoint: &CpuManagerCheckpoint, file: &str) -> Result<CpuState, RestoreError> {
    let default: CpuSet =
        checkpoint
            .default_cpu_set
            .parse()
            .map_err(|source| RestoreError::DefaultCpuSet {
                file: file.to_owned(),
                text: checkpoint.default_cpu_set.clone(),
                source: Box::new(source),
            })?;
    let mut assignments = ContainerCpuAssignments::new();
    for (pod, containers) in checkpoint.entries.iter().flatten() {
        let parsed = assignments.entry(pod.clone()).or_default();
        for (container, text) in containers.iter().flatten() {
            let cpus = text
                .parse()
                .map_err(|source| RestoreError::ContainerCpuSet {
                    file: file.to_owned(),
                    pod: pod.clone(),
                    container: container.clone(),
                    text: text.clone(),
                    source: Box::new(source),
                })?;
            parsed.insert(container.clone(), cpus);
        }
    }
    Ok(CpuState::new(default, assignments))
}
