//! The static policy for pods whose resources are managed at pod level (KEP-5526, the
//! `PodLevelResourceManagers` gate, alpha in v1.36; upstream `policy_static.go`
//! `AllocatePod`, `validatePodScopeResources`, and the pod-level branches of
//! `getPodRequestedResources` / `getContainerRequestedResources`).
//!
//! The pod's budget is its pod-level memory and huge page requests, taken from the machine
//! once on the pod's nodes; the containers' blocks only partition it and never touch the
//! machine state: a regular init container gets its own request, or (none) the budget less
//! the sidecars before it; a sidecar keeps its request; app containers get theirs; every
//! other container gets the rest (the pod's shared pool). Only a container whose CPU and
//! memory requests equal their limits has its own request. Blocks are listed by resource
//! name (upstream walks a Go map, in random order).

use corral_topology::topologymanager::TopologyHint;
use corral_topology::{Container, Pod, PodLevelResources, QosClass};

use crate::error::{AllocateError, EmptyPodSharedPoolError};
use crate::hints::{MemoryHints, Requested};
use crate::machine_state::Block;
use crate::static_policy::{StaticPolicy, requested};

/// The pod-level requests of memory and huge pages (above zero).
fn pod_budget(pod: &Pod) -> Requested {
    let Some(resources) = &pod.resources else {
        return Requested::new();
    };
    let mut container = Container::new("");
    container.resources.requests = resources.requests.clone();
    requested(&container)
        .into_iter()
        .filter(|(_, size)| *size > 0)
        .collect()
}

/// Adds `size` bytes of `resource` to `sums`, saturating: a few containers of up to
/// `i64::MAX` bytes each overflowed `u64` ("attempt to add with overflow"; Go's `uint64`
/// wraps). A saturated sum is more than any pod budget, so the pod is refused.
fn add(sums: &mut Requested, resource: String, size: u64) {
    let sum = sums.entry(resource).or_default();
    *sum = sum.saturating_add(size);
}

/// Blocks of `sizes` (those above zero) on `bits`.
fn blocks(bits: &[usize], sizes: &Requested) -> Vec<Block> {
    sizes
        .iter()
        .filter(|(_, size)| **size > 0)
        .map(|(resource, &size)| Block {
            numa_affinity: bits.to_vec(),
            resource: resource.clone(),
            size,
        })
        .collect()
}

impl StaticPolicy {
    /// How pods with pod-level resources are treated (the `PodLevelResourceManagers` gate).
    pub fn set_pod_level_resources(&mut self, mode: PodLevelResources) {
        self.pod_level = mode;
    }

    /// The pods' pod-level blocks (pods managed at pod level).
    pub fn pod_blocks(&self) -> &std::collections::BTreeMap<String, Vec<Block>> {
        &self.pod_blocks
    }

    /// Whether memory is left to the pod's own shares: not Guaranteed, or pod-level
    /// resources while the gate is off (v1.36's default).
    pub(crate) fn skipped(&self, pod: &Pod) -> bool {
        pod.qos_class() != QosClass::Guaranteed
            || (pod.has_pod_level_resources() && !pod.is_managed_at_pod_level(self.pod_level))
    }

    /// Upstream `getContainerRequestedResources`: nothing for a container of a pod managed
    /// at pod level unless it is equivalent to Guaranteed.
    pub(crate) fn requested_of(&self, pod: &Pod, container: &Container) -> Requested {
        if pod.is_managed_at_pod_level(self.pod_level) && !container.is_equivalent_guaranteed() {
            Requested::new()
        } else {
            requested(container)
        }
    }

    /// Upstream `getPodRequestedResources`: the pod-level requests for a pod managed at pod
    /// level, else [`pod_requested`](crate::pod_requested).
    pub(crate) fn pod_requested_of(&self, pod: &Pod) -> Requested {
        if pod.is_managed_at_pod_level(self.pod_level) {
            pod_budget(pod)
        } else {
            crate::pod_requested(pod)
        }
    }

