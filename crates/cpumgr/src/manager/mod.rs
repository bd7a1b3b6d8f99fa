//! [`CpuManager`]: upstream's `cpumanager.manager` — policy, state, persistence, stale-state
//! removal, allocation and queries behind one lock. Beside it: its configuration
//! (`config`), error (`error`), counters (`metrics`), `reconcile_once` (`reconcile`), the
//! policy's undo (`undo`) and the topology manager's
//! [`HintProvider`](corral_topology::HintProvider) (`hint_provider`).
//!
//! Unlike upstream, every operation that changes the state writes the checkpoint once, after
//! the whole change (upstream writes after each of its `Set…` calls, so a crash between the
//! default-set write and the assignment write leaves a state it then refuses), and a failed
//! write rolls the in-memory state back and returns the error (upstream only logs it).

mod config;
mod error;
mod hint_provider;
mod metrics;
mod reconcile;
#[cfg(test)]
mod test_machine;
mod undo;

pub use config::CpuManagerConfig;
pub use error::CpuManagerError;
pub use metrics::CpuManagerMetrics;
pub use undo::{CpuTrial, PolicySnapshot};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use corral_checkpoint::StateFile;
use corral_topology::{
    Container, CpuSet, CpuTopology, Pod, PodLevelResources, TopologyHint,
    topologymanager::{DECISION_STEPS, bounded_apart},
};

use self::config::CheckedPolicy;
use crate::container_map::ContainerMap;
use crate::index::TopologyIndex;
use crate::policy::{NonePolicy, Policy, StaticPolicy, ValidationError, guaranteed_cpus};
use crate::runtime::{CfsQuota, ContainerRuntime, CpuQuotaPolicy, PodSource};
use crate::state::{CpuState, CpuStateFileVersion, restore_writing};

/// Whether starting validates the restored state with the policy (upstream `Start`).
enum Validation {
    Policy,
    #[cfg_attr(not(feature = "test-util"), allow(dead_code))]
    Skip,
}

struct Edges {
    state_file: StateFile,
    pods: Arc<dyn PodSource>,
    runtime: Arc<dyn ContainerRuntime>,
}

struct Inner {
    policy: Box<dyn Policy>,
    state: CpuState,
    /// The cpuset last pushed to each container (upstream `lastUpdateState`).
    last_update: CpuState,
    containers: ContainerMap,
    allocatable: CpuSet,
    edges: Option<Edges>,
    /// The pod source's generation and the pending pod of the last stale-state sweep.
    last_sweep: Option<(u64, Option<String>)>,
    /// The `cpu_manager_state` version written.
    file_version: CpuStateFileVersion,
    /// How pods with pod-level resources are treated.
    pod_level: PodLevelResources,
    /// A trial is under way (`undo.rs`): nothing is written or counted.
    trial: bool,
    /// During a trial, the state as it found it (what the reconcile pass pushes).
    before_trial: Option<CpuState>,
}

impl Inner {
    /// Persist the state if it changed since `before`; roll back on failure.
    fn commit(&mut self, before: CpuState) -> Result<(), CpuManagerError> {
        if self.state == before || self.trial {
            return Ok(());
        }
        let Some(edges) = self.edges.as_mut() else {
            return Ok(());
        };
        let file = self.state.to_file(self.policy.name(), self.file_version);
        if let Err(e) = crate::state::stage(&edges.state_file, &file) {
            self.state = before;
            return Err(CpuManagerError::Persist(e));
        }
        Ok(())
    }

    fn exclusive_cpus(&self, pod_uid: &str, container: &str) -> CpuSet {
        self.state
            .cpu_set(pod_uid, container)
            .cloned()
            .unwrap_or_default()
    }

    fn remove_by_ref(&mut self, pod_uid: &str, container: &str) {
        self.policy
            .remove_container(&mut self.state, pod_uid, container);
        self.last_update.delete(pod_uid, container);
        self.containers.remove_by_container_ref(pod_uid, container);
    }
}

