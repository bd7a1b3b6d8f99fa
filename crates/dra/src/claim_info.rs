//! One cached claim ([`ClaimInfo`], upstream `ClaimInfo`): its checkpointed state (uid,
//! name, namespace, referencing pods, per-driver prepared devices) plus the in-memory
//! `prepared` flag, which is never checkpointed — after a restart every claim is prepared
//! again.

use std::collections::{BTreeMap, BTreeSet};

use corral_checkpoint::{ClaimInfoState, Device, DriverState};

use crate::claim::{ClaimRef, ResourceClaim, claim_key};
use crate::error::DraManagerError;

/// A device a driver prepared for a claim, as NodePrepareResources returns it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct PreparedDevice {
    /// The claim requests this device satisfies; empty means all of them.
    pub request_names: Vec<String>,
    /// The device's resource pool.
    pub pool_name: String,
    /// The device's name within the pool.
    pub device_name: String,
    /// Fully qualified CDI device ids (`vendor/class=name`).
    pub cdi_device_ids: Vec<String>,
    /// The share id of a device shared between claims (DRAPlugin v1 `Device.share_id`,
    /// k8s 1.35+; v1beta1 has none). `None` when the driver sent none, `Some("")` when it
    /// sent an empty one, as the kubelet keeps the proto pointer
    /// (`ShareID: (*types.UID)(device.ShareId)`). Recorded in `dra_manager_state` as
    /// `ShareID` and reported in podresources `ClaimResource.share_id`.
    pub share_id: Option<String>,
}

impl PreparedDevice {
    /// The checkpoint form. Empty lists are written as `null`, as a kubelet writes the
    /// protobuf-decoded (nil) slices.
    pub fn to_state(&self) -> Device {
        let non_empty = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        Device {
            pool_name: self.pool_name.clone(),
            device_name: self.device_name.clone(),
            share_id: self.share_id.clone(),
            request_names: non_empty(&self.request_names),
            cdi_device_ids: non_empty(&self.cdi_device_ids),
        }
    }

    /// From the checkpoint form.
    pub fn from_state(device: &Device) -> Self {
        PreparedDevice {
            request_names: device.request_names.clone().unwrap_or_default(),
            pool_name: device.pool_name.clone(),
            device_name: device.device_name.clone(),
            cdi_device_ids: device.cdi_device_ids.clone().unwrap_or_default(),
            share_id: device.share_id.clone(),
        }
    }
}

/// A claim in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimInfo {
    state: ClaimInfoState,
    prepared: bool,
}

impl ClaimInfo {
    /// A new, unprepared entry for an allocated claim: no pods yet, and one empty driver
    /// state per driver of the allocation (upstream `newClaimInfoFromClaim`).
    pub fn from_claim(claim: &ResourceClaim) -> Result<Self, DraManagerError> {
        let allocation =
            claim
                .allocation
                .as_ref()
                .ok_or_else(|| DraManagerError::NotAllocated {
                    claim: claim.key(),
                    claim_uid: claim.uid.clone(),
                })?;
        let driver_state = allocation
            .iter()
            .map(|result| (result.driver.clone(), DriverState::default()))
            .collect();
        Ok(ClaimInfo {
            state: ClaimInfoState {
                claim_uid: claim.uid.clone(),
                claim_name: claim.name.clone(),
                namespace: claim.namespace.clone(),
                pod_uids: Some(BTreeSet::new()),
                driver_state: Some(driver_state),
            },
            prepared: false,
        })
    }

    /// An entry restored from a checkpoint; never prepared (upstream
    /// `newClaimInfoFromState`).
    pub fn from_state(state: ClaimInfoState) -> Self {
        ClaimInfo {
            state,
            prepared: false,
        }
    }

    /// The checkpointed state.
    pub fn state(&self) -> &ClaimInfoState {
        &self.state
    }

    /// The cache key, `namespace/name`.
    pub fn key(&self) -> String {
        claim_key(&self.state.namespace, &self.state.claim_name)
    }

    /// The claim's identity.
    pub fn claim_ref(&self) -> ClaimRef {
        ClaimRef {
            namespace: self.state.namespace.clone(),
            name: self.state.claim_name.clone(),
            uid: self.state.claim_uid.clone(),
        }
    }

    /// The claim's uid.
    pub fn uid(&self) -> &str {
        &self.state.claim_uid
    }

    /// The claim's name.
    pub fn name(&self) -> &str {
        &self.state.claim_name
    }

    /// The claim's namespace.
    pub fn namespace(&self) -> &str {
        &self.state.namespace
    }

    /// uids of the pods referencing the claim, sorted.
    pub fn pod_uids(&self) -> impl Iterator<Item = &str> {
        self.state.pod_uids.iter().flatten().map(String::as_str)
    }

    /// Number of pods referencing the claim.
    pub fn pod_count(&self) -> usize {
        self.state.pod_uids.as_ref().map_or(0, BTreeSet::len)
    }

