//! Property tests: every format round-trips (decode ∘ encode = id for the values a kubelet
//! can write), any single-byte change of a file is either refused or decodes to a value
//! whose own encoding verifies — never a silently wrong checksum — and every checksum, which
//! streams the dump straight into its hasher, equals the hash of the dump's text.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use corral_checkpoint::formats::memorymanager::{MemoryTable, NumaNodeState};
use corral_checkpoint::{
    Block, Checkpoint, ClaimInfoState, ClaimInfoStateV130, CpuManagerCheckpoint,
    CpuManagerCheckpointV1, Device, DeviceManagerCheckpoint, DeviceManagerCheckpointV1,
    DraManagerCheckpoint, DraManagerCheckpointV130, DriverState, MemoryManagerCheckpoint,
    PodDevicesEntry, PodDevicesEntryV1, ResourceHandle, crc32_ieee, fnv32a,
};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9./-]{0,8}",
        any::<String>().prop_map(|s| s.chars().take(6).collect()),
        Just("<&>\u{2028}\"\\\n\u{0}".to_owned()),
    ]
}

fn strings() -> impl Strategy<Value = Option<Vec<String>>> {
    prop::option::of(prop::collection::vec(text(), 0..3))
}

fn string_map() -> impl Strategy<Value = Option<BTreeMap<String, Option<Vec<String>>>>> {
    prop::option::of(prop::collection::btree_map(text(), strings(), 0..3))
}

fn bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 0..12))
}

/// A strategy for a struct: every field drawn from its own strategy.
macro_rules! strategy {
    ($ty:ident { $($field:ident: $strategy:expr),* $(,)? }) => {
        ($($strategy,)*).prop_map(|($($field,)*)| $ty { $($field),* })
    };
}

/// `Some` of what `strategy` draws: a field the kubelet never leaves nil.
fn some<T: Debug>(strategy: impl Strategy<Value = T>) -> impl Strategy<Value = Option<T>> {
    strategy.prop_map(Some)
}

fn device_manager() -> impl Strategy<Value = DeviceManagerCheckpoint> {
    let entry = strategy!(PodDevicesEntry {
        pod_uid: text(),
        container_name: text(),
        resource_name: text(),
        device_ids: prop::option::of(prop::collection::btree_map(any::<i64>(), strings(), 0..3)),
        alloc_resp: bytes(),
    });
    strategy!(DeviceManagerCheckpoint {
        pod_device_entries: prop::option::of(prop::collection::vec(entry, 0..3)),
        registered_devices: string_map(),
    })
}

fn device_manager_v1() -> impl Strategy<Value = DeviceManagerCheckpointV1> {
    let entry = strategy!(PodDevicesEntryV1 {
        pod_uid: text(),
        container_name: text(),
        resource_name: text(),
        device_ids: strings(),
        alloc_resp: bytes(),
    });
    strategy!(DeviceManagerCheckpointV1 {
        pod_device_entries: prop::option::of(prop::collection::vec(entry, 0..3)),
        registered_devices: string_map(),
    })
}

fn cpu_v2() -> impl Strategy<Value = CpuManagerCheckpoint> {
    let containers = prop::option::of(prop::collection::btree_map(text(), text(), 0..3));
    // `entries` is `omitempty` and the kubelet reads into an empty map: it is never nil.
    strategy!(CpuManagerCheckpoint {
        policy_name: text(),
        default_cpu_set: text(),
        entries: some(prop::collection::btree_map(text(), containers, 0..3)),
    })
}

fn cpu_v1() -> impl Strategy<Value = CpuManagerCheckpointV1> {
    strategy!(CpuManagerCheckpointV1 {
        policy_name: text(),
        default_cpu_set: text(),
        entries: some(prop::collection::btree_map(text(), text(), 0..3)),
    })
}

fn memory_manager() -> impl Strategy<Value = MemoryManagerCheckpoint> {
    let table = strategy!(MemoryTable {
        total_mem_size: any::<u64>(),
        system_reserved: any::<u64>(),
        allocatable: any::<u64>(),
        reserved: any::<u64>(),
        free: any::<u64>(),
    });
    let node = strategy!(NumaNodeState {
        number_of_assignments: any::<i64>(),
        memory_map: prop::option::of(prop::collection::btree_map(
            text(),
            prop::option::of(table),
            0..3,
        )),
        cells: prop::option::of(prop::collection::vec(any::<i64>(), 0..3)),
    });
    let block = strategy!(Block {
        numa_affinity: prop::option::of(prop::collection::vec(any::<i64>(), 0..3)),
        resource: text(),
        size: any::<u64>(),
    });
    let containers = prop::option::of(prop::collection::btree_map(
        text(),
        prop::option::of(prop::collection::vec(block, 0..2)),
        0..3,
    ));
    strategy!(MemoryManagerCheckpoint {
        policy_name: text(),
        machine_state: prop::option::of(prop::collection::btree_map(
            any::<i64>(),
            prop::option::of(node),
            0..4,
        )),
        entries: some(prop::collection::btree_map(text(), containers, 0..3)),
    })
}

fn pod_uids() -> impl Strategy<Value = Option<BTreeSet<String>>> {
    prop::option::of(prop::collection::btree_set(text(), 0..3))
}

