//! Device manager checkpoint written by k8s ≤ 1.19 (`checkpointv1.go`, removed upstream
//! after v1.30): flat `DeviceIDs`, read and converted to the current format.
//!
//! Its checksum is computed the way k8s 1.19 named the types: the dump of
//! `checkpointDataV1` with the first `checkpointDataV1` renamed `checkpointData` and every
//! `PodDevicesEntryV1` renamed `PodDevicesEntry` — a plain text replacement, which (as
//! upstream) also rewrites those words inside strings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::devicemanager::{
    DeviceManagerCheckpoint, PodDevicesEntry, RegisteredDevices, decode_data_file, encode_data_file,
};
use super::{Checkpoint, ChecksumCheck, from_go_json, go_struct, impl_checkpoint};
use crate::error::Result;
use crate::format::Format;
use crate::gotype::{
    BYTES, CHECKSUM, GoField, GoStruct, GoType, MAP_STRING_STRINGS, STRING, STRING_SLICE,
};
use crate::hash::fnv32a;
use crate::spew::dump_for_hash;

go_struct! {
    /// One container's devices of one resource, without NUMA information
    /// (`checkpoint.PodDevicesEntryV1`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PodDevicesEntryV1 in static ENTRY_V1 = "checkpoint.PodDevicesEntryV1" {
        /// Pod UID.
        pub pod_uid: String => "PodUID" = &STRING,
        /// Container name.
        pub container_name: String => "ContainerName" = &STRING,
        /// Extended resource name.
        pub resource_name: String => "ResourceName" = &STRING,
        /// Allocated device ids.
        pub device_ids: Option<Vec<String>> => "DeviceIDs" = &STRING_SLICE,
        /// The device plugin's serialized `ContainerAllocateResponse`.
        pub alloc_resp: Option<Vec<u8>> => "AllocResp" = &BYTES,
    }
}

go_struct! {
    /// The pre-1.20 device manager state (`checkpoint.checkpointDataV1`).
    ///
    /// # Example
    ///
    /// ```
    /// use corral_checkpoint::{Checkpoint, DeviceManagerCheckpoint, DeviceManagerCheckpointV1};
    ///
    /// // Conformance vector `devicemanager_v1/single_entry`: device ids as a flat list.
    /// let old = br#"{"Data":{"PodDeviceEntries":[{"PodUID":"pod1","ContainerName":"con1","ResourceName":"domain1.com/resource1","DeviceIDs":["dev1","dev2"],"AllocResp":"AQID"}],"RegisteredDevices":{"domain1.com/resource1":["dev1","dev2"]}},"Checksum":2372526871}"#;
    /// let state = DeviceManagerCheckpointV1::decode(old)?;
    /// let entry = &state.pod_device_entries.as_ref().unwrap()[0];
    /// assert_eq!(entry.device_ids.as_deref(), Some(&["dev1".to_owned(), "dev2".to_owned()][..]));
    /// assert_eq!(state.encode()?, old);
    /// // The current reader wants ids per NUMA node, as upstream's: a decode error.
    /// assert!(DeviceManagerCheckpoint::decode(old).unwrap_err().is_decode_error());
    /// # Ok::<(), corral_checkpoint::CheckpointError>(())
    /// ```
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct DeviceManagerCheckpointV1 in static DATA_V1 = "checkpoint.checkpointDataV1" {
        /// Allocations.
        pub pod_device_entries: Option<Vec<PodDevicesEntryV1>>
            => "PodDeviceEntries" = &ENTRIES_V1,
        /// Registered devices per resource.
        pub registered_devices: Option<RegisteredDevices>
            => "RegisteredDevices" = &MAP_STRING_STRINGS,
    }
}

/// `[]checkpoint.PodDevicesEntryV1`.
static ENTRIES_V1: GoType = GoType::Slice(&ENTRY_V1);

static FILE_V1: GoType = GoType::Struct(&GoStruct {
    name: "checkpoint.DataV1",
    fields: &[
        GoField::plain("Data", &DATA_V1),
        GoField::plain("Checksum", &CHECKSUM),
    ],
});

impl DeviceManagerCheckpointV1 {
    /// The string k8s 1.19 hashed (and upstream's V1 reader recomputes).
    pub fn hash_input(&self) -> Result<String> {
        let dump = dump_for_hash(self, &DATA_V1)?;
        // strings.Replace(…, 1), then strings.Replace(…, -1).
        let dump = dump.replacen("checkpointDataV1", "checkpointData", 1);
        Ok(dump.replace("PodDevicesEntryV1", "PodDevicesEntry"))
    }

    /// The checksum k8s 1.19 wrote for this value.
    pub fn checksum(&self) -> Result<u64> {
        Ok(fnv32a(self.hash_input()?.as_bytes()).into())
    }

    /// Reads the logical value from Go-convention JSON, without any checksum.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        from_go_json(bytes, &DATA_V1, Self::FORMAT)
    }

    /// The same allocations in the current format, as upstream's `GetDataInLatestFormat`:
    /// every device is put on NUMA node 0 (no affinity was recorded), and no entries give a
    /// nil list.
    pub fn to_current(&self) -> DeviceManagerCheckpoint {
        let entries: Vec<PodDevicesEntry> = self
            .pod_device_entries
            .iter()
            .flatten()
            .map(|e| PodDevicesEntry {
                pod_uid: e.pod_uid.clone(),
                container_name: e.container_name.clone(),
                resource_name: e.resource_name.clone(),
                device_ids: Some(BTreeMap::from([(0, e.device_ids.clone())])),
                alloc_resp: e.alloc_resp.clone(),
            })
            .collect();
        DeviceManagerCheckpoint {
            pod_device_entries: (!entries.is_empty()).then_some(entries),
            registered_devices: self.registered_devices.clone(),
        }
    }

    /// Decodes and verifies.
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        decode_data_file(bytes, [&FILE_V1, &DATA_V1, &ENTRIES_V1], Self::checksum)
    }
}

impl_checkpoint!(
    DeviceManagerCheckpointV1,
    Format::DeviceManagerV1,
    /// Writes the legacy format (only for tests and migration tooling; the kubelet no longer
    /// writes it).
    encode(this) {
        encode_data_file(this, this.checksum()?, &FILE_V1)
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_to_numa_node_zero() {
        let v1 = DeviceManagerCheckpointV1 {
            pod_device_entries: Some(vec![PodDevicesEntryV1 {
                pod_uid: "p".into(),
                container_name: "c".into(),
                resource_name: "r".into(),
                device_ids: Some(vec!["d".into()]),
                alloc_resp: None,
            }]),
            registered_devices: None,
        };
        let current = v1.to_current();
        let entries = current.pod_device_entries.unwrap();
        assert_eq!(
            entries[0].device_ids,
            Some(BTreeMap::from([(0, Some(vec!["d".to_owned()]))]))
        );
        assert_eq!(
            DeviceManagerCheckpointV1::default()
                .to_current()
                .pod_device_entries,
            None
        );
    }

    #[test]
    fn round_trips() {
        let v1 = DeviceManagerCheckpointV1 {
            pod_device_entries: Some(vec![]),
            registered_devices: Some(BTreeMap::new()),
        };
        let bytes = v1.encode().unwrap();
        assert_eq!(DeviceManagerCheckpointV1::decode(&bytes).unwrap(), v1);
    }
}
