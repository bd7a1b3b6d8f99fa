//! Fuzzing every reader of untrusted bytes in this crate: the Go JSON parser and decoder
//! (through every format's `decode` and `from_go_json`), the restore functions in every
//! release's order,
//! `DraManagerCheckpointFile::decode`, `DraHealthState::decode` (and Go's time parser behind
//! it) and `inspect`, with and without a file name.
//!
//! Inputs are arbitrary bytes, generated JSON documents built from the formats' own field
//! names, and — the ones that get past the parser — real checkpoint files of every format
//! mutated, truncated and spliced with each other. Files whose checksum rule can be
//! satisfied after mutation are fixed up too (a `cpu_manager_state` recording 0, a DRA
//! v1.32 file whose `Data` was mutated and its CRC recomputed), so the code behind the
//! checksum check runs on mutated content as well.
//!
//! Nothing may panic. Besides that, every error must print, a value that was read must be
//! writable, a written file that reads back must be rewritten byte for byte, and
//! `inspect` must report a verified checksum as both recorded and computed.
//!
//! Cases per test: `CORRAL_FUZZ_CASES` (default 2000); `cargo xtask fuzz` runs 10^6 in
//! release mode.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::OnceLock;

use corral_checkpoint::formats::dra::DraManagerCheckpointFile;
use corral_checkpoint::formats::go_time::{normalize_rfc3339, parse_go_time};
use corral_checkpoint::formats::memorymanager::{MemoryTable, NumaNodeState};
use corral_checkpoint::{
    Block, CPU_MANAGER_FILE, Checkpoint, ChecksumVerification, ClaimInfoState, ClaimInfoStateV130,
    CpuManagerCheckpoint, CpuManagerCheckpointV1, DEVICE_MANAGER_FILE, DRA_MANAGER_FILE, Device,
    DeviceManagerCheckpoint, DeviceManagerCheckpointV1, DraManagerCheckpoint,
    DraManagerCheckpointV130, DriverState, MEMORY_MANAGER_FILE, MemoryManagerCheckpoint,
    PodDevicesEntry, PodDevicesEntryV1, ResourceHandle, crc32_ieee, inspect,
    restore_cpu_manager_state,
};
use corral_checkpoint::{
    CpuManagerCheckpointV3, CpuManagerCheckpointV4, MemoryManagerCheckpointV2,
    MemoryManagerCheckpointV3, PodCpuEntry, PodMemoryEntry, RestoreOrder,
    restore_cpu_manager_state_as, restore_memory_manager_state,
};
use corral_checkpoint::{DRA_HEALTH_FILE, DeviceHealth, DraHealthState, DriverHealthState};
use proptest::prelude::*;
use proptest::sample::Index;

// ---------------------------------------------------------------------------------------
// Seeds: real files of every format.

/// Strings that stress escaping, UTF-8 and Go's unquoting.
const ODD_TEXT: &str = "<&>\u{2028}\"\\\n\u{0}é日\u{1F600}";

struct Seeds {
    device: Vec<Vec<u8>>,
    cpu: Vec<Vec<u8>>,
    memory: Vec<Vec<u8>>,
    /// `dra_manager_state` files of both layouts.
    dra: Vec<Vec<u8>>,
    /// The `Data` strings of the DRA v1.32 seeds.
    dra_data: Vec<Vec<u8>>,
    /// `dra_health_state` files.
    health: Vec<Vec<u8>>,
    /// Everything above, for splicing.
    all: Vec<Vec<u8>>,
}

fn strings(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| (*s).to_owned()).collect())
}

