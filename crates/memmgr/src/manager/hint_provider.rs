//! The memory manager as the topology manager's hint provider: upstream
//! `GetTopologyHints`, `GetPodTopologyHints`, `Allocate` and `AllocatePod`, each answering
//! what it granted.

use corral_topology::topologymanager::{
    DECISION_STEPS, Grant, PodGrants, ProviderHintSets, TopologyHint, bounded_apart,
};
use std::sync::atomic::Ordering;

use corral_topology::{
    AffinityStore, AllocationError, Container, HintProvider, Pod, ProviderHints, QosClass,
};

use super::{EMPTY_POD_SHARED_POOL_ERROR, MemoryManager, MemoryManagerError};
use crate::error::AllocateError;

/// What the topology manager's allocation call answers.
type Allocated<T> = Result<T, AllocationError>;

/// Hints as the topology manager takes them: `None` for no preference.
fn provider_hints(hints: Option<crate::hints::MemoryHints>) -> ProviderHints {
    hints.map(|hints| {
        hints
            .into_iter()
            .map(|(resource, list)| (resource, Some(list)))
            .collect()
    })
}

/// Hint sets as the topology manager takes them.
fn provider_hint_sets(hints: Option<crate::hints::MemoryHintSets>) -> ProviderHintSets {
    hints.map(|hints| {
        hints
            .into_iter()
            .map(|(resource, set)| (resource, Some(set)))
            .collect()
    })
}

impl HintProvider for MemoryManager {
    fn name(&self) -> &str {
        "memory manager"
    }

    fn hints_for_container(&self, pod: &Pod, container: &Container) -> ProviderHints {
        let inner = self.lock();
        provider_hints(inner.policy.as_ref()?.hints_for_container(pod, container))
    }

    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints {
        let inner = self.lock();
        provider_hints(inner.policy.as_ref()?.hints_for_pod(pod))
    }

    /// The fitting sets of nodes as a family: never a walk over every set of nodes.
    fn hint_sets_for_container(&self, pod: &Pod, container: &Container) -> ProviderHintSets {
        let inner = self.lock();
        provider_hint_sets(
            inner
                .policy
                .as_ref()?
                .hint_sets_for_container(pod, container),
        )
    }

    fn hint_sets_for_pod(&self, pod: &Pod) -> ProviderHintSets {
        let inner = self.lock();
        provider_hint_sets(inner.policy.as_ref()?.hint_sets_for_pod(pod))
    }

    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        store: &AffinityStore,
    ) -> Allocated<Grant> {
        let mut inner = self.lock();
        let affinity = store.affinity(&pod.uid, &container.name);
        if !inner.started {
            return Err(AllocationError::unexpected(MemoryManagerError::NotStarted));
        }
        let before = inner.policy.clone();
        // A trial (a dry run) counts nothing.
        let counted = !inner.trial && inner.policy.as_ref().is_some_and(|p| !p.skipped(pod));
        let allocated = (|| {
            if let Some(policy) = inner.policy.as_mut() {
                // A budget of its own: the decision's hints may have used up theirs.
                bounded_apart(DECISION_STEPS, || policy.allocate(pod, container, affinity))
                    .0
                    .map_err(allocation_error)?;
            }
            inner
                .commit(self.policy, before)
                .map_err(AllocationError::unexpected)
        })();
        self.count(counted, allocated.is_ok());
        allocated?;
        Ok(Grant::memory(inner.granted(&pod.uid, &container.name)))
    }

    /// Upstream `AllocatePod`: the affinity stored for the pod's first container.
    fn allocate_pod(&self, pod: &Pod, store: &AffinityStore) -> Allocated<PodGrants> {
        let mut inner = self.lock();
        if !inner.started {
            return Err(AllocationError::unexpected(MemoryManagerError::NotStarted));
        }
        let first = pod.all_containers().next().map(|(_, c)| c.name.clone());
        let affinity = first.map_or_else(TopologyHint::default, |name| {
            store.affinity(&pod.uid, &name)
        });
        let before = inner.policy.clone();
        let counted =
            !inner.trial && inner.policy.is_some() && pod.qos_class() == QosClass::Guaranteed;
        if let Some(policy) = inner.policy.as_mut()
            && let (Err(err), _) =
                bounded_apart(DECISION_STEPS, || policy.allocate_pod(pod, affinity))
        {
            inner.policy = before;
            self.count(counted, false);
            return Err(allocation_error(err));
        }
        let committed = inner.commit(self.policy, before);
        self.count(counted, committed.is_ok());
        committed.map_err(AllocationError::unexpected)?;
        Ok(pod
            .all_containers()
            .map(|(_, c)| {
                (
                    c.name.clone(),
                    Grant::memory(inner.granted(&pod.uid, &c.name)),
                )
            })
            .collect())
    }
}

impl MemoryManager {
    /// Count a pinning request (`counted`: one upstream's static policy counts) and
    /// whether it failed.
    fn count(&self, counted: bool, succeeded: bool) {
        if counted {
            let metrics = self.metrics();
            metrics
                .pinning_requests_total
                .fetch_add(1, Ordering::Relaxed);
            if !succeeded {
                metrics.pinning_errors_total.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A policy error as the topology manager reports it: an empty pod shared pool with
/// upstream's `EmptyPodSharedPoolError` reason.
fn allocation_error(err: AllocateError) -> AllocationError {
    match err {
        AllocateError::EmptyPodSharedPool(why) => AllocationError::Admission {
            reason: EMPTY_POD_SHARED_POOL_ERROR.to_owned(),
            message: why.to_string(),
        },
        other => AllocationError::unexpected(other),
    }
}
