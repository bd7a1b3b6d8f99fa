//! [`HintProvider`]: what the topology manager asks each resource manager (upstream
//! `topologymanager.HintProvider`), and the error a provider's allocation may fail with.

use super::family::{ProviderHintSets, hint_sets};
use super::grant::{Grant, PodGrants};
use super::hint::ProviderHints;
use super::store::AffinityStore;
use crate::{Container, Pod};

/// Why a provider could not allocate for a container.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AllocationError {
    /// An admission error with its own reason (upstream errors implementing
    /// `admission.Error`, e.g. the CPU manager's `SMTAlignmentError`): the pod is rejected
    /// with this reason and message.
    #[error("{message}")]
    Admission {
        /// The rejection reason (a CamelCase word, e.g. `SMTAlignmentError`).
        reason: String,
        /// The human-readable message.
        message: String,
    },
    /// Any other failure, carrying the provider's error as its source: rejected as
    /// `UnexpectedAdmissionError` with the source's message (see
    /// [`PodAdmitResult::from_allocation_error`](super::PodAdmitResult::from_allocation_error)).
    #[error("allocation failed unexpectedly")]
    Unexpected(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The provider must ask something outside the decision before it can allocate (corral's
    /// device manager: a device plugin's `GetPreferredAllocation`, which may take long and
    /// must not hold the decision): the admission ends at once with
    /// [`PodAdmitResult::deferred`](super::PodAdmitResult::deferred), counted as neither a
    /// request nor an error, and the caller admits the pod again once the provider has its
    /// answer.
    #[error("the allocation needs an answer from outside the decision")]
    Deferred,
}

impl AllocationError {
    /// An [`Unexpected`](AllocationError::Unexpected) failure caused by `source` (any error,
    /// or a message).
    pub fn unexpected(
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        AllocationError::Unexpected(source.into())
    }
}

/// A resource manager that gives NUMA hints and allocates (CPU manager, device manager, …).
///
/// Calls are synchronous and made in admission order; `allocate` runs after the topology
/// manager stored the container's affinity, which the provider reads from `store`.
pub trait HintProvider: Send + Sync {
    /// Hints for one container: `None` (or an empty map) = no preference for anything; per
    /// resource, `None` = no preference, `Some(vec![])` = cannot be satisfied.
    fn hints_for_container(&self, pod: &Pod, container: &Container) -> ProviderHints;

    /// Hints for the whole pod (pod scope), with the same conventions.
    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints;

    /// [`hints_for_container`](Self::hints_for_container) as hint sets, which the topology
    /// manager merges: a provider whose hints are a [`HintFamily`](super::HintFamily)
    /// answers it here without listing every set of NUMA nodes. The default: the list.
    fn hint_sets_for_container(&self, pod: &Pod, container: &Container) -> ProviderHintSets {
        hint_sets(self.hints_for_container(pod, container))
    }

    /// [`hints_for_pod`](Self::hints_for_pod) as hint sets (see
    /// [`hint_sets_for_container`](Self::hint_sets_for_container)). The default: the list.
    fn hint_sets_for_pod(&self, pod: &Pod) -> ProviderHintSets {
        hint_sets(self.hints_for_pod(pod))
    }

    /// Allocate the container's resources, aligned with `store.affinity(pod uid, name)`;
    /// what it granted (empty: nothing of its own, e.g. a container in the shared pool).
    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        store: &AffinityStore,
    ) -> Result<Grant, AllocationError>;

    /// Allocate the whole pod at once (upstream `AllocatePod`, called at pod scope for a pod
    /// with pod-level resources while `PodLevelResourceManagers` is on). The default
    /// allocates each container in admission order — what corral's device manager does,
    /// where upstream's does nothing here and allocates later, at container creation.
    /// Its grants by container name (containers granted nothing may be left out).
    fn allocate_pod(&self, pod: &Pod, store: &AffinityStore) -> Result<PodGrants, AllocationError> {
        let mut grants = PodGrants::new();
        for (_, container) in pod.all_containers() {
            let grant = self.allocate(pod, container, store)?;
            grants.insert(container.name.clone(), grant);
        }
        Ok(grants)
    }
}
