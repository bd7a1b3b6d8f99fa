//! [`HintProvider`]: what the topology manager asks each resource manager (upstream
//! `topologymanager.HintProvider`), and the error a provider's allocation may fail with.

use super::family::{ProviderHintSets, hint_sets};
use super::grant::{Grant, PodGrants};
use super::hint::ProviderHints;
use super::store::AffinityStore;
use crate::{Container, Pod};

/// Why a provider could not allocate for a container.
///
/// # Example
///
/// ```
/// use std::error::Error;
/// use corral_topology::{AllocationError, PodAdmitResult};
///
/// let err = AllocationError::Admission {
///     reason: "SMTAlignmentError".into(),
///     message: "not enough free physical cores".into(),
/// };
/// let refused = PodAdmitResult::from_allocation_error(&err);
/// assert_eq!((refused.reason.as_str(), refused.message.as_str()), ("SMTAlignmentError", "not enough free physical cores"));
///
/// let io = std::io::Error::other("device plugin gone");
/// let err = AllocationError::unexpected(io);
/// assert_eq!(err.source().unwrap().to_string(), "device plugin gone");
/// ```
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
///
/// # Example
///
/// A provider of `example.com/gpu` devices, one on each of two NUMA nodes, under the
/// `single-numa-node` policy: a container asking one device gets the node it prefers, one
/// asking two cannot be aligned and is refused.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use corral_topology::topologymanager::{Grant, ProviderHints, TOPOLOGY_AFFINITY_ERROR};
/// use corral_topology::{
///     AffinityStore, AllocationError, Container, HintProvider, NumaMask, NumaNode, Pod,
///     TopologyHint, TopologyManager, TopologyManagerConfig,
/// };
///
/// const GPU: &str = "example.com/gpu";
///
/// /// GPU `gpu-N` sits on NUMA node N.
/// struct Gpus;
///
/// impl HintProvider for Gpus {
///     fn name(&self) -> &str {
///         "gpus"
///     }
///
///     fn hints_for_container(&self, _pod: &Pod, container: &Container) -> ProviderHints {
///         let wanted = container.resources.requests.get(GPU)?;
///         let hint = |ids: &[usize]| TopologyHint::new(NumaMask::new(ids.iter().copied()).ok(), ids.len() as i64 == wanted);
///         let hints = match wanted {
///             1 => vec![hint(&[0]), hint(&[1])],
///             2 => vec![hint(&[0, 1])],
///             _ => vec![],
///         };
///         Some(BTreeMap::from([(GPU.to_owned(), Some(hints))]))
///     }
///
///     fn hints_for_pod(&self, _pod: &Pod) -> ProviderHints {
///         None
///     }
///
///     fn allocate(&self, pod: &Pod, container: &Container, store: &AffinityStore) -> Result<Grant, AllocationError> {
///         let affinity = store.affinity(&pod.uid, &container.name).numa_affinity;
///         let ids = affinity.map(|mask| mask.get_bits()).unwrap_or_default();
///         Ok(Grant::devices(GPU, ids.iter().map(|node| format!("gpu-{node}"))))
///     }
/// }
///
/// let config = TopologyManagerConfig::from_strings("single-numa-node", "container", &BTreeMap::new())?;
/// let mut manager = TopologyManager::new(&config, &[0, 1].map(|id| NumaNode { id, distances: None }))?;
/// manager.add_hint_provider(Arc::new(Gpus));
///
/// let pod_asking = |uid: &str, gpus| {
///     let mut app = Container::new("app");
///     app.resources.requests.extended.insert(GPU.to_owned(), gpus);
///     Pod { uid: uid.into(), containers: vec![app], ..Pod::default() }
/// };
///
/// let one = manager.admit(&pod_asking("one", 1));
/// assert!(one.admit);
/// assert_eq!(manager.affinity("one", "app").to_string(), r#"{"NUMANodeAffinity":1,"Preferred":true}"#);
/// assert!(one.grants["app"].devices[GPU].contains("gpu-0"));
///
/// let two = manager.admit(&pod_asking("two", 2));
/// assert!(!two.admit);
/// assert_eq!(two.reason, TOPOLOGY_AFFINITY_ERROR);
/// // Why: the hints merged for the container that failed, by provider, and the merge.
/// let why = two.rejected_hints.as_deref().expect("a refusal after a merge says why");
/// assert_eq!(why.container.as_deref(), Some("app"));
/// assert_eq!(why.providers[0].0, "gpus");
/// assert!(!why.merged.admit && !why.merged.best_hint.preferred);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait HintProvider: Send + Sync {
    /// What the provider is called where a refusal is explained
    /// ([`RejectedHints`](super::RejectedHints)), e.g. `cpu manager`.
    fn name(&self) -> &str {
        "hint provider"
    }

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