fn dra_v132() -> impl Strategy<Value = DraManagerCheckpoint> {
    let device = strategy!(Device {
        pool_name: text(),
        device_name: text(),
        share_id: prop::option::of(text()),
        request_names: strings(),
        cdi_device_ids: strings(),
    });
    let driver_state = strategy!(DriverState {
        devices: prop::option::of(prop::collection::vec(device, 0..2)),
    });
    let claim = strategy!(ClaimInfoState {
        claim_uid: text(),
        claim_name: text(),
        namespace: text(),
        pod_uids: pod_uids(),
        driver_state: prop::option::of(prop::collection::btree_map(text(), driver_state, 0..2)),
    });
    strategy!(DraManagerCheckpoint {
        claim_info_state_list: prop::option::of(prop::collection::vec(claim, 0..3)),
    })
}

fn dra_v130() -> impl Strategy<Value = DraManagerCheckpointV130> {
    let handle = strategy!(ResourceHandle {
        driver_name: text(),
        data: text(),
        structured_data: Just(None),
    });
    let claim = strategy!(ClaimInfoStateV130 {
        driver_name: text(),
        class_name: text(),
        claim_uid: text(),
        claim_name: text(),
        namespace: text(),
        pod_uids: pod_uids(),
        resource_handles: prop::option::of(prop::collection::vec(handle, 0..2)),
        cdi_devices: string_map(),
    });
    // `entries` is `omitempty` and read into an empty list: never nil in a kubelet's files.
    strategy!(DraManagerCheckpointV130 {
        version: text(),
        entries: some(prop::collection::vec(claim, 0..3)),
    })
}

fn round_trips<T: Checkpoint + PartialEq + Debug>(value: &T) -> Result<(), TestCaseError> {
    let bytes = value
        .encode()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back = T::decode(&bytes)
        .map_err(|e| TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&bytes))))?;
    prop_assert_eq!(&back, value);
    Ok(())
}

fn mutation_is_refused_or_consistent<T: Checkpoint + PartialEq + Debug>(
    value: &T,
    at: prop::sample::Index,
    byte: u8,
) -> Result<(), TestCaseError> {
    let mut bytes = value
        .encode()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let i = at.index(bytes.len());
    bytes[i] = byte;
    if let Ok(decoded) = T::decode(&bytes) {
        let again = decoded
            .encode()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let reread = T::decode(&again);
        prop_assert!(
            reread.is_ok(),
            "re-encoding of an accepted mutation does not verify: {:?}",
            reread.err()
        );
    }
    Ok(())
}

/// `checksum` (computed without materialising the dump) is the hash of `hash_input`.
fn streams_like_text(
    checksum: corral_checkpoint::Result<u64>,
    hash_input: corral_checkpoint::Result<String>,
    hash: fn(&[u8]) -> u32,
) -> Result<(), TestCaseError> {
    let fail = |e: corral_checkpoint::CheckpointError| TestCaseError::fail(e.to_string());
    let text = hash_input.map_err(fail)?;
    prop_assert_eq!(
        checksum.map_err(fail)?,
        u64::from(hash(text.as_bytes())),
        "{}",
        text
    );
    Ok(())
}

/// For each format: its checksum streams like the hash of its text, it round-trips, and a
/// mutated file is refused or consistent — three tests, each named after the format.
macro_rules! format_properties {
    ($(
        $strategy:ident: $streams:ident, $round_trips:ident, $mutations:ident;
        checksum |$v:ident| $checksum:expr, $hash:expr;
    )*) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
            $(
                #[test]
                fn $streams($v in $strategy()) {
                    streams_like_text($checksum, $v.hash_input(), $hash)?;
                }
                #[test]
                fn $round_trips(v in $strategy()) {
                    round_trips(&v)?;
                }
                #[test]
                fn $mutations(
                    v in $strategy(),
                    at in any::<prop::sample::Index>(),
                    b in any::<u8>(),
                ) {
                    mutation_is_refused_or_consistent(&v, at, b)?;
                }
            )*
        }
    };
}

format_properties! {
    device_manager: device_manager_checksum_streams, device_manager_round_trips,
        device_manager_mutations;
        checksum |v| v.checksum(), fnv32a;
    device_manager_v1: device_manager_v1_checksum_streams, device_manager_v1_round_trips,
        device_manager_v1_mutations;
        checksum |v| v.checksum(), fnv32a;
    cpu_v2: cpu_v2_checksum_streams, cpu_v2_round_trips, cpu_v2_mutations;
        checksum |v| v.checksum(), fnv32a;
    cpu_v1: cpu_v1_checksum_streams, cpu_v1_round_trips, cpu_v1_mutations;
        checksum |v| v.checksum(), fnv32a;
    memory_manager: memory_manager_checksum_streams, memory_manager_round_trips,
        memory_manager_mutations;
        checksum |v| v.checksum(), fnv32a;
    dra_v132: dra_v132_checksum_streams, dra_v132_round_trips, dra_v132_mutations;
        checksum |v| v.checksum().map(u64::from), crc32_ieee;
    dra_v130: dra_v130_checksum_streams, dra_v130_round_trips, dra_v130_mutations;
        checksum |v| v.checksum(), fnv32a;
}
