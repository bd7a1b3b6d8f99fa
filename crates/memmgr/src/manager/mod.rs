//! [`MemoryManager`]: upstream's `memorymanager.manager` — the policy (`None` or `Static`),
//! its state persisted in `memory_manager_state`, allocation and release behind one lock,
//! and the topology manager's [`HintProvider`](corral_topology::HintProvider) (`hint_provider`). Its configuration is in `config`, its error
//! in `error`.
//!
//! Unlike upstream, a change is written once, after the whole change, and a failed write
//! rolls the in-memory state back and returns the error (upstream only logs it), so the
//! file never disagrees with what the manager hands out.

mod allocatable;
mod config;
mod error;
mod hint_provider;
mod metrics;

pub use allocatable::{EvictionThreshold, node_allocatable_reservation};
pub use config::{
    ConfigError, MemoryManagerConfig, MemoryPolicy, MemoryReservation, check_system_reserved,
};
pub use error::MemoryManagerError;
pub use metrics::MemoryManagerMetrics;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use corral_checkpoint::{
    CheckpointError, MEMORY_MANAGER_FILE, MemoryManagerCheckpoint, MemoryManagerCheckpointV2,
    MemoryManagerState, RestoreOrder, StateFile, restore_memory_manager_state,
};
use corral_topology::memory::NumaMemory;
use corral_topology::topologymanager::MemoryGrant;
use corral_topology::{Pod, PodLevelResources};

use crate::checkpoint::{from_checkpoint, from_pod_entries, to_checkpoint, to_pod_entries};
use crate::machine_state::{Assignments, Block, MachineState, default_machine_state};
use crate::static_policy::StaticPolicy;

/// The memory manager.
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_memmgr::{
///     MemoryManager, MemoryManagerConfig, MemoryPolicy, MemoryReservation, node_allocatable_reservation,
/// };
/// use corral_topology::memory::NumaMemory;
/// use corral_topology::{Container, HintProvider, Pod};
///
/// let memory = BTreeMap::from([(0, NumaMemory { node: 0, memory_bytes: 8 << 30, huge_pages: vec![] })]);
/// let config = MemoryManagerConfig {
///     policy: MemoryPolicy::Static,
///     reserved_memory: vec![MemoryReservation::new(0, [("memory", "1Gi")])?],
///     node_allocatable_reservation: node_allocatable_reservation(
///         ["memory"],
///         &MemoryReservation::limits([("memory", "1Gi")])?,
///         &BTreeMap::new(),
///         None,
///         8 << 30,
///     )?,
///     ..MemoryManagerConfig::default()
/// };
/// let manager = MemoryManager::new(&config, &memory)?;
/// manager.start(corral_checkpoint::StateFile::in_memory())?;
///
/// let mut app = Container::new("app");
/// for list in [&mut app.resources.requests, &mut app.resources.limits] {
///     list.cpu_millis = Some(1000);
///     list.memory_bytes = Some(1 << 30);
/// }
/// let pod = Pod { uid: "p".into(), containers: vec![app.clone()], ..Pod::default() };
/// let hints = manager.hints_for_container(&pod, &app).unwrap();
/// assert_eq!(hints["memory"].as_deref().map(<[_]>::len), Some(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct MemoryManager {
    policy: MemoryPolicy,
    /// The machine's state with nothing assigned (`None` for the `None` policy).
    default: Option<MachineState>,
    inner: Mutex<Inner>,
    metrics: MemoryManagerMetrics,
}

#[derive(Debug, Default)]
struct Inner {
    /// The static policy's state (`None` with the `None` policy, or before `start`).
    policy: Option<StaticPolicy>,
    /// Where the state is written (`None` before `start`).
    state_file: Option<StateFile>,
    started: bool,
    /// What containers may have, per node and resource, as of `start` (upstream computes
    /// it once, at `Start`).
    allocatable: Vec<Block>,
    /// The `memory_manager_state` version written.
    pod_level: PodLevelResources,
    /// A trial is under way ([`MemoryManager::begin_trial`]): nothing is written.
    trial: bool,
}

impl Inner {
    fn file(&self) -> String {
        match &self.state_file {
            Some(file) => file.to_string(),
            None => MEMORY_MANAGER_FILE.to_owned(),
        }
    }