    /// Add a pod reference.
    pub fn add_pod_reference(&mut self, pod_uid: &str) {
        self.state
            .pod_uids
            .get_or_insert_with(BTreeSet::new)
            .insert(pod_uid.to_owned());
    }

    /// Whether the pod references the claim.
    pub fn has_pod_reference(&self, pod_uid: &str) -> bool {
        self.state
            .pod_uids
            .as_ref()
            .is_some_and(|set| set.contains(pod_uid))
    }

    /// Remove a pod reference (a missing one is fine).
    pub fn delete_pod_reference(&mut self, pod_uid: &str) {
        if let Some(set) = self.state.pod_uids.as_mut() {
            set.remove(pod_uid);
        }
    }

    /// The drivers of the claim, sorted.
    pub fn drivers(&self) -> impl Iterator<Item = &str> {
        self.state
            .driver_state
            .iter()
            .flatten()
            .map(|(name, _)| name.as_str())
    }

    /// The devices a driver prepared.
    pub fn devices(&self, driver: &str) -> Vec<PreparedDevice> {
        self.state
            .driver_state
            .as_ref()
            .and_then(|m| m.get(driver))
            .and_then(|s| s.devices.as_ref())
            .map(|devices| devices.iter().map(PreparedDevice::from_state).collect())
            .unwrap_or_default()
    }

    /// Append one device to a driver's list (upstream `addDevice`).
    pub fn add_device(&mut self, driver: &str, device: &PreparedDevice) {
        self.driver_state_mut(driver)
            .devices
            .get_or_insert_with(Vec::new)
            .push(device.to_state());
    }

    /// Replace a driver's devices with what its latest NodePrepareResources returned.
    ///
    /// Upstream appends (kubernetes#140471: re-preparing after a restart doubles the list);
    /// corral replaces. No devices is written as `null`, as a kubelet that never appended.
    pub fn set_devices(&mut self, driver: &str, devices: &[PreparedDevice]) {
        let state = self.driver_state_mut(driver);
        state.devices =
            (!devices.is_empty()).then(|| devices.iter().map(PreparedDevice::to_state).collect());
    }

    fn driver_state_mut(&mut self, driver: &str) -> &mut DriverState {
        self.state
            .driver_state
            .get_or_insert_with(BTreeMap::new)
            .entry(driver.to_owned())
            .or_default()
    }

    /// Mark the claim prepared (every driver succeeded).
    pub fn set_prepared(&mut self) {
        self.prepared = true;
    }

    /// Whether every driver prepared the claim since this process started.
    pub fn is_prepared(&self) -> bool {
        self.prepared
    }

    /// The CDI device ids for `request` (`None`: the whole claim), drivers in name order:
    /// a device is included when it names the request or names no request at all
    /// (upstream `cdiDevicesAsList`).
    pub fn cdi_devices(&self, request: Option<&str>) -> Vec<String> {
        self.state
            .driver_state
            .iter()
            .flat_map(|m| m.values())
            .flat_map(|state| driver_cdi_devices(state, request))
            .collect()
    }

    /// Per driver, the CDI device ids for `request` (see [`cdi_devices`](Self::cdi_devices));
    /// drivers without any are left out.
    pub fn cdi_devices_by_driver(&self, request: Option<&str>) -> BTreeMap<String, Vec<String>> {
        self.state
            .driver_state
            .iter()
            .flatten()
            .map(|(driver, state)| (driver.clone(), driver_cdi_devices(state, request)))
            .filter(|(_, ids)| !ids.is_empty())
            .collect()
    }
}

