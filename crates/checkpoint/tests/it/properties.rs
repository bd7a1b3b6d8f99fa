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

fn device_manager() -> impl Strategy<Value = DeviceManagerCheckpoint> {
    let entry = (
        text(),
        text(),
        text(),
        prop::option::of(prop::collection::btree_map(any::<i64>(), strings(), 0..3)),
        bytes(),
    )
        .prop_map(
            |(pod_uid, container_name, resource_name, device_ids, alloc_resp)| PodDevicesEntry {
                pod_uid,
                container_name,
                resource_name,
                device_ids,
                alloc_resp,
            },
        );
    (
        prop::option::of(prop::collection::vec(entry, 0..3)),
        string_map(),
    )
        .prop_map(
            |(pod_device_entries, registered_devices)| DeviceManagerCheckpoint {
                pod_device_entries,
                registered_devices,
            },
        )
}

fn device_manager_v1() -> impl Strategy<Value = DeviceManagerCheckpointV1> {
    let entry = (text(), text(), text(), strings(), bytes()).prop_map(
        |(pod_uid, container_name, resource_name, device_ids, alloc_resp)| PodDevicesEntryV1 {
            pod_uid,
            container_name,
            resource_name,
            device_ids,
            alloc_resp,
        },
    );
    (
        prop::option::of(prop::collection::vec(entry, 0..3)),
        string_map(),
    )
        .prop_map(
            |(pod_device_entries, registered_devices)| DeviceManagerCheckpointV1 {
                pod_device_entries,
                registered_devices,
            },
        )
}

fn cpu_v2() -> impl Strategy<Value = CpuManagerCheckpoint> {
    let containers = prop::option::of(prop::collection::btree_map(text(), text(), 0..3));
    // `entries` is `omitempty` and the kubelet reads into an empty map: it is never nil.
    (
        text(),
        text(),
        prop::collection::btree_map(text(), containers, 0..3),
    )
        .prop_map(
            |(policy_name, default_cpu_set, entries)| CpuManagerCheckpoint {
                policy_name,
                default_cpu_set,
                entries: Some(entries),
            },
        )
}

fn cpu_v1() -> impl Strategy<Value = CpuManagerCheckpointV1> {
    (
        text(),
        text(),
        prop::collection::btree_map(text(), text(), 0..3),
    )
        .prop_map(
            |(policy_name, default_cpu_set, entries)| CpuManagerCheckpointV1 {
                policy_name,
                default_cpu_set,
                entries: Some(entries),
            },
        )
}

fn memory_manager() -> impl Strategy<Value = MemoryManagerCheckpoint> {
    let table = (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(a, b, c, d, e)| MemoryTable {
            total_mem_size: a,
            system_reserved: b,
            allocatable: c,
            reserved: d,
            free: e,
        });
    let node = (
        any::<i64>(),
        prop::option::of(prop::collection::btree_map(
            text(),
            prop::option::of(table),
            0..3,
        )),
        prop::option::of(prop::collection::vec(any::<i64>(), 0..3)),
    )
        .prop_map(|(number_of_assignments, memory_map, cells)| NumaNodeState {
            number_of_assignments,
            memory_map,
            cells,
        });
    let block = (
        prop::option::of(prop::collection::vec(any::<i64>(), 0..3)),
        text(),
        any::<u64>(),
    )
        .prop_map(|(numa_affinity, resource, size)| Block {
            numa_affinity,
            resource,
            size,
        });
    let containers = prop::option::of(prop::collection::btree_map(
        text(),
        prop::option::of(prop::collection::vec(block, 0..2)),
        0..3,
    ));
    (
        text(),
        prop::option::of(prop::collection::btree_map(
            any::<i64>(),
            prop::option::of(node),
            0..4,
        )),
        prop::collection::btree_map(text(), containers, 0..3),
    )
        .prop_map(
            |(policy_name, machine_state, entries)| MemoryManagerCheckpoint {
                policy_name,
                machine_state,
                entries: Some(entries),
            },
        )
}

fn pod_uids() -> impl Strategy<Value = Option<BTreeSet<String>>> {
    prop::option::of(prop::collection::btree_set(text(), 0..3))
}

