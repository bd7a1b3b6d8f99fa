//! Poison-tolerant locking: every critical section of the manager leaves its data
//! consistent, so a lock poisoned by a panicking thread is still usable.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Lock `mutex`, poisoned or not.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read `lock`, poisoned or not.
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write `lock`, poisoned or not.
pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// A lock's place in the manager's lock order (`shared.rs`): a thread takes a lock only
/// while every [`Ordered`] lock it holds ranks lower. Checked on every acquisition in debug
/// builds (every test run), so an inversion fails the first test that takes the two locks
/// the wrong way round, whether or not another thread races it into a deadlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// The hub's connected plugins.
    HubPlugins = 1,
    /// The hub's registrations in flight.
    HubRegistering = 2,
    /// The checkpoint writer's serial lock.
    CheckpointSerial = 3,
    /// The device state.
    State = 4,
}

/// A poison-tolerant mutex with a [`Rank`].
#[derive(Debug)]
pub(crate) struct Ordered<T> {
    rank: Rank,
    mutex: Mutex<T>,
}

/// The guard of an [`Ordered`] lock.
pub(crate) struct OrderedGuard<'a, T> {
    guard: MutexGuard<'a, T>,
    #[cfg(debug_assertions)]
    rank: Rank,
}

#[cfg(debug_assertions)]
thread_local! {
    /// The ranks of the [`Ordered`] locks this thread holds.
    static HELD: std::cell::RefCell<Vec<Rank>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl<T> Ordered<T> {
    /// `value` under a lock of `rank`.
    pub(crate) fn new(rank: Rank, value: T) -> Ordered<T> {
        Ordered {
            rank,
            mutex: Mutex::new(value),
        }
    }

    /// Lock, poisoned or not; in debug builds, panics when this thread holds a lock that
    /// does not rank lower.
    pub(crate) fn lock(&self) -> OrderedGuard<'_, T> {
        #[cfg(debug_assertions)]
        HELD.with(|held| {
            let held = held.borrow();
            if let Some(out_of_order) = held.iter().find(|&&r| r >= self.rank) {
                panic!(
                    "lock order: {:?} taken while {out_of_order:?} is held (see shared.rs)",
                    self.rank
                );
            }
        });
        let guard = lock(&self.mutex);
        #[cfg(debug_assertions)]
        HELD.with(|held| held.borrow_mut().push(self.rank));
        OrderedGuard {
            guard,
            #[cfg(debug_assertions)]
            rank: self.rank,
        }
    }
}

impl<T> std::ops::Deref for OrderedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for OrderedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(debug_assertions)]
impl<T> Drop for OrderedGuard<'_, T> {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|&r| r == self.rank) {
                held.remove(at);
            }
        });
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    fn locks_taken_in_order_pass_and_out_of_order_panic() {
        let hub = Ordered::new(Rank::HubPlugins, ());
        let state = Ordered::new(Rank::State, ());
        {
            let _hub = hub.lock();
            let _state = state.lock();
        }
        let inverted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _state = state.lock();
            let _hub = hub.lock();
        }));
        let message = inverted.unwrap_err();
        let message = message.downcast_ref::<String>().unwrap();
        assert!(
            message.contains("HubPlugins taken while State is held"),
            "{message}"
        );
        // The panic released what it held: in order again, nothing is left over.
        let _hub = hub.lock();
        let _state = state.lock();
        let twice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| state.lock()));
        assert!(twice.is_err(), "a lock is not taken twice by one thread");
    }
}
