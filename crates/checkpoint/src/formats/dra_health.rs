//! The DRA manager's device health file `dra_health_state` (KEP-4680,
//! `pkg/kubelet/cm/dra/healthinfo.go` and `state.DevicesHealthMap`).
//!
//! Unlike the other files it has no checksum: the kubelet writes plain
//! `json.Marshal(DevicesHealthMap)` through a temporary file and a rename, and on a file it
//! cannot read it logs and starts with an empty cache. The layout:
//!
//! ```json
//! {"<driver>":{"Devices":{"<pool>/<device>":{"PoolName":"…","DeviceName":"…",
//!   "Health":"Healthy","LastUpdated":"2026-11-25T08:30:00.5Z","HealthCheckTimeout":0}}}}
//! ```
//!
//! `LastUpdated` is a Go `time.Time` (RFC 3339 with nanoseconds, trailing zeros dropped) and
//! `HealthCheckTimeout` a `time.Duration` in nanoseconds, 0 meaning the default (30 s).
//! Driver names and device keys are map keys, so Go writes them sorted, as a `BTreeMap`
//! does.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::go_struct;
use super::go_time::{format_rfc3339_nano, normalize_rfc3339, parse_go_time, parse_rfc3339};
use super::{ChecksumCheck, ChecksumVerification, from_go_json, marshal_file};
use crate::error::{CheckpointError, Result};
use crate::format::Format;
use crate::gotype::{GoType, INT64, STRING};

/// `state.DeviceHealthStatus`.
static DEVICE_HEALTH_STATUS: GoType = GoType::Named("state.DeviceHealthStatus", &STRING);
/// `time.Time`, as its `MarshalJSON` writes it: a string.
static TIME: GoType = GoType::Named("time.Time", &STRING);
/// `time.Duration`.
static DURATION: GoType = GoType::Named("time.Duration", &INT64);

/// `state.DeviceHealthStatusHealthy`.
pub const HEALTHY: &str = "Healthy";
/// `state.DeviceHealthStatusUnhealthy`.
pub const UNHEALTHY: &str = "Unhealthy";
/// `state.DeviceHealthStatusUnknown`.
pub const UNKNOWN: &str = "Unknown";

go_struct! {
    /// One device's last known health (`state.DeviceHealth`).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use corral_checkpoint::DeviceHealth;
    /// use corral_checkpoint::formats::dra_health::UNHEALTHY;
    ///
    /// let at = UNIX_EPOCH + Duration::from_secs(1_764_059_400); // 2025-11-25T08:30:00Z
    /// let health = DeviceHealth::new("node-1", "gpu-0", UNHEALTHY, at, Some(Duration::from_secs(30)));
    /// assert_eq!(health.key(), "node-1/gpu-0");
    /// assert_eq!(health.last_updated, "2025-11-25T08:30:00Z", "as Go's time.Time writes it");
    /// assert_eq!(health.timeout(), Some(Duration::from_secs(30)));
    /// ```
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct DeviceHealth in static DEVICE_HEALTH = "state.DeviceHealth" {
        /// Resource pool of the device.
        pub pool_name: String => "PoolName" = &STRING,
        /// Device name within the pool.
        pub device_name: String => "DeviceName" = &STRING,
        /// `Healthy`, `Unhealthy` or `Unknown` ([`HEALTHY`], [`UNHEALTHY`], [`UNKNOWN`]).
        pub health: String => "Health" = &DEVICE_HEALTH_STATUS,
        /// When the kubelet last recorded this device, as Go writes a `time.Time`
        /// ([`last_updated_time`](Self::last_updated_time) parses it).
        pub last_updated: String => "LastUpdated" = &TIME,
        /// The driver's timeout for this device in nanoseconds; 0 means the kubelet's
        /// default.
        pub health_check_timeout: i64 => "HealthCheckTimeout" = &DURATION,
    }
}

go_struct! {
    /// One driver's devices by `<pool>/<device>` (`state.DriverHealthState`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct DriverHealthState in static DRIVER_HEALTH_STATE = "state.DriverHealthState" {
        /// Devices by `<pool>/<device>`.
        pub devices: Option<BTreeMap<String, DeviceHealth>>
            => "Devices" = &GoType::Map(&STRING, &DEVICE_HEALTH),
    }
}

/// `state.DevicesHealthMap`.
static DEVICES_HEALTH_MAP: GoType = GoType::Named(
    "state.DevicesHealthMap",
    &GoType::Map(&STRING, &DRIVER_HEALTH_STATE),
);

