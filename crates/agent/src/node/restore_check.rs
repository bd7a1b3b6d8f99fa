//! At start, after every manager restored its state file, the state files and the pod
//! records (`corral/pods/<uid>.json`) must agree both ways:
//! - every admitted pod's holdings (recorded in its pod file at admission) are still in the
//!   managers' state — its exclusive CPUs in `cpu_manager_state`, its memory in
//!   `memory_manager_state`, its devices in `kubelet_internal_checkpoint`, its claims in
//!   `dra_manager_state`. A state file that was lost, truncated to an older copy or
//!   replaced would otherwise make the agent hand the same CPUs and devices out twice;
//! - every pod a state file gives something to (CPUs of its containers, memory blocks,
//!   devices, a prepared claim) has a pod record. A lost record would otherwise make the
//!   agent forget the pod and free what its running containers use. Pods admitted with
//!   nothing exclusive have no entries, so no record is asked for them.
//!
//! Either way the agent refuses to start, naming the file, the pod and the remedy — except
//! for a pod without a record after a replay of the state journal, which is a crash's
//! leftover and is released (see [`check`]). A first start (no state files, no pod files)
//! has nothing to check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use corral_checkpoint::{Checkpoint, DeviceManagerCheckpoint, DeviceManagerCheckpointV1};
use corral_topology::{Container, ContainerKind, CpuSet, Pod};

use super::{HeldMemory, Holding, Node, pod_claims};

/// Why the restored state is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RestoreCheckError {
    /// A state file lacks what an admitted pod holds.
    #[error(transparent)]
    Inconsistent(Box<InconsistentState>),
    /// A state file gives something to a pod corral has no record of.
    #[error(transparent)]
    Unrecorded(Box<UnrecordedPod>),
}

/// A restored state file gives something to a pod whose record is gone.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "{file}: pod {pod} holds {what}, but corral has no record of the pod ({record} is missing); \
     the record was lost or removed. Restore {record}, or — once the pod's containers are gone \
     — remove the pod's entries from {file} to start without the pod"
)]
pub(crate) struct UnrecordedPod {
    /// The state file that names the pod.
    pub(crate) file: PathBuf,
    /// The pod's uid.
    pub(crate) pod: String,
    /// Where its record belongs under `corral/pods/`.
    pub(crate) record: PathBuf,
    /// What the file gives it, e.g. `exclusive CPUs 2-3 (container "c0")`.
    pub(crate) what: String,
}

/// A restored state file disagrees with what corral admitted.
#[derive(Debug, thiserror::Error)]
#[error(
    "{file}: {what} of pod {pod} ({namespace}/{name}), admitted by corral and recorded in {record}; \
     the state file was lost or replaced. Restore the file, or — once the pod's containers are \
     gone — remove {record} and the pod's entries in the other state files to start without \
     the pod"
)]
pub(crate) struct InconsistentState {
    /// The state file that lacks the pod's holdings.
    pub(crate) file: PathBuf,
    /// The pod's uid.
    pub(crate) pod: String,
    /// Its namespace.
    pub(crate) namespace: String,
    /// Its name.
    pub(crate) name: String,
    /// The pod's own file under `corral/pods/`.
    pub(crate) record: PathBuf,
    /// What is missing or different, e.g. `no exclusive CPUs for container "c" (recorded: 2-3)`.
    pub(crate) what: String,
}

/// What `container` holds right now, as [`Holding`] records it.
pub(super) fn holding_of(
    node: &Node,
    pod: &Pod,
    kind: ContainerKind,
    container: &Container,
) -> Holding {
    let long_running = kind != ContainerKind::Init;
    let exclusive_cpus = long_running
        .then(|| node.cpu.exclusive_cpus(&pod.uid, &container.name))
        .filter(|cpus| !cpus.is_empty())
        .map(|cpus| cpus.to_string());
    let memory = node
        .memory
        .container_memory(&pod.uid, &container.name)
        .into_iter()
        .filter(|_| long_running)
        .map(|block| {
            let held = HeldMemory {
                size: block.size,
                numa_affinity: block.numa_affinity,
            };
            (block.resource, held)
        })
        .collect();
    let devices = node
        .devices
        .container_devices(&pod.uid, &container.name)
        .into_iter()
        .map(|(resource, allocation)| (resource, allocation.device_ids().into_iter().collect()))
        .collect();
    Holding {
        exclusive_cpus,
        devices,
        memory,
    }
}