    fn checkpoint(&self, policy: MemoryPolicy) -> MemoryManagerCheckpoint {
        match &self.policy {
            Some(p) => to_checkpoint(policy.name(), p.machine_state(), p.assignments()),
            None => to_checkpoint(policy.name(), &MachineState::new(), &Assignments::new()),
        }
    }

    fn write(&self, policy: MemoryPolicy) -> Result<(), MemoryManagerError> {
        let Some(state_file) = self.state_file.as_ref().filter(|_| !self.trial) else {
            return Ok(());
        };
        let v1 = self.checkpoint(policy);
        let written = match self.pod_level {
            PodLevelResources::Managed => {
                let pod_blocks = self.policy.as_ref().map(StaticPolicy::pod_blocks);
                let v2 = MemoryManagerCheckpointV2 {
                    policy_name: v1.policy_name,
                    machine_state: v1.machine_state,
                    entries: v1.entries,
                    pod_entries: Some(to_pod_entries(pod_blocks.into_iter().flatten())),
                };
                state_file.stage_checkpoint(&v2)
            }
            _ => state_file.stage_checkpoint(&v1),
        };
        written.map_err(|source| MemoryManagerError::Persist {
            file: self.file(),
            source,
        })
    }

    /// Persists the state if it changed since `before`; rolls back on failure.
    /// The container's blocks, as a grant.
    fn granted(&self, pod_uid: &str, container: &str) -> Vec<MemoryGrant> {
        let blocks = self
            .policy
            .as_ref()
            .and_then(|p| p.blocks(pod_uid, container));
        blocks
            .unwrap_or_default()
            .iter()
            .map(MemoryGrant::from)
            .collect()
    }

    fn commit(
        &mut self,
        policy: MemoryPolicy,
        before: Option<StaticPolicy>,
    ) -> Result<(), MemoryManagerError> {
        if self.policy == before {
            return Ok(());
        }
        if let Err(err) = self.write(policy) {
            self.policy = before;
            return Err(err);
        }
        Ok(())
    }
}

/// The v1 content of any `memory_manager_state` version (v3, v2 or v1, newest first, as a
/// 1.37 kubelet reads them) and its pod-level blocks, which only `mode`
/// [`PodLevelResources::Managed`] restores (otherwise there must be none).
fn restored_v1(
    bytes: &[u8],
    file: &str,
    mode: PodLevelResources,
) -> Result<(MemoryManagerCheckpoint, BTreeMap<String, Vec<Block>>), MemoryManagerError> {
    let read = |source| MemoryManagerError::Read {
        file: file.to_owned(),
        source,
    };
    let v2 = match restore_memory_manager_state(bytes, RestoreOrder::Any).map_err(read)? {
        MemoryManagerState::V1(v1) => return Ok((v1, BTreeMap::new())),
        MemoryManagerState::V2(v2) => v2,
        MemoryManagerState::V3(v3) => v3.0,
        other => {
            return Err(read(CheckpointError::UnknownFormat {
                path: None,
                why: format!("memory_manager_state {} is not supported", other.version()),
            }));
        }
    };
    let pod_blocks = from_pod_entries(v2.pod_entries.iter().flatten()).map_err(|source| {
        MemoryManagerError::Value {
            file: file.to_owned(),
            source,
        }
    })?;
    if mode != PodLevelResources::Managed && !pod_blocks.is_empty() {
        return Err(MemoryManagerError::PodLevelAssignments {
            file: file.to_owned(),
            pods: pod_blocks.into_keys().collect(),
        });
    }
    Ok((v2.without_pod_entries(), pod_blocks))
}

