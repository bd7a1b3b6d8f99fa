//! The CPU manager as the topology manager's hint provider: upstream `GetTopologyHints`,
//! `GetPodTopologyHints` and `Allocate`/`AllocatePod` from the stored affinity.

use corral_topology::topologymanager::{Grant, PodGrants, ProviderHintSets};
use corral_topology::{
    AffinityStore, AllocationError, Container, HintProvider, Pod, ProviderHints, TopologyHint,
};

use super::{CpuManager, CpuManagerError};

impl HintProvider for CpuManager {
    fn name(&self) -> &str {
        "cpu manager"
    }

    /// Upstream `GetTopologyHints` (after removing stale state).
    fn hints_for_container(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.remove_stale_from_source(Some(pod));
        let inner = self.lock();
        inner
            .policy
            .hints_for_container(&inner.state, pod, container)
    }

    /// Upstream `GetPodTopologyHints` (after removing stale state).
    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints {
        self.remove_stale_from_source(Some(pod));
        let inner = self.lock();
        inner.policy.hints_for_pod(&inner.state, pod)
    }

    /// [`hints_for_container`](HintProvider::hints_for_container) as a family: no walk over
    /// every set of NUMA nodes.
    fn hint_sets_for_container(&self, pod: &Pod, container: &Container) -> ProviderHintSets {
        self.remove_stale_from_source(Some(pod));
        let inner = self.lock();
        inner
            .policy
            .hint_sets_for_container(&inner.state, pod, container)
    }

    /// [`hints_for_pod`](HintProvider::hints_for_pod) as a family.
    fn hint_sets_for_pod(&self, pod: &Pod) -> ProviderHintSets {
        self.remove_stale_from_source(Some(pod));
        let inner = self.lock();
        inner.policy.hint_sets_for_pod(&inner.state, pod)
    }

    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        store: &AffinityStore,
    ) -> Result<Grant, AllocationError> {
        let affinity = store.affinity(&pod.uid, &container.name);
        CpuManager::allocate(self, pod, container, affinity)
            .map(Grant::cpus)
            .map_err(allocation_error)
    }

    /// Upstream `AllocatePod`: the affinity stored for the pod's first container.
    fn allocate_pod(&self, pod: &Pod, store: &AffinityStore) -> Result<PodGrants, AllocationError> {
        let first = pod.all_containers().next().map(|(_, c)| c.name.as_str());
        let affinity =
            first.map_or_else(TopologyHint::default, |name| store.affinity(&pod.uid, name));
        let granted = CpuManager::allocate_pod(self, pod, affinity).map_err(allocation_error)?;
        Ok(granted
            .into_iter()
            .map(|(name, cpus)| (name, Grant::cpus(cpus)))
            .collect())
    }
}

/// A manager error as the topology manager reports it.
fn allocation_error(e: CpuManagerError) -> AllocationError {
    match e {
        CpuManagerError::Allocate(a) => a.into(),
        other => AllocationError::unexpected(other),
    }
}
