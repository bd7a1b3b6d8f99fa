//! The device manager's measurements as the kubelet's series:
//! `kubelet_device_plugin_registration_total{resource_name}` and
//! `kubelet_device_plugin_alloc_duration_seconds{resource_name}` (client_golang's default
//! buckets, as upstream).

use std::time::Duration;

use corral_devicemgr::{ALLOC_DURATION_BUCKETS, DeviceManagerObserver};

use crate::exposition::{CounterVec, HistogramVec};

/// The label of both series.
const RESOURCE_NAME: &[&str] = &["resource_name"];

/// Device-plugin series, fed by the device manager through [`DeviceManagerObserver`]. Clones
/// share the series.
#[derive(Debug, Clone)]
pub(crate) struct DevicePluginMetrics {
    /// `kubelet_device_plugin_registration_total`.
    pub(crate) registrations: CounterVec,
    /// `kubelet_device_plugin_alloc_duration_seconds`.
    pub(crate) alloc_duration: HistogramVec,
}

impl Default for DevicePluginMetrics {
    fn default() -> Self {
        Self {
            registrations: CounterVec::new(RESOURCE_NAME),
            alloc_duration: HistogramVec::new(RESOURCE_NAME, &ALLOC_DURATION_BUCKETS),
        }
    }
}

impl DeviceManagerObserver for DevicePluginMetrics {
    fn plugin_registered(&self, resource: &str) {
        self.registrations.inc(&[resource]);
    }

    fn allocate_rpc_finished(&self, resource: &str, duration: Duration) {
        self.alloc_duration
            .observe(&[resource], duration.as_secs_f64());
    }
}
