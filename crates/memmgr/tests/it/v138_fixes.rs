//! Upstream's v1.38 memory manager fixes, each against corral: a pod restored from
//! `memory_manager_state` and admitted again (pod scope) after a restart.
//!
//! - PR #141070 (fixes #141069): pod-scope hints of a restored multi-container pod come from
//!   what the pod holds, not from its first container's blocks compared with the pod's
//!   request.
//! - PR #141077 (fixes #140906): `AllocatePod` of a restored pod changes nothing (no second
//!   reservation, no extra `NumberOfAssignments`, no new nodes).
//! - PR #141994 (open upstream, fixes #141993): a pod entry with no container entries.
//!
//! The machine is upstream's `returnMachineInfo()` set-up of `policy_static_restore_test.go`
//! (two nodes, 1 GiB of memory reserved on each), as in `upstream_pod_level.rs`.

use std::collections::BTreeMap;
use std::path::Path;

use corral_checkpoint::{
    Block as CheckpointBlock, Checkpoint, MEMORY_MANAGER_FILE, MemoryManagerCheckpointV2,
    PodMemoryEntry,
};
use corral_memmgr::{
    MEMORY, MemoryManager, MemoryManagerConfig, MemoryManagerError, MemoryPolicy, MemoryReservation,
};
use corral_topology::topologymanager::{TopologyManager, TopologyManagerConfig};
use corral_topology::{
    AffinityStore, Container, HintProvider, NumaNode, Pod, PodLevelResources, Quantity,
    QuantitySum, ResourceRequirements,
};
use std::sync::Arc;

use crate::support::{GI, MI, hint, state_file};

fn config() -> MemoryManagerConfig {
    let mut sum = QuantitySum::new(None);
    sum.add(&Quantity::parse("2Gi").unwrap()).unwrap();
    MemoryManagerConfig {
        policy: MemoryPolicy::Static,
        reserved_memory: vec![
            MemoryReservation::new(0, [(MEMORY, "1Gi")]).unwrap(),
            MemoryReservation::new(1, [(MEMORY, "1Gi")]).unwrap(),
        ],
        node_allocatable_reservation: BTreeMap::from([(MEMORY.to_owned(), sum)]),
        pod_level_resources: PodLevelResources::Managed,
    }
}

/// A memory manager (re)started on the state in `dir`.
fn started(dir: &Path) -> Result<MemoryManager, MemoryManagerError> {
    let machine = crate::support::numa_memory(2, 10 * GI, 1 << 20, 5);
    let manager = MemoryManager::new(&config(), &machine)?;
    manager.start(state_file(dir))?;
    Ok(manager)
}

/// A Guaranteed container: one CPU and `memory` bytes, requests equal to limits.
fn guaranteed(name: &str, memory: u64) -> Container {
    crate::support::guaranteed(name, &[(MEMORY, memory)])
}

/// A pod of two Guaranteed containers of 50 MiB each; with `budget`, pod-level resources
/// (two CPUs and `budget` bytes), managed at pod level.
fn two_container_pod(budget: Option<u64>) -> Pod {
    let mut pod = crate::support::pod(
        "pod1",
        vec![],
        vec![guaranteed("c1", 50 * MI), guaranteed("c2", 50 * MI)],
    );
    pod.resources = budget.map(|bytes| {
        let mut resources = ResourceRequirements::default();
        for list in [&mut resources.requests, &mut resources.limits] {
            list.cpu_millis = Some(2000);
            list.memory_bytes = Some(i64::try_from(bytes).unwrap());
        }
        resources
    });
    pod
}

/// The pod allocated on node 1 (not where an empty machine would put it: node 0), as a
/// first kubelet run does for a pod-scope affinity of node 1.
fn allocate_on_node_1(manager: &MemoryManager, pod: &Pod) {
    let store = AffinityStore::new();
    for c in &pod.containers {
        store.set_affinity(&pod.uid, &c.name, hint(&[1], true));
    }
    if pod.resources.is_some() {
        HintProvider::allocate_pod(manager, pod, &store).unwrap();
    } else {
        for c in &pod.containers {
            HintProvider::allocate(manager, pod, c, &store).unwrap();
        }
    }
}

/// A pod-scope topology manager of `policy` over nodes 0 and 1 with `memory` as its
/// only hint provider.
fn pod_scope(policy: &str, memory: Arc<MemoryManager>) -> TopologyManager {
    let nodes = [0, 1].map(|id| NumaNode {
        id,
        distances: None,
    });
    let config = TopologyManagerConfig::from_strings(policy, "pod", &BTreeMap::new()).unwrap();
    let mut topology = TopologyManager::new(&config, &nodes)
        .unwrap()
        .with_pod_level_resources(PodLevelResources::Managed);
    topology.add_hint_provider(memory);
    topology
}

fn state_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(MEMORY_MANAGER_FILE)).unwrap()
}

