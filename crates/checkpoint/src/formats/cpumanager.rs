//! CPU manager checkpoint `cpu_manager_state` (`pkg/kubelet/cm/cpumanager/state/checkpoint.go`).
//!
//! v2 (`CPUManagerCheckpoint`, entries per pod then container) is what the kubelet writes;
//! v1 (entries per container id) is still read first by `restoreState`. Both hash
//! `dump.ForHash(&cp)` with `Checksum` zeroed, and both accept a stored checksum of 0
//! ("compatibility with old file backend").
//!
//! v1 has two writers upstream that disagree: files written by old kubelets hash the dump
//! with the type named `CPUManagerCheckpoint` (what the v1 reader recomputes, after
//! replacing the first `CPUManagerCheckpointV1` in its own dump), while v1.32's own
//! `CPUManagerCheckpointV1.MarshalCheckpoint` hashes the unreplaced name — so its reader
//! rejects what its writer writes. [`CpuManagerCheckpointV1::encode`] writes the readable
//! (legacy) form; [`CpuManagerCheckpointV1::encode_as_v132_marshal`] reproduces the other.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{
    Checkpoint, ChecksumAt, ChecksumCheck, from_go_json, impl_checkpoint, marshal_file, read_file,
    verify, verify_unless_zero,
};
use crate::checksum::kubelet_checksum;
use crate::error::{CheckpointError, Result};
use crate::format::Format;
use crate::gojson::value::GoValue;
use crate::gotype::{CHECKSUM, GoField, GoStruct, GoType, MAP_STRING_STRING, STRING};
use crate::hash::fnv32a;
use crate::spew::dump_for_hash;

/// v2 entries: pod UID → container name → cpuset string.
pub type CpuEntries = BTreeMap<String, Option<BTreeMap<String, String>>>;

/// The CPU manager's checkpoint, v2 (`state.CPUManagerCheckpoint`, without its checksum).
///
/// # Example
///
/// The bytes a v1.32 kubelet writes (conformance vector `cpumanager_v2/static_default_only`,
/// from the Go oracle built on upstream's sources), decoded, verified and written back alike:
///
/// ```
/// use corral_checkpoint::{Checkpoint, CpuManagerCheckpoint, CpuManagerCheckpointV1};
///
/// let kubelet = br#"{"policyName":"static","defaultCpuSet":"0-7","checksum":14413152}"#;
/// let state = CpuManagerCheckpoint::decode(kubelet)?;
/// assert_eq!((state.policy_name.as_str(), state.default_cpu_set.as_str()), ("static", "0-7"));
/// assert_eq!(state.checksum()?, 14413152);
/// assert_eq!(state.encode()?, kubelet);
///
/// // The v1 reader hashes under another type name: the same bytes are corrupt to it.
/// assert!(CpuManagerCheckpointV1::decode(kubelet).unwrap_err().is_checksum_mismatch());
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuManagerCheckpoint {
    /// `none` or `static`.
    #[serde(rename = "policyName")]
    pub policy_name: String,
    /// The shared pool, in Linux list format (`0-3,8`).
    #[serde(rename = "defaultCpuSet")]
    pub default_cpu_set: String,
    /// Exclusive assignments (omitted from the file when empty).
    #[serde(rename = "entries")]
    pub entries: Option<CpuEntries>,
}

/// The CPU manager's checkpoint, v1 (`state.CPUManagerCheckpointV1`, without its checksum).
///
/// # Example
///
/// ```
/// use corral_checkpoint::{Checkpoint, CpuManagerCheckpointV1};
///
/// // Conformance vector `cpumanager_v1_legacy/static_two_containers`: entries by container id.
/// let old = br#"{"policyName":"static","defaultCpuSet":"0-1,6-7","entries":{"containerID1":"2-3","containerID2":"4-5"},"checksum":736149614}"#;
/// let state = CpuManagerCheckpointV1::decode(old)?;
/// assert_eq!(state.entries.as_ref().unwrap()["containerID1"], "2-3");
/// assert_eq!(state.encode()?, old);
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuManagerCheckpointV1 {
    /// `none` or `static`.
    #[serde(rename = "policyName")]
    pub policy_name: String,
    /// The shared pool.
    #[serde(rename = "defaultCpuSet")]
    pub default_cpu_set: String,
    /// Container id → cpuset string.
    #[serde(rename = "entries")]
    pub entries: Option<BTreeMap<String, String>>,
}

/// The v2 struct under the Go type name `name`.
macro_rules! v2_struct {
    ($name:literal) => {
        GoType::Struct(&GoStruct {
            name: $name,
            fields: &[
                GoField::tagged("PolicyName", "policyName", &STRING),
                GoField::tagged("DefaultCPUSet", "defaultCpuSet", &STRING),
                GoField::omitempty(
                    "Entries",
                    "entries",
                    &GoType::Map(&STRING, &MAP_STRING_STRING),
                ),
                GoField::tagged("Checksum", "checksum", &CHECKSUM),
            ],
        })
    };
}

