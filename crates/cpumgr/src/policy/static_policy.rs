//! [`StaticPolicy`]: upstream's `static` policy — Guaranteed containers with integer CPU
//! requests get exclusive CPUs; everything else shares the default pool.
//!
//! Pods that set pod-level resources (`spec.resources`) get nothing exclusive and no hint,
//! as v1.36 does while `PodLevelResourceManagers` is off (its default); corral does not
//! implement that gate's pod budgets.
//!
//! Pools as upstream: SHARED (the state's default set), RESERVED (never exclusively
//! allocated; kept out of SHARED too with `strict-cpu-reservation`), ASSIGNABLE = SHARED −
//! RESERVED, and the exclusive assignments.
//!
//! One deliberate difference (upstream issue #112228): upstream keeps an init container's
//! exclusive CPUs pinned for the pod's lifetime even when no later container reuses them.
//! Corral returns those CPUs to the shared pool when the init container has terminated
//! ([`Policy::release_terminated_init_container`], called by the manager's reconcile): the
//! init container's entry shrinks to the CPUs its siblings reuse (possibly none). Such an
//! init container then gives no hint preference instead of an unsatisfiable one when the
//! pod is admitted again after a restart.

use std::collections::BTreeMap;
use std::sync::Arc;

use corral_topology::topologymanager::{HintSet, ProviderHintSets, ResourceHintSets};
use corral_topology::{
    Container, CpuSet, Pod, PodLevelResources, PolicyName, ProviderHints, TopologyHint,
};

mod assign;
mod log;

use super::pod_level::validate_pod_scope_resources;
use super::{AllocateError, Policy, PolicyError, SmtAlignmentError, ValidationError};
use crate::hints::{cpu_topology_hint_family, generate_cpu_topology_hints};
use crate::index::TopologyIndex;
use crate::options::StaticPolicyOptions;
use crate::state::CpuState;

/// The `static` policy.
#[derive(Debug, Clone)]
pub struct StaticPolicy {
    index: Arc<TopologyIndex>,
    reserved: CpuSet,
    reserved_physical: CpuSet,
    options: StaticPolicyOptions,
    cpu_group_size: usize,
    /// pod UID → CPUs of finished init containers later containers may reuse.
    cpus_to_reuse: BTreeMap<String, CpuSet>,
    /// How pods with pod-level resources are treated (`PodLevelResourceManagers`).
    pub(super) pod_level: PodLevelResources,
}

/// Whether hints are wanted as upstream's list or as the family it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HintForm {
    List,
    Family,
}

fn cpu_hints(hints: HintSet) -> ProviderHintSets {
    Some(ResourceHintSets::from([("cpu".to_owned(), Some(hints))]))
}

/// Hint sets built as lists, as lists again.
fn as_lists(sets: ProviderHintSets) -> ProviderHints {
    sets.map(|resources| {
        resources
            .into_iter()
            .map(|(name, set)| {
                let list = set.map(|set| match set {
                    HintSet::List(list) => list,
                    family @ HintSet::Family(_) => family.to_hints().into_owned(),
                });
                (name, list)
            })
            .collect()
    })
}

impl StaticPolicy {
    /// Upstream `NewStaticPolicy`: validate the options against the machine and the topology
    /// manager policy, then choose the reserved CPUs. `num_reserved` is the rounded-up CPU
    /// reservation; an explicit set must have exactly that size, as upstream checks.
    pub fn new(
        index: Arc<TopologyIndex>,
        num_reserved: usize,
        explicit_reserved: &CpuSet,
        options: StaticPolicyOptions,
        topology_manager_policy: PolicyName,
    ) -> Result<StaticPolicy, PolicyError> {
        options.validate(index.counts(), topology_manager_policy)?;
        let mut policy = StaticPolicy {
            cpu_group_size: index.topology().cpus_per_core(),
            index,
            reserved: CpuSet::new(),
            reserved_physical: CpuSet::new(),
            options,
            cpus_to_reuse: BTreeMap::new(),
            pod_level: PodLevelResources::default(),
        };
        let reserved = if explicit_reserved.is_empty() {
            let all = policy.index.all_cpus().clone();
            policy
                .take_by_topology(&all, num_reserved)
                .unwrap_or_default()
        } else {
            explicit_reserved.clone()
        };
        if reserved.len() != num_reserved {
            return Err(PolicyError::Reservation {
                reserved: reserved.to_string(),
                wanted: num_reserved,
            });
        }
        if let Some(cpu) = reserved
            .iter()
            .find(|&c| policy.index.topology().cpu(c).is_none())
        {
            return Err(PolicyError::UnknownReservedCpu { cpu });
        }
        policy.reserved_physical = policy.index.core_siblings(&reserved);
        policy.reserved = reserved;
        Ok(policy)
    }

