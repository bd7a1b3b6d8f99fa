//! CPU manager checkpoint `cpu_manager_state` with pod entries: v3 (v1.36, written while
//! `PodLevelResourceManagers` is on) and v4 (v1.37: the content as a JSON `data` string and
//! its own checksum).
//!
//! **v3** (`state.CPUManagerCheckpoint` of v1.36, `CPUManagerCheckpointV3` of v1.37) is v2
//! plus `podEntries`: pod UID → `{"cpuSet": "0-3"}`. Its checksum hashes the dump under
//! the type name `CPUManagerCheckpoint` — v1.36's own name for it, and the "legacy" name
//! v1.37 keeps writing so a v1.36 kubelet can read its files. v1.37's reader also accepts
//! the dump under `CPUManagerCheckpointV3`, and so does this one. A pod entry's cpuset is a
//! `cpuset.CPUSet` in memory, so the dump prints its elements
//! (`{CPUSet:(cpuset.CPUSet){elems:(map[int]struct {})map[1:{} 2:{}]}}`) while the file holds
//! its list string. Unlike v1 and v2, a recorded checksum of 0 is not accepted.
//!
//! **v4** (`CPUManagerCheckpointV4`, k8s 1.37) writes the v3 fields at the top level for
//! older readers, with `checksum` 0 (which v1.36's v2 reader accepts unchecked), then
//! `data` — the v3 content without a checksum, as a JSON string — and `dataChecksum`, the
//! kubelet checksum of that string (FNV-32a of `(string)` followed by the string). Only
//! `data` and `dataChecksum` are read back; the top-level copy must still decode.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::cpumanager::CpuEntries;
use super::data_string::{
    CHECKSUM_FIELD, DATA_CHECKSUM_FIELD, DATA_FIELD, DataFormat, data_checksum,
    data_checksum_methods,
};
use super::go_cpuset::{self, CPUSET, HashedCpuSet};
use super::{Checkpoint, ChecksumCheck, ChecksumVerification, impl_checkpoint, marshal_file};
use crate::checksum::kubelet_checksum;
use crate::error::{CheckpointError, Result};
use crate::format::Format;
use crate::gojson::{self, value::GoValue};
use crate::gotype::{GoField, GoStruct, GoType, MAP_STRING_STRING, STRING};

/// A pod's pod-level CPU assignment (`state.PodEntry`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodCpuEntry {
    /// The pod's CPUs in Linux list format (`0-3,8`); written in `cpuset`'s canonical form.
    #[serde(rename = "cpuSet")]
    pub cpu_set: String,
}

/// Pod UID → pod-level CPUs (`state.PodCPUAssignments`).
pub type PodCpuEntries = BTreeMap<String, PodCpuEntry>;

/// The CPU manager's checkpoint v3 (without its checksum): v2 plus pod entries.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_checkpoint::{Checkpoint, CpuManagerCheckpointV3, PodCpuEntry};
///
/// // Conformance vector `cpumanager_v3/none_policy_empty`: v1.36's bytes.
/// let kubelet = br#"{"policyName":"none","defaultCpuSet":"","checksum":642675224}"#;
/// assert_eq!(CpuManagerCheckpointV3::decode(kubelet)?.policy_name, "none");
///
/// let state = CpuManagerCheckpointV3 {
///     policy_name: "static".into(),
///     default_cpu_set: "0-1".into(),
///     entries: Some(BTreeMap::new()), // never nil in the kubelet
///     pod_entries: Some(BTreeMap::from([("pod-uid".into(), PodCpuEntry { cpu_set: "2-3".into() })])),
/// };
/// let bytes = state.encode()?;
/// assert!(bytes.windows(9).any(|w| w == b"podEntrie"), "pod entries are written");
/// assert_eq!(CpuManagerCheckpointV3::decode(&bytes)?, state);
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuManagerCheckpointV3 {
    /// `none` or `static`.
    #[serde(rename = "policyName")]
    pub policy_name: String,
    /// The shared pool, in Linux list format.
    #[serde(rename = "defaultCpuSet")]
    pub default_cpu_set: String,
    /// Exclusive assignments per pod and container (omitted from the file when empty).
    #[serde(rename = "entries")]
    pub entries: Option<CpuEntries>,
    /// Pod-level assignments (omitted from the file when empty).
    #[serde(rename = "podEntries")]
    pub pod_entries: Option<PodCpuEntries>,
}