fn device_seeds() -> Vec<Vec<u8>> {
    let v2 = DeviceManagerCheckpoint {
        pod_device_entries: Some(vec![
            PodDevicesEntry {
                pod_uid: "6a8d6ef4-aaaa-4bbb-8ccc-0123456789ab".into(),
                container_name: "main".into(),
                resource_name: "example.com/gpu".into(),
                device_ids: Some(BTreeMap::from([
                    (0, strings(&["gpu-0", "gpu-1"])),
                    (1, strings(&[])),
                    (-1, None),
                ])),
                alloc_resp: Some(vec![0x0a, 0x12, 0xff, 0x00, 0x80, 0x3e, 0x3f]),
            },
            PodDevicesEntry {
                pod_uid: ODD_TEXT.into(),
                container_name: String::new(),
                resource_name: "r".into(),
                device_ids: None,
                alloc_resp: None,
            },
        ]),
        registered_devices: Some(BTreeMap::from([
            (
                "example.com/gpu".into(),
                strings(&["gpu-0", "gpu-1", "gpu-2"]),
            ),
            ("example.com/nic".into(), None),
        ])),
    };
    let v1 = DeviceManagerCheckpointV1 {
        pod_device_entries: Some(vec![PodDevicesEntryV1 {
            pod_uid: "pod".into(),
            container_name: "c".into(),
            resource_name: "example.com/gpu".into(),
            device_ids: strings(&["gpu-0", ODD_TEXT]),
            alloc_resp: Some(b"\x01\x02\x03\x04\x05".to_vec()),
        }]),
        registered_devices: Some(BTreeMap::from([(
            "example.com/gpu".into(),
            strings(&["gpu-0"]),
        )])),
    };
    vec![
        v2.encode().expect("device v2"),
        DeviceManagerCheckpoint::default()
            .encode()
            .expect("device empty"),
        v1.encode().expect("device v1"),
    ]
}

fn cpu_seeds() -> Vec<Vec<u8>> {
    let v2 = CpuManagerCheckpoint {
        policy_name: "static".into(),
        default_cpu_set: "0-1,4-7".into(),
        entries: Some(BTreeMap::from([
            (
                "pod-a".into(),
                Some(BTreeMap::from([
                    ("app".into(), "2-3".into()),
                    ("sidecar".into(), "8,10-11".into()),
                ])),
            ),
            ("pod-b".into(), None),
            (ODD_TEXT.into(), Some(BTreeMap::new())),
        ])),
    };
    let v1 = CpuManagerCheckpointV1 {
        policy_name: "static".into(),
        default_cpu_set: "0-3".into(),
        entries: Some(BTreeMap::from([
            ("containerid-1".into(), "4-5".into()),
            ("containerid-2".into(), ODD_TEXT.into()),
        ])),
    };
    let v3 = CpuManagerCheckpointV3 {
        policy_name: v2.policy_name.clone(),
        default_cpu_set: v2.default_cpu_set.clone(),
        entries: v2.entries.clone(),
        pod_entries: Some(BTreeMap::from([
            (
                "pod-a".into(),
                PodCpuEntry {
                    cpu_set: "2-3,8,10-11".into(),
                },
            ),
            (ODD_TEXT.into(), PodCpuEntry::default()),
        ])),
    };
    vec![
        v3.encode().expect("cpu v3"),
        CpuManagerCheckpointV4(v3).encode().expect("cpu v4"),
        v2.encode().expect("cpu v2"),
        zero_checksum(&v2.encode().expect("cpu v2")),
        v1.encode().expect("cpu v1"),
        v1.encode_as_v132_marshal().expect("cpu v1 v1.32"),
        br#"{"policyName":"none","defaultCpuSet":"","checksum":0}"#.to_vec(),
    ]
}

fn memory_seeds() -> Vec<Vec<u8>> {
    let table = |n: u64| MemoryTable {
        total_mem_size: n,
        system_reserved: n / 8,
        allocatable: n - n / 8,
        reserved: n / 4,
        free: n / 2,
    };
    let node = |cells: &[i64]| NumaNodeState {
        number_of_assignments: 2,
        memory_map: Some(BTreeMap::from([
            ("memory".into(), Some(table(17_179_869_184))),
            ("hugepages-1Gi".into(), Some(table(2_147_483_648))),
            ("hugepages-2Mi".into(), None),
        ])),
        cells: Some(cells.to_vec()),
    };
    let cp = MemoryManagerCheckpoint {
        policy_name: "Static".into(),
        machine_state: Some(BTreeMap::from([
            (0, Some(node(&[0, 1]))),
            (1, Some(node(&[0, 1]))),
            (7, None),
        ])),
        entries: Some(BTreeMap::from([(
            "pod".into(),
            Some(BTreeMap::from([(
                "c".into(),
                Some(vec![
                    Block {
                        numa_affinity: Some(vec![0, 1]),
                        resource: "memory".into(),
                        size: 1_073_741_824,
                    },
                    Block {
                        numa_affinity: None,
                        resource: ODD_TEXT.into(),
                        size: u64::MAX,
                    },
                ]),
            )])),
        )])),
    };
    let empty = MemoryManagerCheckpoint {
        policy_name: "None".into(),
        machine_state: Some(BTreeMap::new()),
        entries: Some(BTreeMap::new()),
    };
    let v2 = MemoryManagerCheckpointV2 {
        policy_name: cp.policy_name.clone(),
        machine_state: cp.machine_state.clone(),
        entries: cp.entries.clone(),
        pod_entries: Some(BTreeMap::from([(
            "pod".into(),
            PodMemoryEntry {
                memory_blocks: Some(vec![Block {
                    numa_affinity: Some(vec![0, 1]),
                    resource: "memory".into(),
                    size: 1_073_741_824,
                }]),
            },
        )])),
    };
    vec![
        v2.encode().expect("memory v2"),
        MemoryManagerCheckpointV3(v2).encode().expect("memory v3"),
        cp.encode().expect("memory"),
        empty.encode().expect("memory empty"),
    ]
}