/// PR #141070 (its regression test "Pod topology hint is restored from a multi-container pod
/// allocation", and `TestMemoryManagerRestoreState`'s "Container-level pod" rows): a
/// two-container Guaranteed pod allocated on node 1 — managed at pod level (128 MiB budget)
/// or container by container — is restarted from its checkpoint; its pod-scope memory hint
/// is the one preferred hint of node 1, and the topology manager admits it again under
/// `restricted` and `single-numa-node` with the affinity of node 1 for both containers.
///
/// Before corral's 09ff67f the pod-level pod got no hint (its first container's 50 MiB
/// compared with the 128 MiB budget), and before this test's commit so did the
/// container-level pod (50 MiB against 100 MiB): no preference, and the topology manager
/// gave the containers the affinity of both nodes, not node 1.
#[test]
fn a_restored_multi_container_pod_is_hinted_and_admitted_on_its_nodes() {
    for budget in [Some(128 * MI), None] {
        for policy in ["restricted", "single-numa-node"] {
            let case = format!("budget {budget:?}, {policy}");
            let dir = tempfile::tempdir().unwrap();
            let pod = two_container_pod(budget);
            allocate_on_node_1(&started(dir.path()).unwrap(), &pod);

            let restarted = Arc::new(started(dir.path()).unwrap());
            let hints = HintProvider::hints_for_pod(&*restarted, &pod);
            assert_eq!(
                hints.and_then(|h| h[MEMORY].clone()),
                Some(vec![hint(&[1], true)]),
                "{case}: the restored pod's hint"
            );
            let topology = pod_scope(policy, restarted.clone());
            let admitted = topology.admit(&pod);
            assert!(admitted.admit, "{case}: {admitted:?}");
            for c in &pod.containers {
                assert_eq!(
                    topology.affinity(&pod.uid, &c.name),
                    hint(&[1], true),
                    "{case}: {}",
                    c.name
                );
            }
        }
    }
}

/// PR #141077 (fixes #140906; upstream's check in `TestMemoryManagerRestoreState`): after a
/// restart, admitting the restored pod-level pod again — through the topology manager, and
/// with an `AllocatePod` whose affinity is another node — leaves the pod's blocks, its
/// containers' blocks, the machine state (free, reserved, `NumberOfAssignments`) and the
/// checkpoint's bytes as they were. corral never re-applied a restored pod allocation
/// (`StaticPolicy::allocate_pod` returns early for a pod holding pod-level blocks since
/// pod-level support, 77999d0); this pins it.
#[test]
fn re_admitting_a_restored_pod_leaves_the_state_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let pod = two_container_pod(Some(128 * MI));
    allocate_on_node_1(&started(dir.path()).unwrap(), &pod);
    let written = state_bytes(dir.path());

    let restarted = Arc::new(started(dir.path()).unwrap());
    let (state, assignments) = (restarted.machine_state(), restarted.assignments());
    let pod_blocks = restarted.pod_memory(&pod.uid);
    assert_eq!(state.as_ref().unwrap()[&1].number_of_assignments, 1);
    assert_eq!(
        state.as_ref().unwrap()[&1].memory[MEMORY].reserved,
        128 * MI
    );

    let topology = pod_scope("single-numa-node", restarted.clone());
    assert!(topology.admit(&pod).admit);
    let elsewhere = AffinityStore::new();
    for c in &pod.containers {
        elsewhere.set_affinity(&pod.uid, &c.name, hint(&[0], true));
    }
    HintProvider::allocate_pod(&*restarted, &pod, &elsewhere).unwrap();

    assert_eq!(restarted.machine_state(), state);
    assert_eq!(restarted.assignments(), assignments);
    assert_eq!(restarted.pod_memory(&pod.uid), pod_blocks);
    assert_eq!(state_bytes(dir.path()), written, "the checkpoint's bytes");
}

/// PR #141994 (open upstream; issue #141993: `validateState` rejects a pod entry without
/// container entries). The file of the issue — a pod entry, no container entry, the machine
/// state untouched — corral accepts, dropping the pod entry (`upstream_pod_level.rs`,
/// `memory_manager_restore_partial_pod_checkpoint`). A variant did leak: the pod listed
/// in `entries` with an empty container map and the machine state holding its 128 MiB.
/// The pod's blocks were counted in the restore check (so the file passed it) and then
/// dropped for having no container, so nothing owned the reservation and nothing ever
/// gave it back. Now a pod's blocks count only with container entries: the reservation no
/// container holds makes the machine state differ, and the file is refused at start, as
/// any other state that does not add up.
#[test]
fn a_pod_entry_with_an_empty_container_map_never_leaks_its_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let pod = two_container_pod(Some(128 * MI));
    allocate_on_node_1(&started(dir.path()).unwrap(), &pod);

    // The same file with the pod's container entries emptied (`"pod1": {}`).
    let path = dir.path().join(MEMORY_MANAGER_FILE);
    let mut v2 = MemoryManagerCheckpointV2::decode(&state_bytes(dir.path())).unwrap();
    let entries = v2.entries.as_mut().unwrap();
    entries.insert("pod1".to_owned(), Some(BTreeMap::new()));
    assert_eq!(
        v2.pod_entries.as_ref().unwrap()["pod1"],
        PodMemoryEntry {
            memory_blocks: Some(vec![CheckpointBlock {
                numa_affinity: Some(vec![1]),
                resource: MEMORY.into(),
                size: 128 * MI,
            }]),
        }
    );
    std::fs::write(&path, v2.encode().unwrap()).unwrap();

    match started(dir.path()) {
        Err(MemoryManagerError::InvalidState { .. }) => {}
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(manager) => {
            let state = manager.machine_state().unwrap();
            panic!(
                "accepted, pod blocks {:?}, node 1 reserved {} MiB with no owner",
                manager.pod_memory("pod1"),
                state[&1].memory[MEMORY].reserved / MI
            );
        }
    }
}