/// The CPU manager.
///
/// ```
/// use std::sync::Arc;
/// use corral_cpumgr::{CfsQuota, ContainerMap, CpuManager, CpuManagerConfig, PodSource,
///     PodStatus, ContainerRuntime, RuntimeError};
/// use corral_checkpoint::StateFile;
/// use corral_topology::{Container, CpuInfo, CpuRecord, CpuSet, CpuTopology, Pod, TopologyHint};
///
/// struct NoPods;
/// impl PodSource for NoPods {
///     fn active_pods(&self) -> Vec<Pod> { Vec::new() }
///     fn pod_status(&self, _: &str) -> Option<PodStatus> { None }
/// }
/// struct NoRuntime;
/// #[corral_cpumgr::async_trait]
/// impl ContainerRuntime for NoRuntime {
///     async fn update_container_cpuset(&self, _: &str, _: &CpuSet, _: CfsQuota) -> Result<(), RuntimeError> { Ok(()) }
/// }
///
/// // 1 socket, 4 cores × 2 threads; reserve 1 CPU.
/// let records: Vec<CpuRecord> = (0..8)
///     .map(|cpu| CpuRecord { cpu, info: CpuInfo { core: cpu % 4, socket: 0, numa: 0, uncore: 0 } })
///     .collect();
/// let topology = CpuTopology::new(&records)?;
/// let config = CpuManagerConfig {
///     policy: "static".into(),
///     reserved_cpu_millis: Some(1000),
///     ..CpuManagerConfig::default()
/// };
/// let manager = CpuManager::new(&config, &topology)?;
/// manager.start(StateFile::in_memory(), Arc::new(NoPods), Arc::new(NoRuntime), ContainerMap::new())?;
///
/// let mut app = Container::new("app");
/// for list in [&mut app.resources.requests, &mut app.resources.limits] {
///     list.cpu_millis = Some(2000);
///     list.memory_bytes = Some(1 << 30);
/// }
/// let pod = Pod { uid: "uid".into(), name: "p".into(), containers: vec![app.clone()], ..Pod::default() };
/// manager.allocate(&pod, &app, TopologyHint::default())?;
/// assert_eq!(manager.exclusive_cpus("uid", "app").to_string(), "1,5");
/// assert_eq!(manager.state().default_cpu_set().to_string(), "0,2-4,6-7");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CpuManager {
    index: Arc<TopologyIndex>,
    quota_policy: CpuQuotaPolicy,
    start_validation: Validation,
    reconcile_period: Duration,
    metrics: CpuManagerMetrics,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for CpuManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuManager")
            .field("policy", &self.lock().policy)
            .field("reconcile_period", &self.reconcile_period)
            .finish_non_exhaustive()
    }
}

impl CpuManager {
    /// Upstream `NewManager`: create the policy from the configuration
    /// ([`CpuManagerConfig::validate`]'s checks, then the machine's).
    pub fn new(
        config: &CpuManagerConfig,
        topology: &CpuTopology,
    ) -> Result<CpuManager, CpuManagerError> {
        let index = Arc::new(TopologyIndex::new(topology));
        let policy: Box<dyn Policy> = match config.checked_policy()? {
            CheckedPolicy::None => Box::new(NonePolicy),
            CheckedPolicy::Static {
                num_reserved,
                options,
            } => Box::new(
                StaticPolicy::new(
                    Arc::clone(&index),
                    num_reserved,
                    &config.reserved_system_cpus,
                    options,
                    config.topology_manager_policy,
                )
                .map_err(|source| CpuManagerError::Policy {
                    policy: config.policy.clone(),
                    source: Box::new(source),
                })?,
            ),
        };
        Ok(CpuManager::with_policy(
            index,
            policy,
            config.reconcile_period,
        ))
    }

    /// A manager around an explicit policy (tests, custom policies).
    pub fn with_policy(
        index: Arc<TopologyIndex>,
        policy: Box<dyn Policy>,
        reconcile_period: Duration,
    ) -> CpuManager {
        CpuManager {
            index,
            quota_policy: CpuQuotaPolicy::default(),
            start_validation: Validation::Policy,
            reconcile_period,
            metrics: CpuManagerMetrics::default(),
            inner: Mutex::new(Inner {
                policy,
                state: CpuState::default(),
                last_update: CpuState::default(),
                containers: ContainerMap::new(),
                allocatable: CpuSet::new(),
                edges: None,
                last_sweep: None,
                file_version: CpuStateFileVersion::default(),
                pod_level: PodLevelResources::default(),
                trial: false,
                before_trial: None,
            }),
        }
    }

    /// Whether containers with exclusive CPUs run without a CFS quota (v1.36's default:
    /// they do). [`cfs_quota`](Self::cfs_quota) and reconcile's runtime updates follow it.
    pub fn with_cpu_quota_policy(mut self, policy: CpuQuotaPolicy) -> CpuManager {
        self.quota_policy = policy;
        self
    }

