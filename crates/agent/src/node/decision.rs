//! One pod's decision, from the topology manager's admission to the device plugins'
//! answers: the decision itself under the node's [`DecisionLock`](super::locks::DecisionLock)
//! (the device manager only reserves), then, outside the lock, the plugins' preferred
//! allocation for a deferred decision (which is put back exactly and taken again) and
//! their `Allocate` for an admitted one (which is given back when it fails).
//!
//! A failed `Allocate` frees what its pod's decision held, and decisions taken meanwhile
//! saw those holdings: a pod refused then may have been refused for them. Such a refusal
//! waits for the allocations that were under way when it was decided and, if one of them
//! gave its decision back, the pod is decided again ([`Realizing`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use corral_cpumgr::PolicySnapshot;
use corral_memmgr::MemorySnapshot;
use corral_topology::Pod;
use corral_topology::topologymanager::{AllocationError, PodAdmitResult};

use super::explain::Explanation;
use super::{Node, pod_ref};

/// How often a refused pod is decided again because an allocation under way when it was
/// refused gave its decision back.
const MAX_REDECISIONS: usize = 2;

/// How long a refused pod waits at most for the allocations under way when it was
/// refused: a little over one plugin call's deadline (30 s by default). Plugins answer in
/// milliseconds; only a slow or hostile one makes a refusal wait this long, once per
/// re-decision — where the kubelet would hold every admission behind it.
const REALIZE_WAIT: Duration = Duration::from_secs(35);

/// What a decision that does not stand gives back before the decision lock is (see
/// [`Node::decide`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Undo {
    /// The whole pod (an admission of a pod).
    Pod,
    /// The pod's new container only; its admitted pod keeps what it holds (NRI).
    Container,
}

/// Admitted decisions whose device plugins are still answering `Allocate`, and how many
/// such decisions were given back so far.
#[derive(Debug)]
pub(crate) struct Realizing {
    state: tokio::sync::watch::Sender<RealizingState>,
    /// Refused decisions waiting for allocations under way.
    waiting: std::sync::atomic::AtomicUsize,
}

#[derive(Debug, Default)]
struct RealizingState {
    next: u64,
    pending: BTreeSet<u64>,
    given_back: u64,
}

/// The allocations under way when a decision was refused.
#[derive(Debug)]
struct Seen {
    pending: BTreeSet<u64>,
    given_back: u64,
}

/// One admitted decision's allocation under way; ends (not given back) when dropped.
struct AllocationUnderWay<'a> {
    realizing: &'a Realizing,
    id: u64,
    given_back: bool,
}

impl Drop for AllocationUnderWay<'_> {
    fn drop(&mut self) {
        let (id, given_back) = (self.id, self.given_back);
        self.realizing.state.send_modify(|s| {
            s.pending.remove(&id);
            s.given_back += u64::from(given_back);
        });
    }
}

impl Default for Realizing {
    fn default() -> Self {
        Realizing {
            state: tokio::sync::watch::Sender::new(RealizingState::default()),
            waiting: Default::default(),
        }
    }
}

impl Realizing {
    /// An admitted decision's allocation starts (with the decision lock held).
    fn begin(&self) -> u64 {
        let mut id = 0;
        self.state.send_modify(|s| {
            id = s.next;
            s.next += 1;
            s.pending.insert(id);
        });
        id
    }

    /// The allocations under way now (with the decision lock held).
    fn seen(&self) -> Seen {
        let s = self.state.borrow();
        Seen {
            pending: s.pending.clone(),
            given_back: s.given_back,
        }
    }

    /// Wait (at most [`REALIZE_WAIT`]) until the allocations `seen` under way have ended;
    /// true when one of the decisions given back since is among them or later.
    async fn gave_back_since(&self, seen: &Seen) -> bool {
        if seen.pending.is_empty() {
            return false;
        }
        let mut watch = self.state.subscribe();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let ended = watch.wait_for(|s| s.pending.is_disjoint(&seen.pending));
        let _ = tokio::time::timeout(REALIZE_WAIT, ended).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        self.state.borrow().given_back > seen.given_back
    }

    /// Refused decisions waiting for allocations under way (for tests).
    #[cfg(test)]
    pub(in crate::node) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }
}

/// A decision's answer and, for a refusal after hints were merged, why.
pub(super) type Verdict = (PodAdmitResult, Option<Box<Explanation>>);

/// One decision's outcome, and what it saw.
struct Decided {
    result: PodAdmitResult,
    /// Refused after hints were merged: why, as the managers were when it was decided.
    explanation: Option<Box<Explanation>>,
    /// Admitted with devices to allocate: its allocation under way.
    realize: Option<u64>,
    /// Refused: the allocations under way then.
    seen: Option<Seen>,
}

impl Node {
    /// Marks `pod` in flight and decides it: the topology manager's admission (hints,
    /// merge, allocation; the device manager only reserves) under the decision lock on the
    /// blocking pool, then, outside the lock, the device plugins' part. A decision the
    /// topology manager refused is given back (`undo`) before the lock is: no other
    /// decision ever sees a refused pod's holdings. A decision deferred for a plugin's
    /// preferred allocation is put back exactly, the plugins are asked, and the pod is
    /// decided again (each question at most `MAX_QUESTIONS_PER_RESOURCE` times). An
    /// admitted decision is realized by the plugins' `Allocate`; if that fails, the
    /// decision is given back and the pod refused as upstream refuses a failed `Allocate`.
    pub(super) async fn decide(
        self: &Arc<Self>,
        pod: &Pod,
        undo: Undo,
    ) -> Result<Verdict, tokio::task::JoinError> {
        self.devices.wait_for_plugins(pod).await;
        let decided = self.decide_with_plugins(pod, undo).await;
        self.devices.end_admission(&pod.uid);
        decided
    }