/// Go's zero `time.Time`, as `MarshalJSON` writes it.
const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Reading: `LastUpdated` as a pointer, so a missing or `null` one (Go: the zero time,
/// `UnmarshalJSON` not called) is told apart from `""` (Go: an error).
static TIME_READ: GoType = GoType::Ptr(&TIME);

go_struct! {
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    struct DeviceHealthRead in static DEVICE_HEALTH_READ = "state.DeviceHealth" {
        pool_name: String => "PoolName" = &STRING,
        device_name: String => "DeviceName" = &STRING,
        health: String => "Health" = &DEVICE_HEALTH_STATUS,
        last_updated: Option<String> => "LastUpdated" = &TIME_READ,
        health_check_timeout: i64 => "HealthCheckTimeout" = &DURATION,
    }
}

go_struct! {
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    struct DriverHealthStateRead in static DRIVER_HEALTH_STATE_READ = "state.DriverHealthState" {
        devices: Option<BTreeMap<String, DeviceHealthRead>>
            => "Devices" = &GoType::Map(&STRING, &DEVICE_HEALTH_READ),
    }
}

static DEVICES_HEALTH_MAP_READ: GoType = GoType::Named(
    "state.DevicesHealthMap",
    &GoType::Map(&STRING, &DRIVER_HEALTH_STATE_READ),
);

/// The whole `dra_health_state` file: each driver's devices.
///
/// # Example
///
/// ```
/// use corral_checkpoint::DraHealthState;
/// use corral_checkpoint::formats::dra_health::HEALTHY;
///
/// // Conformance vector `one_healthy_default_timeout`: plain JSON, no checksum.
/// let kubelet = br#"{"gpu.example.com":{"Devices":{"node-1/gpu-0":{"PoolName":"node-1","DeviceName":"gpu-0","Health":"Healthy","LastUpdated":"2025-11-25T08:30:00Z","HealthCheckTimeout":0}}}}"#;
/// let state = DraHealthState::decode(kubelet)?;
/// let device = &state.0["gpu.example.com"].devices.as_ref().unwrap()["node-1/gpu-0"];
/// assert_eq!(device.health, HEALTHY);
/// assert_eq!(device.key(), "node-1/gpu-0");
/// assert_eq!(device.timeout(), None, "0: the kubelet's default applies");
/// assert!(device.last_updated_time().is_some());
/// assert_eq!(state.encode()?, kubelet);
///
/// // Not an RFC 3339 time: an error, as Go's `time.Time` makes it.
/// let bad = String::from_utf8(kubelet.to_vec()).unwrap().replace("2025-11-25T08:30:00Z", "yesterday");
/// assert!(DraHealthState::decode(bad.as_bytes()).is_err());
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DraHealthState(pub BTreeMap<String, DriverHealthState>);

impl DeviceHealth {
    /// A record of `health` at `at`.
    pub fn new(
        pool_name: &str,
        device_name: &str,
        health: &str,
        at: SystemTime,
        timeout: Option<Duration>,
    ) -> Self {
        DeviceHealth {
            pool_name: pool_name.to_owned(),
            device_name: device_name.to_owned(),
            health: health.to_owned(),
            last_updated: format_rfc3339_nano(at),
            health_check_timeout: timeout
                .map_or(0, |t| i64::try_from(t.as_nanos()).unwrap_or(i64::MAX)),
        }
    }

    /// The key the device is filed under: `<pool>/<device>`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.pool_name, self.device_name)
    }

    /// `LastUpdated` as a time (files decoded by [`DraHealthState::decode`] always have one).
    pub fn last_updated_time(&self) -> Option<SystemTime> {
        parse_rfc3339(&self.last_updated).ok()
    }

    /// `HealthCheckTimeout`, `None` when 0 or negative (the kubelet's default applies).
    pub fn timeout(&self) -> Option<Duration> {
        u64::try_from(self.health_check_timeout)
            .ok()
            .filter(|&n| n > 0)
            .map(Duration::from_nanos)
    }
}

impl DraHealthState {
    /// The bytes the kubelet writes: `json.Marshal` of the map. A `LastUpdated` Go could
    /// not write (not a time, a year outside 0–9999, an offset of 24 hours or more) is an
    /// error, as `MarshalJSON`'s.
    pub fn encode(&self) -> Result<Vec<u8>> {
        for (driver, devices) in &self.0 {
            for (key, device) in devices.devices.iter().flatten() {
                if normalize_rfc3339(&device.last_updated).is_err() {
                    return Err(CheckpointError::schema(format!(
                        "driver {driver:?}, device {key:?}: LastUpdated {:?} cannot be written as a Go time",
                        device.last_updated
                    )));
                }
            }
        }
        marshal_file(self, &DEVICES_HEALTH_MAP)
    }