fn dra_v130_seeds() -> Vec<Vec<u8>> {
    let cp = DraManagerCheckpointV130 {
        version: "v1".into(),
        entries: Some(vec![ClaimInfoStateV130 {
            driver_name: "gpu.example.com".into(),
            class_name: "class".into(),
            claim_uid: "067798be-454e-4be4-9047-1aa06aea63f7".into(),
            claim_name: "claim".into(),
            namespace: "default".into(),
            pod_uids: Some(BTreeSet::from(["pod-1".into(), ODD_TEXT.into()])),
            resource_handles: Some(vec![ResourceHandle {
                driver_name: "gpu.example.com".into(),
                data: r#"{"a":"b"}"#.into(),
                structured_data: None,
            }]),
            cdi_devices: Some(BTreeMap::from([(
                "gpu.example.com".into(),
                strings(&["example.com/gpu=gpu-0"]),
            )])),
        }]),
    };
    vec![
        cp.encode().expect("dra v1.30"),
        cp.encode_without_resource_handles()
            .expect("dra v1.28 layout"),
        // Upstream v1.30 TestOldCheckpointRestore's file (legacy checksum).
        br#"{"version":"v1","entries":[{"DriverName":"test-driver.cdi.k8s.io","ClassName":"class-name","ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example","Namespace":"default","PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"CDIDevices":{"test-driver.cdi.k8s.io":["example.com/example=cdi-example"]}}],"checksum":153446146}"#.to_vec(),
    ]
}

fn dra_v132_values() -> Vec<DraManagerCheckpoint> {
    let claim = ClaimInfoState {
        claim_uid: "067798be-454e-4be4-9047-1aa06aea63f7".into(),
        claim_name: "claim".into(),
        namespace: "default".into(),
        pod_uids: Some(BTreeSet::from(["pod-1".into(), "pod-2".into()])),
        driver_state: Some(BTreeMap::from([(
            "gpu.example.com".into(),
            DriverState {
                devices: Some(vec![
                    Device {
                        pool_name: "worker-1".into(),
                        device_name: "gpu-0".into(),
                        share_id: Some(ODD_TEXT.into()),
                        request_names: strings(&["req", ODD_TEXT]),
                        cdi_device_ids: strings(&["example.com/gpu=gpu-0"]),
                    },
                    Device {
                        pool_name: String::new(),
                        device_name: "gpu-1".into(),
                        share_id: None,
                        request_names: None,
                        cdi_device_ids: Some(vec![]),
                    },
                ]),
            },
        )])),
    };
    vec![
        DraManagerCheckpoint {
            claim_info_state_list: Some(vec![claim]),
        },
        DraManagerCheckpoint {
            claim_info_state_list: Some(vec![]),
        },
    ]
}

fn health_seeds() -> Vec<Vec<u8>> {
    let at = std::time::UNIX_EPOCH + std::time::Duration::new(1_764_059_400, 120_000_000);
    let device = |pool: &str, name: &str, health: &str, timeout: Option<u64>| {
        let d = DeviceHealth::new(
            pool,
            name,
            health,
            at,
            timeout.map(std::time::Duration::from_secs),
        );
        (d.key(), d)
    };
    let states = [
        DraHealthState::default(),
        DraHealthState(BTreeMap::from([
            (
                "gpu.example.com".to_owned(),
                DriverHealthState {
                    devices: Some(BTreeMap::from([
                        device("node-1", "gpu-0", "Healthy", None),
                        device("node-1", "gpu-1", "Unhealthy", Some(60)),
                        device(ODD_TEXT, ODD_TEXT, "Unknown", Some(1)),
                    ])),
                },
            ),
            ("other".to_owned(), DriverHealthState { devices: None }),
        ])),
    ];
    states.iter().map(|s| s.encode().expect("health")).collect()
}

