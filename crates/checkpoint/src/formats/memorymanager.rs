//! Memory manager checkpoint `memory_manager_state`
//! (`pkg/kubelet/cm/memorymanager/state/checkpoint.go`): checksum of `dump.ForHash(&cp)`
//! with `Checksum` zeroed and — unlike the CPU manager — no acceptance of a zero checksum in
//! v1.32 (`decode`); v1.36's v1 reader accepts one unchecked (`decode_v136`, `inspect`).
//!
//! `machineState` maps NUMA ids to *pointers*, so a nil node prints `<nil>` in the dump and,
//! being a nil pointer, leaves go-spew's "ignore next type" flag set: when the numerically
//! last node is nil, the `Entries` field that follows prints without its type. The dumper
//! reproduces that.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ChecksumVerification;
use super::{
    Checkpoint, ChecksumAt, ChecksumCheck, from_go_json, go_struct, impl_checkpoint, marshal_file,
    read_file, verify, verify_unless_zero,
};
use crate::checksum::kubelet_checksum;
use crate::error::Result;
use crate::format::Format;
use crate::gojson::value::GoValue;
use crate::gotype::{CHECKSUM, GoField, GoStruct, GoType, INT, INT_SLICE, STRING, UINT64};
use crate::spew::dump_for_hash;

go_struct! {
    /// Memory of one type on one NUMA node (`state.MemoryTable`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct MemoryTable in static MEMORY_TABLE = "state.MemoryTable" {
        /// Total bytes.
        pub total_mem_size: u64 => "total" as "TotalMemSize" = &UINT64,
        /// Bytes reserved for the system.
        pub system_reserved: u64 => "systemReserved" as "SystemReserved" = &UINT64,
        /// Allocatable bytes.
        pub allocatable: u64 => "allocatable" as "Allocatable" = &UINT64,
        /// Bytes assigned to containers.
        pub reserved: u64 => "reserved" as "Reserved" = &UINT64,
        /// Bytes still free.
        pub free: u64 => "free" as "Free" = &UINT64,
    }
}

go_struct! {
    /// One NUMA node's memory state (`state.NUMANodeState`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct NumaNodeState in static NUMA_NODE_STATE = "state.NUMANodeState" {
        /// Memory assignments from this node.
        pub number_of_assignments: i64 => "numberOfAssignments" as "NumberOfAssignments" = &INT,
        /// Memory per resource name (`memory`, `hugepages-2Mi`, …); values are pointers.
        pub memory_map: Option<BTreeMap<String, Option<MemoryTable>>> => "memoryMap"
            as "MemoryMap" = &GoType::Map(&RESOURCE_NAME, &GoType::Ptr(&MEMORY_TABLE)),
        /// The NUMA nodes grouped with this one.
        pub cells: Option<Vec<i64>> => "cells" as "Cells" = &INT_SLICE,
    }
}

go_struct! {
    /// A memory block assigned to a container (`state.Block`).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Block in pub(crate) static BLOCK = "state.Block" {
        /// NUMA nodes of the block.
        pub numa_affinity: Option<Vec<i64>> => "numaAffinity" as "NUMAAffinity" = &INT_SLICE,
        /// Resource name (`v1.ResourceName`).
        pub resource: String => "type" as "Type" = &RESOURCE_NAME,
        /// Bytes.
        pub size: u64 => "size" as "Size" = &UINT64,
    }
}

/// NUMA id → node state (`state.NUMANodeMap`, values are pointers).
pub type NumaNodeMap = BTreeMap<i64, Option<NumaNodeState>>;

/// Pod UID → container name → blocks (`state.ContainerMemoryAssignments`).
pub type ContainerMemoryAssignments =
    BTreeMap<String, Option<BTreeMap<String, Option<Vec<Block>>>>>;