/// The CPU manager's checkpoint v4 (k8s 1.37): the same content as v3, stored as `data`.
///
/// # Example
///
/// What v1.37 writes (conformance vector `cpumanager_v4/none_policy_empty`): the v3 fields at
/// the top level with checksum 0 for older readers, then `data` and its own checksum.
///
/// ```
/// use corral_checkpoint::{Checkpoint, CpuManagerCheckpointV4};
///
/// let kubelet = br#"{"policyName":"none","defaultCpuSet":"","checksum":0,"data":"{\"policyName\":\"none\",\"defaultCpuSet\":\"\"}","dataChecksum":3028111495}"#;
/// let state = CpuManagerCheckpointV4::decode(kubelet)?;
/// assert_eq!(state.0.policy_name, "none");
/// assert_eq!(state.data()?, r#"{"policyName":"none","defaultCpuSet":""}"#);
/// assert_eq!(state.encode()?, kubelet);
///
/// // Only `data` and `dataChecksum` are read back: a changed `data` is caught.
/// let tampered = String::from_utf8(kubelet.to_vec())?.replacen(r#"\"none\""#, r#"\"static\""#, 1);
/// assert!(CpuManagerCheckpointV4::decode(tampered.as_bytes()).unwrap_err().is_checksum_mismatch());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuManagerCheckpointV4(pub CpuManagerCheckpointV3);

static ENTRIES: GoType = GoType::Map(&STRING, &MAP_STRING_STRING);

/// `state.PodCPUAssignments` whose entries are the struct `$entry` with a `CPUSet` of `$set`.
macro_rules! pod_entries {
    ($entry:literal, $set:expr) => {
        GoType::Named(
            "state.PodCPUAssignments",
            &GoType::Map(
                &STRING,
                &GoType::Struct(&GoStruct {
                    name: $entry,
                    fields: &[GoField::omitempty("CPUSet", "cpuSet", $set)],
                }),
            ),
        )
    };
}

/// `podEntryJSON`: what `PodEntry.MarshalJSON` writes.
static POD_ENTRIES_FILE: GoType = pod_entries!("state.podEntryJSON", &STRING);
/// `PodEntry` as go-spew sees it.
static POD_ENTRIES_HASH: GoType = pod_entries!("state.PodEntry", &CPUSET);

/// The struct `$name`: the v3 content with pod entries of type `$pods`, then `$tail`.
macro_rules! cpu_struct {
    ($name:literal, $pods:expr $(, $tail:expr)*) => {
        GoType::Struct(&GoStruct {
            name: $name,
            fields: &[
                GoField::tagged("PolicyName", "policyName", &STRING),
                GoField::tagged("DefaultCPUSet", "defaultCpuSet", &STRING),
                GoField::omitempty("Entries", "entries", &ENTRIES),
                GoField::omitempty("PodEntries", "podEntries", $pods),
                $($tail),*
            ],
        })
    };
}

static V3_FILE: GoType = cpu_struct!(
    "state.CPUManagerCheckpoint",
    &POD_ENTRIES_FILE,
    CHECKSUM_FIELD
);
static V3_HASH: GoType = GoType::Ptr(&cpu_struct!(
    "state.CPUManagerCheckpoint",
    &POD_ENTRIES_HASH,
    CHECKSUM_FIELD
));
static V3_HASH_V137_NAME: GoType = GoType::Ptr(&cpu_struct!(
    "state.CPUManagerCheckpointV3",
    &POD_ENTRIES_HASH,
    CHECKSUM_FIELD
));

static V4_DATA: GoType = cpu_struct!("state.CPUManagerCheckpointData", &POD_ENTRIES_FILE);

/// The v4 file and its `data`.
static V4: DataFormat = DataFormat {
    format: Format::CpuManagerV4,
    file: &V4_FILE,
    data_index: 5,
    content: &V4_DATA,
};

static V4_FILE: GoType = cpu_struct!(
    "state.CPUManagerCheckpoint",
    &POD_ENTRIES_FILE,
    CHECKSUM_FIELD,
    DATA_FIELD,
    DATA_CHECKSUM_FIELD
);

#[derive(Serialize)]
struct HashedPodEntry<'a> {
    #[serde(rename = "cpuSet")]
    cpu_set: HashedCpuSet<'a>,
}

/// Any of the structs above, field by field; `None` fields are not serialized.
#[derive(Serialize)]
struct Wire<'a, P> {
    #[serde(rename = "policyName")]
    policy_name: &'a str,
    #[serde(rename = "defaultCpuSet")]
    default_cpu_set: &'a str,
    #[serde(rename = "entries")]
    entries: &'a Option<CpuEntries>,
    #[serde(rename = "podEntries")]
    pod_entries: Option<P>,
    #[serde(rename = "checksum", skip_serializing_if = "Option::is_none")]
    checksum: Option<u64>,
    #[serde(rename = "data", skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(rename = "dataChecksum", skip_serializing_if = "Option::is_none")]
    data_checksum: Option<u64>,
}