    /// The CFS quota the container should run with (upstream `ContainerHasExclusiveCPUs`
    /// under `DisableCPUQuotaWithExclusiveCPUs`).
    pub fn cfs_quota(&self, pod_uid: &str, container: &str) -> CfsQuota {
        let exclusive = || {
            self.lock()
                .state
                .cpu_set(pod_uid, container)
                .is_some_and(|cpus| !cpus.is_empty())
        };
        match self.quota_policy {
            CpuQuotaPolicy::UnlimitedForExclusiveCpus if exclusive() => CfsQuota::Unlimited,
            _ => CfsQuota::Unchanged,
        }
    }

    /// How pods with pod-level resources are treated (the `PodLevelResourceManagers`
    /// gate). [`PodLevelResources::Managed`] allocates their budget at pod scope
    /// ([`HintProvider::allocate_pod`](corral_topology::HintProvider::allocate_pod)), keeps
    /// the pods' CPUs in the state and writes `cpu_manager_state` v3, as a v1.36 kubelet
    /// with the gate on does (v2 otherwise).
    pub fn with_pod_level_resources(self, mode: PodLevelResources) -> CpuManager {
        {
            let mut inner = self.lock();
            inner.policy.set_pod_level_resources(mode);
            inner.pod_level = mode;
            inner.file_version = match mode {
                PodLevelResources::Managed => CpuStateFileVersion::V3,
                _ => CpuStateFileVersion::V2,
            };
        }
        self
    }

