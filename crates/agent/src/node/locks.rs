//! The node's two kinds of lock.
//!
//! - [`DecisionLock`]: one at a time through the managers' decisions (hints, merge, CPU,
//!   memory and device choice), as the kubelet admits one pod at a time. Nothing waits on
//!   a plugin or driver under it: the device manager only reserves in the decision, and
//!   the plugins answer after it (`Node::decide`).
//! - [`PodLocks`]: one lock per pod uid, held for a whole admission or release of that pod,
//!   so two requests for the same pod never interleave (a second admission of an in-flight
//!   pod waits for the first and then answers what the pod holds).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The decision lock: taken by an async task, first come first served, and held by the
/// blocking thread the task hands the decision to. It knows since when it is held, so a
/// wedged decision shows on `/healthz`.
#[derive(Debug)]
pub(crate) struct DecisionLock {
    permit: Arc<Semaphore>,
    held_since: Arc<Mutex<Option<Instant>>>,
}

/// Holding the [`DecisionLock`] (movable to a blocking thread); dropping it lets the next
/// decision in.
#[derive(Debug)]
pub(crate) struct DecisionGuard {
    _permit: OwnedSemaphorePermit,
    held_since: Arc<Mutex<Option<Instant>>>,
}

impl DecisionLock {
    /// A free lock.
    pub(crate) fn new() -> DecisionLock {
        DecisionLock {
            permit: Arc::new(Semaphore::new(1)),
            held_since: Arc::default(),
        }
    }

    /// Wait for the lock (first come, first served).
    pub(crate) async fn acquire(&self) -> DecisionGuard {
        let permit = Arc::clone(&self.permit)
            .acquire_owned()
            .await
            .expect("the decision semaphore is never closed");
        *lock(&self.held_since) = Some(Instant::now());
        DecisionGuard {
            _permit: permit,
            held_since: Arc::clone(&self.held_since),
        }
    }

    /// How long the current holder has held the lock (`None`: free).
    pub(crate) fn held_for(&self) -> Option<Duration> {
        lock(&self.held_since).map(|since| since.elapsed())
    }
}

impl Drop for DecisionGuard {
    fn drop(&mut self) {
        // Cleared before the permit is given back (fields drop after this), so the next
        // holder's time is never overwritten by this one's end.
        *lock(&self.held_since) = None;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One async lock per key, created on demand and dropped when nobody holds or waits for it.
#[derive(Debug, Default)]
pub(crate) struct PodLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Holding the lock of one pod.
#[derive(Debug)]
pub(crate) struct PodGuard<'a> {
    locks: &'a PodLocks,
    uid: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for PodGuard<'_> {
    fn drop(&mut self) {
        let mut locks = self
            .locks
            .locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Release first, then forget the entry if only the map still refers to it.
        drop(self.guard.take());
        if locks
            .get(&self.uid)
            .is_some_and(|lock| Arc::strong_count(lock) == 1)
        {
            locks.remove(&self.uid);
        }
    }
}

impl PodLocks {
    /// Wait for the lock of pod `uid`.
    pub(crate) async fn lock(&self, uid: &str) -> PodGuard<'_> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(locks.entry(uid.to_owned()).or_default())
        };
        let guard = lock.lock_owned().await;
        PodGuard {
            locks: self,
            uid: uid.to_owned(),
            guard: Some(guard),
        }
    }

    /// How many pods have a lock entry (held or waited for).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
pub(in crate::node) mod tests {
    use std::task::Poll;

    use super::*;
    use crate::node::tests::WAIT;

    /// How many hold or wait for the lock of pod `uid` (for the node's tests: a request
    /// that queues on a pod's lock shows here).
    pub(in crate::node) fn holders_and_waiters(locks: &PodLocks, uid: &str) -> usize {
        locks
            .locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .map_or(0, |lock| Arc::strong_count(lock) - 1)
    }

    #[tokio::test]
    async fn pod_locks_serialize_one_pod_and_are_forgotten_when_free() {
        let locks = PodLocks::default();
        let a = locks.lock("a").await;
        let _b = locks.lock("b").await;
        // A second locker of pod a waits (a free lock is taken at the first poll)...
        let second = locks.lock("a");
        tokio::pin!(second);
        let first_poll =
            std::future::poll_fn(|cx| Poll::Ready(std::future::Future::poll(second.as_mut(), cx)))
                .await;
        assert!(first_poll.is_pending(), "pod a's lock taken twice");
        assert_eq!(holders_and_waiters(&locks, "a"), 2);
        // ...and gets it once the first lets go.
        drop(a);
        let _a = tokio::time::timeout(WAIT, second).await.unwrap();
        assert_eq!(locks.len(), 2);
        drop(_a);
        drop(_b);
        assert_eq!(locks.len(), 0);
    }

    #[tokio::test]
    async fn the_decision_lock_knows_how_long_it_is_held() {
        let lock = DecisionLock::new();
        assert_eq!(lock.held_for(), None);
        let guard = lock.acquire().await;
        std::thread::sleep(Duration::from_millis(5));
        assert!(lock.held_for().unwrap() >= Duration::from_millis(5));
        // Moved to a blocking thread and dropped there, as a decision does.
        tokio::task::spawn_blocking(move || drop(guard))
            .await
            .unwrap();
        assert_eq!(lock.held_for(), None);
        let _again = tokio::time::timeout(WAIT, lock.acquire()).await.unwrap();
        assert!(lock.held_for().is_some());
    }
}