    /// For a pod managed at pod level whose spec leaves containers without memory: one
    /// empty hint list per requested resource (the pod cannot be admitted).
    pub(crate) fn refuse_pod_scope(&self, pod: &Pod, requested: &Requested) -> Option<MemoryHints> {
        if !pod.is_managed_at_pod_level(self.pod_level) {
            return None;
        }
        self.validate_pod_scope_resources(pod).err()?;
        Some(requested.keys().map(|r| (r.clone(), Vec::new())).collect())
    }

    /// Upstream `validatePodScopeResources`, with its messages (resources checked in name
    /// order where upstream walks a Go map): whether the pod's spec leaves memory for every
    /// container that needs the pod's shared pool. Its error is what
    /// [`AllocateError::EmptyPodSharedPool`] carries, which [`allocate_pod`](Self::allocate_pod)
    /// returns; it does not look at the pod's QoS class.
    pub fn validate_pod_scope_resources(&self, pod: &Pod) -> Result<(), EmptyPodSharedPoolError> {
        let budget = pod_budget(pod);
        let mut shared_long_running = false;
        let mut long_running = Requested::new();
        let held = |long_running: &Requested, r: &str| long_running.get(r).copied().unwrap_or(0);
        for container in &pod.init_containers {
            let own = self.requested_of(pod, container);
            if !container.is_restartable() {
                if !own.is_empty() {
                    for (resource, total) in &budget {
                        let pool = total.saturating_sub(held(&long_running, resource));
                        let want = own.get(resource).copied().unwrap_or(0);
                        if want > pool {
                            return Err(EmptyPodSharedPoolError::InitContainerTooLarge {
                                resource: resource.clone(),
                                requested: want,
                                available: pool,
                            });
                        }
                    }
                } else if let Some(resource) = budget
                    .iter()
                    .find(|(r, total)| held(&long_running, r) >= **total)
                    .map(|(r, _)| r)
                {
                    return Err(EmptyPodSharedPoolError::NoneForSharedInitContainers {
                        resource: resource.clone(),
                    });
                }
                continue;
            }
            if own.is_empty() {
                shared_long_running = true;
            }
            for (resource, size) in own {
                add(&mut long_running, resource, size);
            }
        }
        for container in &pod.containers {
            let own = self.requested_of(pod, container);
            if own.is_empty() {
                shared_long_running = true;
            }
            for (resource, size) in own {
                add(&mut long_running, resource, size);
            }
        }
        if shared_long_running
            && let Some(resource) = budget
                .iter()
                .find(|(r, total)| held(&long_running, r) >= **total)
                .map(|(r, _)| r)
        {
            return Err(EmptyPodSharedPoolError::NoneForSharedContainers {
                resource: resource.clone(),
            });
        }
        Ok(())
    }

