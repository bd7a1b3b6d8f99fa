//! Admission results (upstream `lifecycle.PodAdmitResult` and `admission.GetPodAdmitResult`).

use super::family::ProviderHintSets;
use super::grant::PodGrants;
use super::policy::MergeResult;
use super::provider::AllocationError;

/// Upstream's reason for a pod rejected for lack of NUMA alignment.
pub const TOPOLOGY_AFFINITY_ERROR: &str = "TopologyAffinityError";
/// Upstream's message for that rejection.
pub const TOPOLOGY_AFFINITY_MESSAGE: &str = "Resources cannot be allocated with Topology locality";
/// Upstream's reason for an allocation error without its own reason.
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";

/// Whether a pod is admitted, and why not.
///
/// # Example
///
/// Upstream's reasons and messages, and what a manager answers:
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{
///     AllocationError, Container, NumaNode, Pod, PodAdmitResult, TopologyManager,
///     TopologyManagerConfig,
/// };
///
/// let refused = PodAdmitResult::topology_affinity_error();
/// assert!(!refused.admit);
/// assert_eq!(refused.reason, "TopologyAffinityError");
/// assert_eq!(refused.message, "Resources cannot be allocated with Topology locality");
/// let failed = PodAdmitResult::from_allocation_error(&AllocationError::unexpected("disk full"));
/// assert_eq!(failed.reason, "UnexpectedAdmissionError");
/// assert!(failed.message.contains("disk full"), "{}", failed.message);
///
/// let config = TopologyManagerConfig::from_strings("single-numa-node", "container", &BTreeMap::new())?;
/// let manager = TopologyManager::new(&config, &[0, 1].map(|id| NumaNode { id, distances: None }))?;
/// let pod = Pod { uid: "u".into(), containers: vec![Container::new("c")], ..Pod::default() };
/// let admitted = manager.admit(&pod);
/// assert!(admitted.admit && admitted.reason.is_empty(), "no provider: nothing to align");
/// assert!(admitted.grants.values().all(|grant| grant.is_empty()), "and nothing granted");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// [`HintProvider`](super::HintProvider)'s example shows a refusal by the policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodAdmitResult {
    /// Admitted.
    pub admit: bool,
    /// CamelCase reason when rejected (empty when admitted).
    pub reason: String,
    /// Human-readable message when rejected (empty when admitted).
    pub message: String,
    /// The decision's searches ran out of their [budget](super::bounded): the hints and
    /// merged hint are the best found, not proven upstream's (an aligning policy still
    /// admits only a hint it would admit; see `budget.rs`).
    pub approximate: bool,
    /// A provider must ask something outside the decision before it can allocate
    /// ([`AllocationError::Deferred`]): nothing was decided and nothing counted. The caller
    /// gives back what the decision took, gets the provider its answer (corral's device
    /// manager: `ask_plugins`) and admits the pod again.
    pub deferred: bool,
    /// What the providers granted, by container: everything when admitted; what was
    /// granted before the failure when not (upstream leaves it allocated; the caller gives
    /// back exactly this).
    pub grants: PodGrants,
    /// On a rejection after hints were merged: what was merged for the container (or, at
    /// pod scope, the pod) that failed. Built only when a pod is refused, from the hints
    /// the merge already had, so an admission pays nothing for it.
    pub rejected_hints: Option<Box<RejectedHints>>,
}

/// What the topology manager merged for the container (or pod) whose admission failed:
/// each provider's hints as given to the merge, and the merge's answer. A refusal by the
/// policy has `merged.admit == false`; a refusal by a provider's allocation (the CPU
/// manager's `SMTAlignmentError`, …) was merged and admitted, then failed.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{Container, NumaNode, Pod, TopologyManager, TopologyManagerConfig};
///
/// let config = TopologyManagerConfig::from_strings("single-numa-node", "container", &BTreeMap::new())?;
/// let manager = TopologyManager::new(&config, &[0, 1].map(|id| NumaNode { id, distances: None }))?;
/// let pod = Pod { uid: "u".into(), containers: vec![Container::new("c")], ..Pod::default() };
/// let admitted = manager.admit(&pod);
/// assert!(admitted.admit && admitted.rejected_hints.is_none(), "only a refusal carries them");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// [`HintProvider`](super::HintProvider)'s example shows a refusal with its hints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedHints {
    /// The container whose hints were merged; `None` at pod scope (one merge for the pod).
    pub container: Option<String>,
    /// Each provider's [`name`](super::HintProvider::name) and hints, in provider order.
    pub providers: Vec<(String, ProviderHintSets)>,
    /// The merged best hint, and whether the policy admitted it.
    pub merged: MergeResult,
}

impl PodAdmitResult {
    /// An admitted pod.
    pub fn admitted() -> PodAdmitResult {
        PodAdmitResult {
            admit: true,
            ..PodAdmitResult::default()
        }
    }

    /// Rejected with upstream's `TopologyAffinityError`.
    pub fn topology_affinity_error() -> PodAdmitResult {
        PodAdmitResult {
            admit: false,
            reason: TOPOLOGY_AFFINITY_ERROR.to_owned(),
            message: TOPOLOGY_AFFINITY_MESSAGE.to_owned(),
            ..PodAdmitResult::default()
        }
    }

    /// Rejected with upstream's `PodLevelTopologyAffinityError` (reason
    /// `TopologyAffinityError`, message `Pod Scope ` and what failed), for a pod with
    /// pod-level resources while `PodLevelResourceManagers` is on.
    pub fn pod_level_topology_affinity_error(what: &str) -> PodAdmitResult {
        PodAdmitResult {
            admit: false,
            reason: TOPOLOGY_AFFINITY_ERROR.to_owned(),
            message: format!("Pod Scope {what}"),
            ..PodAdmitResult::default()
        }
    }

    /// Rejected because a provider's allocation failed (upstream `GetPodAdmitResult(err)`).
    pub fn from_allocation_error(error: &AllocationError) -> PodAdmitResult {
        match error {
            AllocationError::Admission { reason, message } => PodAdmitResult {
                admit: false,
                reason: reason.clone(),
                message: message.clone(),
                ..PodAdmitResult::default()
            },
            AllocationError::Unexpected(cause) => PodAdmitResult {
                admit: false,
                reason: UNEXPECTED_ADMISSION_ERROR.to_owned(),
                message: format!("Allocate failed due to {cause}, which is unexpected"),
                ..PodAdmitResult::default()
            },
            AllocationError::Deferred => PodAdmitResult {
                deferred: true,
                ..PodAdmitResult::default()
            },
        }
    }
}
