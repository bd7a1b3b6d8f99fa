//! Memory manager checkpoint `memory_manager_state` with pod entries: v2 (v1.36, written
//! while `PodLevelResourceManagers` is on) and v3 (v1.37: the content as a JSON `data`
//! string and its own checksum).
//!
//! **v2** (`state.MemoryManagerCheckpoint` of v1.36, `MemoryManagerCheckpointV2` of v1.37)
//! is v1 plus `podEntries`: pod UID → `{"memoryBlocks": [...]}`. Its checksum hashes the
//! dump under the type name `MemoryManagerCheckpoint`, in both releases; a recorded 0 is
//! not accepted. A v1 reader refuses a v2 file (the dump differs by the pod entries field),
//! which is the documented v1.36 downgrade hazard.
//!
//! **v3** (`MemoryManagerCheckpointV3`, k8s 1.37) writes the v1 fields at the top level for
//! older readers, with v1's checksum over them (so a v1.36 kubelet with the gate off still
//! reads it, minus the pod entries), then `data` — the v2 content without a checksum, as a
//! JSON string — and `dataChecksum`, the kubelet checksum of that string. Only `data` and
//! `dataChecksum` are read back; the top-level copy must still decode.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::data_string::{
    CHECKSUM_FIELD, DATA_CHECKSUM_FIELD, DATA_FIELD, DataFormat, data_checksum,
    data_checksum_methods,
};
use super::memorymanager::{
    ASSIGNMENTS, BLOCK, Block, ContainerMemoryAssignments, MemoryManagerCheckpoint, NUMA_NODE_MAP,
    NumaNodeMap,
};
use super::{
    Checkpoint, ChecksumAt, ChecksumCheck, from_go_json, go_struct, impl_checkpoint, marshal_file,
    read_file, verify,
};
use crate::checksum::kubelet_checksum;
use crate::error::Result;
use crate::format::Format;
use crate::gojson::{self, value::GoValue};
use crate::gotype::{GoField, GoStruct, GoType, STRING};

go_struct! {
    /// A pod's pod-level memory (`state.PodEntry`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PodMemoryEntry in static POD_ENTRY = "state.PodEntry" {
        /// The pod's memory blocks (omitted from the file when empty).
        pub memory_blocks: Option<Vec<Block>> => omitempty "memoryBlocks" as "MemoryBlocks"
            = &GoType::Slice(&BLOCK),
    }
}

/// Pod UID → pod-level memory (`state.PodMemoryAssignments`).
pub type PodMemoryEntries = BTreeMap<String, PodMemoryEntry>;

/// The memory manager's checkpoint v2 (without its checksum): v1 plus pod entries.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{Checkpoint, MemoryManagerCheckpoint, MemoryManagerCheckpointV2};
///
/// // Conformance vector `memorymanager_v2/upstream_restore_test_pod_entries` (v1.36's bytes).
/// let kubelet = br#"{"policyName":"static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},"podEntries":{"pod":{"memoryBlocks":[{"numaAffinity":[0],"type":"memory","size":512}]}},"checksum":1278640530}"#;
/// let state = MemoryManagerCheckpointV2::decode(kubelet)?;
/// let pod = &state.pod_entries.as_ref().unwrap()["pod"];
/// assert_eq!(pod.memory_blocks.as_ref().unwrap()[0].size, 512);
/// assert_eq!(state.encode()?, kubelet);
/// // A v1 reader refuses it: v1.36's documented downgrade hazard.
/// assert!(MemoryManagerCheckpoint::decode(kubelet).unwrap_err().is_checksum_mismatch());
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryManagerCheckpointV2 {
    /// `None` or `Static`.
    #[serde(rename = "policyName")]
    pub policy_name: String,
    /// Per-NUMA-node memory state.
    #[serde(rename = "machineState")]
    pub machine_state: Option<NumaNodeMap>,
    /// Container assignments (omitted from the file when empty).
    #[serde(rename = "entries")]
    pub entries: Option<ContainerMemoryAssignments>,
    /// Pod-level assignments (omitted from the file when empty).
    #[serde(rename = "podEntries")]
    pub pod_entries: Option<PodMemoryEntries>,
}

