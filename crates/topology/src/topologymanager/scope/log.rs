//! What the scopes log, with upstream's messages, keys and verbosities
//! (`scope_container.go`, `scope_pod.go`, `policy.go`'s `filterProvidersHints`): klog's
//! `Info` is INFO, `V(4)` TRACE. A pod is `pod="namespace/name"` (klog's `KObj`).

use super::super::family::{HintSet, ProviderHintSets};
use super::super::hint_text::show_provider_hints;
use super::super::policy::MergeResult;
use super::super::provider::AllocationError;
use crate::{Container, Pod};

/// One provider's hints (upstream `accumulateProvidersHints`: `"TopologyHints"`), for
/// `container`, or for the pod at pod scope.
pub(super) fn provider_hints(pod: &Pod, container: Option<&Container>, hints: &ProviderHintSets) {
    match container {
        Some(container) => tracing::info!(
            hints = %show_provider_hints(hints),
            pod = %pod.key(),
            containerName = %container.name,
            "TopologyHints"
        ),
        None => {
            tracing::info!(hints = %show_provider_hints(hints), pod = %pod.key(), "TopologyHints")
        }
    }
}

/// What upstream's `filterProvidersHints` says of hints it stands in for, before the merge.
pub(super) fn filtered(providers: &[ProviderHintSets]) {
    for provider in providers {
        let Some(resources) = provider.as_ref().filter(|r| !r.is_empty()) else {
            tracing::info!("Hint Provider has no preference for NUMA affinity with any resource");
            continue;
        };
        for (resource, set) in resources {
            match set {
                None => tracing::info!(
                    resource = %resource,
                    "Hint Provider has no preference for NUMA affinity with resource"
                ),
                Some(HintSet::List(list)) if list.is_empty() => no_possible_affinity(resource),
                Some(HintSet::Family(family)) if family.is_empty() => {
                    no_possible_affinity(resource)
                }
                Some(_) => {}
            }
        }
    }
}

fn no_possible_affinity(resource: &str) {
    tracing::info!(
        resource = %resource,
        "Hint Provider has no possible NUMA affinities for resource"
    );
}

/// The merge's result (`"ContainerTopologyHint"` / `"PodTopologyHint"`) and, as the scope
/// then logs it, `"Best TopologyHint"`.
pub(super) fn merged(pod: &Pod, container: Option<&Container>, merged: MergeResult) {
    let best = merged.best_hint;
    match container {
        Some(container) => {
            let name = &container.name;
            tracing::info!(bestHint = %best, pod = %pod.key(), containerName = %name, "ContainerTopologyHint");
            tracing::info!(bestHint = %best, pod = %pod.key(), containerName = %name, "Best TopologyHint");
        }
        None => {
            tracing::info!(bestHint = %best, pod = %pod.key(), "PodTopologyHint");
            tracing::info!(bestHint = %best, pod = %pod.key(), "Best TopologyHint");
        }
    }
}

/// The affinity stored for an admitted container (`"Topology Affinity"`).
pub(super) fn affinity(pod: &Pod, container: &Container, merged: MergeResult) {
    tracing::info!(
        bestHint = %merged.best_hint,
        pod = %pod.key(),
        containerName = %container.name,
        "Topology Affinity"
    );
}

/// Upstream's V(4) line once a policy that guarantees alignment allocated a container
/// (container scope) or the pod (pod scope).
pub(super) fn alignment_guaranteed(pod: &Pod, container_scope: bool) {
    if container_scope {
        tracing::trace!(pod = %pod.key(), "Resource alignment at container scope guaranteed");
    } else {
        tracing::trace!(pod = %pod.key(), "Resource alignment at pod scope guaranteed");
    }
}

/// Upstream `admitUsingPodResources`' V(4) line before the providers' `AllocatePod`.
pub(super) fn allocate_pod(pod: &Pod) {
    tracing::trace!(pod = %pod.key(), "Calling AllocatePod on hint providers");
}

/// A provider's `AllocatePod` failed (upstream logs it as an error); a deferred allocation
/// has not failed, and is not logged.
pub(super) fn pod_level_allocation_failed(pod: &Pod, err: &AllocationError) {
    if matches!(err, AllocationError::Deferred) {
        return;
    }
    tracing::error!(
        err = err as &dyn std::error::Error,
        pod = %pod.key(),
        "Pod-level allocation failed"
    );
}
