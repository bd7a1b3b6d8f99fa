//! Upstream `state/state_checkpoint_test.go` (v1.36, commit
//! a70df224aff081f14dc98188065eb7ff21caf352): `TestCheckpointStateRestore`, its rows with the
//! `PodLevelResourceManagers` gate off and those with it on (`podLevelResourceManagersEnabled:
//! true`: v1 migrated, v2 with its `podEntries`), and `TestCheckpointStateStore`; and, from
//! the v1.37 development version of the file (stored copy id 54612244991, PR #139626; the
//! tool that read it gives no commit), the gate-on v3 restore row and
//! `TestCheckpointStateStore_WithPodLevelResourceManagersEnabled`. Through corral-checkpoint's
//! `memory_manager_state` codec (in the restore order of the kubelet named) and corral-memmgr's
//! conversions. Upstream writes the rows' files with its test checkpoint (the text as
//! given); the checksums are upstream's.

use std::collections::BTreeMap;

use corral_checkpoint::{
    Checkpoint, CheckpointStore, MemoryManagerCheckpoint, MemoryManagerCheckpointV2,
    MemoryManagerState, RestoreOrder, restore_memory_manager_state,
};
use corral_memmgr::checkpoint::{from_checkpoint, from_pod_entries, to_checkpoint, to_pod_entries};
use corral_memmgr::{Assignments, Block, MEMORY, MachineState, MemoryTable, NodeState};

const KEY: &str = "memorymanager_checkpoint_test";

/// The V1 file of "Restore valid checkpoint" (and of both "from v1 (migration)" rows).
const VALID_V1: &str = r#"{
				"policyName":"static",
				"machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},
				"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},
				"checksum": 4215593881
			}"#;

/// The V2 file of "Restore checkpoint from v2 …": a V1 reader does not know `podEntries`,
/// so its checksum is not the V1 one.
const V2: &str = r#"{
					"policyName":"static",
					"machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},
					"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},
					"podEntries":{"pod":{"memoryBlocks":[{"numaAffinity":[0],"type":"memory","size":512}]}},
					"checksum": 1278640530
        }"#;

/// The rows' expected state: one node, `reserved` of its 1536 allocatable bytes reserved.
fn state(reserved: u64) -> MachineState {
    let table = MemoryTable {
        total: 2048,
        system_reserved: 512,
        allocatable: 1536,
        reserved,
        free: 1536 - reserved,
    };
    let node = NodeState {
        number_of_assignments: 0,
        memory: BTreeMap::from([(MEMORY.to_owned(), table)]),
        cells: Vec::new(),
    };
    BTreeMap::from([(0, node)])
}

fn assignments(size: u64) -> Assignments {
    let block = Block {
        numa_affinity: vec![0],
        resource: MEMORY.to_owned(),
        size,
    };
    BTreeMap::from([(
        "pod".to_owned(),
        BTreeMap::from([("container1".to_owned(), vec![block])]),
    )])
}

/// What restoring `content` gives: the state and assignments, or the error's text.
fn restore(content: &str) -> Result<(MachineState, Assignments), String> {
    let checkpoint = MemoryManagerCheckpoint::decode(content.as_bytes()).map_err(|e| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    })?;
    from_checkpoint(&checkpoint).map_err(|e| e.to_string())
}

/// `TestCheckpointStateRestore`, the rows that hold with the gate off.
#[test]
fn checkpoint_state_restore() {
    // "Restore valid checkpoint", and "Restore checkpoint from v1 (migration) with
    // PodLevelResourceManagers disabled" (the same file and state).
    assert_eq!(restore(VALID_V1), Ok((state(512), assignments(512))));
    // "Restore checkpoint with invalid checksum".
    let invalid = VALID_V1
        .replace("4215593881", "101010")
        .replace("numaAffinity", "affinity");
    let err = restore(&invalid).unwrap_err();
    assert!(err.contains("is corrupted"), "{err}");
    // "Restore checkpoint with invalid JSON".
    let err = restore("{").unwrap_err();
    assert!(err.contains("unexpected end of JSON input"), "{err}");
    // "Restore checkpoint from v2 with PodLevelResourceManagers disabled".
    let err = restore(V2).unwrap_err();
    assert!(err.contains("is corrupted"), "{err}");
}

/// `TestCheckpointStateRestore` "Restore non-existing checkpoint" and
/// `TestCheckpointStateStore`: nothing stored reads as nothing; what is stored (1024 of
/// 1536 bytes reserved for one container) reads back the same.
#[test]
fn checkpoint_state_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    assert!(matches!(
        store.get::<MemoryManagerCheckpoint>(KEY),
        Err(corral_checkpoint::CheckpointError::NotFound { .. })
    ));
    let stored = to_checkpoint("static", &state(1024), &assignments(1024));
    store.create(KEY, &stored).unwrap();
    let back: MemoryManagerCheckpoint = store.get(KEY).unwrap();
    assert_eq!(from_checkpoint(&back), Ok((state(1024), assignments(1024))));
}

/// The pod-level blocks of the rows: pod `pod`, `size` bytes of memory on node 0.
fn pod_blocks(size: u64) -> BTreeMap<String, Vec<Block>> {
    let block = Block {
        numa_affinity: vec![0],
        resource: MEMORY.to_owned(),
        size,
    };
    BTreeMap::from([("pod".to_owned(), vec![block])])
}

