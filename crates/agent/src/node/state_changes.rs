//! [`StateChanges`]: a counter the node bumps after every change of what it holds (an
//! admission, a release, a container's start or removal, once committed; a device plugin's
//! device list or health), so that a watcher — the NodeResourceTopology publisher — wakes
//! without polling. A burst of changes while the watcher works is one wake-up.

use std::sync::Arc;
use std::time::Duration;

use corral_devicemgr::DeviceManagerObserver;
use tokio::sync::watch;

use super::DevicePluginMetrics;

/// The node's change counter (clones share it).
#[derive(Clone, Debug)]
pub(crate) struct StateChanges(Arc<watch::Sender<u64>>);

impl Default for StateChanges {
    fn default() -> Self {
        Self(Arc::new(watch::channel(0).0))
    }
}

impl StateChanges {
    /// Something changed: wake every watcher.
    pub(crate) fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A watcher: `changed().await` returns after the next bump (or at once if one came
    /// since the last `borrow_and_update`).
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }

    /// How many changes so far.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        *self.0.borrow()
    }
}

/// The device manager's observer: its metrics, and a device list or health change as a
/// state change.
pub(super) struct DeviceObserver {
    pub(super) metrics: DevicePluginMetrics,
    pub(super) changes: StateChanges,
}

impl DeviceManagerObserver for DeviceObserver {
    fn plugin_registered(&self, resource: &str) {
        self.metrics.plugin_registered(resource);
    }

    fn allocate_rpc_finished(&self, resource: &str, duration: Duration) {
        self.metrics.allocate_rpc_finished(resource, duration);
    }

    fn devices_changed(&self, _resource: &str) {
        self.changes.bump();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_of_bumps_is_one_wake_up() {
        let changes = StateChanges::default();
        let mut watcher = changes.subscribe();
        watcher.borrow_and_update();
        for _ in 0..5 {
            changes.bump();
        }
        tokio::time::timeout(Duration::from_secs(30), watcher.changed())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(*watcher.borrow_and_update(), 5);
        assert!(!watcher.has_changed().unwrap());
        assert_eq!(changes.count(), 5);
    }
}
