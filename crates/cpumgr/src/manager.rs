//! [`CpuManager`]: upstream's `cpumanager.manager` — policy, state, persistence, stale-state
//! removal, reconciliation and queries behind one lock, and the topology manager's
//! [`HintProvider`].
//!
//! Unlike upstream, every operation that changes the state writes the checkpoint once, after
//! the whole change (upstream writes after each of its `Set…` calls, so a crash between the
//! default-set write and the assignment write leaves a state it then refuses), and a failed
//! write rolls the in-memory state back and returns the error (upstream only logs it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use corral_topology::{
    AffinityStore, AllocationError, Container, CpuSet, CpuTopology, HintProvider, Pod, PolicyName,
    ProviderHints, TopologyHint,
};

use crate::container_map::ContainerMap;
use crate::index::TopologyIndex;
use crate::options::StaticPolicyOptions;
use crate::policy::{
    AllocateError, NonePolicy, Policy, PolicyError, StaticPolicy, ValidationError, guaranteed_cpus,
};
use crate::runtime::{
    ContainerRuntime, ContainerState, PodSource, ReconcileReport, ReconciledContainer,
};
use crate::state::{CpuState, RestoreError, StateBackend, StateIoError, restore};

/// The CPU manager's configuration (the kubelet's `cpuManagerPolicy`,
/// `cpuManagerPolicyOptions`, `cpuManagerReconcilePeriod`, CPU reservation and
/// `reservedSystemCPUs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuManagerConfig {
    /// `none` or `static`.
    pub policy: String,
    /// Static policy options by name.
    pub policy_options: BTreeMap<String, String>,
    /// How often the agent should call [`CpuManager::reconcile_once`].
    pub reconcile_period: Duration,
    /// `systemReserved.cpu + kubeReserved.cpu` in millicores; `None` when not given (the
    /// static policy then needs `reserved_system_cpus`).
    pub reserved_cpu_millis: Option<i64>,
    /// `reservedSystemCPUs`: explicit reserved CPUs (empty = choose by topology).
    pub reserved_system_cpus: CpuSet,
    /// The topology manager's policy (`align-by-socket` is refused with `single-numa-node`).
    pub topology_manager_policy: PolicyName,
}

impl Default for CpuManagerConfig {
    fn default() -> Self {
        CpuManagerConfig {
            policy: "none".to_owned(),
            policy_options: BTreeMap::new(),
            reconcile_period: Duration::from_secs(10),
            reserved_cpu_millis: None,
            reserved_system_cpus: CpuSet::new(),
            topology_manager_policy: PolicyName::None,
        }
    }
}

impl CpuManagerConfig {
    /// Check everything [`CpuManager::new`] refuses without looking at the machine: the
    /// policy name; the options (names, values, combinations; the `none` policy takes none;
    /// `align-by-socket` not with the topology manager's `single-numa-node`); the static
    /// policy's reservation (given, above zero, and an explicit `reserved_system_cpus` of
    /// the reserved size). Errors are the ones [`CpuManager::new`] returns, which runs this
    /// first: a configuration that passes can still be refused there only for the machine
    /// (too few CPUs, an unknown reserved CPU, `align-by-socket` on more sockets than NUMA
    /// nodes).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use corral_cpumgr::CpuManagerConfig;
    ///
    /// let config = CpuManagerConfig {
    ///     policy: "static".into(),
    ///     policy_options: BTreeMap::from([("bogus".into(), "true".into())]),
    ///     reserved_cpu_millis: Some(1000),
    ///     ..CpuManagerConfig::default()
    /// };
    /// let err = config.validate().unwrap_err();
    /// let cause = std::error::Error::source(&err).unwrap();
    /// assert_eq!(cause.to_string(), "unknown CPU Manager Policy option: \"bogus\"");
    /// ```
    pub fn validate(&self) -> Result<(), CpuManagerError> {
        self.checked_policy().map(|_| ())
    }

    /// The policy to build, once [`validate`](Self::validate)'s checks passed.
    fn checked_policy(&self) -> Result<CheckedPolicy, CpuManagerError> {
        let wrap = |source| CpuManagerError::Policy {
            policy: self.policy.clone(),
            source: Box::new(source),
        };
        match self.policy.as_str() {
            "none" => {
                NonePolicy::new(&self.policy_options).map_err(|e| wrap(e.into()))?;
                Ok(CheckedPolicy::None)
            }
            "static" => {
                let millis = match self.reserved_cpu_millis {
                    Some(m) => m,
                    None if !self.reserved_system_cpus.is_empty() => {
                        self.reserved_system_cpus.len() as i64 * 1000
                    }
                    None => return Err(wrap(PolicyError::NoReservation)),
                };
                if millis <= 0 {
                    return Err(wrap(PolicyError::ZeroReservation));
                }
                let num_reserved = usize::try_from((millis + 999) / 1000).unwrap_or(usize::MAX);
                let options = StaticPolicyOptions::from_map(&self.policy_options)
                    .map_err(|e| wrap(e.into()))?;
                options
                    .validate_policy(self.topology_manager_policy)
                    .map_err(|e| wrap(e.into()))?;
                let explicit = &self.reserved_system_cpus;
                if !explicit.is_empty() && explicit.len() != num_reserved {
                    return Err(wrap(PolicyError::Reservation {
                        reserved: explicit.to_string(),
                        wanted: num_reserved,
                    }));
                }
                Ok(CheckedPolicy::Static {
                    num_reserved,
                    options,
                })
            }
            other => Err(wrap(PolicyError::UnknownPolicy {
                name: other.to_owned(),
            })),
        }
    }
}