/// Pod UID → parsed cpuset.
type ParsedPods = BTreeMap<String, BTreeSet<i64>>;

impl CpuManagerCheckpointV3 {
    fn parsed_pods(&self, format: Format) -> Result<Option<ParsedPods>> {
        let Some(pods) = &self.pod_entries else {
            return Ok(None);
        };
        let mut parsed = ParsedPods::new();
        for (pod, entry) in pods {
            let set = go_cpuset::parse(&entry.cpu_set).map_err(|why| CheckpointError::Decode {
                path: None,
                format,
                message: format!("pod {pod:?}: failed to parse cpuset: {why}"),
            })?;
            parsed.insert(pod.clone(), set);
        }
        Ok(Some(parsed))
    }

    /// The file's pod entries: each cpuset in canonical form.
    fn file_pods(&self, format: Format) -> Result<Option<PodCpuEntries>> {
        Ok(self.parsed_pods(format)?.map(|pods| {
            pods.into_iter()
                .map(|(pod, set)| {
                    let cpu_set = go_cpuset::format(&set);
                    (pod, PodCpuEntry { cpu_set })
                })
                .collect()
        }))
    }

    fn wire<P>(&self, pod_entries: Option<P>) -> Wire<'_, P> {
        Wire {
            policy_name: &self.policy_name,
            default_cpu_set: &self.default_cpu_set,
            entries: &self.entries,
            pod_entries,
            checksum: None,
            data: None,
            data_checksum: None,
        }
    }

    /// The value go-spew dumps: pod cpusets as `cpuset.CPUSet`, `Checksum` 0.
    fn hash_wire<'a>(
        &'a self,
        parsed: &'a Option<ParsedPods>,
    ) -> Wire<'a, BTreeMap<&'a str, HashedPodEntry<'a>>> {
        let hashed = parsed.as_ref().map(|pods| {
            pods.iter()
                .map(|(pod, set)| {
                    let cpu_set = HashedCpuSet(set);
                    (pod.as_str(), HashedPodEntry { cpu_set })
                })
                .collect()
        });
        let mut wire = self.wire(hashed);
        wire.checksum = Some(0);
        wire
    }

    fn checksum_as(&self, ty: &'static GoType) -> Result<u64> {
        let parsed = self.parsed_pods(Format::CpuManagerV3)?;
        kubelet_checksum(&self.hash_wire(&parsed), ty)
    }

    /// The string upstream hashes: `dump.ForHash(&cp)` with `Checksum` 0, under the type
    /// name `CPUManagerCheckpoint`.
    pub fn hash_input(&self) -> Result<String> {
        let parsed = self.parsed_pods(Format::CpuManagerV3)?;
        crate::spew::dump_for_hash(&self.hash_wire(&parsed), &V3_HASH)
    }

    /// Upstream's checksum of this value (what v1.36 and v1.37 write).
    pub fn checksum(&self) -> Result<u64> {
        self.checksum_as(&V3_HASH)
    }

    /// Reads the logical value from Go-convention JSON, without verifying any checksum.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        let value = gojson::unmarshal(bytes, &V4_DATA, GoValue::zero(&V4_DATA), Self::FORMAT)?;
        canonical(gojson::typed(value, &V4_DATA)?, Self::FORMAT)
    }

    /// Decodes and verifies as v1.37's v3 reader: the checksum under either type name; 0
    /// is not accepted.
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        let initial = GoValue::Struct(vec![
            GoValue::Str(String::new()),
            GoValue::Str(String::new()),
            GoValue::empty(&ENTRIES),
            GoValue::empty(&POD_ENTRIES_FILE),
            GoValue::Uint(0),
        ]);
        let mut value = gojson::unmarshal(bytes, &V3_FILE, initial, Self::FORMAT)?;
        let recorded = super::checksum_field(&value, 4);
        if let Some(field) = value.field_mut(4) {
            *field = GoValue::Uint(0);
        }
        let content: Self = canonical(gojson::typed(value, &V3_FILE)?, Self::FORMAT)?;
        let computed = content.checksum()?;
        if recorded != computed && recorded != content.checksum_as(&V3_HASH_V137_NAME)? {
            return Err(CheckpointError::ChecksumMismatch {
                path: None,
                format: Self::FORMAT,
                expected: recorded,
                actual: computed,
                verifies_as: None,
            });
        }
        let verification = ChecksumVerification::Verified;
        Ok((
            content,
            ChecksumCheck {
                recorded,
                computed,
                verification,
            },
        ))
    }
}