/// The memory manager's checkpoint (`state.MemoryManagerCheckpoint`, without its checksum).
///
/// # Example
///
/// ```
/// use corral_checkpoint::{Checkpoint, MemoryManagerCheckpoint};
///
/// use corral_checkpoint::CheckpointError;
///
/// // Conformance vector `memorymanager/random_05`: a v1.32 kubelet's bytes.
/// let kubelet = br#"{"policyName":"Static","machineState":null,"entries":{"3198f970-e588-dec6-483d-7f0b041700aa":{},"596f9873-e6de-f26d-d365-a3ecdf9b4fa4":{"h8hbhli":[{"numaAffinity":[2],"type":"memory","size":6124988922},{"numaAffinity":[3],"type":"hugepages-2Mi","size":2131735295}]}},"checksum":2681773060}"#;
/// let state = MemoryManagerCheckpoint::decode(kubelet)?;
/// let pod = state.entries.as_ref().unwrap()["596f9873-e6de-f26d-d365-a3ecdf9b4fa4"].as_ref().unwrap();
/// let blocks = pod["h8hbhli"].as_deref().unwrap();
/// assert_eq!((blocks[1].resource.as_str(), blocks[1].size), ("hugepages-2Mi", 2131735295));
/// assert_eq!(state.encode()?, kubelet);
///
/// // `memorymanager/nil_maps`: written from nil maps, the kubelet's own reader refuses it
/// // (it reads into empty maps, whose dump differs) and names the same two checksums.
/// let nil_maps = br#"{"policyName":"Static","machineState":null,"checksum":2701266525}"#;
/// match MemoryManagerCheckpoint::decode(nil_maps) {
///     Err(CheckpointError::ChecksumMismatch { expected: 2701266525, actual: 3824511554, .. }) => {}
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryManagerCheckpoint {
    /// `None` or `Static`.
    #[serde(rename = "policyName")]
    pub policy_name: String,
    /// Per-NUMA-node memory state.
    #[serde(rename = "machineState")]
    pub machine_state: Option<NumaNodeMap>,
    /// Assignments (omitted from the file when empty).
    #[serde(rename = "entries")]
    pub entries: Option<ContainerMemoryAssignments>,
}

pub(crate) static RESOURCE_NAME: GoType = GoType::Named("v1.ResourceName", &STRING);

pub(crate) static NUMA_NODE_MAP: GoType = GoType::Named(
    "state.NUMANodeMap",
    &GoType::Map(&INT, &GoType::Ptr(&NUMA_NODE_STATE)),
);

pub(crate) static ASSIGNMENTS: GoType = GoType::Named(
    "state.ContainerMemoryAssignments",
    &GoType::Map(&STRING, &GoType::Map(&STRING, &GoType::Slice(&BLOCK))),
);

/// The v1 struct under the Go type name `name`.
macro_rules! v1_struct {
    ($name:literal) => {
        GoType::Struct(&GoStruct {
            name: $name,
            fields: &[
                GoField::tagged("PolicyName", "policyName", &STRING),
                GoField::tagged("MachineState", "machineState", &NUMA_NODE_MAP),
                GoField::omitempty("Entries", "entries", &ASSIGNMENTS),
                GoField::tagged("Checksum", "checksum", &CHECKSUM),
            ],
        })
    };
}

static CHECKPOINT: GoType = v1_struct!("state.MemoryManagerCheckpoint");
/// The name v1.36 gives v1 (`MemoryManagerCheckpointV1`), whose dump its reader accepts too.
static CHECKPOINT_V1_PTR: GoType = GoType::Ptr(&v1_struct!("state.MemoryManagerCheckpointV1"));
static CHECKPOINT_PTR: GoType = GoType::Ptr(&CHECKPOINT);

#[derive(Serialize)]
struct Wire<'a> {
    #[serde(rename = "policyName")]
    policy_name: &'a str,
    #[serde(rename = "machineState")]
    machine_state: &'a Option<NumaNodeMap>,
    #[serde(rename = "entries")]
    entries: &'a Option<ContainerMemoryAssignments>,
    #[serde(rename = "checksum")]
    checksum: u64,
}

