//! DRA manager checkpoint `dra_manager_state` as k8s 1.26–1.30 wrote it
//! (`DRAManagerCheckpoint{Version, Entries, Checksum}`, go-spew/FNV checksum), read-only in
//! the kubelet's terms; the writers exist for tests and migration tooling.
//!
//! v1.30's reader first checks the checksum of the current layout and, on mismatch, the one
//! k8s 1.27–1.28 wrote before `ResourceHandles` existed: the entries copied without that
//! field into `DRAManagerCheckpointWithoutResourceHandles` (always a non-nil list, version
//! `v1`), dumped, with the first `DRAManagerCheckpointWithoutResourceHandles` and the first
//! `ClaimInfoStateListWithoutResourceHandles` renamed to the current names.
//!
//! `ResourceHandle.StructuredData` (a large v1alpha2 API type) is not modelled: a file with
//! a non-null `structuredData` is refused as [`CheckpointError::Unsupported`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize, Serializer};

use super::{
    Checkpoint, ChecksumCheck, ChecksumVerification, checksum_field, go_struct, impl_checkpoint,
    marshal_file, string_set,
};
use crate::checksum::kubelet_checksum;
use crate::error::{CheckpointError, Result};
use crate::format::Format;
use crate::gojson::{self, value::GoValue};
use crate::gotype::{
    CHECKSUM, GoField, GoStruct, GoType, MAP_STRING_STRINGS, STRING, STRING_SET, TYPES_UID,
};
use crate::hash::fnv32a;
use crate::spew::dump_for_hash;

/// The only version v1.30 writes.
pub const CHECKPOINT_VERSION: &str = "v1";

go_struct! {
    /// Opaque resource data for a kubelet plugin (`v1alpha2.ResourceHandle`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct ResourceHandle in static RESOURCE_HANDLE = "v1alpha2.ResourceHandle" {
        /// The driver the data is for.
        pub driver_name: String => omitempty "driverName" as "DriverName" = &STRING,
        /// The opaque data.
        pub data: String => omitempty "data" as "Data" = &STRING,
        /// Always `None`: structured handles are not modelled (see the module docs).
        pub structured_data: Option<StructuredResourceHandle>
            => omitempty "structuredData" as "StructuredData" = &GoType::Ptr(&STRUCTURED),
    }
}

/// Placeholder for `v1alpha2.StructuredResourceHandle`, which this crate does not model; it
/// cannot be constructed, so [`ResourceHandle::structured_data`] is always `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructuredResourceHandle {
    _unconstructible: (),
}

impl Serialize for StructuredResourceHandle {
    fn serialize<S: Serializer>(&self, _serializer: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "StructuredResourceHandle is not modelled",
        ))
    }
}

impl<'de> Deserialize<'de> for StructuredResourceHandle {
    fn deserialize<D: serde::Deserializer<'de>>(_deserializer: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "StructuredResourceHandle is not modelled",
        ))
    }
}

go_struct! {
    /// A prepared claim as v1.30 recorded it (`state.ClaimInfoState`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct ClaimInfoStateV130 in static CLAIM = "state.ClaimInfoState" {
        /// DRA driver name.
        pub driver_name: String => "DriverName" = &STRING,
        /// Resource class of the claim.
        pub class_name: String => "ClassName" = &STRING,
        /// Claim UID.
        pub claim_uid: String => "ClaimUID" = &TYPES_UID,
        /// Claim name.
        pub claim_name: String => "ClaimName" = &STRING,
        /// Claim namespace.
        pub namespace: String => "Namespace" = &STRING,
        /// Pods referencing the claim.
        #[serde(with = "string_set")]
        pub pod_uids: Option<BTreeSet<String>> => "PodUIDs" = &STRING_SET,
        /// Resource handles (absent in files from k8s 1.27–1.28).
        pub resource_handles: Option<Vec<ResourceHandle>>
            => "ResourceHandles" = &GoType::Slice(&RESOURCE_HANDLE),
        /// Driver name → CDI devices.
        pub cdi_devices: Option<BTreeMap<String, Option<Vec<String>>>>
            => "CDIDevices" = &MAP_STRING_STRINGS,
    }
}

