//! The two topology manager scopes (upstream `scope_container.go`, `scope_pod.go`, and the
//! none scope used with the `none` policy).

use std::cell::RefCell;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::admission::{PodAdmitResult, RejectedHints};
use super::family::ProviderHintSets;
use super::grant::{PodGrants, merge_into};
use super::metrics::ManagerMetrics;
use super::metrics::inc;
use super::policy::{MergeResult, Policy, PolicyConfigError, PolicyName};
use super::provider::HintProvider;
use super::store::AffinityStore;
use crate::{Container, Pod, PodLevelResources};

/// What failed, for a pod with pod-level resources (upstream's texts).
const POD_LEVEL_CONTAINER_SCOPE: &str =
    "pod with pod-level resources failed admission with a container-level topology manager";
const POD_LEVEL_POD_SCOPE: &str =
    "pod with pod-level resources failed admission under pod-scope topology manager";

/// The scope names kubelet config uses.
///
/// # Example
///
/// ```
/// use corral_topology::ScopeName;
///
/// assert_eq!("pod".parse::<ScopeName>()?, ScopeName::Pod);
/// assert_eq!(ScopeName::Container.to_string(), "container");
/// assert!("node".parse::<ScopeName>().is_err());
/// # Ok::<(), corral_topology::PolicyConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScopeName {
    /// `container`: one merge per container.
    Container,
    /// `pod`: one merge for the whole pod, its result stored for every container.
    Pod,
}

enum_strings! {
    /// The kubelet config string.
    ScopeName {
        Container => "container",
        Pod => "pod",
    }
}

impl FromStr for ScopeName {
    type Err = PolicyConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "container" => Ok(ScopeName::Container),
            "pod" => Ok(ScopeName::Pod),
            other => Err(PolicyConfigError::UnknownScope(other.to_owned())),
        }
    }
}

/// Every provider's hint sets for one container, in provider order: what the policy merges.
fn container_hint_sets(
    providers: &[Arc<dyn HintProvider>],
    pod: &Pod,
    container: &Container,
) -> Vec<ProviderHintSets> {
    providers
        .iter()
        .map(|p| p.hint_sets_for_container(pod, container))
        .inspect(|hints| log::provider_hints(pod, Some(container), hints))
        .collect()
}

/// Every provider's hint sets for the whole pod, in provider order.
fn pod_hint_sets(providers: &[Arc<dyn HintProvider>], pod: &Pod) -> Vec<ProviderHintSets> {
    providers
        .iter()
        .map(|p| p.hint_sets_for_pod(pod))
        .inspect(|hints| log::provider_hints(pod, None, hints))
        .collect()
}

#[cfg(test)]
/// Every provider's hints for one container, in provider order, as given (upstream
/// `containerScope.accumulateProvidersHints`): what the policy merges.
pub(crate) fn container_hints(
    providers: &[Arc<dyn HintProvider>],
    pod: &Pod,
    container: &Container,
) -> Vec<super::hint::ProviderHints> {
    providers
        .iter()
        .map(|p| p.hints_for_container(pod, container))
        .collect()
}

#[cfg(test)]
/// Every provider's hints for the whole pod, in provider order, as given (upstream
/// `podScope.accumulateProvidersHints`).
pub(crate) fn pod_hints(
    providers: &[Arc<dyn HintProvider>],
    pod: &Pod,
) -> Vec<super::hint::ProviderHints> {
    providers.iter().map(|p| p.hints_for_pod(pod)).collect()
}

/// What one pod's admission reads and counts in: the policy, the providers (asked and
/// allocating in order), the affinity store and the manager's metrics.
pub(crate) struct Admission<'a> {
    pub(crate) policy: &'a Policy,
    pub(crate) providers: &'a [Arc<dyn HintProvider>],
    pub(crate) store: &'a AffinityStore,
    pub(crate) metrics: &'a ManagerMetrics,
    pub(crate) pod_level: PodLevelResources,
    /// What the providers granted so far.
    pub(crate) grants: RefCell<PodGrants>,
}

