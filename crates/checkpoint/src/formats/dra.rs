//! DRA manager checkpoint `dra_manager_state`, v1.32 format
//! (`pkg/kubelet/cm/dra/state/checkpoint.go`).
//!
//! The file is `json.Marshal(Checkpoint{Data, Checksum})` where `Data` is itself a JSON
//! document — `{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1",
//! "ClaimInfoStateList":[…]}` — carried as a string, and `Checksum` is CRC32-IEEE of those
//! bytes. The kubelet verifies the CRC while unmarshalling the outer document and parses
//! `Data` only when asked for the claim list; [`DraManagerCheckpointFile`] keeps those two steps
//! apart, [`DraManagerCheckpoint`] does both.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{
    Checkpoint, ChecksumCheck, ChecksumVerification, checksum_field, from_go_json, go_struct,
    impl_checkpoint, marshal_file, string_set,
};
use crate::error::{CheckpointError, Result};
use crate::format::Format;
use crate::gojson::{self, value::GoValue};
use crate::gotype::{
    GoField, GoStruct, GoType, STRING, STRING_SET, STRING_SLICE, TYPES_UID, UINT32,
};
use crate::hash::crc32_ieee;

/// `kind` written into `Data`.
pub const CHECKPOINT_KIND: &str = "DRACheckpoint";
/// `apiVersion` written into `Data`.
pub const CHECKPOINT_API_VERSION: &str = "checkpoint.dra.kubelet.k8s.io/v1";

go_struct! {
    /// A device a DRA driver allocated for a claim (`state.Device`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Device in static DEVICE = "state.Device" {
        /// Resource pool of the device.
        pub pool_name: String => "PoolName" = &STRING,
        /// Device name within the pool.
        pub device_name: String => "DeviceName" = &STRING,
        /// The claim requests this device satisfies.
        pub request_names: Option<Vec<String>> => "RequestNames" = &STRING_SLICE,
        /// CDI device ids.
        pub cdi_device_ids: Option<Vec<String>> => "CDIDeviceIDs" = &STRING_SLICE,
    }
}

go_struct! {
    /// One driver's devices for a claim (`state.DriverState`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct DriverState in static DRIVER_STATE = "state.DriverState" {
        /// Devices.
        pub devices: Option<Vec<Device>> => "Devices" = &GoType::Slice(&DEVICE),
    }
}

go_struct! {
    /// A prepared resource claim (`state.ClaimInfoState`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct ClaimInfoState in static CLAIM_INFO_STATE = "state.ClaimInfoState" {
        /// Claim UID.
        pub claim_uid: String => "ClaimUID" = &TYPES_UID,
        /// Claim name.
        pub claim_name: String => "ClaimName" = &STRING,
        /// Claim namespace.
        pub namespace: String => "Namespace" = &STRING,
        /// Pods referencing the claim (`sets.Set[string]`).
        #[serde(with = "string_set")]
        pub pod_uids: Option<BTreeSet<String>> => "PodUIDs" = &STRING_SET,
        /// Per driver name, what it prepared.
        pub driver_state: Option<BTreeMap<String, DriverState>>
            => "DriverState" = &GoType::Map(&STRING, &DRIVER_STATE),
    }
}

/// The DRA manager's checkpointed claim list (`CheckpointData` without its type meta).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraManagerCheckpoint {
    /// Prepared claims.
    #[serde(rename = "ClaimInfoStateList")]
    pub claim_info_state_list: Option<Vec<ClaimInfoState>>,
}

/// The outer file (`state.Checkpoint`): the `Data` JSON string and its CRC32.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraManagerCheckpointFile {
    /// The serialized `CheckpointData`.
    pub data: String,
    /// CRC32-IEEE of `data`.
    pub checksum: u32,
}

/// `state.CheckpointData` with `metav1.TypeMeta` inlined.
static CHECKPOINT_DATA: GoType = GoType::Struct(&GoStruct {
    name: "state.CheckpointData",
    fields: &[
        GoField::omitempty("Kind", "kind", &STRING),
        GoField::omitempty("APIVersion", "apiVersion", &STRING),
        GoField::plain(
            "ClaimInfoStateList",
            &GoType::Named(
                "state.ClaimInfoStateList",
                &GoType::Slice(&CLAIM_INFO_STATE),
            ),
        ),
    ],
});

static FILE: GoType = GoType::Struct(&GoStruct {
    name: "state.Checkpoint",
    fields: &[
        GoField::plain("Data", &STRING),
        GoField::plain("Checksum", &UINT32),
    ],
});