fn driver_cdi_devices(state: &DriverState, request: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    for device in state.devices.iter().flatten() {
        let names = device.request_names.as_deref().unwrap_or_default();
        let wanted = match request {
            None | Some("") => true,
            Some(r) => names.is_empty() || names.iter().any(|n| n == r),
        };
        if wanted {
            out.extend(device.cdi_device_ids.iter().flatten().cloned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::AllocatedDevice;

    fn claim() -> ResourceClaim {
        ResourceClaim {
            namespace: "ns".into(),
            name: "c".into(),
            uid: "uid".into(),
            allocation: Some(vec![
                AllocatedDevice {
                    request: "r1".into(),
                    driver: "b.example.com".into(),
                    pool: "p".into(),
                    device: "d1".into(),
                },
                AllocatedDevice {
                    request: "r2".into(),
                    driver: "a.example.com".into(),
                    pool: "p".into(),
                    device: "d2".into(),
                },
            ]),
            reserved_for: vec![],
        }
    }

    fn device(requests: &[&str], cdi: &str) -> PreparedDevice {
        PreparedDevice {
            request_names: requests.iter().map(|s| s.to_string()).collect(),
            pool_name: "p".into(),
            device_name: cdi.into(),
            cdi_device_ids: vec![cdi.into()],
            share_id: None,
        }
    }

    // A share id survives the checkpoint form both ways; none stays none (`null`), an
    // empty one stays empty (`""`), as the kubelet keeps the proto's pointer.
    #[test]
    fn share_id_round_trips_through_the_state() {
        for share_id in [None, Some(String::new()), Some("8d4a5f1c".to_owned())] {
            let device = PreparedDevice {
                share_id: share_id.clone(),
                ..device(&["r"], "v/c=1")
            };
            assert_eq!(device.to_state().share_id, share_id);
            assert_eq!(PreparedDevice::from_state(&device.to_state()), device);
        }
    }

    // Upstream TestNewClaimInfoFromClaim: one empty driver state per allocation driver,
    // no pods, not prepared; an unallocated claim is an error.
    #[test]
    fn new_claim_info_from_claim() {
        let info = ClaimInfo::from_claim(&claim()).unwrap();
        assert_eq!(info.key(), "ns/c");
        assert_eq!(
            info.drivers().collect::<Vec<_>>(),
            ["a.example.com", "b.example.com"]
        );
        assert_eq!(info.pod_count(), 0);
        assert!(!info.is_prepared());
        assert_eq!(
            info.state().driver_state.as_ref().unwrap()["a.example.com"].devices,
            None
        );
        let unallocated = ResourceClaim {
            allocation: None,
            ..claim()
        };
        assert!(matches!(
            ClaimInfo::from_claim(&unallocated),
            Err(DraManagerError::NotAllocated { .. })
        ));
    }

    // Upstream TestNewClaimInfoFromState: restored entries are never prepared.
    #[test]
    fn new_claim_info_from_state() {
        let mut info = ClaimInfo::from_claim(&claim()).unwrap();
        info.set_prepared();
        let restored = ClaimInfo::from_state(info.state().clone());
        assert!(!restored.is_prepared());
        assert_eq!(restored.state(), info.state());
    }

    // Upstream TestClaimInfoAddDevice: devices append per driver.
    #[test]
    fn add_device_appends_set_devices_replaces() {
        let mut info = ClaimInfo::from_claim(&claim()).unwrap();
        info.add_device("a.example.com", &device(&["r2"], "v/c=1"));
        info.add_device("a.example.com", &device(&["r2"], "v/c=2"));
        assert_eq!(info.devices("a.example.com").len(), 2);
        info.set_devices("a.example.com", &[device(&["r2"], "v/c=3")]);
        assert_eq!(
            info.devices("a.example.com"),
            vec![device(&["r2"], "v/c=3")]
        );
        info.set_devices("a.example.com", &[]);
        assert_eq!(
            info.state().driver_state.as_ref().unwrap()["a.example.com"].devices,
            None
        );
    }

    // Upstream TestClaimInfoAddPodReference / TestClaimInfoHasPodReference /
    // TestClaimInfoDeletePodReference.
    #[test]
    fn pod_references() {
        let mut info = ClaimInfo::from_claim(&claim()).unwrap();
        assert!(!info.has_pod_reference("p1"));
        info.add_pod_reference("p1");
        info.add_pod_reference("p1");
        info.add_pod_reference("p2");
        assert_eq!(info.pod_uids().collect::<Vec<_>>(), ["p1", "p2"]);
        info.delete_pod_reference("p1");
        info.delete_pod_reference("missing");
        assert!(!info.has_pod_reference("p1"));
        assert!(info.has_pod_reference("p2"));
        // A restored entry with a nil pod set accepts references (Go would panic).
        let mut state = info.state().clone();
        state.pod_uids = None;
        let mut restored = ClaimInfo::from_state(state);
        restored.delete_pod_reference("p2");
        restored.add_pod_reference("p3");
        assert!(restored.has_pod_reference("p3"));
    }

    // Upstream TestClaimInfoSetPrepared / TestClaimInfoIsPrepared.
    #[test]
    fn prepared_flag() {
        let mut info = ClaimInfo::from_claim(&claim()).unwrap();
        assert!(!info.is_prepared());
        info.set_prepared();
        assert!(info.is_prepared());
    }

    // Upstream TestClaimInfoCDIdevicesAsList (v1.32 request filtering).
    #[test]
    fn cdi_devices_filter_by_request() {
        let mut info = ClaimInfo::from_claim(&claim()).unwrap();
        info.add_device("b.example.com", &device(&["r1"], "v/c=r1"));
        info.add_device("a.example.com", &device(&["r2"], "v/c=r2"));
        info.add_device("a.example.com", &device(&[], "v/c=any"));
        assert_eq!(info.cdi_devices(None), ["v/c=r2", "v/c=any", "v/c=r1"]);
        assert_eq!(info.cdi_devices(Some("r1")), ["v/c=any", "v/c=r1"]);
        assert_eq!(info.cdi_devices(Some("r2")), ["v/c=r2", "v/c=any"]);
        assert_eq!(info.cdi_devices(Some("other")), ["v/c=any"]);
        let by_driver = info.cdi_devices_by_driver(Some("r1"));
        assert_eq!(by_driver["a.example.com"], ["v/c=any"]);
        assert_eq!(by_driver["b.example.com"], ["v/c=r1"]);
    }
}