    async fn decide_with_plugins(
        self: &Arc<Self>,
        pod: &Pod,
        undo: Undo,
    ) -> Result<Verdict, tokio::task::JoinError> {
        let mut redecided = 0;
        loop {
            let decided = self.decide_once(pod, undo).await?;
            let result = decided.result;
            if result.deferred {
                if let Err(err) = self.devices.ask_plugins(&pod.uid).await {
                    // No decision was counted for the pod: it is one now.
                    self.topology
                        .metrics()
                        .admission_requests_total
                        .fetch_add(1, Ordering::Relaxed);
                    return Ok((self.devices_refused(err), None));
                }
                continue;
            }
            if let Some(seen) = decided.seen
                && redecided < MAX_REDECISIONS
                && self.realizing.gave_back_since(&seen).await
            {
                redecided += 1;
                tracing::info!(pod = pod_ref(pod), podUID = %pod.uid, "a pod refused while another pod's devices were allocated is decided again: that allocation failed and gave its holdings back");
                continue;
            }
            // Realized even with nothing for the plugins: the decision then stands as it is
            // (what its init containers left for reuse included).
            let mut pending = decided.realize.map(|id| AllocationUnderWay {
                realizing: &self.realizing,
                id,
                given_back: false,
            });
            if let Err(err) = self.devices.realize(&pod.uid).await {
                self.give_back(pod, undo).await?;
                if let Some(pending) = &mut pending {
                    pending.given_back = true;
                }
                return Ok((self.devices_refused(err), None));
            }
            return Ok((result, decided.explanation));
        }
    }

    /// Run `work` on the blocking pool with the decision lock held (taken first come,
    /// first served): every change of the managers' state goes through here.
    pub(super) async fn with_decision_lock<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Node) -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        let decision = self.decisions.acquire().await;
        let node = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _decision = decision;
            work(&node)
        })
        .await
    }

    /// Run `work` holding the decision lock, as a decision would (tests: a wedged one).
    #[cfg(test)]
    pub(crate) async fn hold_decision_lock_for_test(
        self: &Arc<Self>,
        work: impl FnOnce() + Send + 'static,
    ) {
        self.with_decision_lock(move |_| work())
            .await
            .expect("the held lock's work panicked");
    }

    /// One decision under the lock; a refused or deferred one is given back before the
    /// lock is.
    async fn decide_once(
        self: &Arc<Self>,
        pod: &Pod,
        undo: Undo,
    ) -> Result<Decided, tokio::task::JoinError> {
        self.pods.begin_admitting(pod);
        let admitting = pod.clone();
        self.with_decision_lock(move |node| {
            // A deferred decision is undone exactly, as if it had never been taken: a
            // release alone would move how a group's memory is split among its nodes and
            // leave the CPU policy's CPUs to reuse, which no serial order gives the
            // decisions meanwhile. (Every change of the memory manager runs under the
            // decision lock, so its snapshot undoes nobody else's.)
            let before = (node.cpu.policy_snapshot(), node.memory.snapshot());
            let result = node.topology.admit(&admitting);
            // Before the undo: the managers as the refused decision saw them.
            let explanation = match &result.rejected_hints {
                Some(hints) if !result.deferred => Some(Box::new(node.explain(&admitting, hints))),
                _ => None,
            };
            if !result.admit {
                #[cfg(test)]
                super::settled::pause::point(&admitting.uid);
                node.undo_decision(&admitting, undo);
            }
            if result.deferred {
                node.put_back(&admitting, before);
            }
            let refused = !result.admit && !result.deferred;
            let realize = (result.admit && node.devices.has_reservations(&admitting.uid))
                .then(|| node.realizing.begin());
            let seen = refused.then(|| node.realizing.seen());
            Decided {
                result,
                explanation,
                realize,
                seen,
            }
        })
        .await
    }

    /// After a deferred decision's undo, with the decision lock held: the CPU policy's
    /// bookkeeping and the memory manager as they were before it (the CPUs themselves
    /// came back exactly with the undo).
    fn put_back(&self, pod: &Pod, (cpu, memory): (PolicySnapshot, MemorySnapshot)) {
        self.cpu.restore_policy(cpu);
        if let Err(err) = self.memory.restore(memory) {
            tracing::error!(pod = pod_ref(pod), podUID = %pod.uid, err = %err, "restoring the memory manager's state after a deferred decision failed");
        }
    }

    /// Give back an admitted decision whose plugins failed, under the decision lock.
    async fn give_back(
        self: &Arc<Self>,
        pod: &Pod,
        undo: Undo,
    ) -> Result<(), tokio::task::JoinError> {
        let pod = pod.clone();
        self.with_decision_lock(move |node| node.undo_decision(&pod, undo))
            .await
    }

    /// What a decision that does not stand gives back, with the decision lock held.
    pub(super) fn undo_decision(&self, pod: &Pod, undo: Undo) {
        self.pods.end_admitting(&pod.uid);
        self.devices.cancel_reserved(&pod.uid);
        match undo {
            Undo::Pod => self.release_pod_from_managers(pod),
            Undo::Container => self.release_containers_from_managers(pod),
        }
    }

    /// The rejection of a pod whose device plugins failed (upstream: an `Allocate` error
    /// in the topology manager's admission), counted as the topology manager counts it.
    fn devices_refused(&self, err: corral_devicemgr::DeviceManagerError) -> PodAdmitResult {
        self.topology
            .metrics()
            .admission_errors_total
            .fetch_add(1, Ordering::Relaxed);
        PodAdmitResult::from_allocation_error(&AllocationError::unexpected(err))
    }
}