    /// Reads the bytes as `json.Unmarshal` into `&state.DevicesHealthMap{}` does: a
    /// `LastUpdated` that is not an RFC 3339 time is an error, as Go's `time.Time` makes it;
    /// an accepted one is kept in the form Go writes back (same instant and offset). A
    /// missing or `null` `LastUpdated` is Go's zero time.
    ///
    /// One deliberate difference: a file holding `null` reads as an empty map (Go leaves
    /// the kubelet's map nil, and its first health update then panics on it).
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let read: Option<BTreeMap<String, DriverHealthStateRead>> =
            from_go_json(bytes, &DEVICES_HEALTH_MAP_READ, Format::DraHealth)?;
        let mut state = DraHealthState::default();
        for (driver, devices) in read.unwrap_or_default() {
            let devices = devices
                .devices
                .map(|devices| {
                    devices
                        .into_iter()
                        .map(|(key, d)| {
                            let last_updated = match d.last_updated {
                                None => GO_ZERO_TIME.to_owned(),
                                // Go reads it; a time it cannot write back stays as read, and
                                // `encode` refuses it as Go's `Marshal` does.
                                Some(text) => match parse_go_time(&text) {
                                    Ok(time) => time.format().unwrap_or(text),
                                    Err(err) => {
                                        return Err(CheckpointError::Decode {
                                            path: None,
                                            format: Format::DraHealth,
                                            message: format!(
                                                "driver {driver:?}, device {key:?}: LastUpdated: {err}"
                                            ),
                                        });
                                    }
                                },
                            };
                            let device = DeviceHealth {
                                pool_name: d.pool_name,
                                device_name: d.device_name,
                                health: d.health,
                                last_updated,
                                health_check_timeout: d.health_check_timeout,
                            };
                            Ok((key, device))
                        })
                        .collect::<Result<BTreeMap<_, _>>>()
                })
                .transpose()?;
            state.0.insert(driver, DriverHealthState { devices });
        }
        Ok(state)
    }

    /// [`decode`](Self::decode) with the check `inspect` reports: there is no checksum.
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        let check = ChecksumCheck {
            recorded: 0,
            computed: 0,
            verification: ChecksumVerification::NoChecksum,
        };
        Ok((Self::decode(bytes)?, check))
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn sample() -> DraHealthState {
        let at = UNIX_EPOCH + Duration::new(1_764_059_400, 500_000_000);
        let gpu0 = DeviceHealth::new("node-1", "gpu-0", HEALTHY, at, None);
        let gpu1 = DeviceHealth::new(
            "node-1",
            "gpu-1",
            UNHEALTHY,
            at,
            Some(Duration::from_secs(60)),
        );
        DraHealthState(BTreeMap::from([(
            "gpu.example.com".to_owned(),
            DriverHealthState {
                devices: Some(BTreeMap::from([(gpu1.key(), gpu1), (gpu0.key(), gpu0)])),
            },
        )]))
    }

    // The bytes of Go's json.Marshal(&state.DevicesHealthMap{…}) for the same map (map keys
    // sorted, time.Time as RFC3339Nano, time.Duration as nanoseconds).
    #[test]
    fn encodes_like_go() {
        let bytes = sample().encode().unwrap();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"gpu.example.com":{"Devices":{"node-1/gpu-0":{"PoolName":"node-1","DeviceName":"gpu-0","Health":"Healthy","LastUpdated":"2025-11-25T08:30:00.5Z","HealthCheckTimeout":0},"node-1/gpu-1":{"PoolName":"node-1","DeviceName":"gpu-1","Health":"Unhealthy","LastUpdated":"2025-11-25T08:30:00.5Z","HealthCheckTimeout":60000000000}}}}"#
        );
        assert_eq!(DraHealthState::decode(&bytes).unwrap(), sample());
        let state = sample();
        let device = &state.0["gpu.example.com"].devices.as_ref().unwrap()["node-1/gpu-1"];
        assert_eq!(device.timeout(), Some(Duration::from_secs(60)));
        assert_eq!(
            device.last_updated_time(),
            Some(UNIX_EPOCH + Duration::new(1_764_059_400, 500_000_000))
        );
    }

    #[test]
    fn reads_go_input_rules() {
        // Case-insensitive keys, null devices, an offset time, an empty map.
        let state = DraHealthState::decode(
            br#"{"d":{"devices":{"p/x":{"poolname":"p","DeviceName":"x","Health":"Unknown","LastUpdated":"2025-11-25T09:30:00+01:00"}}},"e":{"Devices":null}}"#,
        )
        .unwrap();
        assert_eq!(state.0["d"].devices.as_ref().unwrap()["p/x"].pool_name, "p");
        assert_eq!(state.0["e"].devices, None);
        assert_eq!(
            DraHealthState::decode(b"{}").unwrap(),
            DraHealthState::default()
        );
        assert_eq!(
            DraHealthState::decode(b"null").unwrap(),
            DraHealthState::default()
        );
        for bad in [
            &br#"{"d":{"Devices":{"p/x":{"LastUpdated":"yesterday"}}}}"#[..],
            br#"{"d":{"Devices":{"p/x":{"HealthCheckTimeout":"30s"}}}}"#,
            br#"{"d":[]}"#,
            b"{",
            b"",
        ] {
            let err = DraHealthState::decode(bad).unwrap_err();
            assert!(err.is_decode_error(), "{err}");
        }
    }
}