    /// Upstream `AllocatePod` (pod scope, a pod with pod-level resources, the gate on):
    /// the pod's budget aligned with `affinity`, partitioned among its containers, persisted
    /// once; nothing changes on failure, except that a pod whose restored CPUs cannot hold
    /// it gives them back (v1.38, #141041). Answers each container's exclusive CPUs (empty:
    /// the pod's shared pool).
    pub fn allocate_pod(
        &self,
        pod: &Pod,
        affinity: TopologyHint,
    ) -> Result<BTreeMap<String, CpuSet>, CpuManagerError> {
        self.remove_stale_from_source(Some(pod));
        let mut inner = self.lock();
        let before = inner.state.clone();
        let Inner { policy, state, .. } = &mut *inner;
        // A budget of its own (see `allocate`).
        let (result, _) =
            bounded_apart(DECISION_STEPS, || policy.allocate_pod(state, pod, affinity));
        if let Err(err) = result {
            // v1.38 (#141041): a pod re-admitted from restored CPUs that cannot be gives
            // them all back (the policy released them); anything else changes nothing.
            let released = before.pod_cpu_set(&pod.uid).is_some()
                && inner.state.pod_cpu_set(&pod.uid).is_none();
            if released {
                inner.commit(before)?;
            } else {
                inner.state = before;
            }
            return Err(err.into());
        }
        inner.commit(before)?;
        let granted = pod
            .all_containers()
            .map(|(_, c)| (c.name.clone(), inner.exclusive_cpus(&pod.uid, &c.name)))
            .collect();
        Ok(granted)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every operation leaves the data consistent, so a poisoned lock is usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Upstream `Start`: restore and validate the state (refusing to start with the file and
    /// the remedy named), and remember the edges. `initial_containers` resolves v1
    /// checkpoints and seeds the container map.
    pub fn start(
        &self,
        state_file: StateFile,
        pods: Arc<dyn PodSource>,
        runtime: Arc<dyn ContainerRuntime>,
        initial_containers: ContainerMap,
    ) -> Result<(), CpuManagerError> {
        let mut inner = self.lock();
        let name = inner.policy.name();
        let file = state_file.to_string();
        let version = inner.file_version;
        let restored = restore_writing(
            &state_file,
            name,
            &|id| {
                initial_containers
                    .container_ref(id)
                    .map(|(p, c)| (p.to_owned(), c.to_owned()))
            },
            version,
        )
        .map_err(|e| CpuManagerError::Restore(Box::new(e)))?;
        let mut state = restored.state.clone();
        let validated = match self.start_validation {
            Validation::Policy => inner.policy.start(&mut state),
            Validation::Skip => Ok(()),
        };
        validated.map_err(|source| CpuManagerError::InvalidState {
                hint: match &source {
                    ValidationError::CpusChanged { .. } => {
                        "the node's CPUs changed since the state was written: "
                    }
                    ValidationError::ReservedNotInDefault { .. }
                    | ValidationError::StrictReservedInDefault { .. } => {
                        "the CPU reservation changed since the state was written: either restore it, or "
                    }
                    _ => "",
                },
                file,
                source: Box::new(source),
            })?;
        inner.allocatable = inner.policy.allocatable_cpus(&state);
        inner.state = state;
        inner.containers = initial_containers;
        inner.edges = Some(Edges {
            state_file,
            pods,
            runtime,
        });
        inner.commit(restored.state)
    }

    /// Test support (feature `test-util`): [`start`](Self::start) will not have the policy
    /// validate the restored state, whatever it holds — upstream's tests build a manager
    /// around a `mockState` and never call `Start`.
    #[cfg(feature = "test-util")]
    #[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
    #[must_use]
    pub fn without_start_validation(mut self) -> CpuManager {
        self.start_validation = Validation::Skip;
        self
    }

    /// How often the agent should call [`reconcile_once`](Self::reconcile_once).
    pub fn reconcile_period(&self) -> Duration {
        self.reconcile_period
    }

    /// The policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.lock().policy.name()
    }

    /// Counters (pinning requests and errors).
    pub fn metrics(&self) -> &CpuManagerMetrics {
        &self.metrics
    }

    /// The topology the manager works on.
    pub fn topology(&self) -> &TopologyIndex {
        &self.index
    }

    /// A snapshot of the state.
    pub fn state(&self) -> CpuState {
        self.lock().state.clone()
    }

    fn pods(&self) -> Option<Arc<dyn PodSource>> {
        self.lock().edges.as_ref().map(|e| Arc::clone(&e.pods))
    }

    fn remove_stale_from_source(&self, pending: Option<&Pod>) {
        let Some(pods) = self.pods() else { return };
        if !pods.all_ready() {
            return;
        }
        let sweep = pods
            .generation()
            .map(|generation| (generation, pending.map(|p| p.uid.clone())));
        if sweep.is_some() && self.lock().last_sweep == sweep {
            return;
        }
        let active = pods.active_pods();
        // Errors are logged upstream; here the state is rolled back and kept.
        if self.remove_stale_state(&active, pending).is_ok() {
            self.lock().last_sweep = sweep;
        }
    }

    /// Upstream `removeStaleState`: release every assignment and container id whose
    /// container is in none of `active_pods` nor in `pending` (the pod being admitted).
    pub fn remove_stale_state(
        &self,
        active_pods: &[Pod],
        pending: Option<&Pod>,
    ) -> Result<(), CpuManagerError> {
        let mut active: BTreeSet<(&str, &str)> = BTreeSet::new();
        for pod in active_pods.iter().chain(pending) {
            for (_, container) in pod.all_containers() {
                active.insert((pod.uid.as_str(), container.name.as_str()));
            }
        }
        let mut inner = self.lock();
        let before = inner.state.clone();
        let mut stale: Vec<(String, String)> = Vec::new();
        for (pod, containers) in inner.state.assignments() {
            for container in containers.keys() {
                if !active.contains(&(pod.as_str(), container.as_str())) {
                    stale.push((pod.clone(), container.clone()));
                }
            }
        }
        for (_, pod, container) in inner.containers.iter() {
            if !active.contains(&(pod, container)) {
                stale.push((pod.to_owned(), container.to_owned()));
            }
        }
        for (pod, container) in stale {
            inner.remove_by_ref(&pod, &container);
        }
        inner.commit(before)
    }

    /// Give back what every container of `pod` holds (an admission undone, a pod
    /// released): exactly its containers' assignments, persisted once; and forget what the
    /// policy kept for the pod ([`Policy::forget_pod`](crate::Policy::forget_pod)).
    pub fn remove_pod_containers(&self, pod: &Pod) -> Result<(), CpuManagerError> {
        let mut inner = self.lock();
        let before = inner.state.clone();
        for (_, container) in pod.all_containers() {
            inner.remove_by_ref(&pod.uid, &container.name);
        }
        inner.policy.forget_pod(&pod.uid);
        inner.commit(before)
    }

    /// Upstream `Allocate`: remove stale state, then let the policy assign CPUs, aligned with
    /// `affinity` (the topology manager's decision for this container). Answers the
    /// container's exclusive CPUs (empty: the shared pool).
    pub fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: TopologyHint,
    ) -> Result<CpuSet, CpuManagerError> {
        self.remove_stale_from_source(Some(pod));
        let mut inner = self.lock();
        let pinning =
            !inner.trial && inner.policy.name() == "static" && guaranteed_cpus(pod, container) > 0;
        if pinning {
            self.metrics
                .pinning_requests_total
                .fetch_add(1, Ordering::Relaxed);
        }
        let before = inner.state.clone();
        let had_cpus = before.cpu_set(&pod.uid, &container.name).is_some();
        let Inner { policy, state, .. } = &mut *inner;
        // The allocation's searches (the distributed assignment walks NUMA combinations)
        // get a step budget of their own, also after a decision that used up its budget;
        // running out answers the best allocation found (see
        // `take_by_topology_numa_distributed`) and marks the decision approximate.
        let (result, _) = bounded_apart(DECISION_STEPS, || {
            policy.allocate(state, pod, container, affinity)
        });
        let result = result
            .map_err(CpuManagerError::from)
            .and_then(|()| inner.commit(before));
        if pinning {
            let count = |counter: &AtomicU64| {
                counter.fetch_add(1, Ordering::Relaxed);
            };
            let physical = inner.policy.aligns_physical_cpus();
            match &result {
                Err(_) => {
                    count(&self.metrics.pinning_errors_total);
                    if physical {
                        count(&self.metrics.aligned_physical_cpu_failures_total);
                    }
                }
                Ok(()) => {
                    if physical {
                        count(&self.metrics.aligned_physical_cpu_total);
                    }
                    // Upstream `updateMetricsOnAllocate`: only a new allocation counts.
                    let allocated = inner.state.cpu_set(&pod.uid, &container.name);
                    if !had_cpus && allocated.is_some_and(|cpus| self.index.is_uncore_aligned(cpus))
                    {
                        count(&self.metrics.aligned_uncore_cache_total);
                    }
                }
            }
        }
        result.map(|()| inner.exclusive_cpus(&pod.uid, &container.name))
    }

