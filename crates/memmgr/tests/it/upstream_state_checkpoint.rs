//! Upstream `state/state_checkpoint_test.go` (v1.36, commit a70df224): its
//! `TestCheckpointStateRestore` rows with the `PodLevelResourceManagers` gate off (corral's
//! behaviour; the gate-on rows and the V2 `podEntries` format belong to pod-level resources)
//! and `TestCheckpointStateStore`, through corral-checkpoint's `memory_manager_state` codec
//! and corral-memmgr's conversions. Upstream writes the rows' files with its test
//! checkpoint (the text as given); the checksums are upstream's.

use std::collections::BTreeMap;

use corral_checkpoint::{Checkpoint, CheckpointStore, MemoryManagerCheckpoint};
use corral_memmgr::checkpoint::{from_checkpoint, to_checkpoint};
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