/// The memory manager's checkpoint v3 (k8s 1.37): the v2 content, stored as `data`.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{Checkpoint, MemoryManagerCheckpointV3};
///
/// // Conformance vector `memorymanager_v3/none_empty`: v1.37's bytes, v1's checksum at the
/// // top level and the `data` string's own.
/// let kubelet = br#"{"policyName":"None","machineState":{},"checksum":4236770233,"data":"{\"policyName\":\"None\",\"machineState\":{}}","dataChecksum":3093843326}"#;
/// let state = MemoryManagerCheckpointV3::decode(kubelet)?;
/// assert_eq!(state.data()?, r#"{"policyName":"None","machineState":{}}"#);
/// assert_eq!(state.encode()?, kubelet);
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryManagerCheckpointV3(pub MemoryManagerCheckpointV2);

static PODS: GoType = GoType::Named(
    "state.PodMemoryAssignments",
    &GoType::Map(&STRING, &POD_ENTRY),
);

/// The struct `$name`: the v1 content, then `$tail`.
macro_rules! memory_struct {
    ($name:literal $(, $tail:expr)*) => {
        GoType::Struct(&GoStruct {
            name: $name,
            fields: &[
                GoField::tagged("PolicyName", "policyName", &STRING),
                GoField::tagged("MachineState", "machineState", &NUMA_NODE_MAP),
                GoField::omitempty("Entries", "entries", &ASSIGNMENTS),
                $($tail),*
            ],
        })
    };
}

/// `PodEntries` of v2 and of v3's data.
const POD_ENTRIES_FIELD: GoField = GoField::omitempty("PodEntries", "podEntries", &PODS);

static V2: GoType = memory_struct!(
    "state.MemoryManagerCheckpoint",
    POD_ENTRIES_FIELD,
    CHECKSUM_FIELD
);
static V2_PTR: GoType = GoType::Ptr(&V2);

static V3_DATA: GoType = memory_struct!("state.MemoryManagerCheckpointData", POD_ENTRIES_FIELD);

/// The v3 file and its `data`.
static V3: DataFormat = DataFormat {
    format: Format::MemoryManagerV3,
    file: &V3_FILE,
    data_index: 4,
    content: &V3_DATA,
};

static V3_FILE: GoType = memory_struct!(
    "state.MemoryManagerCheckpoint",
    CHECKSUM_FIELD,
    DATA_FIELD,
    DATA_CHECKSUM_FIELD
);

/// Any of the structs above, field by field; `None` fields are not serialized.
#[derive(Serialize)]
struct Wire<'a> {
    #[serde(rename = "policyName")]
    policy_name: &'a str,
    #[serde(rename = "machineState")]
    machine_state: &'a Option<NumaNodeMap>,
    #[serde(rename = "entries")]
    entries: &'a Option<ContainerMemoryAssignments>,
    #[serde(rename = "podEntries", skip_serializing_if = "Option::is_none")]
    pod_entries: Option<&'a Option<PodMemoryEntries>>,
    #[serde(rename = "checksum", skip_serializing_if = "Option::is_none")]
    checksum: Option<u64>,
    #[serde(rename = "data", skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(rename = "dataChecksum", skip_serializing_if = "Option::is_none")]
    data_checksum: Option<u64>,
}

impl MemoryManagerCheckpointV2 {
    fn wire(&self, checksum: Option<u64>) -> Wire<'_> {
        Wire {
            policy_name: &self.policy_name,
            machine_state: &self.machine_state,
            entries: &self.entries,
            pod_entries: Some(&self.pod_entries),
            checksum,
            data: None,
            data_checksum: None,
        }
    }

    /// The string upstream hashes: `dump.ForHash(&mp)` with `Checksum` 0.
    pub fn hash_input(&self) -> Result<String> {
        crate::spew::dump_for_hash(&self.wire(Some(0)), &V2_PTR)
    }

    /// Upstream's checksum of this value.
    pub fn checksum(&self) -> Result<u64> {
        kubelet_checksum(&self.wire(Some(0)), &V2_PTR)
    }

    /// Reads the logical value from Go-convention JSON, without verifying any checksum.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        from_go_json(bytes, &V3_DATA, Self::FORMAT)
    }

    /// The v1 part (what a reader without pod entries sees).
    pub fn without_pod_entries(&self) -> MemoryManagerCheckpoint {
        MemoryManagerCheckpoint {
            policy_name: self.policy_name.clone(),
            machine_state: self.machine_state.clone(),
            entries: self.entries.clone(),
        }
    }

    /// Decodes and verifies as `GetCheckpoint(…, newMemoryManagerCheckpointV2())`.
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        let initial = GoValue::Struct(vec![
            GoValue::Str(String::new()),
            GoValue::empty(&NUMA_NODE_MAP),
            GoValue::empty(&ASSIGNMENTS),
            GoValue::empty(&PODS),
            GoValue::Uint(0),
        ]);
        let (value, recorded): (Self, _) =
            read_file(bytes, &V2, initial, Self::FORMAT, &V2, ChecksumAt::Field(4))?;
        let check = verify(Self::FORMAT, recorded, value.checksum()?)?;
        Ok((value, check))
    }
}