static V2: GoType = v2_struct!("state.CPUManagerCheckpoint");
static V2_PTR: GoType = GoType::Ptr(&V2);
static V2_NAMED_V2_PTR: GoType = GoType::Ptr(&v2_struct!("state.CPUManagerCheckpointV2"));

pub(crate) static V1: GoType = GoType::Struct(&GoStruct {
    name: "state.CPUManagerCheckpointV1",
    fields: &[
        GoField::tagged("PolicyName", "policyName", &STRING),
        GoField::tagged("DefaultCPUSet", "defaultCpuSet", &STRING),
        GoField::omitempty("Entries", "entries", &MAP_STRING_STRING),
        GoField::tagged("Checksum", "checksum", &CHECKSUM),
    ],
});
static V1_PTR: GoType = GoType::Ptr(&V1);

/// The Go struct with its checksum field.
#[derive(Serialize)]
struct Wire<'a, E> {
    #[serde(rename = "policyName")]
    policy_name: &'a str,
    #[serde(rename = "defaultCpuSet")]
    default_cpu_set: &'a str,
    #[serde(rename = "entries")]
    entries: &'a Option<E>,
    #[serde(rename = "checksum")]
    checksum: u64,
}

/// Reads a v1 or v2 file (of Go type `ty`) into what the kubelet's constructors give
/// (`Entries` an empty map) and verifies it with `checksum`; a recorded 0 is accepted
/// unchecked.
fn decode_checked<T: Checkpoint + DeserializeOwned>(
    bytes: &[u8],
    ty: &'static GoType,
    checksum: fn(&T) -> Result<u64>,
    also_accepted: Option<fn(&T) -> Result<u64>>,
) -> Result<(T, ChecksumCheck)> {
    let initial = GoValue::Struct(vec![
        GoValue::Str(String::new()),
        GoValue::Str(String::new()),
        GoValue::empty(&MAP_STRING_STRING),
        GoValue::Uint(0),
    ]);
    let (value, recorded) = read_file(bytes, ty, initial, T::FORMAT, ty, ChecksumAt::Field(3))?;
    let computed = checksum(&value)?;
    if let Some(also) = also_accepted
        && recorded != computed
        && recorded == also(&value)?
    {
        return verify(T::FORMAT, recorded, recorded).map(|check| (value, check));
    }
    let check = verify_unless_zero(T::FORMAT, recorded, computed)?;
    Ok((value, check))
}

impl CpuManagerCheckpoint {
    fn wire(&self, checksum: u64) -> Wire<'_, CpuEntries> {
        Wire {
            policy_name: &self.policy_name,
            default_cpu_set: &self.default_cpu_set,
            entries: &self.entries,
            checksum,
        }
    }

    /// The string upstream hashes: `dump.ForHash(&cp)` with `Checksum` 0.
    pub fn hash_input(&self) -> Result<String> {
        dump_for_hash(&self.wire(0), &V2_PTR)
    }

    /// Upstream's checksum of this value.
    pub fn checksum(&self) -> Result<u64> {
        kubelet_checksum(&self.wire(0), &V2_PTR)
    }

    /// Reads the logical value from Go-convention JSON, without verifying any checksum.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        from_go_json(bytes, &V2, Self::FORMAT)
    }

    /// The checksum of the dump under the type name `CPUManagerCheckpointV2`, which
    /// v1.36's v2 reader accepts too (with `PodLevelResourceManagers` off).
    fn checksum_v2_name(&self) -> Result<u64> {
        kubelet_checksum(&self.wire(0), &V2_NAMED_V2_PTR)
    }

    /// Decodes and verifies as v1.36's v2 reader: a recorded 0 is accepted unchecked, and
    /// the dump may name the type `CPUManagerCheckpoint` or `CPUManagerCheckpointV2`.
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        decode_checked(bytes, &V2, Self::checksum, Some(Self::checksum_v2_name))
    }
}

impl_checkpoint!(
    CpuManagerCheckpoint,
    Format::CpuManagerV2,
    encode(this) {
        marshal_file(&this.wire(this.checksum()?), &V2)
    },
    /// Reads as `GetCheckpoint(…, newCPUManagerCheckpointV2())`; a stored checksum of 0 is
    /// accepted without verification, as upstream does.
    decode
);

