//! DRA device health (KEP-4680): drivers stream their devices' health over
//! `DRAResourceHealth.NodeWatchResources` (`v1alpha1` in k8s 1.31–1.36, `v1` from 1.37),
//! the kubelet keeps it in the `dra_health_state` file and shows it per container as
//! `allocatedResourcesStatus`.
//!
//! - [`HealthCache`]: the last report per driver and device, per-device timeouts (default
//!   [`DEFAULT_HEALTH_TIMEOUT`]), messages cut to [`MAX_MESSAGE_LEN`], the file;
//! - [`HealthMonitor`]: one stream per driver on its newest plugin, set as the
//!   [`PluginRegistry`](crate::PluginRegistry)'s observer;
//! - [`DraManager::container_health`](crate::DraManager::container_health): a container's
//!   `claim:<podClaim>[/<request>]` entries.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use corral_dra::health::{DeviceHealthStatus, HealthCache, ReportedDevice};
//!
//! let cache = HealthCache::in_memory();
//! let now = SystemTime::now();
//! cache.update("gpu.example.com", &[ReportedDevice {
//!     pool_name: "node-1".into(),
//!     device_name: "gpu-0".into(),
//!     health: DeviceHealthStatus::Unhealthy,
//!     timeout: None,
//!     message: Some("ECC error count exceeded threshold".into()),
//! }], now).unwrap();
//! let seen = cache.health("gpu.example.com", "node-1", "gpu-0", now + Duration::from_secs(1));
//! assert_eq!(seen.health, DeviceHealthStatus::Unhealthy);
//! // Not reported again within 30 s: unknown.
//! let later = cache.health("gpu.example.com", "node-1", "gpu-0", now + Duration::from_secs(31));
//! assert_eq!(later.health, DeviceHealthStatus::Unknown);
//! ```

mod cache;
mod error;
mod monitor;
mod status;

pub use cache::{
    DEFAULT_HEALTH_TIMEOUT, DeviceHealthNow, DeviceHealthStatus, HealthCache, HealthChange,
    MAX_DEVICES_PER_DRIVER, MAX_MESSAGE_LEN, ReportedDevice, truncate_message,
};
pub use error::HealthError;
pub use monitor::{HealthMonitor, HealthMonitorConfig};
pub use status::{ClaimDeviceHealth, ClaimHealthStatus};
