//! [`Changes`]: a counter bumped whenever plugins or their devices change, and the one
//! bounded wait of the crate — until a condition on the manager holds, at most a timeout.

use std::time::Duration;

use tokio::sync::watch;

/// Wakes waiters when the plugins' bookkeeping or the state changed.
pub(crate) struct Changes(watch::Sender<u64>);

impl Default for Changes {
    fn default() -> Self {
        Changes(watch::channel(0).0)
    }
}

impl Changes {
    /// Something changed: wake every waiter to re-check its condition.
    pub(crate) fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wait until `condition` holds, re-checking it after every change, at most `timeout`;
    /// true when it holds.
    pub(crate) async fn wait_for(&self, timeout: Duration, condition: impl Fn() -> bool) -> bool {
        // Subscribed before the first check, so a change right after it still wakes us.
        let mut changes = self.0.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if condition() {
                return true;
            }
            if !matches!(
                tokio::time::timeout_at(deadline, changes.changed()).await,
                Ok(Ok(()))
            ) {
                return condition();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    use super::*;

    #[tokio::test]
    async fn a_condition_that_never_holds_ends_the_wait_at_its_timeout() {
        let changes = Changes::default();
        let started = Instant::now();
        assert!(!changes.wait_for(Duration::from_millis(50), || false).await);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn a_change_that_makes_the_condition_hold_ends_the_wait_at_once() {
        let changes = std::sync::Arc::new(Changes::default());
        let ready = std::sync::Arc::new(AtomicBool::new(false));
        let (c, r) = (changes.clone(), ready.clone());
        // The wait's own timeout is far beyond the test's: only the change can end it.
        let waiter = tokio::spawn(async move {
            c.wait_for(Duration::from_secs(24 * 3600), || r.load(Ordering::SeqCst))
                .await
        });
        tokio::task::yield_now().await;
        ready.store(true, Ordering::SeqCst);
        changes.bump();
        let woken = tokio::time::timeout(Duration::from_secs(60), waiter).await;
        assert!(woken.expect("the change ended the wait").unwrap());
    }
}