fn seeds() -> &'static Seeds {
    static SEEDS: OnceLock<Seeds> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let dra = dra_v132_values();
        let dra_v132: Vec<Vec<u8>> = dra
            .iter()
            .map(|cp| cp.encode().expect("dra v1.32"))
            .collect();
        let dra_data = dra
            .iter()
            .map(|cp| cp.hash_input().expect("dra data").into_bytes())
            .collect();
        let mut seeds = Seeds {
            device: device_seeds(),
            cpu: cpu_seeds(),
            memory: memory_seeds(),
            dra: dra_v130_seeds().into_iter().chain(dra_v132).collect(),
            dra_data,
            health: health_seeds(),
            all: Vec::new(),
        };
        seeds.all = [
            &seeds.device,
            &seeds.cpu,
            &seeds.memory,
            &seeds.dra,
            &seeds.dra_data,
            &seeds.health,
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        seeds
    })
}

// ---------------------------------------------------------------------------------------
// Mutations.

/// Fragments that steer the parser and decoder into their corners.
#[rustfmt::skip]
const TOKENS: &[&[u8]] = &[
    b"{", b"}", b"[", b"]", b",", b":", b"\"", b"\\", b"null", b"true", b"false", b"-", b"0",
    b"-0", b"1e3", b"1.5", b"18446744073709551615", b"18446744073709551616",
    b"-9223372036854775808", b"-9223372036854775809", b"4294967295", b"4294967296", b"\\u0000",
    b"\\ud800", b"\\udc00", b"\\ud83d\\ude00", b"\\u00e9", b"\\/", b"\xff", b"\xc3",
    b"\xe6\x97", "\u{212a}".as_bytes(), "\u{17f}".as_bytes(), b" ", b"\n", b"\t",
    b"\"checksum\":0", b"\"Checksum\":0", b"\"CHECKSUM\":1,", b"\"Data\":",
    b"\"entries\":null,", b"\"entries\":{},", b"\"entries\":[],", b"\"structuredData\":{},",
    b"\"AllocResp\":\"=\",", b"\"AllocResp\":\"AAAA\",", b"\"DeviceIDs\":{\"x\":[]},",
    b"\"machineState\":{\"-1\":null},", b"{\"a\":{\"b\":[1,{}]}}", b"[[[[[[[[[[[[[[[[",
    b"]]]]]]]]", b"}}}}}}}}",
];

/// Numbers a digit run can be replaced by.
#[rustfmt::skip]
const NUMBERS: &[&str] = &[
    "0", "-0", "1", "-1", "00", "01", "1.0", "1e0", "1E+2", "-1e-2", "255", "256", "2147483647",
    "2147483648", "-2147483649", "4294967295", "4294967296", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "18446744073709551615",
    "18446744073709551616", "99999999999999999999999999", "-", "1.", ".5", "1e", "+1", "0x10",
    "NaN",
];

/// Contents a string literal can be replaced by (the text between the quotes).
#[rustfmt::skip]
const STRING_BODIES: &[&[u8]] = &[
    b"", b"a", b"\\\"", b"\\\\", b"\\u0000", b"\\ud800", b"\\udfff\\ud800", b"\\ud83d\\ude00",
    b"\\x", b"\\u12", b"\xff\xfe", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", "日本語".as_bytes(),
    "\u{212a}ey".as_bytes(), b"CHECKSUM", b"checksum", b"policyname", b"DATA", b"data",
    b"entries", b"ENTRIES", b"AAAA", b"AAA=", b"A===", b"=", b"!!!!", b"AQID", b"AQIDBA==",
    b"-1", b"0", b"18446744073709551616", b"{\\\"kind\\\":\\\"DRACheckpoint\\\"}", b"\n", b"\t",
];

