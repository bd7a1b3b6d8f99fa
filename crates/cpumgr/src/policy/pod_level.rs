//! The static policy for pods whose resources are managed at pod level (KEP-5526, the
//! `PodLevelResourceManagers` gate, alpha in v1.36; upstream `policy_static.go`
//! `AllocatePod`, `validatePodScopeResources`, and the pod-level branches of
//! `guaranteedCPUs` / `podGuaranteedCPUs`).
//!
//! Such a pod's budget (its integer pod-level CPU request, pod Guaranteed) is allocated once
//! as a "bubble" aligned with the pod's affinity and recorded as the pod's CPUs; the bubble
//! is then partitioned: an init container with exclusive CPUs takes them from the bubble
//! less the sidecars before it, a sidecar keeps its CPUs, a shared init container runs on
//! the bubble less the sidecars, app containers with exclusive CPUs take theirs from the
//! rest, and every other container runs on what is left (the pod's shared pool). Only a
//! container whose CPU and memory requests equal their limits can be exclusive.

use std::collections::BTreeMap;

use corral_topology::{Container, CpuSet, Pod, QosClass, TopologyHint};

use super::{
    AllocateError, EmptyPodSharedPoolError, StaticPolicy, guaranteed_cpus, pod_guaranteed_cpus,
};
use crate::assignment::TakeError;
use crate::state::CpuState;

/// `guaranteedCPUs` for a pod managed at pod level: 0 unless the container is equivalent
/// to Guaranteed.
fn container_cpus(pod: &Pod, container: &Container) -> usize {
    if container.is_equivalent_guaranteed() {
        guaranteed_cpus(pod, container)
    } else {
        0
    }
}

/// `podGuaranteedCPUs` for a pod managed at pod level: its integer pod-level CPU request,
/// when the pod is Guaranteed.
pub(super) fn pod_budget(pod: &Pod) -> usize {
    if pod.qos_class() != QosClass::Guaranteed {
        return 0;
    }
    let millis = pod
        .resources
        .as_ref()
        .and_then(|r| r.requests.cpu_millis)
        .unwrap_or(0);
    if millis > 0 && millis % 1000 == 0 {
        usize::try_from(millis / 1000).unwrap_or(0)
    } else {
        0
    }
}

/// Why a pod's spec leaves a container without CPUs (upstream
/// `validatePodScopeResources`'s messages).
pub(super) fn validate_pod_scope_resources(pod: &Pod) -> Result<(), EmptyPodSharedPoolError> {
    let budget = pod_budget(pod);
    let mut shared_long_running = false;
    let mut long_running_exclusive: usize = 0;
    for container in &pod.init_containers {
        let cpus = container_cpus(pod, container);
        if !container.is_restartable() {
            if cpus > 0 {
                let pool = budget.saturating_sub(long_running_exclusive);
                if cpus > pool {
                    return Err(EmptyPodSharedPoolError::InitContainerTooLarge {
                        requested: cpus,
                        available: pool,
                    });
                }
            } else if long_running_exclusive >= budget {
                return Err(EmptyPodSharedPoolError::NoCpusForSharedInitContainers);
            }
            continue;
        }
        // Saturating, as `pod_guaranteed_cpus`: thousands of containers of `i64::MAX / 1000`
        // CPUs overflowed (Go's `int` wraps); a saturated sum is still refused.
        if cpus == 0 {
            shared_long_running = true;
        } else {
            long_running_exclusive = long_running_exclusive.saturating_add(cpus);
        }
    }
    for container in &pod.containers {
        match container_cpus(pod, container) {
            0 => shared_long_running = true,
            cpus => long_running_exclusive = long_running_exclusive.saturating_add(cpus),
        }
    }
    if shared_long_running && long_running_exclusive >= budget {
        return Err(EmptyPodSharedPoolError::NoCpusForSharedContainers);
    }
    Ok(())
}

impl StaticPolicy {
    /// `guaranteedCPUs` under this policy's pod-level mode.
    pub(super) fn guaranteed_cpus_of(&self, pod: &Pod, container: &Container) -> usize {
        if pod.is_managed_at_pod_level(self.pod_level) {
            container_cpus(pod, container)
        } else {
            guaranteed_cpus(pod, container)
        }
    }

    /// `podGuaranteedCPUs` under this policy's pod-level mode.
    pub(super) fn pod_guaranteed_cpus_of(&self, pod: &Pod) -> usize {
        if pod.is_managed_at_pod_level(self.pod_level) {
            pod_budget(pod)
        } else {
            pod_guaranteed_cpus(pod)
        }
    }