    /// The reserved CPUs.
    pub fn reserved_cpus(&self) -> &CpuSet {
        &self.reserved
    }

    /// The reserved CPUs and their core siblings (upstream `reservedPhysicalCPUs`).
    pub fn reserved_physical_cpus(&self) -> &CpuSet {
        &self.reserved_physical
    }

    /// The options in force.
    pub fn options(&self) -> &StaticPolicyOptions {
        &self.options
    }

    /// The CPUs of finished init containers the pod's next containers may reuse.
    pub fn cpus_to_reuse(&self, pod_uid: &str) -> CpuSet {
        self.cpus_to_reuse.get(pod_uid).cloned().unwrap_or_default()
    }

    /// Upstream `GetAvailableCPUs`: the shared pool minus the reserved CPUs.
    pub fn available_cpus(&self, state: &CpuState) -> CpuSet {
        state.default_cpu_set().difference(&self.reserved)
    }

    /// Upstream `generateCPUTopologyHints`.
    pub fn generate_hints(
        &self,
        available: &CpuSet,
        reusable: &CpuSet,
        request: usize,
    ) -> Vec<TopologyHint> {
        generate_cpu_topology_hints(
            &self.index,
            available,
            reusable,
            request,
            self.options.socket_alignment(),
        )
    }

    fn update_cpus_to_reuse(&mut self, pod: &Pod, container: &Container, cpus: &CpuSet) {
        self.cpus_to_reuse.retain(|uid, _| *uid == pod.uid);
        let reuse = self.cpus_to_reuse.entry(pod.uid.clone()).or_default();
        if let Some(init) = pod
            .init_containers
            .iter()
            .find(|c| c.name == container.name)
            && !init.is_restartable()
        {
            reuse.union_with(cpus);
            return;
        }
        reuse.difference_with(cpus);
    }

    /// Whether pod-level resources leave `pod` to the shared pool (the gate off).
    fn skips(&self, pod: &Pod) -> bool {
        pod.has_pod_level_resources() && !pod.is_managed_at_pod_level(self.pod_level)
    }

    /// Upstream `enforceSMTAlignment`: with `full-pcpus-only`, whole cores that are free.
    pub(super) fn enforce_smt_alignment(
        &self,
        state: &CpuState,
        num_cpus: usize,
    ) -> Result<(), SmtAlignmentError> {
        if !self.options.full_physical_cpus_only {
            return Ok(());
        }
        let group = self.cpu_group_size.max(1);
        if !num_cpus.is_multiple_of(group) {
            return Err(SmtAlignmentError {
                requested_cpus: num_cpus,
                cpus_per_core: self.cpu_group_size,
                available_physical_cpus: 0,
                caused_by_physical_cpus: false,
            });
        }
        let available_physical = state
            .default_cpu_set()
            .difference(&self.reserved_physical)
            .len();
        if num_cpus > available_physical {
            return Err(SmtAlignmentError {
                requested_cpus: num_cpus,
                cpus_per_core: self.cpu_group_size,
                available_physical_cpus: available_physical,
                caused_by_physical_cpus: true,
            });
        }
        Ok(())
    }

    /// CPUs assigned to the pod's containers other than `container`.
    fn siblings_cpus(state: &CpuState, pod_uid: &str, container: &str) -> CpuSet {
        let mut out = CpuSet::new();
        for (name, cpus) in state.assignments().get(pod_uid).into_iter().flatten() {
            if name != container {
                out.union_with(cpus);
            }
        }
        out
    }

    /// A non-restartable init container whose entry is smaller than its request: corral
    /// released its unreused CPUs after it terminated.
    fn is_released_init(
        pod: &Pod,
        container: &Container,
        allocated: &CpuSet,
        requested: usize,
    ) -> bool {
        allocated.len() < requested
            && pod
                .init_containers
                .iter()
                .any(|c| c.name == container.name && !c.is_restartable())
    }
}

impl Policy for StaticPolicy {
    /// The policy with its CPUs to reuse.
    fn snapshot(&self) -> Option<Box<dyn Policy>> {
        Some(Box::new(self.clone()))
    }

