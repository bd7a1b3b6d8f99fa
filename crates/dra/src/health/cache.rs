//! The device health cache (upstream `healthInfoCache`, `pkg/kubelet/cm/dra/healthinfo.go`):
//! the last health each driver reported for each of its devices, kept in the
//! `dra_health_state` file so a restart does not forget an unhealthy device.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use corral_checkpoint::formats::dra_health::{HEALTHY, UNHEALTHY, UNKNOWN};
use corral_checkpoint::{
    CheckpointError, CheckpointStore, DRA_HEALTH_FILE, DeviceHealth, DraHealthState,
    DriverHealthState, StateFile,
};

use super::error::HealthError;

/// How long a reported health holds when the driver gives no timeout (upstream
/// `DefaultHealthTimeout`).
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `message` kept: longer ones are cut to 1021 bytes and `...` (the API's
/// documented limit).
pub const MAX_MESSAGE_LEN: usize = 1024;

/// The most devices kept per driver; a report naming more keeps the first ones and logs the
/// rest as dropped (upstream has no bound).
pub const MAX_DEVICES_PER_DRIVER: usize = 4096;

/// A device's health (`state.DeviceHealthStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceHealthStatus {
    /// Operates as normal.
    Healthy,
    /// Reported unhealthy.
    Unhealthy,
    /// Not reported, reported as unknown, or the report timed out.
    Unknown,
}

impl DeviceHealthStatus {
    /// `Healthy`, `Unhealthy` or `Unknown`, as the kubelet writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceHealthStatus::Healthy => HEALTHY,
            DeviceHealthStatus::Unhealthy => UNHEALTHY,
            DeviceHealthStatus::Unknown => UNKNOWN,
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            HEALTHY => DeviceHealthStatus::Healthy,
            UNHEALTHY => DeviceHealthStatus::Unhealthy,
            _ => DeviceHealthStatus::Unknown,
        }
    }
}

impl std::fmt::Display for DeviceHealthStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One device in a driver's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedDevice {
    /// Resource pool.
    pub pool_name: String,
    /// Device name in the pool.
    pub device_name: String,
    /// Its health.
    pub health: DeviceHealthStatus,
    /// How long the report holds (`None`: [`DEFAULT_HEALTH_TIMEOUT`]).
    pub timeout: Option<Duration>,
    /// Why, as the driver put it (cut to [`MAX_MESSAGE_LEN`]).
    pub message: Option<String>,
}

/// A device's health as of now, after timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHealthNow {
    /// `Unknown` for a device never reported or whose report timed out.
    pub health: DeviceHealthStatus,
    /// The driver's message with the report that still holds.
    pub message: Option<String>,
}

/// A device whose recorded health changed in an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthChange {
    /// The driver.
    pub driver: String,
    /// Resource pool.
    pub pool_name: String,
    /// Device name in the pool.
    pub device_name: String,
    /// The new health.
    pub health: DeviceHealthStatus,
}

#[derive(Debug, Default)]
struct Inner {
    state: DraHealthState,
    /// Messages by driver and `<pool>/<device>`: not in v1.36's file layout, so kept in
    /// memory only (a restart shows health without the message until the next report).
    messages: BTreeMap<String, BTreeMap<String, String>>,
}

/// The device health cache, kept in a `dra_health_state` [`StateFile`] (or in memory).
#[derive(Debug)]
pub struct HealthCache {
    inner: Mutex<Inner>,
    file: StateFile,
}

/// `msg` cut to [`MAX_MESSAGE_LEN`] bytes: 1021 bytes (at a character boundary) and `...`.
pub fn truncate_message(msg: &str) -> String {
    if msg.len() <= MAX_MESSAGE_LEN {
        return msg.to_owned();
    }
    let mut end = MAX_MESSAGE_LEN - 3;
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &msg[..end])
}

fn timeout_of(device: &DeviceHealth) -> Duration {
    device.timeout().unwrap_or(DEFAULT_HEALTH_TIMEOUT)
}

fn age(device: &DeviceHealth, now: SystemTime) -> Duration {
    device
        .last_updated_time()
        .and_then(|at| now.duration_since(at).ok())
        .unwrap_or(Duration::ZERO)
}

