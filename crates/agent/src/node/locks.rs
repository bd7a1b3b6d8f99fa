//! The node's two kinds of lock.
//!
//! - [`DecisionLock`]: one at a time through the managers' decisions (hints, merge, CPU and
//!   device choice), as the kubelet admits one pod at a time. It is *released while a device
//!   plugin answers* (see [`DecisionLock::released_during`]), so a plugin stuck in
//!   `Allocate` delays only the admissions that ask for its resource; every decision is
//!   still taken on a state no other decision is changing.
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
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_decision_handed_back_lets_another_decision_in_and_is_taken_again() {
        let lock = Arc::new(DecisionLock::new());
        let other_ran = Arc::new(AtomicBool::new(false));
        let (lock2, ran2) = (Arc::clone(&lock), Arc::clone(&other_ran));
        let holder = tokio::task::spawn_blocking(move || {
            let _guard = lock2.acquire_blocking();
            lock2.released_during(|| {
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                while !ran2.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
            // Taken again: nobody else may be inside now.
            lock2.permit.available_permits()
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        {
            let _inside = tokio::time::timeout(Duration::from_secs(10), lock.acquire())
                .await
                .expect("the lock was handed back");
            other_ran.store(true, Ordering::SeqCst);
        }
        assert_eq!(holder.await.unwrap(), 0);
        assert_eq!(lock.permit.available_permits(), 1);
    }

    #[tokio::test]
    async fn pod_locks_serialize_one_pod_and_are_forgotten_when_free() {
        let locks = PodLocks::default();
        let a = locks.lock("a").await;
        let _b = locks.lock("b").await;
        assert!(
            tokio::time::timeout(Duration::from_millis(50), locks.lock("a"))
                .await
                .is_err()
        );
        drop(a);
        let _a = tokio::time::timeout(Duration::from_secs(5), locks.lock("a"))
            .await
            .unwrap();
        assert_eq!(locks.len(), 2);
        drop(_a);
        drop(_b);
        assert_eq!(locks.len(), 0);
    }
}
