//! The health streams ([`HealthMonitor`], upstream `DRAPluginManager`'s health streams and
//! `Manager.HandleWatchResourcesStream`): one `NodeWatchResources` stream per driver, on the
//! driver's newest plugin when that plugin advertises a DRAResourceHealth service.
//!
//! As upstream 1.37 does:
//! - a newer plugin that advertises health takes the stream over (a new generation) without
//!   the driver's health being cleared;
//! - a newer plugin that advertises none ends the stream and clears the driver's health
//!   (no fall-back to the older plugin);
//! - removing an older plugin leaves the stream alone; removing the last clears the health;
//! - a stream answered `Unimplemented` ends for good (the driver's health is cleared); any
//!   other end is retried after [`HealthMonitorConfig::retry_interval`] (upstream: 5 s).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime};

use corral_proto::dra_health::{v1, v1alpha1};
use corral_proto::tonic::{self, Code, Streaming};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::cache::{DeviceHealthStatus, HealthCache, ReportedDevice};
use crate::plugin::{DraPluginClient, HealthService, PluginObserver};

/// Health monitor settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthMonitorConfig {
    /// Wait before re-opening a stream that ended (upstream: 5 s).
    pub retry_interval: Duration,
    /// How long a driver has to answer `NodeWatchResources` (its response headers or first
    /// report) before the attempt is dropped and retried on a new connection (default
    /// 30 s, the default health timeout: a driver silent that long has its devices
    /// `Unknown` anyway). Upstream waits forever, so one lost request would stop that
    /// driver's health for good.
    pub open_timeout: Duration,
}

impl Default for HealthMonitorConfig {
    fn default() -> Self {
        HealthMonitorConfig {
            retry_interval: Duration::from_secs(5),
            open_timeout: Duration::from_secs(30),
        }
    }
}

/// A driver's stream: which plugin it is on and its generation (0: none running).
#[derive(Debug)]
struct Slot {
    endpoint: PathBuf,
    generation: u64,
    cancel: Option<CancellationToken>,
}

#[derive(Debug)]
struct Shared {
    cache: Arc<HealthCache>,
    config: HealthMonitorConfig,
    slots: Mutex<BTreeMap<String, Slot>>,
    generations: AtomicU64,
    /// Bumped whenever a device's recorded health changes or a driver is cleared.
    changes: watch::Sender<u64>,
}

/// Keeps each driver's health stream running and the [`HealthCache`] current. Set it as
/// the registry's observer ([`PluginRegistry::set_observer`](crate::PluginRegistry::set_observer)).
#[derive(Debug, Clone)]
pub struct HealthMonitor {
    shared: Arc<Shared>,
}

impl HealthMonitor {
    /// A monitor writing into `cache`. Streams start once it observes plugins; it must be
    /// used inside a tokio runtime.
    pub fn new(cache: Arc<HealthCache>, config: HealthMonitorConfig) -> Self {
        HealthMonitor {
            shared: Arc::new(Shared {
                cache,
                config,
                slots: Mutex::new(BTreeMap::new()),
                generations: AtomicU64::new(0),
                changes: watch::channel(0).0,
            }),
        }
    }

    /// The cache the streams write into.
    pub fn cache(&self) -> &Arc<HealthCache> {
        &self.shared.cache
    }

    /// A counter bumped at every change of recorded health (for waiting on one).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// The plugin endpoint and generation of `driver`'s running stream, if one runs.
    pub fn active_stream(&self, driver: &str) -> Option<(PathBuf, u64)> {
        self.shared
            .slots()
            .get(driver)
            .filter(|s| s.generation != 0)
            .map(|s| (s.endpoint.clone(), s.generation))
    }

    /// Stop every stream (the cache keeps what it has).
    pub fn stop(&self) {
        for slot in self.shared.slots().values_mut() {
            if let Some(cancel) = slot.cancel.take() {
                cancel.cancel();
            }
            slot.generation = 0;
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for slot in self
            .slots
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            if let Some(cancel) = &slot.cancel {
                cancel.cancel();
            }
        }
    }
}

impl Shared {
    fn slots(&self) -> MutexGuard<'_, BTreeMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Clear `driver`'s health (a stream deactivated).
    fn clear(&self, driver: &str) {
        if let Err(e) = self.cache.clear_driver(driver) {
            tracing::error!(driver, error = %e, "cannot clear the DRA driver's device health");
        }
        self.bump();
    }