impl HealthCache {
    /// A cache that keeps nothing on disk.
    pub fn in_memory() -> Self {
        HealthCache {
            inner: Mutex::new(Inner::default()),
            file: StateFile::in_memory(),
        }
    }

    /// Load `dra_health_state` from `state_dir`. A missing file is an empty cache; a file
    /// that cannot be read is reported as the second value and the cache starts empty (as
    /// upstream, which logs and goes on: health is re-reported by the drivers, and the file
    /// is rewritten at the next change).
    pub fn open(state_dir: &Path) -> Result<(Self, Option<CheckpointError>), HealthError> {
        let file = CheckpointStore::open(state_dir)
            .and_then(|store| StateFile::in_store(&store, DRA_HEALTH_FILE))
            .map_err(|source| HealthError::Open {
                dir: state_dir.to_path_buf(),
                source,
            })?;
        Ok(Self::load(file))
    }

    /// Load the cache from `file`: a missing file is an empty cache; a file that cannot be
    /// read is reported as the second value and the cache starts empty (see
    /// [`open`](Self::open)).
    pub fn load(file: StateFile) -> (Self, Option<CheckpointError>) {
        let (state, damaged) = match file.load() {
            Ok(Some(bytes)) => match DraHealthState::decode(&bytes) {
                Ok(state) => (state, None),
                Err(e) => (DraHealthState::default(), Some(e)),
            },
            Ok(None) => (DraHealthState::default(), None),
            Err(e) => (DraHealthState::default(), Some(e)),
        };
        let cache = HealthCache {
            inner: Mutex::new(Inner {
                state,
                messages: BTreeMap::new(),
            }),
            file,
        };
        (cache, damaged)
    }

