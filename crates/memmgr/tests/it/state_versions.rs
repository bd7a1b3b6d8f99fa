//! `memory_manager_state` versions through the manager: v2 written while
//! `PodLevelResourceManagers` is on (as a v1.36 kubelet writes), v1, v2 and v1.37's v3 all
//! restored; pod-level assignments restored with the gate on and refused with it off.

use crate::support::state_file;
use std::collections::BTreeMap;

use corral_checkpoint::{
    Block, Checkpoint, MEMORY_MANAGER_FILE, MemoryManagerCheckpoint, MemoryManagerCheckpointV2,
    MemoryManagerCheckpointV3, PodMemoryEntry,
};
use corral_memmgr::{MemoryManager, MemoryManagerConfig, MemoryManagerError, MemoryPolicy};
use corral_topology::PodLevelResources;
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{AffinityStore, HintProvider, NumaMask};

use crate::manager::{config, file, guaranteed, machine};

const GI: u64 = 1 << 30;

fn manager(version: PodLevelResources) -> MemoryManager {
    let config = MemoryManagerConfig {
        pod_level_resources: version,
        ..config(MemoryPolicy::Static)
    };
    MemoryManager::new(&config, &machine()).unwrap()
}

/// A manager writing `version` into `dir`, with pod `p1`'s container on node 1.
fn with_one_container(dir: &std::path::Path, version: PodLevelResources) -> MemoryManager {
    let manager = manager(version);
    manager.start(state_file(dir)).unwrap();
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
    let manager = manager(PodLevelResources::Unmanaged);
    manager.start(state_file(dir))?;
    Ok(manager)
}

#[test]
fn v2_is_written_when_configured_and_every_version_restores() {
    let dir = tempfile::tempdir().unwrap();
    let first = with_one_container(dir.path(), PodLevelResources::Managed);
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
fn pod_level_assignments_stop_a_start_with_the_gate_off() {
    let dir = tempfile::tempdir().unwrap();
    drop(with_one_container(dir.path(), PodLevelResources::Managed));
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
    drop(with_one_container(dir.path(), PodLevelResources::Unmanaged));
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

/// A Guaranteed pod with pod-level resources (3 GiB): `a` is equivalent to Guaranteed
/// (2 GiB of its own), `b` has no resources (the pod's shared pool).
fn pod_level_pod() -> corral_topology::Pod {
    let mut a = corral_topology::Container::new("a");
    for list in [&mut a.resources.requests, &mut a.resources.limits] {
        list.cpu_millis = Some(1000);
        list.memory_bytes = Some(2 * GI as i64);
    }
    let mut resources = corral_topology::ResourceRequirements::default();
    for list in [&mut resources.requests, &mut resources.limits] {
        list.cpu_millis = Some(2000);
        list.memory_bytes = Some(3 * GI as i64);
    }
    corral_topology::Pod {
        uid: "pl".into(),
        containers: vec![a, corral_topology::Container::new("b")],
        resources: Some(resources),
        ..corral_topology::Pod::default()
    }
}

/// Upstream `AllocatePod` through the manager with the gate on: the pod's budget taken
/// once on its node, partitioned (own request, then the pod's shared pool), written as
/// v2 pod entries, restored, and given back with the last container.
#[test]
fn pod_level_memory_is_allocated_once_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let managed = || {
        let m = manager(PodLevelResources::Managed);
        m.start(state_file(dir.path())).unwrap();
        m
    };
    let first = managed();
    let free_before = free_on(&first, 1);
    let pod = pod_level_pod();
    let store = AffinityStore::new();
    for c in ["a", "b"] {
        store.set_affinity(
            "pl",
            c,
            TopologyHint {
                numa_affinity: Some(NumaMask::new([1]).unwrap()),
                preferred: true,
            },
        );
    }
    first.allocate_pod(&pod, &store).unwrap();
    let sizes = |m: &MemoryManager, c: &str| {
        m.container_memory("pl", c)
            .iter()
            .map(|b| (b.resource.clone(), b.size, b.numa_affinity.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(sizes(&first, "a"), [("memory".to_owned(), 2 * GI, vec![1])]);
    assert_eq!(sizes(&first, "b"), [("memory".to_owned(), GI, vec![1])]);
    assert_eq!(free_on(&first, 1), free_before - 3 * GI);
    let v2 = MemoryManagerCheckpointV2::decode(&file(dir.path())).unwrap();
    let entry = &v2.pod_entries.as_ref().unwrap()["pl"];
    assert_eq!(entry.memory_blocks.as_ref().unwrap()[0].size, 3 * GI);
    drop(first);

    // With the gate off, the pod-level blocks stop the start.
    let err = restarted(dir.path()).unwrap_err();
    assert!(
        matches!(&err, MemoryManagerError::PodLevelAssignments { .. }),
        "{err}"
    );
    let again = managed();
    assert_eq!(sizes(&again, "b"), [("memory".to_owned(), GI, vec![1])]);
    again.remove_container("pl", "a").unwrap();
    assert_eq!(free_on(&again, 1), free_before - 3 * GI);
    again.remove_container("pl", "b").unwrap();
    assert_eq!(free_on(&again, 1), free_before);
}

/// A spec whose exclusive containers take the whole budget is refused as upstream refuses
/// it, and nothing changes.
#[test]
fn an_empty_pod_shared_pool_is_an_admission_error() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(PodLevelResources::Managed);
    m.start(state_file(dir.path())).unwrap();
    let before = file(dir.path());
    let mut pod = pod_level_pod();
    let resources = &mut pod.containers[0].resources;
    for list in [&mut resources.requests, &mut resources.limits] {
        list.memory_bytes = Some(3 * GI as i64);
    }
    let err = m.allocate_pod(&pod, &AffinityStore::new()).unwrap_err();
    let corral_topology::AllocationError::Admission { reason, message } = err else {
        panic!("{err:?}");
    };
    assert_eq!(reason, "EmptyPodSharedPoolError");
    assert_eq!(
        message,
        "pod rejected, sum of exclusive container memory requests equals pod budget, leaving no memory for shared containers"
    );
    assert_eq!(file(dir.path()), before);
}

fn free_on(m: &MemoryManager, node: usize) -> u64 {
    m.machine_state().unwrap()[&node].memory["memory"].free
}