fn dra_v132() -> impl Strategy<Value = DraManagerCheckpoint> {
    let device = (text(), text(), strings(), strings()).prop_map(
        |(pool_name, device_name, request_names, cdi_device_ids)| Device {
            pool_name,
            device_name,
            request_names,
            cdi_device_ids,
        },
    );
    let driver_state = prop::option::of(prop::collection::vec(device, 0..2))
        .prop_map(|devices| DriverState { devices });
    let claim = (
        text(),
        text(),
        text(),
        pod_uids(),
        prop::option::of(prop::collection::btree_map(text(), driver_state, 0..2)),
    )
        .prop_map(
            |(claim_uid, claim_name, namespace, pod_uids, driver_state)| ClaimInfoState {
                claim_uid,
                claim_name,
                namespace,
                pod_uids,
                driver_state,
            },
        );
    prop::option::of(prop::collection::vec(claim, 0..3)).prop_map(|claim_info_state_list| {
        DraManagerCheckpoint {
            claim_info_state_list,
        }
    })
}

fn dra_v130() -> impl Strategy<Value = DraManagerCheckpointV130> {
    let handle = (text(), text()).prop_map(|(driver_name, data)| ResourceHandle {
        driver_name,
        data,
        structured_data: None,
    });
    let claim = (
        (text(), text(), text(), text(), text()),
        pod_uids(),
        prop::option::of(prop::collection::vec(handle, 0..2)),
        string_map(),
    )
        .prop_map(
            |(
                (driver_name, class_name, claim_uid, claim_name, namespace),
                pod_uids,
                resource_handles,
                cdi_devices,
            )| {
                ClaimInfoStateV130 {
                    driver_name,
                    class_name,
                    claim_uid,
                    claim_name,
                    namespace,
                    pod_uids,
                    resource_handles,
                    cdi_devices,
                }
            },
        );
    // `entries` is `omitempty` and read into an empty list: never nil in a kubelet's files.
    (text(), prop::collection::vec(claim, 0..3)).prop_map(|(version, entries)| {
        DraManagerCheckpointV130 {
            version,
            entries: Some(entries),
        }
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn device_manager_checksum_streams(v in device_manager()) {
        streams_like_text(v.checksum(), v.hash_input(), fnv32a)?;
    }
    #[test]
    fn device_manager_v1_checksum_streams(v in device_manager_v1()) {
        streams_like_text(v.checksum(), v.hash_input(), fnv32a)?;
    }
    #[test]
    fn cpu_v2_checksum_streams(v in cpu_v2()) {
        streams_like_text(v.checksum(), v.hash_input(), fnv32a)?;
    }
    #[test]
    fn cpu_v1_checksum_streams(v in cpu_v1()) {
        streams_like_text(v.checksum(), v.hash_input(), fnv32a)?;
    }
    #[test]
    fn memory_manager_checksum_streams(v in memory_manager()) {
        streams_like_text(v.checksum(), v.hash_input(), fnv32a)?;
    }
    #[test]
    fn dra_v132_checksum_streams(v in dra_v132()) {
        streams_like_text(v.checksum().map(u64::from), v.hash_input(), crc32_ieee)?;
    }
    #[test]
    fn dra_v130_checksum_streams(v in dra_v130()) {
        streams_like_text(v.checksum(), v.hash_input(), fnv32a)?;
    }

    #[test]
    fn device_manager_round_trips(v in device_manager()) { round_trips(&v)?; }
    #[test]
    fn device_manager_v1_round_trips(v in device_manager_v1()) { round_trips(&v)?; }
    #[test]
    fn cpu_v2_round_trips(v in cpu_v2()) { round_trips(&v)?; }
    #[test]
    fn cpu_v1_round_trips(v in cpu_v1()) { round_trips(&v)?; }
    #[test]
    fn memory_manager_round_trips(v in memory_manager()) { round_trips(&v)?; }
    #[test]
    fn dra_v132_round_trips(v in dra_v132()) { round_trips(&v)?; }
    #[test]
    fn dra_v130_round_trips(v in dra_v130()) { round_trips(&v)?; }

    #[test]
    fn device_manager_mutations(v in device_manager(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        mutation_is_refused_or_consistent(&v, at, b)?;
    }
    #[test]
    fn device_manager_v1_mutations(v in device_manager_v1(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        mutation_is_refused_or_consistent(&v, at, b)?;
    }
    #[test]
    fn cpu_v2_mutations(v in cpu_v2(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        mutation_is_refused_or_consistent(&v, at, b)?;
    }
    #[test]
    fn cpu_v1_mutations(v in cpu_v1(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        mutation_is_refused_or_consistent(&v, at, b)?;
    }
    #[test]
    fn memory_manager_mutations(v in memory_manager(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        mutation_is_refused_or_consistent(&v, at, b)?;
    }
    #[test]
    fn dra_v132_mutations(v in dra_v132(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        mutation_is_refused_or_consistent(&v, at, b)?;
    }
    #[test]
    fn dra_v130_mutations(v in dra_v130(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        mutation_is_refused_or_consistent(&v, at, b)?;
    }
}
