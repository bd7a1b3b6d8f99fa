//! Putting the policy's own bookkeeping back, for a caller that undoes an allocation
//! exactly (corral's node, undoing a decision deferred for a device plugin's answer).

use super::CpuManager;
use crate::policy::Policy;

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