    /// Upstream `AllocatePod`: the bubble, then its partition (see the module docs). An
    /// invalid spec is `EmptyPodSharedPoolError`; nothing is changed on any error. A pod
    /// whose CPUs are in the state (restored from the checkpoint) is re-admitted from them
    /// (see [`Self::readmit_pod_cpus`]).
    pub(super) fn allocate_pod_cpus(
        &mut self,
        state: &mut CpuState,
        pod: &Pod,
        affinity: TopologyHint,
    ) -> Result<(), AllocateError> {
        let budget = pod_budget(pod);
        if budget == 0 {
            return Ok(());
        }
        if let Some(bubble) = state.pod_cpu_set(&pod.uid).cloned() {
            return self.readmit_pod_cpus(state, pod, &bubble);
        }
        validate_pod_scope_resources(pod)?;
        self.enforce_smt_alignment(state, budget)?;
        let mut scratch = state.clone();
        let bubble =
            self.allocate_cpus(&mut scratch, budget, affinity.numa_affinity, &CpuSet::new())?;
        let no_entries = BTreeMap::new();
        for (name, cpus) in self.partition(pod, &bubble, &no_entries)? {
            scratch.set_cpu_set(&pod.uid, &name, cpus);
        }
        scratch.set_pod_cpu_set(&pod.uid, bubble);
        *state = scratch;
        Ok(())
    }

    /// Upstream v1.38's restore path (#141041, issue #140989): a pod whose CPUs `bubble`
    /// were restored keeps them and its containers' restored entries as they are; only the
    /// containers without an entry (a partial checkpoint) are computed, from `bubble` with
    /// the same partitioning. When that fails, every CPU of the pod goes back to the shared
    /// pool with its entries (the pod is refused, and would otherwise hold them) and the
    /// error is returned. v1.37 allocated a restored pod's budget again: refused as "not
    /// enough cpus" on a full node, or moved, leaking the restored CPUs.
    fn readmit_pod_cpus(
        &mut self,
        state: &mut CpuState,
        pod: &Pod,
        bubble: &CpuSet,
    ) -> Result<(), AllocateError> {
        let entries = state
            .assignments()
            .get(&pod.uid)
            .cloned()
            .unwrap_or_default();
        if pod
            .all_containers()
            .all(|(_, c)| entries.contains_key(&c.name))
        {
            return Ok(());
        }
        let partition = validate_pod_scope_resources(pod)
            .map_err(AllocateError::from)
            .and_then(|()| Ok(self.partition(pod, bubble, &entries)?));
        match partition {
            Ok(assigned) => {
                for (name, cpus) in assigned {
                    if !entries.contains_key(&name) {
                        state.set_cpu_set(&pod.uid, &name, cpus);
                    }
                }
                Ok(())
            }
            Err(err) => {
                for name in entries.keys() {
                    state.delete(&pod.uid, name);
                }
                state.set_default_cpu_set(state.default_cpu_set().union(bubble));
                state.delete_pod(&pod.uid);
                Err(err)
            }
        }
    }

    /// The bubble's partition among the pod's containers (see the module docs), every
    /// container's CPUs by name; a container with an entry in `entries` keeps it (and what
    /// it holds is not handed to another).
    fn partition(
        &self,
        pod: &Pod,
        bubble: &CpuSet,
        entries: &BTreeMap<String, CpuSet>,
    ) -> Result<Vec<(String, CpuSet)>, TakeError> {
        let mut assigned: Vec<(String, CpuSet)> = Vec::new();
        let mut sidecars = CpuSet::new();
        for container in &pod.init_containers {
            let cpus = container_cpus(pod, container);
            let runnable = bubble.difference(&sidecars);
            let taken = match entries.get(&container.name) {
                Some(kept) => kept.clone(),
                None if cpus > 0 => self.take_by_topology(&runnable, cpus)?,
                None if !container.is_restartable() => runnable,
                // A shared sidecar runs on the pod's shared pool.
                None => continue,
            };
            if cpus > 0 && container.is_restartable() {
                sidecars.union_with(&taken);
            }
            assigned.push((container.name.clone(), taken));
        }
        let mut pod_shared = bubble.difference(&sidecars);
        // What exclusive app containers keep is no one else's.
        for container in &pod.containers {
            if container_cpus(pod, container) > 0
                && let Some(kept) = entries.get(&container.name)
            {
                pod_shared.difference_with(kept);
            }
        }
        for container in &pod.containers {
            let cpus = container_cpus(pod, container);
            if let Some(kept) = entries.get(&container.name) {
                assigned.push((container.name.clone(), kept.clone()));
            } else if cpus > 0 {
                let taken = self.take_by_topology(&pod_shared, cpus)?;
                pod_shared = pod_shared.difference(&taken);
                assigned.push((container.name.clone(), taken));
            }
        }
        let mut out = Vec::new();
        for (_, container) in pod.all_containers() {
            let cpus = assigned
                .iter()
                .find(|(name, _)| *name == container.name)
                .map_or_else(|| pod_shared.clone(), |(_, cpus)| cpus.clone());
            out.push((container.name.clone(), cpus));
        }
        Ok(out)
    }