    /// The file, when kept on disk.
    pub fn path(&self) -> Option<PathBuf> {
        self.file.path()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn save(&self, inner: &Inner) -> Result<(), HealthError> {
        let bytes = inner.state.encode().map_err(HealthError::Encode)?;
        self.file
            .stage(&bytes)
            .map_err(|source| HealthError::Write {
                path: PathBuf::from(self.file.to_string()),
                source,
            })
    }

    /// The health of a device now: `Unknown` when never reported or when its report is
    /// older than its timeout (upstream `getHealthInfo`).
    pub fn health(
        &self,
        driver: &str,
        pool: &str,
        device: &str,
        now: SystemTime,
    ) -> DeviceHealthNow {
        let inner = self.lock();
        let key = format!("{pool}/{device}");
        let Some(recorded) = inner
            .state
            .0
            .get(driver)
            .and_then(|d| d.devices.as_ref())
            .and_then(|d| d.get(&key))
        else {
            return DeviceHealthNow {
                health: DeviceHealthStatus::Unknown,
                message: None,
            };
        };
        if age(recorded, now) > timeout_of(recorded) {
            return DeviceHealthNow {
                health: DeviceHealthStatus::Unknown,
                message: None,
            };
        }
        DeviceHealthNow {
            health: DeviceHealthStatus::parse(&recorded.health),
            message: inner
                .messages
                .get(driver)
                .and_then(|m| m.get(&key))
                .cloned(),
        }
    }

    /// Take a driver's full report at `now` (upstream `updateHealthInfo`): reported devices
    /// are recorded with `LastUpdated = now`; devices left out keep their health until
    /// their timeout, then become `Unknown`. Returns the devices whose health changed; the
    /// file is rewritten when any did. At most [`MAX_DEVICES_PER_DRIVER`] devices are kept.
    pub fn update(
        &self,
        driver: &str,
        devices: &[ReportedDevice],
        now: SystemTime,
    ) -> Result<Vec<HealthChange>, HealthError> {
        let mut inner = self.lock();
        let Inner { state, messages } = &mut *inner;
        let current = state
            .0
            .entry(driver.to_owned())
            .or_insert_with(DriverHealthState::default)
            .devices
            .get_or_insert_with(BTreeMap::new);
        let messages = messages.entry(driver.to_owned()).or_default();
        let mut changed = Vec::new();
        let mut reported = std::collections::BTreeSet::new();
        let mut dropped = 0usize;
        for device in devices {
            let record = DeviceHealth::new(
                &device.pool_name,
                &device.device_name,
                device.health.as_str(),
                now,
                device.timeout,
            );
            let key = record.key();
            if !current.contains_key(&key) && current.len() >= MAX_DEVICES_PER_DRIVER {
                dropped += 1;
                continue;
            }
            if current
                .get(&key)
                .is_none_or(|old| old.health != record.health)
            {
                changed.push(HealthChange {
                    driver: driver.to_owned(),
                    pool_name: device.pool_name.clone(),
                    device_name: device.device_name.clone(),
                    health: device.health,
                });
            }
            match &device.message {
                Some(m) if !m.is_empty() => {
                    messages.insert(key.clone(), truncate_message(m));
                }
                _ => {
                    messages.remove(&key);
                }
            }
            reported.insert(key.clone());
            current.insert(key, record);
        }
        if dropped > 0 {
            tracing::warn!(
                driver,
                dropped,
                limit = MAX_DEVICES_PER_DRIVER,
                "DRA health report names more devices than are kept; the rest are ignored"
            );
        }
        for (key, device) in current.iter_mut() {
            if reported.contains(key)
                || device.health == UNKNOWN
                || age(device, now) <= timeout_of(device)
            {
                continue;
            }
            *device = DeviceHealth::new(
                &device.pool_name,
                &device.device_name,
                UNKNOWN,
                now,
                device.timeout(),
            );
            messages.remove(key);
            changed.push(HealthChange {
                driver: driver.to_owned(),
                pool_name: device.pool_name.clone(),
                device_name: device.device_name.clone(),
                health: DeviceHealthStatus::Unknown,
            });
        }
        if !changed.is_empty() {
            self.save(&inner)?;
        }
        Ok(changed)
    }

    /// Forget everything about `driver` (its health stream ended for good or it went away;
    /// upstream `clearDriver`) and rewrite the file.
    pub fn clear_driver(&self, driver: &str) -> Result<(), HealthError> {
        let mut inner = self.lock();
        let had = inner.state.0.remove(driver).is_some();
        inner.messages.remove(driver);
        if had { self.save(&inner) } else { Ok(()) }
    }

    /// What the file holds (or would hold).
    pub fn snapshot(&self) -> DraHealthState {
        self.lock().state.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn device(name: &str, health: DeviceHealthStatus, timeout: Option<u64>) -> ReportedDevice {
        ReportedDevice {
            pool_name: "pool".into(),
            device_name: name.into(),
            health,
            timeout: timeout.map(Duration::from_secs),
            message: None,
        }
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_764_000_000 + secs)
    }

    use DeviceHealthStatus::{Healthy, Unhealthy, Unknown};

    // Upstream TestHealthInfoCache-style: report, change, timeouts (default and per
    // device), devices left out, clearing a driver, and the file across a reopen.
    #[test]
    fn reports_timeouts_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (cache, damaged) = HealthCache::open(dir.path()).unwrap();
        assert!(damaged.is_none());
        assert_eq!(cache.health("drv", "pool", "a", at(0)).health, Unknown);

        let changed = cache
            .update(
                "drv",
                &[device("a", Healthy, None), device("b", Unhealthy, Some(60))],
                at(0),
            )
            .unwrap();
        assert_eq!(changed.len(), 2);
        assert_eq!(cache.health("drv", "pool", "a", at(30)).health, Healthy);
        // Past the default timeout: Unknown, without anyone writing.
        assert_eq!(cache.health("drv", "pool", "a", at(31)).health, Unknown);
        // The device's own timeout holds longer.
        assert_eq!(cache.health("drv", "pool", "b", at(60)).health, Unhealthy);
        assert_eq!(cache.health("drv", "pool", "b", at(61)).health, Unknown);
        // The same report again changes nothing.
        assert!(
            cache
                .update(
                    "drv",
                    &[device("a", Healthy, None), device("b", Unhealthy, Some(60))],
                    at(10)
                )
                .unwrap()
                .is_empty()
        );

        // `b` is left out: it stays Unhealthy within its timeout, then becomes Unknown.
        assert!(
            cache
                .update("drv", &[device("a", Healthy, None)], at(40))
                .unwrap()
                .is_empty()
        );
        let changed = cache
            .update("drv", &[device("a", Healthy, None)], at(71))
            .unwrap();
        assert_eq!(
            changed,
            [HealthChange {
                driver: "drv".into(),
                pool_name: "pool".into(),
                device_name: "b".into(),
                health: Unknown
            }]
        );
        let file = std::fs::read(dir.path().join(DRA_HEALTH_FILE)).unwrap();
        let text = String::from_utf8(file).unwrap();
        assert!(
            text.contains(r#""pool/b":{"PoolName":"pool","DeviceName":"b","Health":"Unknown""#),
            "{text}"
        );
        assert!(
            text.contains(r#""HealthCheckTimeout":60000000000"#),
            "{text}"
        );

        // A restart reads the file back.
        let (again, damaged) = HealthCache::open(dir.path()).unwrap();
        assert!(damaged.is_none());
        assert_eq!(again.snapshot(), cache.snapshot());
        assert_eq!(again.health("drv", "pool", "a", at(72)).health, Healthy);

        cache.clear_driver("drv").unwrap();
        assert_eq!(cache.health("drv", "pool", "a", at(72)).health, Unknown);
        assert_eq!(
            std::fs::read(dir.path().join(DRA_HEALTH_FILE)).unwrap(),
            b"{}"
        );
    }

    #[test]
    fn a_damaged_file_starts_empty_and_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DRA_HEALTH_FILE), b"{\"drv\":").unwrap();
        let (cache, damaged) = HealthCache::open(dir.path()).unwrap();
        assert!(damaged.unwrap().is_decode_error());
        assert_eq!(cache.snapshot(), DraHealthState::default());
        cache
            .update("drv", &[device("a", Healthy, None)], at(0))
            .unwrap();
        let (again, damaged) = HealthCache::open(dir.path()).unwrap();
        assert!(damaged.is_none());
        assert_eq!(again.health("drv", "pool", "a", at(1)).health, Healthy);
    }

    #[test]
    fn messages_are_cut_and_kept_with_their_report() {
        assert_eq!(truncate_message("short"), "short");
        let exact = "x".repeat(MAX_MESSAGE_LEN);
        assert_eq!(truncate_message(&exact), exact);
        let long = "y".repeat(MAX_MESSAGE_LEN + 1);
        let cut = truncate_message(&long);
        assert_eq!(cut.len(), MAX_MESSAGE_LEN);
        assert!(cut.ends_with("yyy..."));
        // Never inside a character.
        let wide = "é".repeat(MAX_MESSAGE_LEN);
        let cut = truncate_message(&wide);
        assert!(
            cut.len() <= MAX_MESSAGE_LEN && cut.ends_with("..."),
            "{}",
            cut.len()
        );

        let cache = HealthCache::in_memory();
        let mut d = device("a", Unhealthy, None);
        d.message = Some(long);
        cache.update("drv", &[d], at(0)).unwrap();
        let now = cache.health("drv", "pool", "a", at(1));
        assert_eq!(now.health, Unhealthy);
        assert_eq!(now.message.unwrap().len(), MAX_MESSAGE_LEN);
        // Timed out: no message either.
        assert_eq!(cache.health("drv", "pool", "a", at(31)).message, None);
    }

    #[test]
    fn a_driver_naming_too_many_devices_is_bounded() {
        let cache = HealthCache::in_memory();
        let many: Vec<ReportedDevice> = (0..MAX_DEVICES_PER_DRIVER + 10)
            .map(|i| device(&format!("d{i}"), Healthy, None))
            .collect();
        let changed = cache.update("drv", &many, at(0)).unwrap();
        assert_eq!(changed.len(), MAX_DEVICES_PER_DRIVER);
        let kept = cache.snapshot().0["drv"].devices.as_ref().unwrap().len();
        assert_eq!(kept, MAX_DEVICES_PER_DRIVER);
    }
}