/// `value` with its pod cpusets parsed and printed back, as Go holds them.
fn canonical(mut value: CpuManagerCheckpointV3, format: Format) -> Result<CpuManagerCheckpointV3> {
    value.pod_entries = value.file_pods(format)?;
    Ok(value)
}

impl_checkpoint!(
    CpuManagerCheckpointV3,
    Format::CpuManagerV3,
    /// Writes what v1.36 (`PodLevelResourceManagers` on) and v1.37 write for v3.
    encode(this) {
        let mut wire = this.wire(this.file_pods(Format::CpuManagerV3)?);
        wire.checksum = Some(this.checksum()?);
        marshal_file(&wire, &V3_FILE)
    },
    /// Reads as v1.37's `GetCheckpoint(…, newCPUManagerCheckpointV3())`.
    decode
);

impl CpuManagerCheckpointV4 {
    /// The `data` string: `json.Marshal(CheckpointData)`.
    pub fn data(&self) -> Result<String> {
        let wire = self.0.wire(self.0.file_pods(Format::CpuManagerV4)?);
        gojson::marshal(&wire, &V4_DATA)
    }

    data_checksum_methods!(V4);

    /// Reads the logical value (the v3 content) from Go-convention JSON.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        CpuManagerCheckpointV3::from_go_json(bytes).map(CpuManagerCheckpointV4)
    }

    /// Decodes as v1.37's v4 reader (`newCPUManagerCheckpointV4` then `GetCheckpoint`).
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        let initial = GoValue::Struct(vec![
            GoValue::Str(String::new()),
            GoValue::Str(String::new()),
            GoValue::empty(&ENTRIES),
            GoValue::empty(&POD_ENTRIES_FILE),
        ]);
        let (content, check) = V4.decode(bytes, initial)?;
        Ok((
            CpuManagerCheckpointV4(canonical(content, Self::FORMAT)?),
            check,
        ))
    }
}