#[derive(Debug, Clone)]
enum Mutation {
    SetByte(Index, u8),
    InsertBytes(Index, Vec<u8>),
    InsertToken(Index, Index),
    Delete(Index, usize),
    Truncate(Index),
    /// Copies a piece of any seed (`seed`, start, length) to a position.
    Splice(Index, Index, Index, usize),
    /// Repeats a piece of the input right after itself.
    Duplicate(Index, usize),
    /// Replaces one digit run with a number from [`NUMBERS`].
    Number(Index, Index),
    /// Replaces the body of one string literal with one of [`STRING_BODIES`].
    StringBody(Index, Index),
    /// Opens `n` arrays (or objects with key `"a"`) at a position, around the nesting
    /// limit of 1000.
    Nest(Index, usize, bool),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::SetByte(i, b)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..6))
            .prop_map(|(i, b)| Mutation::InsertBytes(i, b)),
        (any::<Index>(), any::<Index>()).prop_map(|(i, t)| Mutation::InsertToken(i, t)),
        (any::<Index>(), 1usize..24).prop_map(|(i, n)| Mutation::Delete(i, n)),
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), any::<Index>(), any::<Index>(), 1usize..64)
            .prop_map(|(i, s, f, n)| Mutation::Splice(i, s, f, n)),
        (any::<Index>(), 1usize..48).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        (any::<Index>(), any::<Index>()).prop_map(|(i, n)| Mutation::Number(i, n)),
        (any::<Index>(), any::<Index>()).prop_map(|(i, s)| Mutation::StringBody(i, s)),
        (any::<Index>(), 990usize..1010, any::<bool>())
            .prop_map(|(i, n, objects)| Mutation::Nest(i, n, objects)),
    ]
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..5)
}

/// `(start, end)` of each maximal run of ASCII digits.
fn digit_runs(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

/// `(start, end)` of the body of each string literal (between its quotes).
fn string_bodies(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut bodies = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            let start = i + 1;
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            bodies.push((start, i.min(bytes.len())));
        }
        i += 1;
    }
    bodies
}

fn apply(mut input: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    let all = &seeds().all;
    for m in mutations {
        let at = |i: &Index, len: usize| i.index(len + 1);
        match m {
            Mutation::SetByte(i, b) => {
                if !input.is_empty() {
                    let k = i.index(input.len());
                    input[k] = *b;
                }
            }
            Mutation::InsertBytes(i, bytes) => {
                let k = at(i, input.len());
                input.splice(k..k, bytes.iter().copied());
            }
            Mutation::InsertToken(i, t) => {
                let k = at(i, input.len());
                input.splice(k..k, t.get(TOKENS).iter().copied());
            }
            Mutation::Delete(i, n) => {
                let k = at(i, input.len());
                let end = (k + n).min(input.len());
                input.drain(k..end);
            }
            Mutation::Truncate(i) => input.truncate(at(i, input.len())),
            Mutation::Splice(i, s, f, n) => {
                let source = s.get(all);
                let from = f.index(source.len());
                let piece = &source[from..(from + n).min(source.len())];
                let k = at(i, input.len());
                input.splice(k..k, piece.iter().copied());
            }
            Mutation::Duplicate(i, n) => {
                let k = at(i, input.len());
                let end = (k + n).min(input.len());
                let piece = input[k..end].to_vec();
                input.splice(end..end, piece);
            }
            Mutation::Number(i, n) => {
                let runs = digit_runs(&input);
                if !runs.is_empty() {
                    let (start, end) = *i.get(&runs);
                    input.splice(start..end, n.get(NUMBERS).bytes());
                }
            }
            Mutation::Nest(i, n, objects) => {
                let k = at(i, input.len());
                let open: &[u8] = if *objects { b"{\"a\":" } else { b"[" };
                input.splice(k..k, open.iter().copied().cycle().take(open.len() * n));
            }
            Mutation::StringBody(i, s) => {
                let bodies = string_bodies(&input);
                if !bodies.is_empty() {
                    let (start, end) = *i.get(&bodies);
                    input.splice(start..end, s.get(STRING_BODIES).iter().copied());
                }
            }
        }
    }
    input
}

/// The file with its last `"checksum":<digits>` (any key case) recording 0 instead, which
/// the CPU manager accepts unverified.
fn zero_checksum(bytes: &[u8]) -> Vec<u8> {
    let key = b"\"checksum\":";
    let Some(at) = bytes
        .windows(key.len())
        .rposition(|w| w.eq_ignore_ascii_case(key))
    else {
        return bytes.to_vec();
    };
    let start = at + key.len();
    let end = start
        + bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
    let mut out = bytes[..start].to_vec();
    out.push(b'0');
    out.extend_from_slice(&bytes[end..]);
    out
}