impl Admission<'_> {
    /// Allocate one container with every provider, in order (upstream
    /// `allocateAlignedResources`), noting each grant.
    fn allocate(&self, pod: &Pod, container: &Container) -> Result<(), PodAdmitResult> {
        for provider in self.providers {
            let grant = provider
                .allocate(pod, container, self.store)
                .map_err(|e| PodAdmitResult::from_allocation_error(&e))?;
            let mut grants = self.grants.borrow_mut();
            grants
                .entry(container.name.clone())
                .or_default()
                .merge(grant);
        }
        Ok(())
    }

    /// Count a rejection in `admission_errors_total` (a deferred decision is none).
    fn count_error(&self, rejected: &PodAdmitResult) {
        if !rejected.deferred {
            inc(&self.metrics.admission_errors_total);
        }
    }

    /// Upstream `noneScope.Admit`: allocate every container, no hints (and, as upstream, no
    /// error counted).
    pub(crate) fn none_scope(&self, pod: &Pod) -> PodAdmitResult {
        for (_, container) in pod.all_containers() {
            if let Err(rejected) = self.allocate(pod, container) {
                return rejected;
            }
        }
        PodAdmitResult::admitted()
    }

    /// Upstream `containerScope.Admit`: merge, store and allocate container by container,
    /// counting in the metrics as upstream does: every rejection in
    /// `admission_errors_total`, and under a policy that guarantees alignment a failed merge
    /// or an allocated container in the container-scope alignment counters.
    pub(crate) fn container_scope(&self, pod: &Pod) -> PodAdmitResult {
        let guaranteed = self.policy.is_alignment_guaranteed();
        let alignment = &self.metrics.numa_alignment;
        for (_, container) in pod.all_containers() {
            let sets = container_hint_sets(self.providers, pod, container);
            let merged = self.merge(pod, Some(container), &sets);
            let failures = guaranteed.then_some(&alignment.container_failures);
            if let Err(rejected) = self.store_and_allocate(pod, merged, [container], failures) {
                let rejected = if !merged.admit && pod.is_managed_at_pod_level(self.pod_level) {
                    PodAdmitResult::pod_level_topology_affinity_error(POD_LEVEL_CONTAINER_SCOPE)
                } else {
                    rejected
                };
                return self.with_hints(rejected, Some(&container.name), sets, merged);
            }
            if guaranteed {
                log::alignment_guaranteed(pod, true);
                inc(&alignment.container);
            }
        }
        PodAdmitResult::admitted()
    }

    /// Upstream `podScope.Admit`: one merge for the pod, stored for every container, then
    /// allocate container by container, counting as [`Admission::container_scope`] does, in
    /// the pod-scope alignment counters, once per pod.
    pub(crate) fn pod_scope(&self, pod: &Pod) -> PodAdmitResult {
        let guaranteed = self.policy.is_alignment_guaranteed();
        let alignment = &self.metrics.numa_alignment;
        let sets = pod_hint_sets(self.providers, pod);
        let merged = self.merge(pod, None, &sets);
        if pod.is_managed_at_pod_level(self.pod_level) {
            let result = self.pod_level(pod, merged);
            return self.with_hints(result, None, sets, merged);
        }
        let containers = pod.all_containers().map(|(_, container)| container);
        let failures = guaranteed.then_some(&alignment.pod_failures);
        if let Err(rejected) = self.store_and_allocate(pod, merged, containers, failures) {
            return self.with_hints(rejected, None, sets, merged);
        }
        if guaranteed {
            log::alignment_guaranteed(pod, false);
            inc(&alignment.pod);
        }
        PodAdmitResult::admitted()
    }

    /// The policy's merge of `sets` for `container` (the pod at pod scope), logged as
    /// upstream's `calculateAffinity` and `Admit` log it.
    fn merge(
        &self,
        pod: &Pod,
        container: Option<&Container>,
        sets: &[ProviderHintSets],
    ) -> MergeResult {
        if self.policy.name() != PolicyName::None {
            log::filtered(sets);
        }
        let merged = self.policy.merge_sets(sets);
        log::merged(pod, container, merged);
        merged
    }

    /// `result` with the hints merged for `container` (`None`: the pod) when it is a
    /// refusal (not a deferral): only a refused pod pays for naming the providers.
    fn with_hints(
        &self,
        mut result: PodAdmitResult,
        container: Option<&str>,
        sets: Vec<ProviderHintSets>,
        merged: MergeResult,
    ) -> PodAdmitResult {
        if !result.admit && !result.deferred {
            let providers = self.providers.iter().map(|p| p.name().to_owned());
            result.rejected_hints = Some(Box::new(RejectedHints {
                container: container.map(str::to_owned),
                providers: providers.zip(sets).collect(),
                merged,
            }));
        }
        result
    }

    /// Upstream `admitUsingPodResources`: the pod's best hint stored for every container,
    /// then one [`HintProvider::allocate_pod`] per provider.
    fn pod_level(&self, pod: &Pod, merged: MergeResult) -> PodAdmitResult {
        let guaranteed = self.policy.is_alignment_guaranteed();
        let alignment = &self.metrics.numa_alignment;
        if !merged.admit {
            if guaranteed {
                inc(&alignment.pod_failures);
            }
            inc(&self.metrics.admission_errors_total);
            return PodAdmitResult::pod_level_topology_affinity_error(POD_LEVEL_POD_SCOPE);
        }
        log::allocate_pod(pod);
        for (_, container) in pod.all_containers() {
            log::affinity(pod, container, merged);
            self.store
                .set_affinity(&pod.uid, &container.name, merged.best_hint);
        }
        for provider in self.providers {
            match provider.allocate_pod(pod, self.store) {
                Ok(grants) => merge_into(&mut self.grants.borrow_mut(), grants),
                Err(err) => {
                    log::pod_level_allocation_failed(pod, &err);
                    let rejected = PodAdmitResult::from_allocation_error(&err);
                    self.count_error(&rejected);
                    return rejected;
                }
            }
        }
        if guaranteed {
            log::alignment_guaranteed(pod, false);
            inc(&alignment.pod);
        }
        PodAdmitResult::admitted()
    }

    /// The part both scopes share: a merge the policy rejected is upstream's
    /// `TopologyAffinityError` (counted in `alignment_failures` when given); otherwise
    /// `merged.best_hint` is stored for each of `containers`, in order, and each is
    /// allocated. Every rejection is counted in `admission_errors_total`.
    fn store_and_allocate<'c>(
        &self,
        pod: &Pod,
        merged: MergeResult,
        containers: impl IntoIterator<Item = &'c Container>,
        alignment_failures: Option<&AtomicU64>,
    ) -> Result<(), PodAdmitResult> {
        if !merged.admit {
            if let Some(failures) = alignment_failures {
                inc(failures);
            }
            inc(&self.metrics.admission_errors_total);
            return Err(PodAdmitResult::topology_affinity_error());
        }
        for container in containers {
            log::affinity(pod, container, merged);
            self.store
                .set_affinity(&pod.uid, &container.name, merged.best_hint);
            self.allocate(pod, container)
                .inspect_err(|rejected| self.count_error(rejected))?;
        }
        Ok(())
    }
}

mod log;
#[cfg(test)]
mod tests;
