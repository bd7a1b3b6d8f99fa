//! Putting the policy's own bookkeeping back, for a caller that undoes an allocation
//! exactly (corral's node, undoing a decision deferred for a device plugin's answer), and
//! trials: allocations that are tried, then put back, neither written nor counted.

use super::CpuManager;
use crate::policy::Policy;
use crate::state::CpuState;

/// The CPU policy's own bookkeeping at one moment ([`CpuManager::policy_snapshot`]).
#[derive(Debug)]
pub struct PolicySnapshot(Option<Box<dyn Policy>>);

impl super::Inner {
    /// The state that stands: during a trial, the state as the trial found it.
    pub(super) fn settled_state(&self) -> &CpuState {
        self.before_trial.as_ref().unwrap_or(&self.state)
    }
}

impl CpuManager {
    /// A copy of the policy's own bookkeeping (the static policy's CPUs an init container
    /// left for reuse), to put back with [`restore_policy`](Self::restore_policy).
    pub fn policy_snapshot(&self) -> PolicySnapshot {
        PolicySnapshot(self.lock().policy.snapshot())
    }

    /// Put back the policy's bookkeeping of `snapshot`. Releasing a container gives its
    /// CPUs back exactly (the assignments are sets), but leaves what the policy noted for
    /// reuse: a caller that undoes an allocation and wants the manager as it was before
    /// it (corral's node, undoing a decision deferred for a device plugin's answer) puts
    /// the policy back too. The assignments are not touched, so a stale-state sweep that
    /// ran meanwhile (the reconcile loop's) stands.
    pub fn restore_policy(&self, snapshot: PolicySnapshot) {
        if let Some(policy) = snapshot.0 {
            self.lock().policy = policy;
        }
    }
}

/// The CPU manager as a trial found it ([`CpuManager::begin_trial`]).
#[derive(Debug)]
pub struct CpuTrial {
    state: CpuState,
    policy: PolicySnapshot,
    /// The last stale-state sweep's key: a sweep made during the trial is undone with it,
    /// so the next one is not skipped.
    last_sweep: Option<(u64, Option<String>)>,
}

impl CpuManager {
    /// Start a trial (corral's `admit --dry-run`): until [`end_trial`](Self::end_trial),
    /// changes are made in memory only — no state file write, no metric counted — and a
    /// reconcile pass meanwhile pushes the state as the trial found it. Only for a
    /// caller that serializes every change of the manager (corral's decision lock), so the
    /// trial puts back nobody else's change.
    pub fn begin_trial(&self) -> CpuTrial {
        let mut inner = self.lock();
        inner.trial = true;
        inner.before_trial = Some(inner.state.clone());
        CpuTrial {
            state: inner.state.clone(),
            policy: PolicySnapshot(inner.policy.snapshot()),
            last_sweep: inner.last_sweep.clone(),
        }
    }

    /// End a trial: the assignments and the policy's bookkeeping as [`begin_trial`]
    /// found them, which is what the state file holds; writes and counting resume.
    ///
    /// [`begin_trial`]: Self::begin_trial
    pub fn end_trial(&self, trial: CpuTrial) {
        let mut inner = self.lock();
        inner.state = trial.state;
        if let Some(policy) = trial.policy.0 {
            inner.policy = policy;
        }
        inner.last_sweep = trial.last_sweep;
        inner.before_trial = None;
        inner.trial = false;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use corral_checkpoint::StateFile;
    use corral_topology::{Container, CpuSet, Pod, TopologyHint};

    use crate::{CfsQuota, ContainerMap, ContainerRuntime, PodSource, PodStatus, RuntimeError};

    struct NoPods;
    impl PodSource for NoPods {
        fn active_pods(&self) -> Vec<Pod> {
            Vec::new()
        }
        fn pod_status(&self, _: &str) -> Option<PodStatus> {
            None
        }
    }
    struct NoRuntime;
    #[crate::async_trait]
    impl ContainerRuntime for NoRuntime {
        async fn update_container_cpuset(
            &self,
            _: &str,
            _: &CpuSet,
            _: CfsQuota,
        ) -> Result<(), RuntimeError> {
            Ok(())
        }
    }

    /// A trial allocates in memory only: nothing written, nothing counted, and its end
    /// puts the manager back as it was.
    #[test]
    fn a_trial_writes_and_counts_nothing_and_ends_as_it_began() {
        let manager = crate::manager::test_machine::eight_cpu_static_manager();
        let file = StateFile::in_memory();
        manager
            .start(
                file.clone(),
                Arc::new(NoPods),
                Arc::new(NoRuntime),
                ContainerMap::new(),
            )
            .unwrap();
        let mut app = Container::new("app");
        for list in [&mut app.resources.requests, &mut app.resources.limits] {
            list.cpu_millis = Some(2000);
            list.memory_bytes = Some(1 << 30);
        }
        let pod = Pod {
            uid: "uid".into(),
            containers: vec![app.clone()],
            ..Pod::default()
        };
        let (bytes, state) = (file.load().unwrap(), manager.state());

        let trial = manager.begin_trial();
        let cpus = manager
            .allocate(&pod, &app, TopologyHint::default())
            .unwrap();
        assert_eq!(cpus.len(), 2, "allocated in memory");
        assert_eq!(file.load().unwrap(), bytes, "not written");
        assert_eq!(
            manager
                .metrics()
                .pinning_requests_total
                .load(Ordering::Relaxed),
            0
        );
        manager.end_trial(trial);
        assert_eq!(manager.state(), state);

        // Writes and counting resume: the same allocation, for real.
        assert_eq!(
            manager
                .allocate(&pod, &app, TopologyHint::default())
                .unwrap(),
            cpus
        );
        assert_ne!(file.load().unwrap(), bytes);
        assert_eq!(
            manager
                .metrics()
                .pinning_requests_total
                .load(Ordering::Relaxed),
            1
        );
    }
}