/// A seed of `pool` (or, now and then, of any format) mutated.
fn mutated(pool: fn(&Seeds) -> &Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (any::<Index>(), any::<Index>(), 0u8..8, mutations()).prop_map(
        move |(seed, any_seed, from_any, mutations)| {
            let seeds = seeds();
            // One case in eight starts from another format's file.
            let start = if from_any == 0 {
                any_seed.get(&seeds.all)
            } else {
                seed.get(pool(seeds))
            };
            apply(start.clone(), &mutations)
        },
    )
}

// ---------------------------------------------------------------------------------------
// Oracles.

/// An error must print (Display and Debug walk every field).
fn prints<T>(result: &Result<T, corral_checkpoint::CheckpointError>) {
    if let Err(err) = result {
        let _ = err.to_string();
        let _ = format!("{err:?}");
    }
}

/// A value that was read can be written, and the written file, if it reads back, is
/// rewritten byte for byte.
fn rewrites<T: Checkpoint + Debug>(
    read: Result<T, corral_checkpoint::CheckpointError>,
) -> Result<(), TestCaseError> {
    prints(&read);
    let Ok(value) = read else { return Ok(()) };
    let written = value
        .encode()
        .map_err(|e| TestCaseError::fail(format!("{value:?} read but not writable: {e}")))?;
    if let Ok(again) = T::decode(&written) {
        let rewritten = again
            .encode()
            .map_err(|e| TestCaseError::fail(format!("rewrite failed: {e}")))?;
        prop_assert_eq!(
            String::from_utf8_lossy(&rewritten),
            String::from_utf8_lossy(&written)
        );
    }
    Ok(())
}

/// Only the readers' own errors, never a panic; a verified checksum is both recorded and
/// computed.
fn inspects(bytes: &[u8], names: &[Option<&str>]) -> Result<(), TestCaseError> {
    for &name in names {
        let found = inspect(bytes, name);
        prints(&found);
        if let Ok(found) = found {
            if found.verification == ChecksumVerification::Verified {
                prop_assert_eq!(found.recorded_checksum, found.checksum);
            }
            prop_assert!(!found.checksum_summary().is_empty());
        }
    }
    Ok(())
}

fn read_device(bytes: &[u8]) -> Result<(), TestCaseError> {
    rewrites(DeviceManagerCheckpoint::decode(bytes))?;
    rewrites(DeviceManagerCheckpointV1::decode(bytes))?;
    prints(&DeviceManagerCheckpoint::from_go_json(bytes));
    prints(&DeviceManagerCheckpointV1::from_go_json(bytes));
    inspects(bytes, &[Some(DEVICE_MANAGER_FILE), None])
}

/// The kubelet releases' restore orders.
const ORDERS: [RestoreOrder; 5] = [
    RestoreOrder::V132,
    RestoreOrder::V136,
    RestoreOrder::V136PodLevel,
    RestoreOrder::V137,
    RestoreOrder::Any,
];

fn read_cpu(bytes: &[u8]) -> Result<(), TestCaseError> {
    rewrites(CpuManagerCheckpoint::decode(bytes))?;
    rewrites(CpuManagerCheckpointV1::decode(bytes))?;
    rewrites(CpuManagerCheckpointV3::decode(bytes))?;
    rewrites(CpuManagerCheckpointV4::decode(bytes))?;
    prints(&restore_cpu_manager_state(bytes));
    for order in ORDERS {
        prints(&restore_cpu_manager_state_as(bytes, order));
    }
    prints(&CpuManagerCheckpointV3::from_go_json(bytes));
    prints(&CpuManagerCheckpoint::from_go_json(bytes));
    prints(&CpuManagerCheckpointV1::from_go_json(bytes));
    inspects(bytes, &[Some(CPU_MANAGER_FILE), None])
}

fn read_memory(bytes: &[u8]) -> Result<(), TestCaseError> {
    rewrites(MemoryManagerCheckpoint::decode(bytes))?;
    rewrites(MemoryManagerCheckpointV2::decode(bytes))?;
    rewrites(MemoryManagerCheckpointV3::decode(bytes))?;
    prints(&MemoryManagerCheckpoint::decode_v136(bytes));
    for order in ORDERS {
        prints(&restore_memory_manager_state(bytes, order));
    }
    prints(&MemoryManagerCheckpointV2::from_go_json(bytes));
    prints(&MemoryManagerCheckpoint::from_go_json(bytes));
    inspects(bytes, &[Some(MEMORY_MANAGER_FILE), None])
}