impl_checkpoint!(
    CpuManagerCheckpointV4,
    Format::CpuManagerV4,
    /// Writes what v1.37 writes: the v3 fields with checksum 0, `data` and `dataChecksum`.
    encode(this) {
        let data = this.data()?;
        let data_checksum = data_checksum(&data)?;
        let mut wire = this.0.wire(this.0.file_pods(Format::CpuManagerV4)?);
        wire.checksum = Some(0);
        wire.data = Some(&data);
        wire.data_checksum = Some(data_checksum);
        marshal_file(&wire, &V4_FILE)
    },
    /// Reads as v1.37's `GetCheckpoint(…, newCPUManagerCheckpointV4())`.
    decode
);

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CpuManagerCheckpointV3 {
        CpuManagerCheckpointV3 {
            policy_name: "static".into(),
            default_cpu_set: "0,3-7".into(),
            entries: Some(BTreeMap::from([(
                "pod".into(),
                Some(BTreeMap::from([
                    ("c1".into(), "1".into()),
                    ("c2".into(), "2".into()),
                ])),
            )])),
            pod_entries: Some(BTreeMap::from([(
                "pod".into(),
                PodCpuEntry {
                    cpu_set: "1,2".into(),
                },
            )])),
        }
    }

    #[test]
    fn v3_matches_the_v136_kubelet() {
        // Vector cpumanager_v3/static_pod_entry (testdata/upstream/checkpoint_v136_cpumanager.json).
        let cp = sample();
        assert_eq!(
            cp.hash_input().unwrap(),
            "(*state.CPUManagerCheckpoint){PolicyName:(string)static DefaultCPUSet:(string)0,3-7 Entries:(map[string]map[string]string)map[pod:map[c1:1 c2:2]] PodEntries:(state.PodCPUAssignments)map[pod:{CPUSet:(cpuset.CPUSet){elems:(map[int]struct {})map[1:{} 2:{}]}}] Checksum:(checksum.Checksum)0}"
        );
        let file = String::from_utf8(cp.encode().unwrap()).unwrap();
        assert_eq!(
            file,
            r#"{"policyName":"static","defaultCpuSet":"0,3-7","entries":{"pod":{"c1":"1","c2":"2"}},"podEntries":{"pod":{"cpuSet":"1-2"}},"checksum":3240201252}"#
        );
        let back = CpuManagerCheckpointV3::decode(file.as_bytes()).unwrap();
        assert_eq!(back.pod_entries.unwrap()["pod"].cpu_set, "1-2");
    }

    #[test]
    fn v4_matches_the_v137_kubelet() {
        let cp = CpuManagerCheckpointV4(sample());
        let file = String::from_utf8(cp.encode().unwrap()).unwrap();
        assert_eq!(
            file,
            r#"{"policyName":"static","defaultCpuSet":"0,3-7","entries":{"pod":{"c1":"1","c2":"2"}},"podEntries":{"pod":{"cpuSet":"1-2"}},"checksum":0,"data":"{\"policyName\":\"static\",\"defaultCpuSet\":\"0,3-7\",\"entries\":{\"pod\":{\"c1\":\"1\",\"c2\":\"2\"}},\"podEntries\":{\"pod\":{\"cpuSet\":\"1-2\"}}}","dataChecksum":13358141}"#
        );
        assert_eq!(
            CpuManagerCheckpointV4::decode(file.as_bytes()).unwrap().0,
            canonical(sample(), Format::CpuManagerV4).unwrap()
        );
    }

    #[test]
    fn bad_pod_cpuset_is_a_decode_error() {
        let err = CpuManagerCheckpointV3::decode(
            br#"{"policyName":"static","defaultCpuSet":"","podEntries":{"p":{"cpuSet":"3-1"}},"checksum":1}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("invalid range"), "{err}");
    }

    /// A pod entry holding `9223372036854775807` (`MaxInt64`) panicked every reader and
    /// writer ("attempt to add with overflow" printing the set); it reads and writes as Go
    /// prints it, in v3 and in v4's `data`, whatever the other fields hold.
    #[test]
    fn pod_entries_holding_max_int64_read_and_write_as_go() {
        let mut cp = sample();
        cp.default_cpu_set = "9223372036854775807".into();
        cp.entries = Some(BTreeMap::from([(
            "pod".into(),
            Some(BTreeMap::from([(
                "c".into(),
                "-1,9223372036854775807".into(),
            )])),
        )]));
        for (pod, canonical) in [
            ("9223372036854775807", "9223372036854775807"),
            ("9223372036854775807,0", "0,9223372036854775807"),
            (
                "9223372036854775807,9223372036854775806",
                "9223372036854775806-9223372036854775807",
            ),
            (
                "9223372036854775806-9223372036854775807",
                "9223372036854775806-9223372036854775807",
            ),
        ] {
            cp.pod_entries = Some(BTreeMap::from([(
                "pod".into(),
                PodCpuEntry {
                    cpu_set: pod.into(),
                },
            )]));
            let file = cp.encode().unwrap();
            let text = String::from_utf8(file.clone()).unwrap();
            assert!(
                text.contains(&format!(r#""cpuSet":"{canonical}""#)),
                "{text}"
            );
            let back = CpuManagerCheckpointV3::decode(&file).unwrap();
            assert_eq!(back.pod_entries.unwrap()["pod"].cpu_set, canonical);
            assert_eq!(back.default_cpu_set, "9223372036854775807");
            let v4 = CpuManagerCheckpointV4(cp.clone()).encode().unwrap();
            let back = CpuManagerCheckpointV4::decode(&v4).unwrap().0;
            assert_eq!(back.pod_entries.unwrap()["pod"].cpu_set, canonical);
        }
    }

    /// Pod entries that hold no set Go can read (negative ids have no text) are decode errors
    /// in v3 and v4, and encoding such a value is refused the same way.
    #[test]
    fn pod_entries_with_negative_ids_are_decode_errors() {
        for pod in [
            "-1",
            "-9223372036854775808",
            "1--1",
            "0--9223372036854775808",
        ] {
            let v3 = format!(
                r#"{{"policyName":"static","defaultCpuSet":"","podEntries":{{"p":{{"cpuSet":"{pod}"}}}},"checksum":1}}"#
            );
            let err = CpuManagerCheckpointV3::decode(v3.as_bytes()).unwrap_err();
            assert!(err.is_decode_error(), "{pod}: {err}");
            let mut cp = sample();
            cp.pod_entries = Some(BTreeMap::from([(
                "p".into(),
                PodCpuEntry {
                    cpu_set: pod.into(),
                },
            )]));
            assert!(cp.encode().unwrap_err().is_decode_error(), "{pod}");
            let err = CpuManagerCheckpointV4(cp).encode().unwrap_err();
            assert!(err.is_decode_error(), "{pod}");
        }
    }
}