/// A policy [`CpuManagerConfig::checked_policy`] accepted, still to be built on the machine.
enum CheckedPolicy {
    None,
    Static {
        num_reserved: usize,
        options: StaticPolicyOptions,
    },
}

/// Why a manager operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CpuManagerError {
    /// The policy could not be created.
    #[error("new {policy} policy error: {source}")]
    Policy {
        /// The policy name.
        policy: String,
        /// Why.
        #[source]
        source: Box<PolicyError>,
    },
    /// The persisted state could not be restored (the message names the file and remedy).
    #[error(transparent)]
    Restore(Box<RestoreError>),
    /// The restored state is inconsistent with the configuration or the machine.
    #[error(
        "static policy invalid state in {file}: {source}; {hint}drain this node, delete {file} and restart"
    )]
    InvalidState {
        /// The checkpoint file.
        file: String,
        /// What is wrong.
        #[source]
        source: Box<ValidationError>,
        /// Extra context for the remedy.
        hint: &'static str,
    },
    /// The state could not be persisted; the change was rolled back.
    #[error("{0}; the change was rolled back")]
    Persist(#[source] StateIoError),
    /// Allocation failed.
    #[error(transparent)]
    Allocate(#[from] AllocateError),
    /// [`CpuManager::start`] was not called (or failed).
    #[error("the CPU manager has not been started")]
    NotStarted,
}

/// Counters with upstream's metric names (`pkg/kubelet/metrics/metrics.go`), counted where
/// upstream's static policy counts them (`Allocate`, `updateMetricsOnAllocate`).
#[derive(Debug, Default)]
pub struct CpuManagerMetrics {
    /// `kubelet_cpu_manager_pinning_requests_total`: allocations of a container that needs
    /// exclusive CPUs (static policy).
    pub pinning_requests_total: AtomicU64,
    /// `kubelet_cpu_manager_pinning_errors_total`: those that failed.
    pub pinning_errors_total: AtomicU64,
    /// `kubelet_container_aligned_compute_resources_count{scope="container",
    /// boundary="physical_cpu"}`: pinned allocations that succeeded with `full-pcpus-only`.
    pub aligned_physical_cpu_total: AtomicU64,
    /// `kubelet_container_aligned_compute_resources_failure_count{scope="container",
    /// boundary="physical_cpu"}`: pinned allocations that failed with `full-pcpus-only`.
    pub aligned_physical_cpu_failures_total: AtomicU64,
    /// `kubelet_container_aligned_compute_resources_count{scope="container",
    /// boundary="uncore_cache"}`: new exclusive allocations whose CPUs all share one uncore
    /// cache (upstream `Allocation.Aligned.UncoreCache`, whatever the options).
    pub aligned_uncore_cache_total: AtomicU64,
}

struct Edges {
    backend: Box<dyn StateBackend>,
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
}

impl Inner {
    /// Persist the state if it changed since `before`; roll back on failure.
    fn commit(&mut self, before: CpuState) -> Result<(), CpuManagerError> {
        if self.state == before {
            return Ok(());
        }
        let Some(edges) = self.edges.as_mut() else {
            return Ok(());
        };
        let checkpoint = self.state.to_checkpoint(self.policy.name());
        if let Err(e) = edges.backend.store(&checkpoint) {
            self.state = before;
            return Err(CpuManagerError::Persist(e));
        }
        Ok(())
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
/// use corral_cpumgr::{ContainerMap, CpuManager, CpuManagerConfig, MemoryBackend, PodSource, PodStatus,
///     ContainerRuntime, RuntimeError};
/// use corral_topology::{Container, CpuInfo, CpuRecord, CpuSet, CpuTopology, Pod, TopologyHint};
///
/// struct NoPods;
/// impl PodSource for NoPods {
///     fn active_pods(&self) -> Vec<Pod> { Vec::new() }
///     fn pod_status(&self, _: &str) -> Option<PodStatus> { None }
/// }
/// struct NoRuntime;
/// impl ContainerRuntime for NoRuntime {
///     fn update_container_cpuset(&self, _: &str, _: &CpuSet) -> Result<(), RuntimeError> { Ok(()) }
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
/// manager.start(Box::new(MemoryBackend::new()), Arc::new(NoPods), Arc::new(NoRuntime), ContainerMap::new())?;
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
            }),
        }
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
        mut backend: Box<dyn StateBackend>,
        pods: Arc<dyn PodSource>,
        runtime: Arc<dyn ContainerRuntime>,
        initial_containers: ContainerMap,
    ) -> Result<(), CpuManagerError> {
        let mut inner = self.lock();
        let name = inner.policy.name();
        let file = backend.location();
        let restored = restore(backend.as_mut(), name, &|id| {
            initial_containers
                .container_ref(id)
                .map(|(p, c)| (p.to_owned(), c.to_owned()))
        })
        .map_err(|e| CpuManagerError::Restore(Box::new(e)))?;
        let mut state = restored.state.clone();
        inner
            .policy
            .start(&mut state)
            .map_err(|source| CpuManagerError::InvalidState {
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
            backend,
            pods,
            runtime,
        });
        inner.commit(restored.state)
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

    /// Upstream `Allocate`: remove stale state, then let the policy assign CPUs, aligned with
    /// `affinity` (the topology manager's decision for this container).
    pub fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: TopologyHint,
    ) -> Result<(), CpuManagerError> {
        self.remove_stale_from_source(Some(pod));
        let mut inner = self.lock();
        let pinning = inner.policy.name() == "static" && guaranteed_cpus(pod, container) > 0;
        if pinning {
            self.metrics
                .pinning_requests_total
                .fetch_add(1, Ordering::Relaxed);
        }
        let before = inner.state.clone();
        let had_cpus = before.cpu_set(&pod.uid, &container.name).is_some();
        let Inner { policy, state, .. } = &mut *inner;
        let result = policy
            .allocate(state, pod, container, affinity)
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
        result
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
        self.lock()
            .state
            .cpu_set(pod_uid, container)
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

    /// Upstream `reconcileState`, once: push each running container's cpuset to the runtime
    /// when it differs from the last one pushed; skip waiting containers, report successes
    /// and failures. corral also returns the unreused CPUs of terminated init containers to
    /// the shared pool (upstream #112228). Does nothing before [`start`](Self::start).
    pub fn reconcile_once(&self) -> ReconcileReport {
        let mut report = ReconcileReport::default();
        let Some((pods, runtime)) = self
            .lock()
            .edges
            .as_ref()
            .map(|e| (Arc::clone(&e.pods), Arc::clone(&e.runtime)))
        else {
            return report;
        };
        self.remove_stale_from_source(None);
        for pod in pods.active_pods() {
            let entry = |name: &str, id: &str| ReconciledContainer {
                pod_name: pod.name.clone(),
                container_name: name.to_owned(),
                container_id: id.to_owned(),
            };
            let Some(status) = pods.pod_status(&pod.uid) else {
                report.failure.push(entry("", ""));
                continue;
            };
            for (_, container) in pod.all_containers() {
                let name = container.name.as_str();
                let Ok(id) = status.container_id(name) else {
                    report.failure.push(entry(name, ""));
                    continue;
                };
                let Some(cstatus) = status.container_status(name) else {
                    report.failure.push(entry(name, ""));
                    continue;
                };
                match cstatus.state {
                    ContainerState::Waiting | ContainerState::Unknown => {
                        report.failure.push(entry(name, ""));
                        continue;
                    }
                    ContainerState::Terminated => {
                        let mut inner = self.lock();
                        let before = inner.state.clone();
                        let Inner { policy, state, .. } = &mut *inner;
                        if policy.release_terminated_init_container(state, &pod, name)
                            && inner.commit(before).is_ok()
                        {
                            report.released_init_containers.push(entry(name, &id));
                        }
                        continue;
                    }
                    ContainerState::Running => {}
                }
                let (cpus, last) = {
                    let mut inner = self.lock();
                    inner.containers.add(&pod.uid, name, &id);
                    // As upstream, an empty assignment is skipped (reported below), except
                    // for an init container whose CPUs corral handed back: it runs in the
                    // shared pool.
                    let released_init = pod
                        .init_containers
                        .iter()
                        .any(|c| c.name == name && !c.is_restartable());
                    let cpus = match inner.state.cpu_set(&pod.uid, name) {
                        Some(cpus) if cpus.is_empty() && released_init => {
                            inner.state.default_cpu_set().clone()
                        }
                        Some(cpus) => cpus.clone(),
                        None => inner.state.default_cpu_set().clone(),
                    };
                    let last = inner.last_update.cpu_set_or_default(&pod.uid, name).clone();
                    (cpus, last)
                };
                if cpus.is_empty() {
                    report.failure.push(entry(name, &id));
                    continue;
                }
                if cpus != last {
                    if runtime.update_container_cpuset(&id, &cpus).is_err() {
                        report.failure.push(entry(name, &id));
                        continue;
                    }
                    self.lock().last_update.set_cpu_set(&pod.uid, name, cpus);
                }
                report.success.push(entry(name, &id));
            }
        }
        report
    }
}

impl HintProvider for CpuManager {
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

    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        store: &AffinityStore,
    ) -> Result<(), AllocationError> {
        let affinity = store.affinity(&pod.uid, &container.name);
        CpuManager::allocate(self, pod, container, affinity).map_err(|e| match e {
            CpuManagerError::Allocate(a) => a.into(),
            other => AllocationError::unexpected(other),
        })
    }
}