fn read_dra(bytes: &[u8]) -> Result<(), TestCaseError> {
    rewrites(DraManagerCheckpointV130::decode(bytes))?;
    rewrites(DraManagerCheckpoint::decode(bytes))?;
    prints(&DraManagerCheckpointV130::from_go_json(bytes));
    let file = DraManagerCheckpointFile::decode(bytes);
    prints(&file);
    if let Ok(file) = file {
        prints(&file.claim_info_state_list());
    }
    inspects(bytes, &[Some(DRA_MANAGER_FILE), None])
}

/// `dra_health_state`: a file that reads is written back, and that reads as the same
/// value (unless it holds a time Go could read but not write, which `encode` refuses).
fn read_health(bytes: &[u8]) -> Result<(), TestCaseError> {
    let read = DraHealthState::decode(bytes);
    prints(&read);
    if let Ok(value) = read {
        let written = value.encode();
        prints(&written);
        if let Ok(file) = written {
            let again = DraHealthState::decode(&file)
                .map_err(|e| TestCaseError::fail(format!("rewritten health file refused: {e}")))?;
            prop_assert_eq!(&again, &value);
            prop_assert_eq!(again.encode().ok(), Some(file));
        }
    }
    inspects(bytes, &[Some(DRA_HEALTH_FILE)])
}

/// Every reader of the crate.
fn read_everything(bytes: &[u8]) -> Result<(), TestCaseError> {
    read_device(bytes)?;
    read_cpu(bytes)?;
    read_memory(bytes)?;
    read_dra(bytes)?;
    read_health(bytes)?;
    prints(&DraManagerCheckpoint::from_go_json(bytes));
    inspects(bytes, &[Some("/var/lib/kubelet/unknown_file")])
}

/// Every format's full reader (parse, decode, typed value, checksum) and format detection:
/// the cheaper subset of [`read_everything`] for documents that usually parse.
fn read_as_every_format(bytes: &[u8]) -> Result<(), TestCaseError> {
    rewrites(DeviceManagerCheckpoint::decode(bytes))?;
    rewrites(DeviceManagerCheckpointV1::decode(bytes))?;
    rewrites(CpuManagerCheckpoint::decode(bytes))?;
    rewrites(CpuManagerCheckpointV1::decode(bytes))?;
    rewrites(CpuManagerCheckpointV3::decode(bytes))?;
    rewrites(CpuManagerCheckpointV4::decode(bytes))?;
    rewrites(MemoryManagerCheckpoint::decode(bytes))?;
    rewrites(MemoryManagerCheckpointV2::decode(bytes))?;
    rewrites(MemoryManagerCheckpointV3::decode(bytes))?;
    rewrites(DraManagerCheckpointV130::decode(bytes))?;
    rewrites(DraManagerCheckpoint::decode(bytes))?;
    read_health(bytes)?;
    inspects(bytes, &[None])
}

// ---------------------------------------------------------------------------------------
// Generated JSON.

/// Every JSON name the formats use, some in other letter cases.
#[rustfmt::skip]
const FIELD_NAMES: &[&str] = &[
    "policyName", "defaultCpuSet", "entries", "checksum", "Checksum", "Data",
    "PodDeviceEntries", "RegisteredDevices", "PodUID", "ContainerName", "ResourceName",
    "DeviceIDs", "AllocResp", "machineState", "numberOfAssignments", "memoryMap", "cells",
    "total", "systemReserved", "allocatable", "reserved", "free", "numaAffinity", "type",
    "size", "version", "DriverName", "ClassName", "ClaimUID", "ClaimName", "Namespace",
    "PodUIDs", "ResourceHandles", "CDIDevices", "driverName", "data", "structuredData", "kind",
    "apiVersion", "ClaimInfoStateList", "DriverState", "Devices", "PoolName", "DeviceName",
    "RequestNames", "CDIDeviceIDs", "POLICYNAME", "checkSUM", "DATA", "\u{212a}ind", "0", "-1",
    "1", "memory", "x", "podEntries", "cpuSet", "memoryBlocks", "dataChecksum", "DataChecksum",
    "Health", "LastUpdated", "HealthCheckTimeout", "lastupdated",
];

fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serializes")
}

fn json_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<Index>().prop_map(|i| quoted(i.get::<&str>(FIELD_NAMES))),
        1 => "[a-zA-Z0-9-]{0,4}".prop_map(|s| quoted(&s)),
    ]
}