impl_checkpoint!(
    MemoryManagerCheckpointV2,
    Format::MemoryManagerV2,
    encode(this) {
        marshal_file(&this.wire(Some(this.checksum()?)), &V2)
    }
);

impl MemoryManagerCheckpointV3 {
    /// The `data` string: `json.Marshal(CheckpointData)`.
    pub fn data(&self) -> Result<String> {
        gojson::marshal(&self.0.wire(None), &V3_DATA)
    }

    data_checksum_methods!(V3);

    /// Reads the logical value (the v2 content) from Go-convention JSON.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        MemoryManagerCheckpointV2::from_go_json(bytes).map(MemoryManagerCheckpointV3)
    }

    /// Decodes as v1.37's v3 reader (`newMemoryManagerCheckpointV3` then `GetCheckpoint`).
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        let initial = GoValue::Struct(vec![
            GoValue::Str(String::new()),
            GoValue::empty(&NUMA_NODE_MAP),
            GoValue::empty(&ASSIGNMENTS),
            GoValue::empty(&PODS),
        ]);
        let (content, check) = V3.decode(bytes, initial)?;
        Ok((MemoryManagerCheckpointV3(content), check))
    }
}

impl_checkpoint!(
    MemoryManagerCheckpointV3,
    Format::MemoryManagerV3,
    /// Writes what v1.37 writes: the v1 fields with v1's checksum, `data` and
    /// `dataChecksum`.
    encode(this) {
        let data = this.data()?;
        let data_checksum = data_checksum(&data)?;
        let mut wire = this.0.wire(Some(this.0.without_pod_entries().checksum()?));
        wire.pod_entries = None;
        wire.data = Some(&data);
        wire.data_checksum = Some(data_checksum);
        marshal_file(&wire, &V3_FILE)
    },
    /// Reads as v1.37's `GetCheckpoint(…, newMemoryManagerCheckpointV3())`.
    decode
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::memorymanager::{MemoryTable, NumaNodeState};

    /// The state of upstream's `TestCheckpointStateRestore` (v1.36 and v1.37).
    fn upstream_state(pod: bool) -> MemoryManagerCheckpointV2 {
        let block = Block {
            numa_affinity: Some(vec![0]),
            resource: "memory".into(),
            size: 512,
        };
        MemoryManagerCheckpointV2 {
            policy_name: "static".into(),
            machine_state: Some(BTreeMap::from([(
                0,
                Some(NumaNodeState {
                    number_of_assignments: 0,
                    memory_map: Some(BTreeMap::from([(
                        "memory".into(),
                        Some(MemoryTable {
                            total_mem_size: 2048,
                            system_reserved: 512,
                            allocatable: 1536,
                            reserved: 512,
                            free: 1024,
                        }),
                    )])),
                    cells: Some(vec![]),
                }),
            )])),
            entries: Some(BTreeMap::from([(
                "pod".into(),
                Some(BTreeMap::from([(
                    "container1".into(),
                    Some(vec![block.clone()]),
                )])),
            )])),
            pod_entries: pod.then(|| {
                BTreeMap::from([(
                    "pod".into(),
                    PodMemoryEntry {
                        memory_blocks: Some(vec![block]),
                    },
                )])
            }),
        }
    }

    #[test]
    fn checksums_of_upstreams_own_test_files() {
        // TestCheckpointStateRestore (v1.36): v1 4215593881, v2 1278640530; (v1.37) the v3
        // file's dataChecksum 1849615440.
        assert_eq!(
            upstream_state(false)
                .without_pod_entries()
                .checksum()
                .unwrap(),
            4_215_593_881
        );
        assert_eq!(upstream_state(true).checksum().unwrap(), 1_278_640_530);
        assert_eq!(
            MemoryManagerCheckpointV3(upstream_state(false))
                .checksum()
                .unwrap(),
            1_849_615_440
        );
    }

    #[test]
    fn v3_round_trips() {
        let cp = MemoryManagerCheckpointV3(upstream_state(true));
        let file = cp.encode().unwrap();
        assert_eq!(MemoryManagerCheckpointV3::decode(&file).unwrap(), cp);
        // A v1.36 kubelet with the gate off reads the top level as v1.
        let v1 = MemoryManagerCheckpoint::decode(&file).unwrap();
        assert_eq!(v1, cp.0.without_pod_entries());
    }
}