impl MemoryManagerCheckpoint {
    fn wire(&self, checksum: u64) -> Wire<'_> {
        Wire {
            policy_name: &self.policy_name,
            machine_state: &self.machine_state,
            entries: &self.entries,
            checksum,
        }
    }

    /// The string upstream hashes: `dump.ForHash(&mp)` with `Checksum` 0.
    pub fn hash_input(&self) -> Result<String> {
        dump_for_hash(&self.wire(0), &CHECKPOINT_PTR)
    }

    /// Upstream's checksum of this value.
    pub fn checksum(&self) -> Result<u64> {
        kubelet_checksum(&self.wire(0), &CHECKPOINT_PTR)
    }

    /// Reads the logical value from Go-convention JSON, without verifying any checksum.
    pub fn from_go_json(bytes: &[u8]) -> Result<Self> {
        from_go_json(bytes, &CHECKPOINT, Self::FORMAT)
    }

    /// Decodes and verifies as v1.36's v1 reader (`MemoryManagerCheckpointV1`): the
    /// checksum of the dump under the type name `MemoryManagerCheckpoint`, or under
    /// `MemoryManagerCheckpointV1` (what v1.36 builds before PR #137751 wrote), is
    /// verified; a recorded 0 is accepted unchecked. This is what `inspect` reports;
    /// [`Checkpoint::decode`] is v1.32's reader, which takes the same verified files and
    /// refuses the 0 (upstream's `VerifyChecksum` there has no zero bypass).
    pub(crate) fn decode_checked(bytes: &[u8]) -> Result<(Self, ChecksumCheck)> {
        let (value, recorded) = Self::read(bytes)?;
        let computed = value.checksum()?;
        if recorded != computed
            && recorded != 0
            && recorded == kubelet_checksum(&value.wire(0), &CHECKPOINT_V1_PTR)?
        {
            // Verified under the other type name, as the CPU manager's v2 reader does.
            return verify(Self::FORMAT, recorded, recorded).map(|check| (value, check));
        }
        let check = verify_unless_zero(Self::FORMAT, recorded, computed)?;
        Ok((value, check))
    }

    /// Decodes and verifies as v1.36's v1 reader (`MemoryManagerCheckpointV1`): the same
    /// decision as `inspect`'s (see `decode_checked`), a recorded 0 accepted unchecked.
    pub fn decode_v136(bytes: &[u8]) -> Result<(Self, ChecksumVerification)> {
        Self::decode_checked(bytes).map(|(value, check)| (value, check.verification))
    }

    /// The file as `NewMemoryManagerCheckpoint()` filled by `json.Unmarshal`, and the
    /// checksum it records.
    fn read(bytes: &[u8]) -> Result<(Self, u64)> {
        // NewMemoryManagerCheckpoint: empty (non-nil) Entries and MachineState.
        let initial = GoValue::Struct(vec![
            GoValue::Str(String::new()),
            GoValue::empty(&NUMA_NODE_MAP),
            GoValue::empty(&ASSIGNMENTS),
            GoValue::Uint(0),
        ]);
        read_file(
            bytes,
            &CHECKPOINT,
            initial,
            Self::FORMAT,
            &CHECKPOINT,
            ChecksumAt::Field(3),
        )
    }
}

impl_checkpoint!(
    MemoryManagerCheckpoint,
    Format::MemoryManager,
    encode(this) {
        marshal_file(&this.wire(this.checksum()?), &CHECKPOINT)
    },
    /// Reads as v1.32's `GetCheckpoint(…, NewMemoryManagerCheckpoint())`: a recorded 0 is
    /// refused. One addition: the checksum of the dump under `MemoryManagerCheckpointV1`
    /// (written by v1.36 builds before PR #137751, which v1.36 reads) verifies too, so
    /// every file `inspect` calls verified decodes.
    decode
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nil_last_node_drops_the_entries_type() {
        // Vector memorymanager/numa_key_order_numeric: node 10 (last numerically) is nil.
        let cp = MemoryManagerCheckpoint {
            policy_name: "Static".into(),
            machine_state: Some(BTreeMap::from([
                (
                    0,
                    Some(NumaNodeState {
                        number_of_assignments: 0,
                        memory_map: Some(BTreeMap::new()),
                        cells: Some(vec![]),
                    }),
                ),
                (1, None),
                (10, None),
                (2, Some(NumaNodeState::default())),
            ])),
            entries: Some(BTreeMap::from([(
                "p".into(),
                Some(BTreeMap::from([
                    ("b".into(), Some(vec![])),
                    ("c".into(), None),
                ])),
            )])),
        };
        assert_eq!(
            cp.hash_input().unwrap(),
            "(*state.MemoryManagerCheckpoint){PolicyName:(string)Static MachineState:(state.NUMANodeMap)map[0:<*>{NumberOfAssignments:(int)0 MemoryMap:(map[v1.ResourceName]*state.MemoryTable)map[] Cells:([]int)[]} 1:<nil> 2:<*>{NumberOfAssignments:(int)0 MemoryMap:(map[v1.ResourceName]*state.MemoryTable)<nil> Cells:([]int)<nil>} 10:<nil>] Entries:map[p:map[b:[] c:<nil>]] Checksum:(checksum.Checksum)0}"
        );
        assert_eq!(cp.checksum().unwrap(), 1_312_001_569);
        assert_eq!(
            String::from_utf8(cp.encode().unwrap()).unwrap(),
            r#"{"policyName":"Static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{},"cells":[]},"1":null,"10":null,"2":{"numberOfAssignments":0,"memoryMap":null,"cells":null}},"entries":{"p":{"b":[],"c":null}},"checksum":1312001569}"#
        );
    }

    #[test]
    fn zero_checksum_is_not_accepted() {
        let err = MemoryManagerCheckpoint::decode(
            br#"{"policyName":"None","machineState":{},"checksum":0}"#,
        )
        .unwrap_err();
        assert!(err.is_checksum_mismatch(), "{err}");
    }
}
