//! [`DeviceManagerObserver`]: how the device manager reports what upstream exposes as
//! metrics (`device_plugin_registration_total`, `device_plugin_alloc_duration_seconds`),
//! without this crate depending on a metrics library. The agent turns the calls into
//! Prometheus series.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::locks::{read, write};

/// Receives the device manager's measurements. Every method has an empty default, so an
/// observer implements only what it records. Calls are made outside the manager's lock and
/// must return quickly.
pub trait DeviceManagerObserver: Send + Sync {
    /// A registration request for `resource` passed validation (upstream
    /// `device_plugin_registration_total{resource_name}`).
    fn plugin_registered(&self, resource: &str) {
        let _ = resource;
    }

    /// One `Allocate` RPC to the plugin of `resource` took `duration`, successful or not
    /// (upstream `device_plugin_alloc_duration_seconds{resource_name}`).
    fn allocate_rpc_finished(&self, resource: &str, duration: Duration) {
        let _ = (resource, duration);
    }

    /// A plugin connected, listed its devices (a change of health included) or
    /// disconnected: what [`DeviceManager::device_inventory`](crate::DeviceManager::device_inventory)
    /// answers may have changed (corral's agent republishes its NodeResourceTopology).
    fn devices_changed(&self, resource: &str) {
        let _ = resource;
    }
}

/// Upstream's histogram buckets for `device_plugin_alloc_duration_seconds`
/// (Prometheus' default buckets), in seconds.
pub const ALLOC_DURATION_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Where the manager keeps its observer (none until one is set).
#[derive(Default)]
pub(crate) struct ObserverSlot(RwLock<Option<Arc<dyn DeviceManagerObserver>>>);

impl ObserverSlot {
    /// Replace the observer.
    pub(crate) fn set(&self, observer: Arc<dyn DeviceManagerObserver>) {
        *write(&self.0) = Some(observer);
    }

    /// The observer, if one is set.
    pub(crate) fn get(&self) -> Option<Arc<dyn DeviceManagerObserver>> {
        read(&self.0).clone()
    }
}
