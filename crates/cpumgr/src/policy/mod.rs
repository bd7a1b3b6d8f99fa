//! CPU manager policies (upstream `policy.go`, `policy_none.go`, `policy_static.go`): the
//! [`Policy`] seam, [`NonePolicy`] and [`StaticPolicy`], the errors they return and the
//! guaranteed-CPU arithmetic they share.

mod errors;
mod none;
mod pod_level;
mod requests;
mod static_policy;

pub use errors::{
    AllocateError, EMPTY_POD_SHARED_POOL_ERROR, EmptyPodSharedPoolError, PolicyError,
    SMT_ALIGNMENT_ERROR, SmtAlignmentError, ValidationError,
};
pub use none::NonePolicy;
pub use requests::{guaranteed_cpus, pod_guaranteed_cpus};
pub use static_policy::StaticPolicy;

use corral_topology::topologymanager::{ProviderHintSets, hint_sets};
use corral_topology::{Container, CpuSet, Pod, PodLevelResources, ProviderHints, TopologyHint};

use crate::state::CpuState;

/// A CPU manager policy (upstream `cpumanager.Policy`). Policies are pure: they read and
/// change a [`CpuState`] and never persist it themselves.
///
/// What a policy decides — validating the restored state, allocating, releasing and the CPUs
/// allocations can come from — every policy spells out (a forgotten `allocate` must not
/// compile into one that silently pins nothing); hints and the rest default to upstream's
/// `none` policy.
pub trait Policy: Send + Sync + std::fmt::Debug {
    /// `none` or `static`.
    fn name(&self) -> &'static str;
    /// Validate (and initialise) the restored state (upstream `Start`).
    fn start(&mut self, state: &mut CpuState) -> Result<(), ValidationError>;
    /// Allocate CPUs to the container if it needs exclusive ones, aligned with `affinity`
    /// (the topology manager's decision). Idempotent.
    fn allocate(
        &mut self,
        state: &mut CpuState,
        pod: &Pod,
        container: &Container,
        affinity: TopologyHint,
    ) -> Result<(), AllocateError>;
    /// Allocate the whole pod at once, aligned with `affinity` (upstream `AllocatePod`, for
    /// a pod with pod-level resources while `PodLevelResourceManagers` is on). The
    /// default allocates each container (upstream's `none` policy allocates nothing).
    fn allocate_pod(
        &mut self,
        state: &mut CpuState,
        pod: &Pod,
        affinity: TopologyHint,
    ) -> Result<(), AllocateError> {
        for (_, container) in pod.all_containers() {
            self.allocate(state, pod, container, affinity)?;
        }
        Ok(())
    }
    /// How pods with pod-level resources are treated. The default ignores the mode.
    fn set_pod_level_resources(&mut self, _mode: PodLevelResources) {}
    /// A copy of the policy with its own bookkeeping (the static policy's CPUs an init
    /// container left for reuse), for [`CpuManager::restore_policy`](crate::CpuManager::restore_policy)
    /// to undo a decision exactly. The default, `None`: the policy keeps nothing beyond
    /// the [`CpuState`].
    fn snapshot(&self) -> Option<Box<dyn Policy>> {
        None
    }
    /// Release the container's exclusive CPUs (upstream `RemoveContainer`). Idempotent.
    fn remove_container(&mut self, state: &mut CpuState, pod_uid: &str, container: &str);
    /// The whole pod went (released, or its decision refused): forget what the policy
    /// keeps for the pod beyond its containers' CPUs (the static policy's CPUs to reuse),
    /// so the same uid admitted again is decided as for the first time. Upstream keeps it
    /// until another pod is allocated; a kubelet never admits a uid twice.
    fn forget_pod(&mut self, _pod_uid: &str) {}
    /// Hints for one container (upstream `GetTopologyHints`). The default: no preference
    /// (upstream's `none` policy).
    fn hints_for_container(&self, _state: &CpuState, _pod: &Pod, _: &Container) -> ProviderHints {
        None
    }
    /// Hints for the whole pod (upstream `GetPodTopologyHints`). The default: no
    /// preference.
    fn hints_for_pod(&self, _state: &CpuState, _pod: &Pod) -> ProviderHints {
        None
    }
    /// [`hints_for_container`](Self::hints_for_container) as hint sets (families where the
    /// policy can describe its hints without listing them). The default: the list.
    fn hint_sets_for_container(
        &self,
        state: &CpuState,
        pod: &Pod,
        container: &Container,
    ) -> ProviderHintSets {
        hint_sets(self.hints_for_container(state, pod, container))
    }
    /// [`hints_for_pod`](Self::hints_for_pod) as hint sets. The default: the list.
    fn hint_sets_for_pod(&self, state: &CpuState, pod: &Pod) -> ProviderHintSets {
        hint_sets(self.hints_for_pod(state, pod))
    }
    /// The CPUs exclusive allocations can come from (upstream `GetAllocatableCPUs`).
    fn allocatable_cpus(&self, state: &CpuState) -> CpuSet;
    /// Whether exclusive allocations are whole physical cores (`full-pcpus-only`), which
    /// upstream counts as `physical_cpu` alignment. The default: no.
    fn aligns_physical_cpus(&self) -> bool {
        false
    }
    /// corral only: an init container of `pod` terminated; return the CPUs no later container
    /// of the pod uses to the shared pool. The default does nothing.
    fn release_terminated_init_container(
        &mut self,
        _state: &mut CpuState,
        _pod: &Pod,
        _container: &str,
    ) -> bool {
        false
    }
}