/// Check the restored managers and the pod records against each other, both ways.
///
/// A pod a state file names without a record is refused when no journal was replayed at
/// this start (a first start, a clean stop, or the journal removed): the record was lost.
/// After a replay the journal is the authority on the records too — a record removed behind
/// corral's back is written again — so such a pod is an admission (or a release) a crash
/// cut short: a commit of a concurrent admission can carry its first writes, never its
/// answer. What it holds is released, as the managers' stale-state removal would at the
/// next admission, so that the files agree before the journal starts again.
pub(super) fn check(node: &Node) -> Result<(), RestoreCheckError> {
    holdings_are_restored(node).map_err(RestoreCheckError::Inconsistent)?;
    let unrecorded = unrecorded_owners(node);
    let Some(first) = unrecorded.first() else {
        return Ok(());
    };
    if !node.journal.path().exists() {
        return Err(RestoreCheckError::Unrecorded(Box::new(first.clone())));
    }
    release_unrecorded(node, &unrecorded);
    Ok(())
}

/// Release what `unrecorded` pods hold (after a replay, see [`check`]); a claim stays
/// prepared (unpreparing it is its driver's call), which is logged.
fn release_unrecorded(node: &Node, unrecorded: &[UnrecordedPod]) {
    for pod in unrecorded {
        tracing::warn!(podUID = %pod.pod, file = %pod.file.display(), holds = %pod.what,
            "a pod without a record after the journal's replay: an admission or release a crash cut short, never answered; releasing what it holds");
    }
    let active = corral_cpumgr::PodSource::active_pods(node.pods.as_ref());
    if let Err(err) = node.cpu.remove_stale_state(&active, None) {
        tracing::error!(err = %crate::error_text::error_chain(&err), "releasing the CPUs of pods without a record failed");
    }
    if let Err(err) = node.memory.remove_stale_state(&active) {
        tracing::error!(err = %crate::error_text::error_chain(&err), "releasing the memory of pods without a record failed");
    }
    let recorded = node.pods.uids();
    let device_file = device_checkpoint(node);
    for pod in device_owners(&device_file).into_keys() {
        if !recorded.contains(&pod)
            && let Err(err) = node.devices.remove_pod(&pod)
        {
            tracing::error!(podUID = %pod, err = %crate::error_text::error_chain(&err), "releasing the devices of a pod without a record failed");
        }
    }
    for left in unrecorded_owners(node) {
        tracing::warn!(podUID = %left.pod, file = %left.file.display(), holds = %left.what,
            "still held by a pod without a record");
    }
}