    fn name(&self) -> &'static str {
        "static"
    }

    /// Upstream `validateState` (plus corral's cross-pod overlap check).
    fn start(&mut self, state: &mut CpuState) -> Result<(), ValidationError> {
        let mut all = self.index.all_cpus().clone();
        if self.options.strict_cpu_reservation {
            all.difference_with(&self.reserved);
        }
        let default = state.default_cpu_set().clone();
        if default.is_empty() {
            if !state.assignments().is_empty() {
                return Err(ValidationError::EmptyDefaultSet);
            }
            state.set_default_cpu_set(all);
            return Ok(());
        }
        if self.options.strict_cpu_reservation {
            let found = self.reserved.intersection(&default);
            if !found.is_empty() {
                return Err(ValidationError::StrictReservedInDefault {
                    reserved: found.to_string(),
                    default: default.to_string(),
                });
            }
        } else if !self.reserved.is_subset_of(&default) {
            return Err(ValidationError::ReservedNotInDefault {
                reserved: self.reserved.to_string(),
                default: default.to_string(),
            });
        }
        for (pod, containers) in state.assignments() {
            for (container, cpus) in containers {
                if cpus.intersects(&default) {
                    return Err(ValidationError::OverlapsDefault {
                        pod: pod.clone(),
                        container: container.clone(),
                        cpus: cpus.to_string(),
                        default: default.to_string(),
                    });
                }
            }
        }
        let mut owner: BTreeMap<usize, (&String, &String)> = BTreeMap::new();
        for (pod, containers) in state.assignments() {
            for (container, cpus) in containers {
                for cpu in cpus {
                    if let Some((other_pod, other_container)) = owner.insert(cpu, (pod, container))
                        && other_pod != pod
                    {
                        return Err(ValidationError::CrossPodOverlap {
                            pod: pod.clone(),
                            container: container.clone(),
                            cpu,
                            other_pod: other_pod.clone(),
                            other_container: other_container.clone(),
                        });
                    }
                }
            }
        }
        let mut known = default.union(&state.exclusive_cpus());
        for cpus in state.pod_cpu_sets().values() {
            known.union_with(cpus);
        }
        if known != all {
            return Err(ValidationError::CpusChanged {
                machine: all.to_string(),
                state: known.to_string(),
            });
        }
        Ok(())
    }

    fn allocate(
        &mut self,
        state: &mut CpuState,
        pod: &Pod,
        container: &Container,
        affinity: TopologyHint,
    ) -> Result<(), AllocateError> {
        let _span = log::allocate_span(pod, container).entered();
        let _end = log::AllocateLog::start();
        let num_cpus = self.guaranteed_cpus_of(pod, container);
        // Pod-level resources: the shared pool while PodLevelResourceManagers is off (v1.36).
        if num_cpus == 0 || self.skips(pod) {
            return Ok(());
        }
        self.enforce_smt_alignment(state, num_cpus)?;
        if let Some(cpus) = state.cpu_set(&pod.uid, &container.name).cloned() {
            self.update_cpus_to_reuse(pod, container, &cpus);
            log::already_present();
            return Ok(());
        }
        log::topology_affinity(affinity);
        let reusable = self.cpus_to_reuse(&pod.uid);
        let cpus = self
            .allocate_cpus(state, num_cpus, affinity.numa_affinity, &reusable)
            .inspect_err(|err| log::unable_to_allocate(num_cpus, err))?;
        state.set_cpu_set(&pod.uid, &container.name, cpus.clone());
        self.update_cpus_to_reuse(pod, container, &cpus);
        log::allocated(&cpus);
        Ok(())
    }

    fn remove_container(&mut self, state: &mut CpuState, pod_uid: &str, container: &str) {
        if Self::remove_pod_level_container(state, pod_uid, container) {
            return;
        }
        let in_use = Self::siblings_cpus(state, pod_uid, container);
        if let Some(release) = state.cpu_set(pod_uid, container).cloned() {
            state.delete(pod_uid, container);
            let release = release.difference(&in_use);
            state.set_default_cpu_set(state.default_cpu_set().union(&release));
        }
    }

    fn allocate_pod(
        &mut self,
        state: &mut CpuState,
        pod: &Pod,
        affinity: TopologyHint,
    ) -> Result<(), AllocateError> {
        let _span = log::allocate_pod_span(pod).entered();
        tracing::trace!("AllocatePod called for pod-level managed pod");
        self.allocate_pod_cpus(state, pod, affinity)
    }

    fn forget_pod(&mut self, pod_uid: &str) {
        self.cpus_to_reuse.remove(pod_uid);
    }

    fn set_pod_level_resources(&mut self, mode: PodLevelResources) {
        self.pod_level = mode;
    }

    fn hints_for_container(
        &self,
        state: &CpuState,
        pod: &Pod,
        container: &Container,
    ) -> ProviderHints {
        as_lists(self.container_hints(state, pod, container, HintForm::List))
    }

    fn hint_sets_for_container(
        &self,
        state: &CpuState,
        pod: &Pod,
        container: &Container,
    ) -> ProviderHintSets {
        self.container_hints(state, pod, container, HintForm::Family)
    }

    fn hints_for_pod(&self, state: &CpuState, pod: &Pod) -> ProviderHints {
        as_lists(self.pod_hints(state, pod, HintForm::List))
    }

    fn hint_sets_for_pod(&self, state: &CpuState, pod: &Pod) -> ProviderHintSets {
        self.pod_hints(state, pod, HintForm::Family)
    }

    fn allocatable_cpus(&self, _state: &CpuState) -> CpuSet {
        self.index.all_cpus().difference(&self.reserved)
    }

    fn aligns_physical_cpus(&self) -> bool {
        self.options.full_physical_cpus_only
    }

    fn release_terminated_init_container(
        &mut self,
        state: &mut CpuState,
        pod: &Pod,
        container: &str,
    ) -> bool {
        let is_init = pod
            .init_containers
            .iter()
            .any(|c| c.name == container && !c.is_restartable());
        if !is_init {
            return false;
        }
        let Some(cpus) = state.cpu_set(&pod.uid, container).cloned() else {
            return false;
        };
        let in_use = Self::siblings_cpus(state, &pod.uid, container);
        let release = cpus.difference(&in_use);
        if release.is_empty() {
            return false;
        }
        state.set_cpu_set(&pod.uid, container, cpus.intersection(&in_use));
        state.set_default_cpu_set(state.default_cpu_set().union(&release));
        if let Some(reuse) = self.cpus_to_reuse.get_mut(&pod.uid) {
            reuse.difference_with(&release);
        }
        true
    }
}