    /// Upstream `RemoveContainer` for a pod managed at pod level: the container's entry
    /// goes; the pod's CPUs go back to the shared pool with its last container. `false`
    /// when the pod is not managed at pod level.
    pub(super) fn remove_pod_level_container(
        state: &mut CpuState,
        pod_uid: &str,
        container: &str,
    ) -> bool {
        let Some(pod_cpus) = state.pod_cpu_set(pod_uid).cloned() else {
            return false;
        };
        state.delete(pod_uid, container);
        if !state.assignments().contains_key(pod_uid) {
            state.set_default_cpu_set(state.default_cpu_set().union(&pod_cpus));
            state.delete_pod(pod_uid);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_topology::ResourceRequirements;

    fn container(name: &str, cpu: Option<i64>, memory: Option<i64>) -> Container {
        let mut c = Container::new(name);
        for list in [&mut c.resources.requests, &mut c.resources.limits] {
            list.cpu_millis = cpu;
            list.memory_bytes = memory;
        }
        c
    }

    fn pod(budget: i64, init: Vec<Container>, app: Vec<Container>) -> Pod {
        let mut resources = ResourceRequirements::default();
        for list in [&mut resources.requests, &mut resources.limits] {
            list.cpu_millis = Some(budget);
            list.memory_bytes = Some(1 << 30);
        }
        Pod {
            uid: "p".into(),
            init_containers: init,
            containers: app,
            resources: Some(resources),
            ..Pod::default()
        }
    }

    /// Exclusive requests summing past `usize::MAX` (2001 containers of `i64::MAX / 1000`
    /// CPUs) used to panic ("attempt to add with overflow"); the saturated sum is refused.
    #[test]
    fn exclusive_requests_past_usize_are_refused_without_overflow() {
        let most = i64::MAX / 1000 * 1000;
        let gu = |n: String| container(&n, Some(most), Some(1 << 20));
        let mut apps: Vec<Container> = (0..2001).map(|i| gu(format!("a{i}"))).collect();
        apps.push(container("shared", None, None));
        let full = pod(most, vec![], apps);
        assert_eq!(
            validate_pod_scope_resources(&full).unwrap_err().to_string(),
            "pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers"
        );
        let sidecars = (0..2001)
            .map(|i| {
                let mut s = gu(format!("s{i}"));
                s.restart_policy = Some(corral_topology::ContainerRestartPolicy::Always);
                s
            })
            .chain([gu("init".into())])
            .collect();
        let starved = pod(most, sidecars, vec![]);
        assert!(validate_pod_scope_resources(&starved).is_err());
    }

    /// Upstream `TestValidatePodScopeResources`-style: the three refusals.
    #[test]
    fn empty_shared_pools_are_refused_with_upstreams_messages() {
        let gu = |n: &str, cpus| container(n, Some(cpus), Some(1 << 20));
        let shared = |n: &str| container(n, None, None);
        let ok = pod(
            3000,
            vec![],
            vec![gu("a", 1000), gu("b", 1000), shared("c")],
        );
        assert_eq!(validate_pod_scope_resources(&ok), Ok(()));
        let full = pod(
            2000,
            vec![],
            vec![gu("a", 1000), gu("b", 1000), shared("c")],
        );
        assert_eq!(
            validate_pod_scope_resources(&full).unwrap_err().to_string(),
            "pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers"
        );
        let big_init = pod(2000, vec![gu("i", 3000)], vec![gu("a", 1000)]);
        assert_eq!(
            validate_pod_scope_resources(&big_init)
                .unwrap_err()
                .to_string(),
            "pod rejected, largest exclusive init container requests 3 cpus, but only 2 available"
        );
        let mut sidecar = gu("s", 2000);
        sidecar.restart_policy = Some(corral_topology::ContainerRestartPolicy::Always);
        let starved = pod(2000, vec![sidecar, shared("i")], vec![]);
        assert_eq!(
            validate_pod_scope_resources(&starved)
                .unwrap_err()
                .to_string(),
            "pod rejected, pod has shared init containers but no cpus available for them"
        );
    }
}