/// The v1.26–v1.30 DRA checkpoint (`state.DRAManagerCheckpoint`, without its checksum).
///
/// # Example
///
/// ```
/// use corral_checkpoint::{Checkpoint, DraManagerCheckpointV130};
///
/// // Conformance vectors `dra_v130/empty_list` and `dra_v130/nil_list`: v1.30 refuses the
/// // file it writes for a nil list (its reader rebuilds an empty one, whose dump differs).
/// let empty = br#"{"version":"v1","checksum":991151041}"#;
/// let state = DraManagerCheckpointV130::decode(empty)?;
/// assert_eq!((state.version.as_str(), state.entries.as_deref()), ("v1", Some(&[][..])));
/// let nil_list = br#"{"version":"v1","checksum":3675879976}"#;
/// assert!(DraManagerCheckpointV130::decode(nil_list).unwrap_err().is_checksum_mismatch());
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraManagerCheckpointV130 {
    /// Always `v1` when written by a kubelet.
    #[serde(rename = "version")]
    pub version: String,
    /// Prepared claims (omitted from the file when empty).
    #[serde(rename = "entries")]
    pub entries: Option<Vec<ClaimInfoStateV130>>,
}

static STRUCTURED: GoType = GoType::Struct(&GoStruct {
    name: "v1alpha2.StructuredResourceHandle",
    fields: &[],
});

static CHECKPOINT: GoType = GoType::Struct(&GoStruct {
    name: "state.DRAManagerCheckpoint",
    fields: &[
        GoField::tagged("Version", "version", &STRING),
        GoField::omitempty(
            "Entries",
            "entries",
            &GoType::Named("state.ClaimInfoStateList", &GoType::Slice(&CLAIM)),
        ),
        GoField::tagged("Checksum", "checksum", &CHECKSUM),
    ],
});
static CHECKPOINT_PTR: GoType = GoType::Ptr(&CHECKPOINT);

static CLAIM_WITHOUT_HANDLES: GoType = GoType::Struct(&GoStruct {
    name: "state.ClaimInfoStateWithoutResourceHandles",
    fields: &[
        GoField::plain("DriverName", &STRING),
        GoField::plain("ClassName", &STRING),
        GoField::plain("ClaimUID", &TYPES_UID),
        GoField::plain("ClaimName", &STRING),
        GoField::plain("Namespace", &STRING),
        GoField::plain("PodUIDs", &STRING_SET),
        GoField::plain("CDIDevices", &MAP_STRING_STRINGS),
    ],
});

static CHECKPOINT_WITHOUT_HANDLES: GoType = GoType::Struct(&GoStruct {
    name: "state.DRAManagerCheckpointWithoutResourceHandles",
    fields: &[
        GoField::tagged("Version", "version", &STRING),
        GoField::omitempty(
            "Entries",
            "entries",
            &GoType::Named(
                "state.ClaimInfoStateListWithoutResourceHandles",
                &GoType::Slice(&CLAIM_WITHOUT_HANDLES),
            ),
        ),
        GoField::tagged("Checksum", "checksum", &CHECKSUM),
    ],
});
static CHECKPOINT_WITHOUT_HANDLES_PTR: GoType = GoType::Ptr(&CHECKPOINT_WITHOUT_HANDLES);

#[derive(Serialize)]
struct Wire<'a, E> {
    #[serde(rename = "version")]
    version: &'a str,
    #[serde(rename = "entries")]
    entries: Option<E>,
    #[serde(rename = "checksum")]
    checksum: u64,
}

struct PodUidsRef<'a>(&'a Option<BTreeSet<String>>);