    /// The stream of `generation` ended for good: deactivate it unless it was replaced.
    fn terminated(&self, driver: &str, generation: u64) {
        let mut slots = self.slots();
        let Some(slot) = slots.get_mut(driver).filter(|s| s.generation == generation) else {
            return;
        };
        slot.generation = 0;
        slot.cancel = None;
        drop(slots);
        self.clear(driver);
    }
}

impl PluginObserver for HealthMonitor {
    fn newest_changed(&self, driver: &str, newest: Option<&DraPluginClient>) {
        let shared = &self.shared;
        let mut slots = shared.slots();
        if let (Some(slot), Some(plugin)) = (slots.get(driver), newest)
            && slot.endpoint == plugin.endpoint()
        {
            return;
        }
        let was_active = match slots.remove(driver) {
            Some(old) => {
                if let Some(cancel) = old.cancel {
                    cancel.cancel();
                }
                old.generation != 0
            }
            None => false,
        };
        let Some(plugin) = newest else {
            drop(slots);
            if was_active {
                shared.clear(driver);
            }
            return;
        };
        let Some(service) = plugin.health_service() else {
            slots.insert(
                driver.to_owned(),
                Slot {
                    endpoint: plugin.endpoint().to_path_buf(),
                    generation: 0,
                    cancel: None,
                },
            );
            drop(slots);
            if was_active {
                shared.clear(driver);
            }
            return;
        };
        let generation = shared.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let cancel = CancellationToken::new();
        slots.insert(
            driver.to_owned(),
            Slot {
                endpoint: plugin.endpoint().to_path_buf(),
                generation,
                cancel: Some(cancel.clone()),
            },
        );
        tracing::info!(driver, endpoint = %plugin.endpoint().display(), %service, generation,
            "watching DRA device health");
        let stream = Stream {
            shared: Arc::downgrade(shared),
            config: shared.config.clone(),
            driver: driver.to_owned(),
            generation,
            service,
            endpoint: plugin.endpoint().to_path_buf(),
            dial_timeout: plugin.timeout(),
        };
        tokio::spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = stream.run() => {}
            }
        });
    }
}

/// One generation of a driver's stream.
struct Stream {
    /// Weak, so the monitor's state (and with it every stream) ends when the monitor is
    /// dropped.
    shared: Weak<Shared>,
    config: HealthMonitorConfig,
    driver: String,
    generation: u64,
    service: HealthService,
    /// The plugin's DRAPlugin socket; each attempt dials its own connection, so the
    /// long-lived stream never shares one with NodePrepareResources calls.
    endpoint: PathBuf,
    dial_timeout: Duration,
}

/// A response's devices, for either version (the same fields under two packages).
macro_rules! devices {
    ($response:expr) => {
        $response
            .devices
            .iter()
            .filter_map(|d| {
                reported(
                    d.device.as_ref().map(|i| (&i.pool_name, &i.device_name)),
                    d.health,
                    d.health_check_timeout_seconds,
                    &d.message,
                )
            })
            .collect()
    };
}

/// Either version's response stream.
enum Responses {
    V1(Streaming<v1::NodeWatchResourcesResponse>),
    V1Alpha1(Streaming<v1alpha1::NodeWatchResourcesResponse>),
}

impl Responses {
    async fn next(&mut self) -> Result<Option<Vec<ReportedDevice>>, tonic::Status> {
        Ok(match self {
            Responses::V1(s) => s.message().await?.map(|r| devices!(r)),
            Responses::V1Alpha1(s) => s.message().await?.map(|r| devices!(r)),
        })
    }
}

