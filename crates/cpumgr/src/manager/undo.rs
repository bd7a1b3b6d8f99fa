//! Putting the policy's own bookkeeping back, for a caller that undoes an allocation
//! exactly (corral's node, undoing a decision deferred for a device plugin's answer), and
//! trials: allocations that are tried, then put back, neither written nor counted.

use super::CpuManager;
use crate::policy::Policy;
use crate::state::CpuState;

/// The CPU policy's own bookkeeping at one moment ([`CpuManager::policy_snapshot`]).
#[derive(Debug)]
pub struct PolicySnapshot(Option<Box<dyn Policy>>);

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
}

impl CpuManager {
    /// Start a trial (corral's `admit --dry-run`): until [`end_trial`](Self::end_trial),
    /// changes are made in memory only — no state file write, no metric counted. Only for a
    /// caller that serializes every change of the manager (corral's decision lock), so the
    /// trial puts back nobody else's change.
    pub fn begin_trial(&self) -> CpuTrial {
        let mut inner = self.lock();
        inner.trial = true;
        CpuTrial {
            state: inner.state.clone(),
            policy: PolicySnapshot(inner.policy.snapshot()),
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
        inner.trial = false;
    }
}