/// What a kubelet restoring in `order` with the gate on gets of `content`: the version that
/// read it, the state, the assignments and the pod-level blocks.
fn restore_gate_on(
    content: &str,
    order: RestoreOrder,
) -> (
    &'static str,
    MachineState,
    Assignments,
    BTreeMap<String, Vec<Block>>,
) {
    let (version, v2) = match restore_memory_manager_state(content.as_bytes(), order).unwrap() {
        MemoryManagerState::V1(v1) => {
            let (state, assignments) = from_checkpoint(&v1).unwrap();
            return ("v1", state, assignments, BTreeMap::new());
        }
        MemoryManagerState::V2(v2) => ("v2", v2),
        MemoryManagerState::V3(v3) => ("v3", v3.0),
        other => panic!("unexpected {other:?}"),
    };
    let (state, assignments) = from_checkpoint(&v2.without_pod_entries()).unwrap();
    let pods = from_pod_entries(v2.pod_entries.iter().flatten()).unwrap();
    (version, state, assignments, pods)
}

/// `TestCheckpointStateRestore`, its two rows with `PodLevelResourceManagers` on, in v1.36's
/// restore order with the gate on (v2, then v1) and in corral's (every version, newest
/// first), which its memory manager uses whatever it writes.
#[test]
fn checkpoint_state_restore_with_pod_level_resource_managers() {
    for order in [RestoreOrder::V136PodLevel, RestoreOrder::Any] {
        // "Restore checkpoint from v1 (migration) with PodLevelResourceManagers enabled":
        // the v1 file fails as v2 (its checksum does not cover `podEntries`) and is read
        // as v1, without pod-level blocks.
        assert_eq!(
            restore_gate_on(VALID_V1, order),
            ("v1", state(512), assignments(512), BTreeMap::new()),
            "{order:?}"
        );
        // "Restore checkpoint from v2 with PodLevelResourceManagers enabled": the pod's
        // 512 bytes on node 0 restored as its pod-level blocks.
        assert_eq!(
            restore_gate_on(V2, order),
            ("v2", state(512), assignments(512), pod_blocks(512)),
            "{order:?}"
        );
    }
}

/// The v3 file of v1.37's "Restore checkpoint from v3 with PodLevelResourceManagers
/// enabled": its top-level (v1 and v2) part is deliberately wrong, only `data` counts.
const V3: &str = r#"{
				"policyName":"other",
				"machineState":{"0":{"numberOfAssignments":5,"memoryMap":{"memory":{"total":1024,"systemReserved":256,"allocatable":768,"reserved":256,"free":512}},"cells":[]}},
				"entries":{"pod":{"containerX":[{"numaAffinity":[0],"type":"memory","size":128}]}},
				"podEntries":{"podY":{"memoryBlocks":[{"numaAffinity":[0],"type":"memory","size":64}]}},
				"checksum": 1234,
				"data": "{\"policyName\":\"static\",\"machineState\":{\"0\":{\"numberOfAssignments\":0,\"memoryMap\":{\"memory\":{\"total\":2048,\"systemReserved\":512,\"allocatable\":1536,\"reserved\":512,\"free\":1024}},\"cells\":[]}},\"entries\":{\"pod\":{\"container1\":[{\"numaAffinity\":[0],\"type\":\"memory\",\"size\":512}]}},\"podEntries\":{\"pod\":{\"memoryBlocks\":[{\"numaAffinity\":[0],\"type\":\"memory\",\"size\":512}]}}}",
				"dataChecksum": 637296054
			}"#;

/// v1.37's `TestCheckpointStateRestore` row "Restore checkpoint from v3 with
/// PodLevelResourceManagers enabled" (policy `static`), in v1.37's restore order and
/// corral's: the state, assignments and pod-level blocks of `data`.
#[test]
fn checkpoint_state_restore_v3_with_pod_level_resource_managers() {
    for order in [RestoreOrder::V137, RestoreOrder::Any] {
        let (version, state_got, assignments_got, pods) = restore_gate_on(V3, order);
        assert_eq!(version, "v3", "{order:?}");
        assert_eq!(
            (state_got, assignments_got, pods),
            (state(512), assignments(512), pod_blocks(512)),
            "{order:?}"
        );
        let MemoryManagerState::V3(v3) =
            restore_memory_manager_state(V3.as_bytes(), order).unwrap()
        else {
            unreachable!()
        };
        assert_eq!(v3.0.policy_name, "static", "{order:?}");
    }
}

/// v1.37's `TestCheckpointStateStore_WithPodLevelResourceManagersEnabled`: the state (1024
/// of 1536 bytes reserved), one container's 1024-byte block and the pod's 512-byte
/// pod-level block, stored as a kubelet with the gate on writes them (v2 in v1.36, what
/// corral writes with the gate on) and read back the same, in v1.36's order with the gate
/// on and in corral's.
#[test]
fn checkpoint_state_store_with_pod_level_resource_managers() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    let v1 = to_checkpoint("static", &state(1024), &assignments(1024));
    let stored = MemoryManagerCheckpointV2 {
        policy_name: v1.policy_name,
        machine_state: v1.machine_state,
        entries: v1.entries,
        pod_entries: Some(to_pod_entries(&pod_blocks(512))),
    };
    store.create(KEY, &stored).unwrap();
    let back: MemoryManagerCheckpointV2 = store.get(KEY).unwrap();
    assert_eq!(back, stored);
    let bytes = std::fs::read(dir.path().join(KEY)).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    for order in [RestoreOrder::V136PodLevel, RestoreOrder::Any] {
        assert_eq!(
            restore_gate_on(&text, order),
            ("v2", state(1024), assignments(1024), pod_blocks(512)),
            "{order:?}"
        );
    }
}