/// Every admitted pod's holdings are in the restored managers.
fn holdings_are_restored(node: &Node) -> Result<(), Box<InconsistentState>> {
    let layout_state = &node.state_dir;
    let cpu_file = layout_state.join("cpu_manager_state");
    let device_file = device_checkpoint(node);
    let dra_file = layout_state.join("dra_manager_state");
    let memory_file = layout_state.join("memory_manager_state");
    for admitted in node.pods.all() {
        let pod = &admitted.pod;
        let refuse = |file: &PathBuf, what: String| {
            Box::new(InconsistentState {
                file: file.clone(),
                pod: pod.uid.clone(),
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                record: node.pods.record_path(&pod.uid),
                what,
            })
        };
        if let Some(holdings) = &admitted.record.holdings {
            for (name, recorded) in holdings {
                let Some((kind, container)) = pod.all_containers().find(|(_, c)| &c.name == name)
                else {
                    continue;
                };
                if container_was_removed(&admitted.record, name) {
                    continue;
                }
                let now = holding_of(node, pod, kind, container);
                if let Some(cpus) = &recorded.exclusive_cpus
                    && now.exclusive_cpus.as_deref() != Some(cpus.as_str())
                {
                    let held = now.exclusive_cpus.map_or_else(
                        || "none".to_owned(),
                        |c| CpuSet::parse(&c).map_or(c, |s| s.to_string()),
                    );
                    return Err(refuse(
                        &cpu_file,
                        format!(
                            "container {name:?} should hold exclusive CPUs {cpus}, the file gives it {held}"
                        ),
                    ));
                }
                if !recorded.memory.is_empty() && recorded.memory != now.memory {
                    let show = |m: &std::collections::BTreeMap<String, HeldMemory>| {
                        let blocks: Vec<String> = m
                            .iter()
                            .map(|(resource, held)| {
                                format!("{resource}={}@{:?}", held.size, held.numa_affinity)
                            })
                            .collect();
                        format!("[{}]", blocks.join(", "))
                    };
                    return Err(refuse(
                        &memory_file,
                        format!(
                            "container {name:?} should hold memory {}, the file gives it {}",
                            show(&recorded.memory),
                            show(&now.memory)
                        ),
                    ));
                }
                for (resource, ids) in &recorded.devices {
                    let held = now.devices.get(resource).cloned().unwrap_or_default();
                    if &held != ids {
                        return Err(refuse(
                            &device_file,
                            format!(
                                "container {name:?} should hold {resource} devices [{}], the file gives it [{}]",
                                ids.join(", "),
                                held.join(", ")
                            ),
                        ));
                    }
                }
            }
        }
        if let Ok(claims) = pod_claims(pod) {
            for claim in claims.claims.iter().filter_map(|c| c.claim_name.as_deref()) {
                let held = node
                    .dra
                    .claim_info(&pod.namespace, claim)
                    .is_some_and(|info| info.has_pod_reference(&pod.uid));
                if !held {
                    return Err(refuse(
                        &dra_file,
                        format!(
                            "ResourceClaim {}/{claim} is not prepared for it",
                            pod.namespace
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A container whose removal the agent recorded keeps no CPUs.
fn container_was_removed(record: &super::PodRecord, name: &str) -> bool {
    record.removed_containers.contains(name)
}

/// The pods the restored managers give something to that have no record: one
/// [`UnrecordedPod`] each (what the first file in the order CPUs, memory, devices, claims
/// gives it).
fn unrecorded_owners(node: &Node) -> Vec<UnrecordedPod> {
    let recorded = node.pods.uids();
    let mut found: BTreeMap<String, UnrecordedPod> = BTreeMap::new();
    let mut note = |file: &Path, pod: &str, what: String| {
        if !recorded.contains(pod) && !found.contains_key(pod) {
            let unrecorded = UnrecordedPod {
                file: file.to_path_buf(),
                pod: pod.to_owned(),
                record: node.pods.record_path(pod),
                what,
            };
            found.insert(pod.to_owned(), unrecorded);
        }
    };
    let cpu_file = node.state_dir.join("cpu_manager_state");
    let cpu = node.cpu.state();
    for (pod, containers) in cpu.assignments() {
        if let Some((name, cpus)) = containers.iter().next() {
            note(
                &cpu_file,
                pod,
                format!("exclusive CPUs {cpus} (container {name:?})"),
            );
        }
    }
    for (pod, cpus) in cpu.pod_cpu_sets() {
        note(&cpu_file, pod, format!("pod-level CPUs {cpus}"));
    }
    let memory_file = node.state_dir.join("memory_manager_state");
    for (pod, containers) in node.memory.assignments() {
        if let Some((name, blocks)) = containers.iter().find(|(_, b)| !b.is_empty()) {
            let blocks: Vec<String> = blocks
                .iter()
                .map(|b| format!("{}={}@{:?}", b.resource, b.size, b.numa_affinity))
                .collect();
            let what = format!("memory [{}] (container {name:?})", blocks.join(", "));
            note(&memory_file, &pod, what);
        }
    }
    let device_file = device_checkpoint(node);
    for (pod, (container, resource, ids)) in device_owners(&device_file) {
        let what = format!(
            "{resource} devices [{}] (container {container:?})",
            ids.join(", ")
        );
        note(&device_file, &pod, what);
    }
    let dra_file = node.state_dir.join("dra_manager_state");
    for claim in node.dra.claim_infos() {
        for pod in claim.pod_uids() {
            let what = format!(
                "ResourceClaim {}/{} prepared for it",
                claim.namespace(),
                claim.name()
            );
            note(&dra_file, pod, what);
        }
    }
    // The first file's pod first: a refusal names the first problem in file order.
    let mut found: Vec<UnrecordedPod> = found.into_values().collect();
    let order = [&cpu_file, &memory_file, &device_file, &dra_file];
    found.sort_by_key(|u| order.iter().position(|f| **f == u.file));
    found
}

/// `kubelet_internal_checkpoint` in the device manager's checkpoint directory.
fn device_checkpoint(node: &Node) -> PathBuf {
    node.devices
        .config()
        .checkpoint_dir
        .join("kubelet_internal_checkpoint")
}

/// The pods `kubelet_internal_checkpoint` gives devices to (`PodDeviceEntries`), each with
/// one of its entries: (container, resource, device ids). The device manager restored the
/// file just before and has not rewritten it: read as it did (the current format, or the
/// pre-1.20 one); nothing when there is no file to read.
fn device_owners(file: &Path) -> BTreeMap<String, (String, String, Vec<String>)> {
    let Ok(bytes) = std::fs::read(file) else {
        return BTreeMap::new();
    };
    let checkpoint = DeviceManagerCheckpoint::decode(&bytes)
        .or_else(|_| DeviceManagerCheckpointV1::decode(&bytes).map(|v1| v1.to_current()));
    let Ok(checkpoint) = checkpoint else {
        return BTreeMap::new();
    };
    let mut owners = BTreeMap::new();
    for entry in checkpoint.pod_device_entries.iter().flatten() {
        let ids: Vec<String> = entry
            .device_ids
            .iter()
            .flatten()
            .flat_map(|(_, ids)| ids.iter().flatten().cloned())
            .collect();
        if ids.is_empty() {
            continue;
        }
        owners.entry(entry.pod_uid.clone()).or_insert_with(|| {
            (
                entry.container_name.clone(),
                entry.resource_name.clone(),
                ids,
            )
        });
    }
    owners
}
