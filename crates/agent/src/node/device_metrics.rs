//! The device manager's measurements as Prometheus series with upstream's names:
//! `device_plugin_registration_total{resource_name}` and
//! `device_plugin_alloc_duration_seconds{resource_name}` (upstream's buckets).

use std::time::Duration;

use corral_devicemgr::{ALLOC_DURATION_BUCKETS, DeviceManagerObserver};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

/// Labels of a device-plugin series: `resource_name`.
type ResourceLabels = Vec<(String, String)>;

fn alloc_histogram() -> Histogram {
    Histogram::new(ALLOC_DURATION_BUCKETS)
}

/// Device-plugin series, fed by the device manager through [`DeviceManagerObserver`].
#[derive(Debug, Clone)]
pub(crate) struct DevicePluginMetrics {
    /// `device_plugin_registration_total`.
    pub(crate) registrations: Family<ResourceLabels, Counter>,
    /// `device_plugin_alloc_duration_seconds`.
    pub(crate) alloc_duration: Family<ResourceLabels, Histogram, fn() -> Histogram>,
}

impl Default for DevicePluginMetrics {
    fn default() -> Self {
        Self {
            registrations: Family::default(),
            alloc_duration: Family::new_with_constructor(alloc_histogram),
        }
    }
}

fn labels(resource: &str) -> ResourceLabels {
    vec![("resource_name".to_owned(), resource.to_owned())]
}

impl DeviceManagerObserver for DevicePluginMetrics {
    fn plugin_registered(&self, resource: &str) {
        self.registrations.get_or_create(&labels(resource)).inc();
    }

    fn allocate_rpc_finished(&self, resource: &str, duration: Duration) {
        self.alloc_duration
            .get_or_create(&labels(resource))
            .observe(duration.as_secs_f64());
    }
}