fn json_leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        any::<Index>().prop_map(|i| i.get(NUMBERS).to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u32>().prop_map(|n| n.to_string()),
        any::<Index>().prop_map(|i| format!(
            "\"{}\"",
            String::from_utf8_lossy(i.get::<&[u8]>(STRING_BODIES))
        )),
        any::<String>().prop_map(|s| quoted(&s.chars().take(6).collect::<String>())),
        any::<Index>().prop_map(|i| quoted(&String::from_utf8_lossy(
            i.get::<Vec<u8>>(&seeds().dra_data)
        ))),
    ]
}

/// A JSON document (valid, or almost: string bodies from [`STRING_BODIES`] may be invalid)
/// whose object keys are mostly the formats' field names.
fn json_document() -> impl Strategy<Value = String> {
    let value = json_leaf().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5)
                .prop_map(|items| format!("[{}]", items.join(","))),
            prop::collection::vec((json_key(), inner), 0..6).prop_map(|members| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    });
    (prop::collection::vec((json_key(), value), 0..6), " {0,2}").prop_map(|(members, ws)| {
        let members: Vec<String> = members
            .into_iter()
            .map(|(k, v)| format!("{k}{ws}:{ws}{v}"))
            .collect();
        format!("{ws}{{{}}}{ws}", members.join(","))
    })
}

// ---------------------------------------------------------------------------------------
// The fuzz tests.

corral_testkit::fuzz! {
    /// Arbitrary bytes, through every reader.
    fn fuzz_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        read_everything(&bytes)?;
    }

    /// Generated JSON documents keyed by the formats' field names, through every reader.
    fn fuzz_generated_json(doc in json_document()) {
        read_as_every_format(doc.as_bytes())?;
    }

    /// Mutated `kubelet_internal_checkpoint` files (current and pre-1.20).
    fn fuzz_device_manager_files(bytes in mutated(|s| &s.device)) {
        read_device(&bytes)?;
    }

    /// Mutated `cpu_manager_state` files (every version).
    fn fuzz_cpu_manager_files(bytes in mutated(|s| &s.cpu)) {
        read_cpu(&bytes)?;
    }

    /// Mutated `cpu_manager_state` files with the checksum set to 0, so the mutated content
    /// is accepted unverified, as upstream does.
    fn fuzz_cpu_manager_files_unverified(bytes in mutated(|s| &s.cpu).prop_map(|b| zero_checksum(&b))) {
        read_cpu(&bytes)?;
    }

    /// Mutated `memory_manager_state` files.
    fn fuzz_memory_manager_files(bytes in mutated(|s| &s.memory)) {
        read_memory(&bytes)?;
    }

    /// Mutated `dra_manager_state` files of both layouts.
    fn fuzz_dra_files(bytes in mutated(|s| &s.dra)) {
        read_dra(&bytes)?;
    }

    /// Mutated `dra_health_state` files.
    fn fuzz_dra_health_files(bytes in mutated(|s| &s.health)) {
        read_health(&bytes)?;
    }

    /// Go's time parser on near-RFC-3339 text: never panics; what it accepts and can write
    /// back is written in a form it reads again as the same time.
    fn fuzz_go_times(text in "[0-9]{0,5}-?[0-9]{1,2}-?[0-9]{1,2}[Tt ]?[0-9]{1,2}:?[0-9]{1,2}:?[0-9]{1,2}([.,][0-9]{0,12})?(Z|z|[+-][0-9]{2}:?[0-9]{2})?") {
        if let Ok(time) = parse_go_time(&text) {
            if let Ok(canonical) = normalize_rfc3339(&text) {
                prop_assert_eq!(parse_go_time(&canonical).ok(), Some(time));
                prop_assert_eq!(normalize_rfc3339(&canonical).ok(), Some(canonical.clone()));
            } else {
                prop_assert!(time.format().is_none());
            }
        }
    }

    /// DRA v1.32 files whose `Data` was mutated and whose CRC matches again, so the inner
    /// document reaches its parser.
    fn fuzz_dra_v132_data(data in mutated(|s| &s.dra_data)) {
        let data = String::from_utf8_lossy(&data).into_owned();
        let checksum = crc32_ieee(data.as_bytes());
        let file = DraManagerCheckpointFile { data, checksum }
            .encode()
            .map_err(|e| TestCaseError::fail(format!("DRA file not writable: {e}")))?;
        read_dra(&file)?;
        prints(&DraManagerCheckpoint::from_go_json(&file));
    }
}
