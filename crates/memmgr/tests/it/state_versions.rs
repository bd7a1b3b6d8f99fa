//! `memory_manager_state` versions through the manager: v2 written when configured (as a
//! v1.36 kubelet with `PodLevelResourceManagers` writes), v1, v2 and v1.37's v3 all
//! restored, and a file with pod-level assignments (which corral does not make) refused.

use std::collections::BTreeMap;

use corral_checkpoint::{
    Block, Checkpoint, CheckpointStore, MEMORY_MANAGER_FILE, MemoryManagerCheckpoint,
    MemoryManagerCheckpointV2, MemoryManagerCheckpointV3, PodMemoryEntry,
};
use corral_memmgr::{
    MemoryManager, MemoryManagerConfig, MemoryManagerError, MemoryPolicy, MemoryStateFileVersion,
};
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{AffinityStore, HintProvider, NumaMask};

use crate::manager::{config, file, guaranteed, machine};

const GI: u64 = 1 << 30;

fn manager(version: MemoryStateFileVersion) -> MemoryManager {
    let config = MemoryManagerConfig {
        state_file_version: version,
        ..config(MemoryPolicy::Static)
    };
    MemoryManager::new(&config, &machine()).unwrap()
}

/// A manager writing `version` into `dir`, with pod `p1`'s container on node 1.
fn with_one_container(dir: &std::path::Path, version: MemoryStateFileVersion) -> MemoryManager {
    let manager = manager(version);
    manager
        .start(Some(CheckpointStore::open(dir).unwrap()))
        .unwrap();
    let (pod, c) = guaranteed("p1", 2 * GI, 128);
    let store = AffinityStore::new();
    let hint = TopologyHint {
        numa_affinity: Some(NumaMask::new([1]).unwrap()),
        preferred: true,
    };
    store.set_affinity("p1", "app", hint);
    manager.allocate(&pod, &c, &store).unwrap();
    manager
}

fn restarted(dir: &std::path::Path) -> Result<MemoryManager, MemoryManagerError> {
    let manager = manager(MemoryStateFileVersion::V1);
    manager.start(Some(CheckpointStore::open(dir).unwrap()))?;
    Ok(manager)
}

#[test]
fn v2_is_written_when_configured_and_every_version_restores() {
    let dir = tempfile::tempdir().unwrap();
    let first = with_one_container(dir.path(), MemoryStateFileVersion::V2);
    let blocks = first.container_memory("p1", "app");
    let bytes = file(dir.path());
    // A v2 file: pod entries present (empty), and a v1 reader refuses it, as upstream's.
    let v2 = MemoryManagerCheckpointV2::decode(&bytes).unwrap();
    assert_eq!(v2.pod_entries, Some(BTreeMap::new()));
    assert!(MemoryManagerCheckpoint::decode(&bytes).is_err());
    drop(first);
    assert_eq!(
        restarted(dir.path()).unwrap().container_memory("p1", "app"),
        blocks
    );

    // The same state as v1.37 writes it (v3) restores too.
    let v3 = MemoryManagerCheckpointV3(v2).encode().unwrap();
    std::fs::write(dir.path().join(MEMORY_MANAGER_FILE), v3).unwrap();
    assert_eq!(
        restarted(dir.path()).unwrap().container_memory("p1", "app"),
        blocks
    );
}

#[test]
fn pod_level_assignments_stop_the_start_naming_the_pods() {
    let dir = tempfile::tempdir().unwrap();
    drop(with_one_container(dir.path(), MemoryStateFileVersion::V2));
    let mut v2 = MemoryManagerCheckpointV2::decode(&file(dir.path())).unwrap();
    v2.pod_entries = Some(BTreeMap::from([(
        "pod-level".to_owned(),
        PodMemoryEntry {
            memory_blocks: Some(vec![Block {
                numa_affinity: Some(vec![0]),
                resource: "memory".into(),
                size: GI,
            }]),
        },
    )]));
    std::fs::write(dir.path().join(MEMORY_MANAGER_FILE), v2.encode().unwrap()).unwrap();
    let err = restarted(dir.path()).unwrap_err();
    assert!(
        matches!(&err, MemoryManagerError::PodLevelAssignments { pods, .. } if pods == &["pod-level"]),
        "{err}"
    );
    assert!(err.to_string().contains("memory_manager_state"), "{err}");
}

#[test]
fn a_damaged_v3_file_does_not_fall_back_to_its_top_level_copy() {
    let dir = tempfile::tempdir().unwrap();
    drop(with_one_container(dir.path(), MemoryStateFileVersion::V1));
    let v1 = MemoryManagerCheckpoint::decode(&file(dir.path())).unwrap();
    let v3 = MemoryManagerCheckpointV3(MemoryManagerCheckpointV2 {
        policy_name: v1.policy_name,
        machine_state: v1.machine_state,
        entries: v1.entries,
        pod_entries: Some(BTreeMap::new()),
    });
    let text = String::from_utf8(v3.encode().unwrap()).unwrap();
    // Break the data checksum: the top level (a valid v1) must not be used instead.
    let broken = text.replace("\"dataChecksum\":", "\"dataChecksum\":1");
    std::fs::write(dir.path().join(MEMORY_MANAGER_FILE), broken).unwrap();
    let err = restarted(dir.path()).unwrap_err();
    assert!(matches!(err, MemoryManagerError::Read { .. }), "{err}");
}
