//! Device manager checkpoint `kubelet_internal_checkpoint`, current format
//! (`pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go`).
//!
//! File: `json.Marshal(Data{Data: checkpointData{PodDeviceEntries, RegisteredDevices},
//! Checksum})`; checksum: FNV-32a of `dump.ForHash(cp.Data)` — the data *value*, so the
//! dump starts `(checkpoint.checkpointData){`.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{
    Checkpoint, ChecksumAt, ChecksumCheck, from_go_json, go_struct, impl_checkpoint, marshal_file,
    read_file, verify,
};
use crate::checksum::kubelet_checksum;
use crate::error::Result;
use crate::format::Format;
use crate::gojson::value::GoValue;
use crate::gotype::{
    BYTES, CHECKSUM, GoField, GoStruct, GoType, INT64, MAP_STRING_STRINGS, STRING, STRING_SLICE,
};
use crate::spew::dump_for_hash;

/// Device ids per NUMA node id (`checkpoint.DevicesPerNUMA`, `map[int64][]string`).
pub type DevicesPerNuma = BTreeMap<i64, Option<Vec<String>>>;

/// Registered device ids per resource name (`map[string][]string`).
pub type RegisteredDevices = BTreeMap<String, Option<Vec<String>>>;

go_struct! {
    /// One container's devices of one resource (`checkpoint.PodDevicesEntry`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PodDevicesEntry in static ENTRY = "checkpoint.PodDevicesEntry" {
        /// Pod UID.
        pub pod_uid: String => "PodUID" = &STRING,
        /// Container name.
        pub container_name: String => "ContainerName" = &STRING,
        /// Extended resource name, e.g. `nvidia.com/gpu`.
        pub resource_name: String => "ResourceName" = &STRING,
        /// Allocated device ids by NUMA node.
        pub device_ids: Option<DevicesPerNuma> => "DeviceIDs" = &DEVICES_PER_NUMA,
        /// The device plugin's serialized `ContainerAllocateResponse` (base64 in the file).
        pub alloc_resp: Option<Vec<u8>> => "AllocResp" = &BYTES,
    }
}

go_struct! {
    /// The device manager's checkpointed state (`checkpoint.checkpointData`).
    ///
    /// # Example
    ///
    /// ```
    /// use corral_checkpoint::{Checkpoint, DeviceManagerCheckpoint};
    ///
    /// // Conformance vector `devicemanager_v2/single_entry`: a v1.32 kubelet's bytes.
    /// let kubelet = br#"{"Data":{"PodDeviceEntries":[{"PodUID":"pod1","ContainerName":"con1","ResourceName":"domain1.com/resource1","DeviceIDs":{"0":["dev1","dev2"]},"AllocResp":"AQID"}],"RegisteredDevices":{"domain1.com/resource1":["dev1","dev2"]}},"Checksum":151920155}"#;
    /// let state = DeviceManagerCheckpoint::decode(kubelet)?;
    /// let entry = &state.pod_device_entries.as_ref().unwrap()[0];
    /// assert_eq!((entry.pod_uid.as_str(), entry.container_name.as_str()), ("pod1", "con1"));
    /// let on_node_0 = entry.device_ids.as_ref().unwrap()[&0].as_deref().unwrap();
    /// assert_eq!(on_node_0, ["dev1", "dev2"]);
    /// assert_eq!(entry.alloc_resp.as_deref(), Some(&[1u8, 2, 3][..]), "base64 in the file");
    /// assert_eq!(state.encode()?, kubelet);
    /// # Ok::<(), corral_checkpoint::CheckpointError>(())
    /// ```
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct DeviceManagerCheckpoint in pub static DATA = "checkpoint.checkpointData" {
        /// Allocations.
        pub pod_device_entries: Option<Vec<PodDevicesEntry>>
            => "PodDeviceEntries" = &ENTRIES,
        /// Registered devices per resource.
        pub registered_devices: Option<RegisteredDevices>
            => "RegisteredDevices" = &MAP_STRING_STRINGS,
    }
}

static DEVICES_PER_NUMA: GoType = GoType::Named(
    "checkpoint.DevicesPerNUMA",
    &GoType::Map(&INT64, &STRING_SLICE),
);

/// `checkpoint.Data` (the file).
static FILE: GoType = GoType::Struct(&GoStruct {
    name: "checkpoint.Data",
    fields: &[
        GoField::plain("Data", &DATA),
        GoField::plain("Checksum", &CHECKSUM),
    ],
});

/// `[]checkpoint.PodDevicesEntry`.
static ENTRIES: GoType = GoType::Slice(&ENTRY);

/// `checkpoint.Data` / `checkpoint.DataV1`: the content and its checksum.
#[derive(Serialize)]
struct FileWire<'a, D> {
    #[serde(rename = "Data")]
    data: &'a D,
    #[serde(rename = "Checksum")]
    checksum: u64,
}

