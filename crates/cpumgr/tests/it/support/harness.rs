//! `cpu_manager_test.go`'s doubles: a started manager around a state that is not validated
//! (upstream's tests build a `manager` around a `mockState` and never call `Start`),
//! upstream's `mockPolicy`, a pod source (`activePods` + `mockPodStatusProvider`), a runtime with a settable error
//! (`mockRuntimeService`) and a backend whose writes can be made to fail.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_checkpoint::CheckpointError;
use corral_cpumgr::{
    AllocateError, CfsQuota, ContainerMap, ContainerRuntime, CpuManager, CpuState, CpuStateFile,
    MemoryBackend, PodSource, PodStatus, Policy, RuntimeError, StateBackend, StateIoError,
    TakeError, TopologyIndex, ValidationError,
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

/// A memory backend whose writes fail while `fail` is set.
#[derive(Debug, Clone, Default)]
pub(crate) struct FlakyBackend {
    /// The stored bytes.
    pub(crate) inner: MemoryBackend,
    /// Whether writes fail.
    pub(crate) fail: Arc<AtomicBool>,
}

impl StateBackend for FlakyBackend {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StateIoError> {
        self.inner.load()
    }
    fn store(&mut self, checkpoint: &CpuStateFile) -> Result<(), StateIoError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(StateIoError {
                location: self.location(),
                source: CheckpointError::Io {
                    op: "write",
                    path: "cpu_manager_state".into(),
                    source: std::io::Error::other("disk full"),
                },
            });
        }
        self.inner.store(checkpoint)
    }
    fn location(&self) -> String {
        "<flaky>".to_owned()
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
    let backend = MemoryBackend::new();
    let mut writer: Box<dyn StateBackend> = Box::new(backend.clone());
    writer
        .store(&state.to_checkpoint(policy.name()).into())
        .expect("memory store");
    let manager =
        CpuManager::with_policy(index, policy, Duration::from_secs(10)).without_start_validation();
    manager
        .start(Box::new(backend), pods, runtime, ContainerMap::new())
        .expect("start");
    manager
}