impl Serialize for PodUidsRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        string_set::serialize(self.0, serializer)
    }
}

#[derive(Serialize)]
struct ClaimWithoutHandles<'a> {
    #[serde(rename = "DriverName")]
    driver_name: &'a str,
    #[serde(rename = "ClassName")]
    class_name: &'a str,
    #[serde(rename = "ClaimUID")]
    claim_uid: &'a str,
    #[serde(rename = "ClaimName")]
    claim_name: &'a str,
    #[serde(rename = "Namespace")]
    namespace: &'a str,
    #[serde(rename = "PodUIDs")]
    pod_uids: PodUidsRef<'a>,
    #[serde(rename = "CDIDevices")]
    cdi_devices: &'a Option<BTreeMap<String, Option<Vec<String>>>>,
}

fn without_handles(entries: &[ClaimInfoStateV130]) -> Vec<ClaimWithoutHandles<'_>> {
    entries
        .iter()
        .map(|e| ClaimWithoutHandles {
            driver_name: &e.driver_name,
            class_name: &e.class_name,
            claim_uid: &e.claim_uid,
            claim_name: &e.claim_name,
            namespace: &e.namespace,
            pod_uids: PodUidsRef(&e.pod_uids),
            cdi_devices: &e.cdi_devices,
        })
        .collect()
}

fn legacy_hash_input(version: &str, entries: Option<&[ClaimInfoStateV130]>) -> Result<String> {
    let wire = Wire {
        version,
        entries: entries.map(without_handles),
        checksum: 0,
    };
    let dump = dump_for_hash(&wire, &CHECKPOINT_WITHOUT_HANDLES_PTR)?;
    // strings.Replace(…, 1), twice.
    let dump = dump.replacen(
        "DRAManagerCheckpointWithoutResourceHandles",
        "DRAManagerCheckpoint",
        1,
    );
    Ok(dump.replacen(
        "ClaimInfoStateListWithoutResourceHandles",
        "ClaimInfoStateList",
        1,
    ))
}

impl DraManagerCheckpointV130 {
    /// The value upstream hashes: `&dc` with `Checksum` 0.
    fn wire(&self) -> Wire<'_, &Vec<ClaimInfoStateV130>> {
        Wire {
            version: &self.version,
            entries: self.entries.as_ref(),
            checksum: 0,
        }
    }

    /// The string upstream hashes: `dump.ForHash(&dc)` with `Checksum` 0.
    pub fn hash_input(&self) -> Result<String> {
        dump_for_hash(&self.wire(), &CHECKPOINT_PTR)
    }

    /// Upstream's checksum of this value.
    pub fn checksum(&self) -> Result<u64> {
        kubelet_checksum(&self.wire(), &CHECKPOINT_PTR)
    }

    /// The string k8s 1.27–1.28 hashed (resource handles dropped, names replaced).
    pub fn hash_input_without_resource_handles(&self) -> Result<String> {
        legacy_hash_input(&self.version, self.entries.as_deref())
    }

    /// The file k8s 1.27–1.28 would have written for these entries (no `ResourceHandles`
    /// key, legacy checksum). For tests and migration tooling.
    pub fn encode_without_resource_handles(&self) -> Result<Vec<u8>> {
        let checksum = u64::from(fnv32a(
            self.hash_input_without_resource_handles()?.as_bytes(),
        ));
        let wire = Wire {
            version: &self.version,
            entries: self.entries.as_deref().map(without_handles),
            checksum,
        };
        marshal_file(&wire, &CHECKPOINT_WITHOUT_HANDLES)
    }

    /// Reads the logical value from Go-convention JSON, without verifying any checksum.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        let value =
            gojson::unmarshal(bytes, &CHECKPOINT, GoValue::zero(&CHECKPOINT), Self::FORMAT)?;
        refuse_structured_data(&value)?;
        gojson::typed(value, &CHECKPOINT)
    }

    fn decode_unverified(bytes: &[u8]) -> Result<(Self, u64)> {
        // NewDRAManagerCheckpoint: Version "v1", Entries an empty list.
        let initial = GoValue::Struct(vec![
            GoValue::Str(CHECKPOINT_VERSION.to_owned()),
            GoValue::Slice(Vec::new()),
            GoValue::Uint(0),
        ]);
        let value = gojson::unmarshal(bytes, &CHECKPOINT, initial, Format::DraV130)?;
        refuse_structured_data(&value)?;
        let stored = checksum_field(&value, 2);
        Ok((gojson::typed(value, &CHECKPOINT)?, stored))
    }
}

