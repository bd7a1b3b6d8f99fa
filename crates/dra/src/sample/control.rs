//! The sample driver's shared state: how it behaves, what it prepared, and a record of
//! every call and registration status it received.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::claim_info::PreparedDevice;

/// How the sample driver answers NodePrepareResources / NodeUnprepareResources.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Behavior {
    /// Prepare fake devices, unprepare them.
    #[default]
    Normal,
    /// Answer every claim with this per-claim error.
    FailClaims(String),
    /// Fail the whole call with gRPC status `INTERNAL` and this message.
    FailCall(String),
    /// Never answer (until the driver stops).
    Hang,
    /// Serve normally but leave these claim uids out of the answer (a driver breaking the
    /// API's "every claim must have an entry" rule).
    SkipClaims(Vec<String>),
    /// Serve normally and also answer for this claim uid, which nobody asked about.
    AnswerUnknownClaim(String),
}

/// The share ids the sample driver gives its devices (DRAPlugin v1 `Device.share_id`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ShareIds {
    /// No share id (the field is absent).
    #[default]
    None,
    /// This share id on every device.
    Fixed(String),
    /// `share-<claim uid>-<device>` on every device: one share per claim and device.
    PerDevice,
}

/// A call the sample driver received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `NodePrepareResources` or `NodeUnprepareResources`.
    pub method: &'static str,
    /// The service version, `v1` or `v1beta1`.
    pub version: &'static str,
    /// The claim uids, in request order.
    pub claim_uids: Vec<String>,
}

/// A `NodePrepareResources` claim allocation the sample driver serves: request name and
/// device name.
pub type FakeAllocation = Vec<(String, String)>;

#[derive(Debug, Default)]
pub(crate) struct Control {
    pub(crate) behavior: Mutex<Behavior>,
    pub(crate) allocations: Mutex<BTreeMap<String, FakeAllocation>>,
    pub(crate) prepared: Mutex<BTreeMap<String, Vec<PreparedDevice>>>,
    pub(crate) calls: Mutex<Vec<Call>>,
    pub(crate) statuses: Mutex<Vec<(bool, String)>>,
}

pub(crate) fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Control {
    /// The devices for a claim: its configured allocation, or one device named after the
    /// claim uid that serves every request.
    pub(crate) fn devices_for(
        &self,
        cdi_kind: &str,
        pool: &str,
        share_ids: &ShareIds,
        uid: &str,
    ) -> Vec<PreparedDevice> {
        let allocation = locked(&self.allocations).get(uid).cloned();
        let mut devices: Vec<PreparedDevice> = match allocation {
            Some(list) => list
                .into_iter()
                .map(|(request, device)| PreparedDevice {
                    request_names: vec![request],
                    pool_name: pool.to_owned(),
                    cdi_device_ids: vec![format!("{cdi_kind}={device}")],
                    device_name: device,
                    share_id: None,
                })
                .collect(),
            None => {
                let device = format!("claim-{uid}");
                vec![PreparedDevice {
                    request_names: vec![],
                    pool_name: pool.to_owned(),
                    cdi_device_ids: vec![format!("{cdi_kind}={device}")],
                    device_name: device,
                    share_id: None,
                }]
            }
        };
        for device in &mut devices {
            device.share_id = match share_ids {
                ShareIds::None => None,
                ShareIds::Fixed(id) => Some(id.clone()),
                ShareIds::PerDevice => Some(format!("share-{uid}-{}", device.device_name)),
            };
        }
        devices
    }
}