#[derive(Serialize)]
struct DataWire<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    #[serde(rename = "ClaimInfoStateList")]
    list: &'a Option<Vec<ClaimInfoState>>,
}

#[derive(Serialize)]
struct FileWire<'a> {
    #[serde(rename = "Data")]
    data: &'a str,
    #[serde(rename = "Checksum")]
    checksum: u32,
}

impl DraManagerCheckpoint {
    /// The `Data` string upstream writes and checksums.
    pub fn hash_input(&self) -> Result<String> {
        let wire = DataWire {
            kind: CHECKPOINT_KIND,
            api_version: CHECKPOINT_API_VERSION,
            list: &self.claim_info_state_list,
        };
        gojson::marshal(&wire, &CHECKPOINT_DATA)
    }

    /// CRC32-IEEE of [`hash_input`](Self::hash_input).
    pub fn checksum(&self) -> Result<u32> {
        Ok(crc32_ieee(self.hash_input()?.as_bytes()))
    }

    /// Reads the logical value from Go-convention JSON (`CheckpointData`), exactly as
    /// upstream's `GetClaimInfoStateList` parses `Data`.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        from_go_json(bytes, &CHECKPOINT_DATA, Self::FORMAT)
    }
}

impl DraManagerCheckpointFile {
    /// Upstream's `NewCheckpoint(list)`.
    pub fn new(list: &DraManagerCheckpoint) -> Result<Self> {
        let data = list.hash_input()?;
        let checksum = crc32_ieee(data.as_bytes());
        Ok(DraManagerCheckpointFile { data, checksum })
    }

    /// The file bytes (`json.Marshal(cp)`).
    pub fn encode(&self) -> Result<Vec<u8>> {
        let wire = FileWire {
            data: &self.data,
            checksum: self.checksum,
        };
        marshal_file(&wire, &FILE)
    }

    /// Reads the outer document as `GetCheckpoint(…, NewCheckpoint(nil))` does (a missing
    /// key keeps the empty checkpoint's value) and verifies the CRC. `Data` is not parsed.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let empty = DraManagerCheckpointFile::new(&DraManagerCheckpoint::default())?;
        let initial = GoValue::Struct(vec![
            GoValue::Str(empty.data),
            GoValue::Uint(empty.checksum.into()),
        ]);
        let mut value = gojson::unmarshal(bytes, &FILE, initial, Format::DraV132)?;
        let stored = checksum_field(&value, 1);
        let data = match value.take_field(0) {
            GoValue::Str(s) => s,
            _ => String::new(),
        };
        let actual = crc32_ieee(data.as_bytes());
        if stored != u64::from(actual) {
            return Err(CheckpointError::ChecksumMismatch {
                path: None,
                format: Format::DraV132,
                expected: stored,
                actual: actual.into(),
            });
        }
        Ok(DraManagerCheckpointFile {
            data,
            checksum: actual,
        })
    }

    /// Parses `Data` (upstream's `GetClaimInfoStateList`).
    pub fn claim_info_state_list(&self) -> Result<DraManagerCheckpoint> {
        DraManagerCheckpoint::from_go_json(self.data.as_bytes())
    }
}

impl DraManagerCheckpoint {
    /// Decodes the file, verifies its CRC and parses `Data`.
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        let file = DraManagerCheckpointFile::decode(bytes)?;
        let check = ChecksumCheck {
            recorded: file.checksum.into(),
            computed: file.checksum.into(),
            verification: ChecksumVerification::Verified,
        };
        Ok((file.claim_info_state_list()?, check))
    }
}

impl_checkpoint!(
    DraManagerCheckpoint,
    Format::DraV132,
    encode(this) {
        DraManagerCheckpointFile::new(this)?.encode()
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_list_file() {
        let cp = DraManagerCheckpoint {
            claim_info_state_list: Some(vec![]),
        };
        let file = String::from_utf8(cp.encode().unwrap()).unwrap();
        assert_eq!(
            file,
            r#"{"Data":"{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[]}","Checksum":2361995144}"#
        );
        assert_eq!(DraManagerCheckpoint::decode(file.as_bytes()).unwrap(), cp);
    }

    #[test]
    fn missing_keys_keep_the_empty_checkpoint() {
        // `{}` leaves NewCheckpoint(nil) untouched, which verifies.
        let file = DraManagerCheckpointFile::decode(b"{}").unwrap();
        assert_eq!(
            file.claim_info_state_list().unwrap(),
            DraManagerCheckpoint::default()
        );
    }
}