/// Decodes and verifies a device checkpoint file of Go type `file` whose data (Go type
/// `data`, entry list `entries`) hashes with `checksum`. The kubelet reads into
/// `checkpoint.New(make([]…, 0), make(map…))`: an empty (non-nil) entry list and device map.
pub(super) fn decode_data_file<T: Checkpoint + DeserializeOwned>(
    bytes: &[u8],
    [file, data, entries]: [&'static GoType; 3],
    checksum: fn(&T) -> Result<u64>,
) -> Result<(T, ChecksumCheck)> {
    let initial = GoValue::Struct(vec![
        GoValue::Struct(vec![
            GoValue::empty(entries),
            GoValue::empty(&MAP_STRING_STRINGS),
        ]),
        GoValue::Uint(0),
    ]);
    let (value, recorded) = read_file(
        bytes,
        file,
        initial,
        T::FORMAT,
        data,
        ChecksumAt::BesideData,
    )?;
    let check = verify(T::FORMAT, recorded, checksum(&value)?)?;
    Ok((value, check))
}

/// The bytes of a device checkpoint file of Go type `file`: `data` and its `checksum`.
pub(super) fn encode_data_file<D: Serialize>(
    data: &D,
    checksum: u64,
    file: &'static GoType,
) -> Result<Vec<u8>> {
    marshal_file(&FileWire { data, checksum }, file)
}

impl DeviceManagerCheckpoint {
    /// The string upstream hashes: `dump.ForHash(cp.Data)`.
    pub fn hash_input(&self) -> Result<String> {
        dump_for_hash(self, &DATA)
    }

    /// Upstream's checksum of this value (`checksum.New(cp.Data)`).
    pub fn checksum(&self) -> Result<u64> {
        kubelet_checksum(self, &DATA)
    }

    /// Reads the logical value from Go-convention JSON (`checkpointData` as
    /// `encoding/json` writes it), without any checksum.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        from_go_json(bytes, &DATA, Self::FORMAT)
    }

    /// Decodes and verifies.
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        decode_data_file(bytes, [&FILE, &DATA, &ENTRIES], Self::checksum)
    }
}

impl_checkpoint!(
    DeviceManagerCheckpoint,
    Format::DeviceManagerV2,
    encode(this) {
        encode_data_file(this, this.checksum()?, &FILE)
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> DeviceManagerCheckpoint {
        DeviceManagerCheckpoint {
            pod_device_entries: Some(vec![PodDevicesEntry {
                pod_uid: "pod1".into(),
                container_name: "con1".into(),
                resource_name: "domain1.com/resource1".into(),
                device_ids: Some(BTreeMap::from([(
                    0,
                    Some(vec!["dev1".into(), "dev2".into()]),
                )])),
                alloc_resp: Some(vec![1, 2, 3]),
            }]),
            registered_devices: Some(BTreeMap::from([(
                "domain1.com/resource1".into(),
                Some(vec!["dev1".into(), "dev2".into()]),
            )])),
        }
    }

    #[test]
    fn readme_example_dump_and_file() {
        // testdata/conformance/README.md and vector devicemanager_v2/single_entry.
        let cp = example();
        assert_eq!(
            cp.hash_input().unwrap(),
            "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)pod1 ContainerName:(string)con1 ResourceName:(string)domain1.com/resource1 DeviceIDs:(checkpoint.DevicesPerNUMA)map[0:[dev1 dev2]] AllocResp:([]uint8)[1 2 3]}] RegisteredDevices:(map[string][]string)map[domain1.com/resource1:[dev1 dev2]]}"
        );
        assert_eq!(cp.checksum().unwrap(), 151_920_155);
        let file = String::from_utf8(cp.encode().unwrap()).unwrap();
        assert_eq!(
            file,
            r#"{"Data":{"PodDeviceEntries":[{"PodUID":"pod1","ContainerName":"con1","ResourceName":"domain1.com/resource1","DeviceIDs":{"0":["dev1","dev2"]},"AllocResp":"AQID"}],"RegisteredDevices":{"domain1.com/resource1":["dev1","dev2"]}},"Checksum":151920155}"#
        );
        assert_eq!(
            DeviceManagerCheckpoint::decode(file.as_bytes()).unwrap(),
            cp
        );
    }

    #[test]
    fn missing_fields_read_as_the_constructor_left_them() {
        // An empty object keeps the kubelet's empty (non-nil) slice and map, whose checksum
        // differs from a nil one.
        let err = DeviceManagerCheckpoint::decode(br#"{"Checksum":1944006890}"#).unwrap_err();
        assert!(err.is_checksum_mismatch(), "{err}");
    }
}