    /// Upstream `AddContainer`: remember the container id, and that a newly created
    /// container already has its exclusive cpuset.
    pub fn add_container(&self, pod_uid: &str, container: &str, container_id: &str) {
        let mut inner = self.lock();
        if let Some(cpus) = inner.state.cpu_set(pod_uid, container).cloned() {
            inner.last_update.set_cpu_set(pod_uid, container, cpus);
        }
        inner.containers.add(pod_uid, container, container_id);
    }

    /// Upstream `RemoveContainer`: release the container's exclusive CPUs (unknown ids are
    /// ignored).
    pub fn remove_container(&self, container_id: &str) -> Result<(), CpuManagerError> {
        let mut inner = self.lock();
        let Some((pod, container)) = inner
            .containers
            .container_ref(container_id)
            .map(|(p, c)| (p.to_owned(), c.to_owned()))
        else {
            return Ok(());
        };
        let before = inner.state.clone();
        let Inner { policy, state, .. } = &mut *inner;
        policy.remove_container(state, &pod, &container);
        inner.commit(before)?;
        inner.last_update.delete(&pod, &container);
        inner.containers.remove_by_container_id(container_id);
        Ok(())
    }

    /// Upstream `GetExclusiveCPUs`: the container's exclusive CPUs (empty if none).
    pub fn exclusive_cpus(&self, pod_uid: &str, container: &str) -> CpuSet {
        self.lock().exclusive_cpus(pod_uid, container)
    }

    /// The CPUs a pod managed at pod level holds as a whole (its budget: its containers'
    /// exclusive CPUs and its shared pool; empty for any other pod). podresources v1.37
    /// reports them as `PodResources.cpu_ids`.
    pub fn pod_cpus(&self, pod_uid: &str) -> CpuSet {
        self.lock()
            .state
            .pod_cpu_set(pod_uid)
            .cloned()
            .unwrap_or_default()
    }

    /// Upstream `GetCPUAffinity`: the container's exclusive CPUs, else the shared pool.
    /// An init container whose CPUs were all handed back (an empty entry) gets the pool.
    pub fn cpu_affinity(&self, pod_uid: &str, container: &str) -> CpuSet {
        let inner = self.lock();
        match inner.state.cpu_set(pod_uid, container) {
            Some(cpus) if !cpus.is_empty() => cpus.clone(),
            _ => inner.state.default_cpu_set().clone(),
        }
    }

    /// Upstream `GetAllocatableCPUs` (empty before start and with the `none` policy).
    pub fn allocatable_cpus(&self) -> CpuSet {
        self.lock().allocatable.clone()
    }

    /// Upstream `GetAllCPUs`.
    pub fn all_cpus(&self) -> CpuSet {
        self.index.all_cpus().clone()
    }
}