impl StaticPolicy {
    /// The CPU hints of `available` and `reusable` CPUs for `request`, in `form`.
    fn hint_set(
        &self,
        form: HintForm,
        available: &CpuSet,
        reusable: &CpuSet,
        request: usize,
    ) -> HintSet {
        match form {
            HintForm::List => HintSet::List(self.generate_hints(available, reusable, request)),
            HintForm::Family => HintSet::Family(cpu_topology_hint_family(
                &self.index,
                available,
                reusable,
                request,
                self.options.socket_alignment(),
            )),
        }
    }

    /// Upstream `GetTopologyHints`, in `form`.
    fn container_hints(
        &self,
        state: &CpuState,
        pod: &Pod,
        container: &Container,
        form: HintForm,
    ) -> ProviderHintSets {
        let requested = self.guaranteed_cpus_of(pod, container);
        if requested == 0 || self.skips(pod) {
            return None;
        }
        if let Some(allocated) = state.cpu_set(&pod.uid, &container.name) {
            if allocated.len() != requested {
                if Self::is_released_init(pod, container, allocated, requested) {
                    return None;
                }
                log::different_number(pod, container, requested, allocated.len());
                return cpu_hints(HintSet::List(Vec::new()));
            }
            log::regenerating(pod, Some(container));
            return cpu_hints(self.hint_set(form, allocated, &CpuSet::new(), requested));
        }
        let available = self.available_cpus(state);
        let reusable = self.cpus_to_reuse(&pod.uid);
        let hints = self.hint_set(form, &available, &reusable, requested);
        log::hints_generated(pod, Some(container), &hints);
        cpu_hints(hints)
    }

    /// Upstream `GetPodTopologyHints`, in `form`.
    fn pod_hints(&self, state: &CpuState, pod: &Pod, form: HintForm) -> ProviderHintSets {
        let requested = self.pod_guaranteed_cpus_of(pod);
        if requested == 0 || self.skips(pod) {
            return None;
        }
        if pod.is_managed_at_pod_level(self.pod_level) {
            if validate_pod_scope_resources(pod).is_err() {
                return cpu_hints(HintSet::List(Vec::new()));
            }
            // v1.38 (#141041): a pod whose CPUs were restored gets its hints from them (its
            // containers' entries overlap and share the pod's pool), none if they are not
            // its budget.
            if let Some(pod_cpus) = state.pod_cpu_set(&pod.uid) {
                if pod_cpus.len() != requested {
                    return cpu_hints(HintSet::List(Vec::new()));
                }
                log::regenerating(pod, None);
                return cpu_hints(self.hint_set(form, pod_cpus, &CpuSet::new(), requested));
            }
        }
        let mut assigned = CpuSet::new();
        for container in pod.init_containers.iter().chain(&pod.containers) {
            let by_container = self.guaranteed_cpus_of(pod, container);
            if let Some(allocated) = state.cpu_set(&pod.uid, &container.name) {
                if allocated.len() != by_container {
                    if Self::is_released_init(pod, container, allocated, by_container) {
                        continue;
                    }
                    log::different_number(pod, container, by_container, allocated.len());
                    return cpu_hints(HintSet::List(Vec::new()));
                }
                assigned.union_with(allocated);
            }
        }
        if assigned.len() == requested {
            log::regenerating(pod, None);
            return cpu_hints(self.hint_set(form, &assigned, &CpuSet::new(), requested));
        }
        let available = self.available_cpus(state);
        let reusable = self.cpus_to_reuse(&pod.uid).union(&assigned);
        let hints = self.hint_set(form, &available, &reusable, requested);
        log::hints_generated(pod, None, &hints);
        cpu_hints(hints)
    }
}
