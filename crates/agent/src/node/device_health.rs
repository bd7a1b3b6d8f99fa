//! DRA device health as the agent runs it (`ResourceHealthStatus`): the health cache in
//! the state directory (`dra_health_state`) and the monitor watching each driver's newest
//! plugin.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use corral_dra::PluginRegistry;
use corral_dra::health::{HealthCache, HealthMonitor, HealthMonitorConfig};

/// The health monitor and whether drivers' messages are shown.
pub(crate) struct DeviceHealth {
    pub(crate) monitor: HealthMonitor,
    /// `ResourceHealthStatusMessage`.
    pub(crate) messages: bool,
}

impl DeviceHealth {
    /// Load `dra_health_state` (a damaged file is logged and the cache starts empty, as
    /// upstream) and watch the registry's drivers.
    pub(crate) fn watch(
        state_dir: &Path,
        registry: &PluginRegistry,
        messages: bool,
    ) -> Result<Self> {
        let (cache, damaged) =
            HealthCache::open(state_dir).context("opening the DRA device health state")?;
        if let Some(error) = damaged {
            tracing::error!(error = %error,
                "the DRA device health state cannot be read; starting with no device health (drivers report it again)");
        }
        let monitor = HealthMonitor::new(Arc::new(cache), HealthMonitorConfig::default());
        if registry.set_observer(Arc::new(monitor.clone())).is_err() {
            anyhow::bail!("the DRA plugin registry already has an observer");
        }
        Ok(DeviceHealth { monitor, messages })
    }
}