impl MemoryManager {
    /// Upstream `NewManager`: checks `config` (the policy, and for `Static` the reserved
    /// memory against the node allocatable reservation) and builds the machine state of
    /// `memory` (every NUMA node of the machine, memory-only nodes included).
    pub fn new(
        config: &MemoryManagerConfig,
        memory: &BTreeMap<usize, NumaMemory>,
    ) -> Result<MemoryManager, MemoryManagerError> {
        let default = match config.policy {
            MemoryPolicy::None => None,
            MemoryPolicy::Static => {
                let reserved = config.static_reserved(memory)?;
                Some(
                    default_machine_state(memory, &reserved)
                        .map_err(MemoryManagerError::MachineState)?,
                )
            }
        };
        Ok(MemoryManager {
            policy: config.policy,
            default,
            inner: Mutex::new(Inner {
                pod_level: config.pod_level_resources,
                ..Inner::default()
            }),
            metrics: MemoryManagerMetrics::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The policy.
    pub fn policy(&self) -> MemoryPolicy {
        self.policy
    }

    /// The counters upstream exports (`kubelet_memory_manager_pinning_*`).
    pub fn metrics(&self) -> &MemoryManagerMetrics {
        &self.metrics
    }

    /// Upstream `Start`: restores `memory_manager_state` from `state_file` (or starts empty
    /// when there is none, writing it; [`StateFile::in_memory`] keeps the state in memory
    /// only). A checkpoint
    /// of another policy, a damaged one, or (`Static`) one whose machine state does not
    /// fit this machine and its reservations is an error and nothing starts.
    pub fn start(&self, state_file: StateFile) -> Result<(), MemoryManagerError> {
        let mut inner = self.lock();
        let file = state_file.to_string();
        let stored = match state_file.load() {
            Ok(Some(bytes)) => Some(restored_v1(&bytes, &file, inner.pod_level)?),
            Ok(None) => None,
            Err(source) => return Err(MemoryManagerError::Read { file, source }),
        };
        inner.state_file = Some(state_file);
        inner.started = false;
        let pod_blocks = stored
            .as_ref()
            .map(|(_, pods)| pods.clone())
            .unwrap_or_default();
        let stored = stored.map(|(checkpoint, _)| checkpoint);
        let (restored, assignments) = match &stored {
            Some(checkpoint) => {
                if checkpoint.policy_name != self.policy.name() {
                    return Err(MemoryManagerError::PolicyMismatch {
                        file,
                        configured: self.policy.name().to_owned(),
                        stored: checkpoint.policy_name.clone(),
                    });
                }
                from_checkpoint(checkpoint).map_err(|source| MemoryManagerError::Value {
                    file: file.clone(),
                    source,
                })?
            }
            None => (MachineState::new(), Assignments::new()),
        };
        inner.policy = match &self.default {
            None => None,
            Some(default) => {
                let mut policy = StaticPolicy::restore_with_pods(
                    &restored,
                    assignments,
                    pod_blocks,
                    default.clone(),
                )
                .map_err(|source| MemoryManagerError::InvalidState { file, source })?;
                policy.set_pod_level_resources(inner.pod_level);
                Some(policy)
            }
        };
        // Upstream writes a missing checkpoint, and the static policy's default state
        // when the checkpoint had none.
        if stored.is_none() || (self.default.is_some() && restored.is_empty()) {
            inner.write(self.policy)?;
        }
        inner.allocatable = inner
            .policy
            .as_ref()
            .map(|p| allocatable_blocks(p.machine_state()))
            .unwrap_or_default();
        inner.started = true;
        Ok(())
    }

    /// Upstream `GetAllocatableMemory`: per node and resource with allocatable memory, one
    /// block of all of it (computed at `start`; empty with the `None` policy).
    pub fn allocatable_memory(&self) -> Vec<Block> {
        self.lock().allocatable.clone()
    }

    /// Upstream `GetMemory`: the container's blocks (empty when it has none).
    pub fn container_memory(&self, pod_uid: &str, container: &str) -> Vec<Block> {
        let inner = self.lock();
        inner
            .policy
            .as_ref()
            .and_then(|p| p.blocks(pod_uid, container))
            .map(<[Block]>::to_vec)
            .unwrap_or_default()
    }

    /// Upstream `GetPodMemoryBlocks`: the pod-level blocks of a pod managed at pod level
    /// (its budget, taken once on its nodes; empty when it has none).
    pub fn pod_memory(&self, pod_uid: &str) -> Vec<Block> {
        let inner = self.lock();
        inner
            .policy
            .as_ref()
            .and_then(|p| p.pod_blocks().get(pod_uid))
            .cloned()
            .unwrap_or_default()
    }

    /// Upstream `GetMemoryNUMANodes`: the nodes of the container's blocks, which the
    /// runtime sets as its `cpuset.mems` (empty when it has none).
    pub fn memory_numa_nodes(&self, pod_uid: &str, container: &str) -> BTreeSet<usize> {
        self.container_memory(pod_uid, container)
            .iter()
            .flat_map(|b| b.numa_affinity.iter().copied())
            .collect()
    }

    /// The machine state (`None` with the `None` policy or before `start`).
    pub fn machine_state(&self) -> Option<MachineState> {
        self.lock()
            .policy
            .as_ref()
            .map(|p| p.machine_state().clone())
    }

    /// Every container's blocks.
    pub fn assignments(&self) -> Assignments {
        self.lock()
            .policy
            .as_ref()
            .map(|p| p.assignments().clone())
            .unwrap_or_default()
    }

    /// Upstream `RemoveContainer`: the container's blocks go back to their nodes.
    pub fn remove_container(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> Result<(), MemoryManagerError> {
        self.change(|policy| policy.remove_container(pod_uid, container))
    }

    /// Give back what every container of `pod` holds (an admission undone, a pod
    /// released), persisted once, and forget what its init containers left to reuse
    /// ([`StaticPolicy::forget_reusable`](crate::StaticPolicy::forget_reusable)).
    pub fn remove_pod_containers(&self, pod: &Pod) -> Result<(), MemoryManagerError> {
        self.change(|policy| {
            for (_, container) in pod.all_containers() {
                policy.remove_container(&pod.uid, &container.name);
            }
            policy.forget_reusable(&pod.uid);
        })
    }

    /// Upstream `AddContainer`'s clean-up: once `container` starts, the regular init
    /// containers before it have finished, and their memory goes back to the nodes.
    pub fn container_started(&self, pod: &Pod, container: &str) -> Result<(), MemoryManagerError> {
        self.change(|policy| {
            for init in &pod.init_containers {
                if init.name == container {
                    break;
                }
                if !init.is_restartable() {
                    policy.remove_container(&pod.uid, &init.name);
                }
            }
        })
    }

    /// Upstream `removeStaleState`: every container of a pod not in `active` (or no
    /// longer in its pod's spec) gives its memory back.
    pub fn remove_stale_state(&self, active: &[Pod]) -> Result<(), MemoryManagerError> {
        let live: BTreeMap<&str, BTreeSet<&str>> = active
            .iter()
            .map(|pod| {
                let names = pod.all_containers().map(|(_, c)| c.name.as_str()).collect();
                (pod.uid.as_str(), names)
            })
            .collect();
        self.change(|policy| {
            let stale: Vec<(String, String)> = policy
                .assignments()
                .iter()
                .flat_map(|(uid, containers)| {
                    containers
                        .keys()
                        .map(move |name| (uid.clone(), name.clone()))
                })
                .filter(|(uid, name)| {
                    live.get(uid.as_str())
                        .is_none_or(|names| !names.contains(name.as_str()))
                })
                .collect();
            for (uid, name) in stale {
                policy.remove_container(&uid, &name);
            }
        })
    }

    /// A copy of the state as it is now, to put back with [`restore`](Self::restore).
    pub fn snapshot(&self) -> MemorySnapshot {
        MemorySnapshot(self.lock().policy.clone())
    }

    /// Put back the state of `snapshot` and persist it: every change since is undone
    /// exactly (a release gives memory back in node order, which can split a group's use
    /// among its nodes otherwise than before the allocation it undoes). Only for a caller
    /// that serializes every change of the manager, so nobody else's changes are undone:
    /// corral's node undoes a decision deferred for a device plugin's answer with it.
    pub fn restore(&self, snapshot: MemorySnapshot) -> Result<(), MemoryManagerError> {
        self.change(|policy| {
            if let Some(before) = snapshot.0 {
                *policy = before;
            }
        })
    }

    /// Start a trial (corral's `admit --dry-run`): until [`end_trial`](Self::end_trial),
    /// changes are made in memory only, never written. Only for a caller that serializes
    /// every change of the manager, as for [`restore`](Self::restore).
    pub fn begin_trial(&self) -> MemorySnapshot {
        let mut inner = self.lock();
        inner.trial = true;
        MemorySnapshot(inner.policy.clone())
    }

    /// End a trial: the state as [`begin_trial`](Self::begin_trial) found it (what the
    /// state file holds); writes resume.
    pub fn end_trial(&self, trial: MemorySnapshot) {
        let mut inner = self.lock();
        if let Some(before) = trial.0 {
            inner.policy = Some(before);
        }
        inner.trial = false;
    }

    /// Runs `change` on the static policy and persists the result (nothing with `None`).
    fn change(&self, change: impl FnOnce(&mut StaticPolicy)) -> Result<(), MemoryManagerError> {
        let mut inner = self.lock();
        if !inner.started {
            return Err(MemoryManagerError::NotStarted);
        }
        let before = inner.policy.clone();
        if let Some(policy) = inner.policy.as_mut() {
            change(policy);
        }
        inner.commit(self.policy, before)
    }
}

/// The memory manager's state at one moment ([`MemoryManager::snapshot`]).
#[derive(Debug, Clone)]
pub struct MemorySnapshot(Option<StaticPolicy>);

/// Upstream static `GetAllocatableMemory`: one block per node and resource with
/// allocatable memory, in node then resource order.
fn allocatable_blocks(state: &MachineState) -> Vec<Block> {
    state
        .iter()
        .flat_map(|(&node, state)| {
            state
                .memory
                .iter()
                .filter(|(_, table)| table.allocatable != 0)
                .map(move |(resource, table)| Block {
                    numa_affinity: vec![node],
                    resource: resource.clone(),
                    size: table.allocatable,
                })
        })
        .collect()
}

/// Upstream's reason for a pod whose spec leaves containers without memory.
pub const EMPTY_POD_SHARED_POOL_ERROR: &str = "EmptyPodSharedPoolError";

#[cfg(test)]
mod trial_tests {
    use std::collections::BTreeMap;

    use corral_checkpoint::StateFile;
    use corral_topology::memory::NumaMemory;
    use corral_topology::{Container, HintProvider, Pod};

    use crate::{MemoryManager, MemoryManagerConfig, MemoryPolicy, MemoryReservation};

    /// A trial allocates in memory only, nothing written; its end puts the state back.
    #[test]
    fn a_trial_writes_nothing_and_ends_as_it_began() {
        let memory = BTreeMap::from([(
            0,
            NumaMemory {
                node: 0,
                memory_bytes: 8 << 30,
                huge_pages: vec![],
            },
        )]);
        let config = MemoryManagerConfig {
            policy: MemoryPolicy::Static,
            reserved_memory: vec![MemoryReservation::new(0, [("memory", "1Gi")]).unwrap()],
            node_allocatable_reservation: crate::node_allocatable_reservation(
                ["memory"],
                &MemoryReservation::limits([("memory", "1Gi")]).unwrap(),
                &BTreeMap::new(),
                None,
                8 << 30,
            )
            .unwrap(),
            ..MemoryManagerConfig::default()
        };
        let manager = MemoryManager::new(&config, &memory).unwrap();
        let file = StateFile::in_memory();
        manager.start(file.clone()).unwrap();
        let mut app = Container::new("app");
        for list in [&mut app.resources.requests, &mut app.resources.limits] {
            list.cpu_millis = Some(1000);
            list.memory_bytes = Some(1 << 30);
        }
        let pod = Pod {
            uid: "p".into(),
            containers: vec![app.clone()],
            ..Pod::default()
        };
        let store = corral_topology::AffinityStore::new();
        let (bytes, state) = (file.load().unwrap(), manager.machine_state());

        let trial = manager.begin_trial();
        manager.allocate(&pod, &app, &store).unwrap();
        assert_ne!(manager.machine_state(), state, "allocated in memory");
        assert_eq!(file.load().unwrap(), bytes, "not written");
        manager.end_trial(trial);
        assert_eq!(manager.machine_state(), state);
        let requests = || {
            let metrics = manager.metrics();
            metrics
                .pinning_requests_total
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        assert_eq!(requests(), 0, "a trial counts nothing");

        manager.allocate(&pod, &app, &store).unwrap();
        assert_ne!(file.load().unwrap(), bytes, "writes resume");
        assert_eq!(requests(), 1, "counting resumes");
    }
}
