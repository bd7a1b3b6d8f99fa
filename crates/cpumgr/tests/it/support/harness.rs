//! `cpu_manager_test.go`'s doubles: a started manager around a state that is not validated
//! (upstream's tests build a `manager` around a `mockState` and never call `Start`),
//! upstream's `mockPolicy`, a pod source (`activePods` + `mockPodStatusProvider`), a runtime with a settable error
//! (`mockRuntimeService`) and a state file whose writes can be made to fail.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_checkpoint::{CPU_MANAGER_FILE, CheckpointStore, StateFile};
use corral_cpumgr::{
    AllocateError, CfsQuota, ContainerMap, ContainerRuntime, CpuManager, CpuState, PodSource,
    PodStatus, Policy, RuntimeError, TakeError, TopologyIndex, ValidationError,
};
use corral_topology::{Container, CpuSet, Pod, TopologyHint};

/// Upstream `mockPolicy{err}`: every allocation fails (corral's `Policy::remove_container`
/// cannot fail, so only `Allocate` carries the error).
#[derive(Debug)]
pub(crate) struct FailingPolicy;

impl Policy for FailingPolicy {
    fn name(&self) -> &'static str {
        "mock"
    }
    fn allocate(
        &mut self,
        _: &mut CpuState,
        _: &Pod,
        _: &Container,
        _: TopologyHint,
    ) -> Result<(), AllocateError> {
        Err(AllocateError::Take(TakeError::Failed))
    }
    fn start(&mut self, _: &mut CpuState) -> Result<(), ValidationError> {
        Ok(())
    }
    fn remove_container(&mut self, _: &mut CpuState, _: &str, _: &str) {}
    fn allocatable_cpus(&self, _: &CpuState) -> CpuSet {
        CpuSet::new()
    }
}

/// `activePods` and `mockPodStatusProvider{podStatus, found}` (one status for every pod).
#[derive(Debug, Default)]
pub(crate) struct Pods {
    /// The active pods.
    pub(crate) pods: Mutex<Vec<Pod>>,
    /// The status every pod reports; `None` = not found.
    pub(crate) status: Mutex<Option<PodStatus>>,
}

impl PodSource for Pods {
    fn active_pods(&self) -> Vec<Pod> {
        self.pods.lock().unwrap().clone()
    }
    fn pod_status(&self, _uid: &str) -> Option<PodStatus> {
        self.status.lock().unwrap().clone()
    }
}

/// `mockRuntimeService{err}`, recording the updates it accepted.
#[derive(Debug, Default)]
pub(crate) struct Runtime {
    /// The error every update returns, if any.
    pub(crate) err: Mutex<Option<String>>,
    /// (container id, cpuset) of every accepted update.
    pub(crate) updates: Mutex<Vec<(String, String)>>,
}

#[corral_cpumgr::async_trait]
impl ContainerRuntime for Runtime {
    async fn update_container_cpuset(
        &self,
        id: &str,
        cpus: &CpuSet,
        _: CfsQuota,
    ) -> Result<(), RuntimeError> {
        if let Some(e) = self.err.lock().unwrap().clone() {
            return Err(RuntimeError::new(e));
        }
        self.updates
            .lock()
            .unwrap()
            .push((id.to_owned(), cpus.to_string()));
        Ok(())
    }
}

/// A real `cpu_manager_state` in a temporary directory whose writes fail while a directory
/// stands where the file goes (renaming a file onto a directory fails, also for root).
#[derive(Debug)]
pub(crate) struct FlakyFile {
    /// The state file.
    pub(crate) file: StateFile,
    dir: tempfile::TempDir,
}

impl Default for FlakyFile {
    fn default() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = CheckpointStore::open(dir.path()).expect("store");
        FlakyFile {
            file: StateFile::in_store(&store, CPU_MANAGER_FILE).expect("key"),
            dir,
        }
    }
}

impl FlakyFile {
    /// Make writes fail (`true`) or succeed again.
    pub(crate) fn fail(&self, fail: bool) {
        let target = self.dir.path().join(CPU_MANAGER_FILE);
        if fail {
            let _ = std::fs::remove_file(&target);
            std::fs::create_dir(&target).expect("block the file");
        } else {
            std::fs::remove_dir(&target).expect("unblock the file");
        }
    }
}

/// A started manager around `policy` whose state is exactly `state` (written as the
/// checkpoint it restores, and not validated, as upstream's tests never call `Start`), with
/// the given doubles.
pub(crate) fn manager_with_state(
    index: Arc<TopologyIndex>,
    policy: Box<dyn Policy>,
    state: &CpuState,
    pods: Arc<Pods>,
    runtime: Arc<Runtime>,
) -> CpuManager {
    let file = StateFile::in_memory();
    file.stage_checkpoint(&state.to_checkpoint(policy.name()))
        .expect("memory store");
    let manager =
        CpuManager::with_policy(index, policy, Duration::from_secs(10)).without_start_validation();
    manager
        .start(file, pods, runtime, ContainerMap::new())
        .expect("start");
    manager
}
