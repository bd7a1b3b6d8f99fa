//! At start, after every manager restored its state file: every admitted pod's holdings
//! (recorded in its pod file at admission) must still be in the managers' state — its
//! exclusive CPUs in `cpu_manager_state`, its memory in `memory_manager_state`, its devices
//! in `kubelet_internal_checkpoint`, its claims in `dra_manager_state`. A state file that was lost, truncated to an older copy or
//! replaced would otherwise make the agent hand the same CPUs and devices out twice; it
//! refuses to start instead, naming the file, the pod and the remedy. A first start (no pod
//! files) has nothing to check.

use std::path::PathBuf;

use corral_topology::{Container, ContainerKind, CpuSet, Pod};

use super::{HeldMemory, Holding, Node, pod_claims};

/// A restored state file disagrees with what corral admitted.
#[derive(Debug, thiserror::Error)]
#[error(
    "{file}: {what} of pod {pod} ({namespace}/{name}), admitted by corral and recorded in {record}; \
     the state file was lost or replaced. Restore the file, or — once the pod's containers are \
     gone — remove {record} to start without the pod"
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

/// Check every admitted pod against the restored managers.
pub(super) fn check(node: &Node) -> Result<(), Box<InconsistentState>> {
    let layout_state = &node.state_dir;
    let cpu_file = layout_state.join("cpu_manager_state");
    let device_file = node
        .devices
        .config()
        .checkpoint_dir
        .join("kubelet_internal_checkpoint");
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
                record: node.pods.file_of(&pod.uid),
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
