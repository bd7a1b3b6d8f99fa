//! [`NriLink`]: whether corral is synchronized with the runtime over NRI, and since when it
//! is not — what `/healthz` and `/readyz` ask of NRI mode.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The state of corral's NRI connection, shared by the plugin (which marks it
/// synchronized), the dialing loop (which marks it lost) and the probes (which read it).
#[derive(Debug, Clone)]
pub(crate) struct NriLink(Arc<Mutex<LinkState>>);

#[derive(Debug)]
struct LinkState {
    /// The runtime's Synchronize was answered on the current connection.
    synchronized: bool,
    /// Some connection has ever been synchronized.
    ever_synchronized: bool,
    /// When `synchronized` last changed (at first: when corral started).
    since: Instant,
}

/// What the probes see of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkStatus {
    /// Synchronized on the current connection.
    Synchronized,
    /// Not synchronized for `for_` (since start, or since the connection was lost);
    /// `ever`: some earlier connection was.
    Unsynchronized { for_: Duration, ever: bool },
}

impl NriLink {
    /// Not synchronized yet, counted from now.
    pub(crate) fn new() -> NriLink {
        NriLink(Arc::new(Mutex::new(LinkState {
            synchronized: false,
            ever_synchronized: false,
            since: Instant::now(),
        })))
    }

    /// The runtime's Synchronize was answered.
    pub(crate) fn synchronized(&self) {
        let mut state = self.lock();
        if !state.synchronized {
            state.synchronized = true;
            state.since = Instant::now();
        }
        state.ever_synchronized = true;
    }

    /// The connection ended (or a new one is being made).
    pub(crate) fn lost(&self) {
        let mut state = self.lock();
        if state.synchronized {
            state.synchronized = false;
            state.since = Instant::now();
        }
    }

    /// Now.
    pub(crate) fn status(&self) -> LinkStatus {
        let state = self.lock();
        if state.synchronized {
            LinkStatus::Synchronized
        } else {
            LinkStatus::Unsynchronized {
                for_: state.since.elapsed(),
                ever: state.ever_synchronized,
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_counts_unsynchronized_time_from_start_and_from_each_loss() {
        let link = NriLink::new();
        let LinkStatus::Unsynchronized { ever: false, .. } = link.status() else {
            panic!("{:?}", link.status());
        };
        link.synchronized();
        assert_eq!(link.status(), LinkStatus::Synchronized);
        std::thread::sleep(Duration::from_millis(20));
        link.lost();
        let LinkStatus::Unsynchronized { for_, ever: true } = link.status() else {
            panic!("{:?}", link.status());
        };
        assert!(
            for_ < Duration::from_millis(20),
            "counted from the loss: {for_:?}"
        );
        // A second loss does not restart the count.
        std::thread::sleep(Duration::from_millis(5));
        link.lost();
        let LinkStatus::Unsynchronized { for_, .. } = link.status() else {
            panic!();
        };
        assert!(for_ >= Duration::from_millis(5));
    }

    /// A runtime that accepts, registers and drops before Synchronize, again and again:
    /// every loss leaves the count from start, so `/healthz` fails after the grace period.
    #[test]
    fn a_reconnect_storm_before_synchronize_never_restarts_the_count() {
        let link = NriLink::new();
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..10_000 {
            link.lost();
        }
        let LinkStatus::Unsynchronized { for_, ever: false } = link.status() else {
            panic!("{:?}", link.status());
        };
        assert!(for_ >= Duration::from_millis(20), "restarted: {for_:?}");
    }
}