/// A device of a response (the same fields in both versions): health 1 is `HEALTHY`, 2
/// `UNHEALTHY`, anything else `Unknown`; a timeout ≤ 0 means the default. An entry without a
/// device identifier, or with an empty pool or device name, names no device and is skipped.
fn reported(
    id: Option<(&String, &String)>,
    health: i32,
    timeout_seconds: i64,
    message: &str,
) -> Option<ReportedDevice> {
    let Some((pool, device)) = id.filter(|(p, d)| !p.is_empty() && !d.is_empty()) else {
        tracing::debug!("DRA health report entry without a device identifier skipped");
        return None;
    };
    let (pool, device) = (pool.clone(), device.clone());
    if timeout_seconds < 0 {
        tracing::debug!(
            pool,
            device,
            timeout_seconds,
            "negative health_check_timeout_seconds; the default applies"
        );
    }
    Some(ReportedDevice {
        pool_name: pool,
        device_name: device,
        health: match health {
            1 => DeviceHealthStatus::Healthy,
            2 => DeviceHealthStatus::Unhealthy,
            _ => DeviceHealthStatus::Unknown,
        },
        timeout: u64::try_from(timeout_seconds)
            .ok()
            .filter(|&s| s > 0)
            .map(Duration::from_secs),
        message: (!message.is_empty()).then(|| message.to_owned()),
    })
}

impl Stream {
    async fn open(&self) -> Result<Responses, tonic::Status> {
        let channel = corral_proto::uds::connect(&self.endpoint, self.dial_timeout)
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        Ok(match self.service {
            HealthService::V1 => Responses::V1(
                v1::dra_resource_health_client::DraResourceHealthClient::new(channel)
                    .node_watch_resources(v1::NodeWatchResourcesRequest {})
                    .await?
                    .into_inner(),
            ),
            _ => Responses::V1Alpha1(
                v1alpha1::dra_resource_health_client::DraResourceHealthClient::new(channel)
                    .node_watch_resources(v1alpha1::NodeWatchResourcesRequest {})
                    .await?
                    .into_inner(),
            ),
        })
    }

    /// Watch until the stream is unimplemented (then deactivate); retry any other end.
    async fn run(self) {
        let driver = self.driver.as_str();
        loop {
            let opened = tokio::time::timeout(self.config.open_timeout, self.open())
                .await
                .unwrap_or_else(|_| {
                    Err(tonic::Status::deadline_exceeded(format!(
                        "no answer to NodeWatchResources within {:?}",
                        self.config.open_timeout
                    )))
                });
            let ended = match opened {
                Ok(mut responses) => loop {
                    match responses.next().await {
                        Ok(Some(devices)) => self.record(&devices),
                        Ok(None) => break None,
                        Err(status) => break Some(status),
                    }
                },
                Err(status) => Some(status),
            };
            if let Some(status) = &ended
                && status.code() == Code::Unimplemented
            {
                tracing::info!(
                    driver,
                    message = status.message(),
                    "the DRA driver does not implement the health stream; its device health is cleared"
                );
                if let Some(shared) = self.shared.upgrade() {
                    shared.terminated(driver, self.generation);
                }
                return;
            }
            if self.shared.strong_count() == 0 {
                return;
            }
            tracing::warn!(driver, error = ?ended.as_ref().map(|s| s.message()),
                retry_in = ?self.config.retry_interval, "DRA health stream ended");
            tokio::time::sleep(self.config.retry_interval).await;
        }
    }

    fn record(&self, devices: &[ReportedDevice]) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        match shared
            .cache
            .update(&self.driver, devices, SystemTime::now())
        {
            Ok(changed) if changed.is_empty() => {}
            Ok(changed) => {
                for c in &changed {
                    tracing::info!(driver = %c.driver, pool = %c.pool_name, device = %c.device_name,
                        health = %c.health, "DRA device health changed");
                }
                shared.bump();
            }
            Err(e) => {
                tracing::error!(driver = %self.driver, error = %e,
                    "device health changed but could not be saved");
                shared.bump();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_entries_map_as_upstream() {
        let (p, d) = ("pool".to_owned(), "gpu".to_owned());
        let got = reported(Some((&p, &d)), 2, 60, "hot").unwrap();
        assert_eq!(got.health, DeviceHealthStatus::Unhealthy);
        assert_eq!(got.timeout, Some(Duration::from_secs(60)));
        assert_eq!(got.message.as_deref(), Some("hot"));
        let got = reported(Some((&p, &d)), 7, -5, "").unwrap();
        assert_eq!(
            (got.health, got.timeout, got.message),
            (DeviceHealthStatus::Unknown, None, None)
        );
        assert_eq!(
            reported(Some((&p, &d)), 1, 0, "").unwrap().health,
            DeviceHealthStatus::Healthy
        );
        assert!(reported(None, 1, 0, "").is_none());
        assert!(reported(Some((&p, &String::new())), 1, 0, "").is_none());
    }
}