    /// Upstream `AllocatePod` (see the module docs); nothing for a pod that is not
    /// Guaranteed. On error nothing changes.
    pub fn allocate_pod(&mut self, pod: &Pod, affinity: TopologyHint) -> Result<(), AllocateError> {
        if pod.qos_class() != QosClass::Guaranteed || self.pod_blocks.contains_key(&pod.uid) {
            return Ok(());
        }
        let budget = pod_budget(pod);
        self.validate_pod_scope_resources(pod)?;
        let bits = self.resolve_mask(&pod.uid, &budget, affinity)?.get_bits();
        let mut partition: Vec<(&str, Vec<Block>)> = Vec::new();
        let mut sidecars = Requested::new();
        let less_sidecars = |sidecars: &Requested| -> Requested {
            budget
                .iter()
                .map(|(r, total)| {
                    let used = sidecars.get(r).copied().unwrap_or(0);
                    (r.clone(), total.saturating_sub(used))
                })
                .collect()
        };
        for container in &pod.init_containers {
            let own = self.requested_of(pod, container);
            if own.is_empty() {
                if !container.is_restartable() {
                    partition.push((&container.name, blocks(&bits, &less_sidecars(&sidecars))));
                }
                continue;
            }
            partition.push((&container.name, blocks(&bits, &own)));
            if container.is_restartable() {
                for (resource, size) in own {
                    add(&mut sidecars, resource, size);
                }
            }
        }
        let mut pool = less_sidecars(&sidecars);
        for container in &pod.containers {
            let own = self.requested_of(pod, container);
            if own.is_empty() {
                continue;
            }
            for (resource, size) in &own {
                let left = pool.entry(resource.clone()).or_default();
                *left = left.saturating_sub(*size);
            }
            partition.push((&container.name, blocks(&bits, &own)));
        }
        let shared = blocks(&bits, &pool);
        for (resource, &size) in &budget {
            self.take(&bits, resource, size);
        }
        let containers = self.assignments.entry(pod.uid.clone()).or_default();
        for (_, container) in pod.all_containers() {
            let own = partition
                .iter()
                .find(|(name, _)| *name == container.name)
                .map_or_else(|| shared.clone(), |(_, blocks)| blocks.clone());
            containers.insert(container.name.clone(), own);
        }
        let pod_blocks = budget
            .iter()
            .map(|(resource, &size)| Block {
                numa_affinity: bits.clone(),
                resource: resource.clone(),
                size,
            })
            .collect();
        self.pod_blocks.insert(pod.uid.clone(), pod_blocks);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine_state::MEMORY;
    use corral_topology::ResourceRequirements;

    fn container(name: &str, memory: Option<i64>) -> Container {
        let mut c = Container::new(name);
        if let Some(memory) = memory {
            for list in [&mut c.resources.requests, &mut c.resources.limits] {
                list.cpu_millis = Some(1000);
                list.memory_bytes = Some(memory);
            }
        }
        c
    }

    fn pod(memory: i64, app: Vec<Container>) -> Pod {
        let mut resources = ResourceRequirements::default();
        for list in [&mut resources.requests, &mut resources.limits] {
            list.cpu_millis = Some(4000);
            list.memory_bytes = Some(memory);
        }
        Pod {
            uid: "p".into(),
            containers: app,
            resources: Some(resources),
            ..Pod::default()
        }
    }

    #[test]
    fn an_empty_shared_pool_is_refused_with_upstreams_message() {
        let mut policy = StaticPolicy::new(crate::machine_state::MachineState::new());
        policy.set_pod_level_resources(PodLevelResources::Managed);
        let full = pod(
            2 << 30,
            vec![container("a", Some(2 << 30)), container("b", None)],
        );
        assert_eq!(
            policy
                .validate_pod_scope_resources(&full)
                .unwrap_err()
                .to_string(),
            format!(
                "pod rejected, sum of exclusive container {MEMORY} requests equals pod budget, leaving no memory for shared containers"
            )
        );
        let room = pod(
            3 << 30,
            vec![container("a", Some(2 << 30)), container("b", None)],
        );
        assert_eq!(policy.validate_pod_scope_resources(&room), Ok(()));
    }

    /// Three containers of `i64::MAX` bytes each sum past `u64::MAX`: the sum used to panic
    /// ("attempt to add with overflow"); saturated, it is more than the budget.
    #[test]
    fn requests_past_u64_are_refused_without_overflow() {
        let mut policy = StaticPolicy::new(crate::machine_state::MachineState::new());
        policy.set_pod_level_resources(PodLevelResources::Managed);
        let mut apps: Vec<Container> = (0..3)
            .map(|i| container(&format!("a{i}"), Some(i64::MAX)))
            .collect();
        apps.push(container("shared", None));
        let full = pod(i64::MAX, apps);
        assert_eq!(
            policy
                .validate_pod_scope_resources(&full)
                .unwrap_err()
                .to_string(),
            format!(
                "pod rejected, sum of exclusive container {MEMORY} requests equals pod budget, leaving no memory for shared containers"
            )
        );
        let mut sidecars: Vec<Container> = (0..3)
            .map(|i| {
                let mut c = container(&format!("s{i}"), Some(i64::MAX));
                c.restart_policy = Some(corral_topology::ContainerRestartPolicy::Always);
                c
            })
            .collect();
        sidecars.push(container("init", Some(1)));
        let mut starved = pod(i64::MAX, vec![container("app", Some(1))]);
        starved.init_containers = sidecars;
        assert!(policy.validate_pod_scope_resources(&starved).is_err());
    }
}
