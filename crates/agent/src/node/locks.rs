//! The node's two kinds of lock.
//!
//! - [`DecisionLock`]: one at a time through the managers' decisions (hints, merge, CPU and
//!   device choice), as the kubelet admits one pod at a time. It is *released while a device
//!   plugin answers* (see [`DecisionLock::released_during`]), so a plugin stuck in
//!   `Allocate` delays only the admissions that ask for its resource. A decision taken
//!   meanwhile sees the waiting pod's CPUs and reserved devices, but the waiting pod's
//!   memory is then allocated with the hint taken before it: the one place decisions can
//!   still interleave (issue 29; the device choice moves before the plugin calls in #30).
//! - [`PodLocks`]: one lock per pod uid, held for a whole admission or release of that pod,
//!   so two requests for the same pod never interleave (a second admission of an in-flight
//!   pod waits for the first and then answers what the pod holds).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Semaphore;

/// The decision lock: a binary semaphore, so that the holder can hand it back for a while
/// from a blocking thread and take it again.
#[derive(Debug)]
pub(crate) struct DecisionLock {
    permit: Semaphore,
}

/// Holding the [`DecisionLock`]; dropping it lets the next decision in.
#[derive(Debug)]
pub(crate) struct DecisionGuard<'a> {
    lock: &'a DecisionLock,
}

impl Drop for DecisionGuard<'_> {
    fn drop(&mut self) {
        self.lock.permit.add_permits(1);
    }
}

impl DecisionLock {
    /// A free lock.
    pub(crate) fn new() -> DecisionLock {
        DecisionLock {
            permit: Semaphore::new(1),
        }
    }

    /// Wait for the lock (first come, first served).
    #[cfg(test)]
    pub(crate) async fn acquire(&self) -> DecisionGuard<'_> {
        // The semaphore is never closed.
        if let Ok(permit) = self.permit.acquire().await {
            permit.forget();
        }
        DecisionGuard { lock: self }
    }

    /// Wait for the lock from a blocking thread (never from an async task).
    pub(crate) fn acquire_blocking(&self) -> DecisionGuard<'_> {
        self.take_blocking();
        DecisionGuard { lock: self }
    }

    fn take_blocking(&self) {
        let handle = tokio::runtime::Handle::current();
        if let Ok(permit) = handle.block_on(self.permit.acquire()) {
            permit.forget();
        }
    }

    /// Run `work` with the lock handed back, on a blocking thread whose caller holds it
    /// (a [`DecisionGuard`] further up its stack); the lock is taken again before this
    /// returns, also when `work` panics.
    pub(crate) fn released_during<T>(&self, work: impl FnOnce() -> T) -> T {
        struct Retake<'a>(&'a DecisionLock);
        impl Drop for Retake<'_> {
            fn drop(&mut self) {
                self.0.take_blocking();
            }
        }
        self.permit.add_permits(1);
        let _retake = Retake(self);
        work()
    }
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
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::Poll;
    use std::time::Duration;

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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_decision_handed_back_lets_another_decision_in_and_is_taken_again() {
        let lock = Arc::new(DecisionLock::new());
        let other_ran = Arc::new(AtomicBool::new(false));
        let (handed_back, handed_back_seen) = tokio::sync::oneshot::channel();
        let (lock2, ran2) = (Arc::clone(&lock), Arc::clone(&other_ran));
        let holder = tokio::task::spawn_blocking(move || {
            let _guard = lock2.acquire_blocking();
            let other_was_inside = lock2.released_during(|| {
                let _ = handed_back.send(());
                // Until the other decision has been inside (bounded, so a broken hand-back
                // fails the test rather than hanging it).
                let deadline = std::time::Instant::now() + WAIT;
                while !ran2.load(Ordering::SeqCst) {
                    if std::time::Instant::now() >= deadline {
                        return false;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                true
            });
            // Taken again: nobody else may be inside now.
            (other_was_inside, lock2.permit.available_permits())
        });
        // The holder holds the lock and has handed it back.
        tokio::time::timeout(WAIT, handed_back_seen)
            .await
            .expect("the holder hands the lock back")
            .unwrap();
        {
            let _inside = tokio::time::timeout(WAIT, lock.acquire())
                .await
                .expect("the lock was handed back");
            other_ran.store(true, Ordering::SeqCst);
        }
        let (other_was_inside, permits) = holder.await.unwrap();
        assert!(other_was_inside, "the other decision never got in");
        assert_eq!(permits, 0);
        assert_eq!(lock.permit.available_permits(), 1);
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
}