impl CpuManagerCheckpointV1 {
    fn wire(&self, checksum: u64) -> Wire<'_, BTreeMap<String, String>> {
        Wire {
            policy_name: &self.policy_name,
            default_cpu_set: &self.default_cpu_set,
            entries: &self.entries,
            checksum,
        }
    }

    /// The string the v1 reader hashes: the dump with the first `CPUManagerCheckpointV1`
    /// replaced by `CPUManagerCheckpoint`.
    pub fn hash_input(&self) -> Result<String> {
        let dump = dump_for_hash(&self.wire(0), &V1_PTR)?;
        // strings.Replace(…, 1).
        Ok(dump.replacen("CPUManagerCheckpointV1", "CPUManagerCheckpoint", 1))
    }

    /// The checksum the v1 reader accepts.
    pub fn checksum(&self) -> Result<u64> {
        Ok(fnv32a(self.hash_input()?.as_bytes()).into())
    }

    /// The string v1.32's `CPUManagerCheckpointV1.MarshalCheckpoint` hashes (no rename).
    pub fn v132_marshal_hash_input(&self) -> Result<String> {
        dump_for_hash(&self.wire(0), &V1_PTR)
    }

    /// What v1.32's `CPUManagerCheckpointV1.MarshalCheckpoint` writes — a file its own v1
    /// reader rejects (see the module docs). For compatibility tests only.
    pub fn encode_as_v132_marshal(&self) -> Result<Vec<u8>> {
        let checksum = u64::from(fnv32a(self.v132_marshal_hash_input()?.as_bytes()));
        marshal_file(&self.wire(checksum), &V1)
    }

    /// Reads the logical value from Go-convention JSON, without verifying any checksum.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        from_go_json(bytes, &V1, Self::FORMAT)
    }

    /// Decodes and verifies (a recorded 0 is accepted unchecked).
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        decode_checked(bytes, &V1, Self::checksum, None)
    }

    /// Migrates to v2 as upstream's `migrateV1CheckpointToV2Checkpoint`: each container id
    /// is resolved to `(pod UID, container name)` by `container_ref` (upstream asks the
    /// runtime's initial container list).
    pub fn to_current(
        &self,
        mut container_ref: impl FnMut(&str) -> Option<(String, String)>,
    ) -> Result<CpuManagerCheckpoint> {
        let mut entries = CpuEntries::new();
        for (container_id, cpus) in self.entries.iter().flatten() {
            let Some((pod, container)) = container_ref(container_id) else {
                return Err(CheckpointError::UnknownContainer {
                    container_id: container_id.clone(),
                });
            };
            entries
                .entry(pod)
                .or_insert_with(|| Some(BTreeMap::new()))
                .get_or_insert_with(BTreeMap::new)
                .insert(container, cpus.clone());
        }
        Ok(CpuManagerCheckpoint {
            policy_name: self.policy_name.clone(),
            default_cpu_set: self.default_cpu_set.clone(),
            entries: Some(entries),
        })
    }
}

impl_checkpoint!(
    CpuManagerCheckpointV1,
    Format::CpuManagerV1,
    /// Writes a v1 file the v1 reader accepts (the legacy kubelet's checksum rule).
    encode(this) {
        marshal_file(&this.wire(this.checksum()?), &V1)
    },
    /// Reads as `GetCheckpoint(…, newCPUManagerCheckpointV1())`; 0 is accepted.
    decode
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_example_dump() {
        // testdata/conformance/README.md: the CPU manager dump, checksum zeroed.
        let cp = CpuManagerCheckpoint {
            policy_name: "static".into(),
            default_cpu_set: "0-1,4-7".into(),
            entries: Some(BTreeMap::from([(
                "pod".into(),
                Some(BTreeMap::from([("container1".into(), "2-3".into())])),
            )])),
        };
        assert_eq!(
            cp.hash_input().unwrap(),
            "(*state.CPUManagerCheckpoint){PolicyName:(string)static DefaultCPUSet:(string)0-1,4-7 Entries:(map[string]map[string]string)map[pod:map[container1:2-3]] Checksum:(checksum.Checksum)0}"
        );
        let bytes = cp.encode().unwrap();
        assert_eq!(CpuManagerCheckpoint::decode(&bytes).unwrap(), cp);
    }

    #[test]
    fn zero_checksum_is_accepted() {
        let cp = CpuManagerCheckpoint::decode(
            br#"{"policyName":"none","defaultCpuSet":"","checksum":0}"#,
        )
        .unwrap();
        assert_eq!(cp.policy_name, "none");
    }

    #[test]
    fn v1_migrates_through_container_refs() {
        let v1 = CpuManagerCheckpointV1 {
            policy_name: "static".into(),
            default_cpu_set: "0".into(),
            entries: Some(BTreeMap::from([("cid".into(), "1-2".into())])),
        };
        let v2 = v1
            .to_current(|id| (id == "cid").then(|| ("pod".into(), "c".into())))
            .unwrap();
        assert_eq!(
            v2.entries,
            Some(BTreeMap::from([(
                "pod".into(),
                Some(BTreeMap::from([("c".into(), "1-2".into())]))
            )]))
        );
        assert!(matches!(
            v1.to_current(|_| None),
            Err(CheckpointError::UnknownContainer { .. })
        ));
    }
}