impl DraManagerCheckpointV130 {
    /// Decodes and verifies, accepting k8s 1.27–1.28's checksum rule as v1.30 does.
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        let (value, recorded) = Self::decode_unverified(bytes)?;
        let computed = value.checksum()?;
        let check = |verification| ChecksumCheck {
            recorded,
            computed,
            verification,
        };
        if recorded == computed {
            return Ok((value, check(ChecksumVerification::Verified)));
        }
        let entries = value.entries.as_deref().unwrap_or(&[]);
        let legacy = u64::from(fnv32a(
            legacy_hash_input(CHECKPOINT_VERSION, Some(entries))?.as_bytes(),
        ));
        if recorded == legacy {
            return Ok((value, check(ChecksumVerification::VerifiedByLegacyRule)));
        }
        Err(CheckpointError::ChecksumMismatch {
            path: None,
            format: Self::FORMAT,
            expected: recorded,
            actual: computed,
            verifies_as: None,
        })
    }
}

fn refuse_structured_data(value: &GoValue) -> Result<()> {
    let Some(GoValue::Slice(entries)) = value.field(1) else {
        return Ok(());
    };
    for entry in entries {
        if let Some(GoValue::Slice(handles)) = entry.field(6)
            && handles
                .iter()
                .any(|h| !matches!(h.field(2), Some(GoValue::Nil) | None))
        {
            return Err(CheckpointError::Unsupported {
                path: None,
                format: Format::DraV130,
                what: "ResourceHandle.structuredData".to_owned(),
            });
        }
    }
    Ok(())
}

impl_checkpoint!(
    DraManagerCheckpointV130,
    Format::DraV130,
    encode(this) {
        let checksum = this.checksum()?;
        let wire = Wire {
            version: &this.version,
            entries: this.entries.as_ref(),
            checksum,
        };
        marshal_file(&wire, &CHECKPOINT)
    },
    /// Reads as v1.30's `GetCheckpoint(…, NewDRAManagerCheckpoint())`, including its
    /// fallback to the checksum of the layout without resource handles.
    decode
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_list_checksum() {
        // Vector dra_v130/empty_list.
        let cp = DraManagerCheckpointV130 {
            version: "v1".into(),
            entries: Some(vec![]),
        };
        assert_eq!(
            cp.hash_input().unwrap(),
            "(*state.DRAManagerCheckpoint){Version:(string)v1 Entries:(state.ClaimInfoStateList)[] Checksum:(checksum.Checksum)0}"
        );
        assert_eq!(cp.checksum().unwrap(), 991_151_041);
        assert_eq!(
            cp.encode().unwrap(),
            br#"{"version":"v1","checksum":991151041}"#
        );
        assert_eq!(
            DraManagerCheckpointV130::decode(&cp.encode().unwrap()).unwrap(),
            cp
        );
    }

    #[test]
    fn structured_data_is_refused() {
        let err = DraManagerCheckpointV130::decode(
            br#"{"version":"v1","entries":[{"ResourceHandles":[{"structuredData":{}}]}],"checksum":1}"#,
        )
        .unwrap_err();
        assert!(matches!(err, CheckpointError::Unsupported { .. }), "{err}");
    }
}
