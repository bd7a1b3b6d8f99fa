//! The memory manager over a real state directory: `memory_manager_state` written at the
//! first start and after each change, restored at a restart, refused loudly when it is
//! damaged, of another policy, or no longer fits the machine; the reservation checked
//! against the node allocatable reservation with upstream's messages.

use crate::support::state_file;
use std::collections::BTreeMap;

use corral_checkpoint::{Checkpoint, MEMORY_MANAGER_FILE, MemoryManagerCheckpoint};
use corral_memmgr::{
    ConfigError, MEMORY, MemoryManager, MemoryManagerConfig, MemoryManagerError, MemoryPolicy,
    MemoryReservation, node_allocatable_reservation,
};
use corral_topology::memory::NumaMemory;
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{AffinityStore, Container, HintProvider, NumaMask, Pod};

const GI: u64 = 1 << 30;
const HP2M: &str = "hugepages-2Mi";

/// Two NUMA nodes of 16 GiB, 512 pages of 2 MiB each.
pub(crate) fn machine() -> BTreeMap<usize, NumaMemory> {
    crate::support::numa_memory(2, 16 * GI, 2048, 512)
}

/// `Static` with 1 GiB kept on node 0 and 512 MiB on node 1 (1536Mi allocatable
/// reservation: 1Gi system reserved, 412Mi kube reserved, the default 100Mi eviction).
pub(crate) fn config(policy: MemoryPolicy) -> MemoryManagerConfig {
    let reserved = |pairs| MemoryReservation::limits(pairs).unwrap();
    MemoryManagerConfig {
        policy,
        reserved_memory: vec![
            MemoryReservation::new(0, [(MEMORY, "1Gi")]).unwrap(),
            MemoryReservation::new(1, [(MEMORY, "512Mi")]).unwrap(),
        ],
        node_allocatable_reservation: node_allocatable_reservation(
            [MEMORY, HP2M],
            &reserved([(MEMORY, "1Gi")]),
            &reserved([(MEMORY, "412Mi")]),
            corral_memmgr::EvictionThreshold::parse("100Mi")
                .unwrap()
                .as_ref(),
            32 * GI,
        )
        .unwrap(),
        ..Default::default()
    }
}

fn started(
    dir: &std::path::Path,
    policy: MemoryPolicy,
) -> Result<MemoryManager, MemoryManagerError> {
    let manager = MemoryManager::new(&config(policy), &machine())?;
    manager.start(state_file(dir))?;
    Ok(manager)
}

pub(crate) fn guaranteed(uid: &str, memory: u64, pages: u64) -> (Pod, Container) {
    let mut c = Container::new("app");
    for list in [&mut c.resources.requests, &mut c.resources.limits] {
        list.cpu_millis = Some(1000);
        list.memory_bytes = Some(memory as i64);
        list.extended.insert(HP2M.into(), pages as i64);
    }
    let pod = Pod {
        uid: uid.into(),
        containers: vec![c.clone()],
        ..Pod::default()
    };
    (pod, c)
}

pub(crate) fn file(dir: &std::path::Path) -> Vec<u8> {
    std::fs::read(dir.join(MEMORY_MANAGER_FILE)).unwrap()
}

/// A manager of `policy` started in a fresh dir, and the checkpoint its start wrote.
fn first_start(
    policy: MemoryPolicy,
) -> (tempfile::TempDir, MemoryManager, MemoryManagerCheckpoint) {
    let dir = tempfile::tempdir().unwrap();
    let manager = started(dir.path(), policy).unwrap();
    let written = MemoryManagerCheckpoint::decode(&file(dir.path())).unwrap();
    assert_eq!(written.policy_name, policy.name());
    (dir, manager, written)
}

#[test]
fn the_first_start_writes_the_default_state_and_a_restart_restores_assignments() {
    let (dir, manager, first) = first_start(MemoryPolicy::Static);
    let node0 = &first.machine_state.as_ref().unwrap()[&0].as_ref().unwrap();
    let memory = node0.memory_map.as_ref().unwrap()[MEMORY].as_ref().unwrap();
    // 16 GiB less 1 GiB reserved less 1 GiB of huge pages.
    assert_eq!(memory.allocatable, 14 * GI);

    let (pod, c) = guaranteed("p1", 2 * GI, 256 << 20);
    let store = AffinityStore::new();
    let hint = TopologyHint {
        numa_affinity: Some(NumaMask::new([1]).unwrap()),
        preferred: true,
    };
    store.set_affinity("p1", "app", hint);
    manager.allocate(&pod, &c, &store).unwrap();
    assert_eq!(
        manager
            .memory_numa_nodes("p1", "app")
            .into_iter()
            .collect::<Vec<_>>(),
        [1]
    );
    let written = file(dir.path());

    drop(manager);
    let restarted = started(dir.path(), MemoryPolicy::Static).unwrap();
    assert_eq!(restarted.container_memory("p1", "app").len(), 2);
    // Restoring writes nothing; the file is what the allocation left.
    assert_eq!(file(dir.path()), written);
    // Allocatable memory: per node and type, what containers may have.
    let allocatable: Vec<(usize, String, u64)> = restarted
        .allocatable_memory()
        .into_iter()
        .map(|b| (b.numa_affinity[0], b.resource, b.size))
        .collect();
    assert_eq!(
        allocatable,
        [
            (0, HP2M.to_owned(), GI),
            (0, MEMORY.to_owned(), 14 * GI),
            (1, HP2M.to_owned(), GI),
            (1, MEMORY.to_owned(), 14 * GI + 512 * (1 << 20)),
        ]
    );
    restarted.remove_stale_state(&[]).unwrap();
    assert!(restarted.container_memory("p1", "app").is_empty());
    let cleared = MemoryManagerCheckpoint::decode(&file(dir.path())).unwrap();
    assert_eq!(cleared.machine_state, first.machine_state);
}

#[test]
fn the_none_policy_writes_an_empty_state_and_gives_no_hints() {
    let (_dir, manager, written) = first_start(MemoryPolicy::None);
    assert_eq!(written.machine_state, Some(BTreeMap::new()));
    let (pod, c) = guaranteed("p", GI, 0);
    assert_eq!(manager.hints_for_container(&pod, &c), None);
    assert_eq!(manager.hints_for_pod(&pod), None);
    manager.allocate(&pod, &c, &AffinityStore::new()).unwrap();
    assert!(manager.allocatable_memory().is_empty());
    assert!(manager.container_memory("p", "app").is_empty());
}

#[test]
fn a_state_of_another_policy_or_damaged_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    drop(started(dir.path(), MemoryPolicy::None).unwrap());
    let err = started(dir.path(), MemoryPolicy::Static).unwrap_err();
    assert!(
        matches!(err, MemoryManagerError::PolicyMismatch { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("configured policy \"Static\" differs from state checkpoint policy \"None\""),
        "{text}"
    );
    assert!(text.contains(MEMORY_MANAGER_FILE), "{text}");

    let mut bytes = file(dir.path());
    let at = bytes.len() - 3;
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(dir.path().join(MEMORY_MANAGER_FILE), &bytes).unwrap();
    let err = started(dir.path(), MemoryPolicy::None).unwrap_err();
    assert!(matches!(err, MemoryManagerError::Read { .. }), "{err}");
    // Nothing was rewritten over the damaged file.
    assert_eq!(file(dir.path()), bytes);
}

#[test]
fn a_state_the_machine_no_longer_matches_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let manager = started(dir.path(), MemoryPolicy::Static).unwrap();
    let (pod, c) = guaranteed("p1", GI, 0);
    manager.allocate(&pod, &c, &AffinityStore::new()).unwrap();
    drop(manager);
    let mut smaller = machine();
    smaller.get_mut(&1).unwrap().memory_bytes = 8 * GI;
    let manager = MemoryManager::new(&config(MemoryPolicy::Static), &smaller).unwrap();
    let err = manager.start(state_file(dir.path())).unwrap_err();
    assert!(
        matches!(err, MemoryManagerError::InvalidState { .. }),
        "{err}"
    );
    assert!(
        std::error::Error::source(&err)
            .unwrap()
            .to_string()
            .contains("the expected machine state is different from the real one")
    );
}

#[test]
fn reservations_are_checked_against_the_node_allocatable_reservation() {
    let mismatch = MemoryManagerConfig {
        reserved_memory: vec![MemoryReservation::new(0, [(MEMORY, "1Gi")]).unwrap()],
        ..config(MemoryPolicy::Static)
    };
    let err = MemoryManager::new(&mismatch, &machine()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the total amount \"1Gi\" of type \"memory\" is not equal to the value \"1536Mi\" determined by Node Allocatable feature"
    );
    let unknown = MemoryManagerConfig {
        reserved_memory: vec![MemoryReservation::new(2, [(MEMORY, "1536Mi")]).unwrap()],
        ..config(MemoryPolicy::Static)
    };
    let err = MemoryManager::new(&unknown, &machine()).unwrap_err();
    assert!(
        matches!(err, MemoryManagerError::Config(ConfigError::UnknownNode(2))),
        "{err}"
    );
    let none = MemoryManagerConfig {
        reserved_memory: Vec::new(),
        node_allocatable_reservation: BTreeMap::new(),
        policy: MemoryPolicy::Static,
        ..Default::default()
    };
    let err = MemoryManager::new(&none, &machine()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "[memorymanager] you should specify the system reserved memory"
    );
    // The None policy does not look at reservations.
    assert!(MemoryManager::new(&MemoryManagerConfig::default(), &machine()).is_ok());
}

#[test]
fn a_failed_write_rolls_the_allocation_back() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let manager = started(&state, MemoryPolicy::Static).unwrap();
    let before = manager.machine_state();
    // The state dir replaced by a file: the write fails.
    std::fs::remove_dir_all(&state).unwrap();
    std::fs::write(&state, b"not a dir").unwrap();
    let (pod, c) = guaranteed("p1", GI, 0);
    let err = manager
        .allocate(&pod, &c, &AffinityStore::new())
        .unwrap_err();
    assert!(format!("{err:?}").contains("Persist"), "{err:?}");
    assert_eq!(manager.machine_state(), before);
    assert!(manager.container_memory("p1", "app").is_empty());
}

/// An allocation has a search budget of its own: a decision whose hints used up theirs
/// still places the pod's memory (here without an affinity, where the memory manager
/// searches for the best set of nodes itself), and the decision is marked approximate.
#[test]
fn an_allocation_after_a_decision_out_of_budget_still_searches() {
    use corral_topology::topologymanager::{bounded, spend};
    let dir = tempfile::tempdir().unwrap();
    let manager = started(dir.path(), MemoryPolicy::Static).unwrap();
    let (pod, c) = guaranteed("p1", GI, 0);
    let (allocated, effort) = bounded(1, || {
        while spend(1) {}
        manager.allocate(&pod, &c, &AffinityStore::new())
    });
    allocated.unwrap();
    assert!(!effort.exact);
    assert!(!manager.memory_numa_nodes("p1", &c.name).is_empty());
}

/// A release gives memory back in node order (upstream `releaseMemory`), so allocating and
/// then releasing a container can move how a group's use is split among its nodes; a
/// snapshot puts back exactly the state it copied, and writes it.
#[test]
fn a_snapshot_puts_back_the_split_a_release_would_move() {
    let dir = tempfile::tempdir().unwrap();
    let manager = started(dir.path(), MemoryPolicy::Static).unwrap();
    let store = AffinityStore::new();
    let both = TopologyHint {
        numa_affinity: Some(NumaMask::new([0, 1]).unwrap()),
        preferred: true,
    };
    // 4 GiB on {0,1}: all from node 0.
    let (small, c) = guaranteed("small", 4 * GI, 0);
    store.set_affinity("small", "app", both);
    manager.allocate(&small, &c, &store).unwrap();
    let before = manager.machine_state();
    let written = file(dir.path());
    let snapshot = manager.snapshot();
    // 20 GiB on {0,1}: node 0's last 10, then 10 from node 1.
    let (big, c) = guaranteed("big", 20 * GI, 0);
    store.set_affinity("big", "app", both);
    manager.allocate(&big, &c, &store).unwrap();
    manager.remove_container("big", "app").unwrap();
    // Released from node 0 first: the small pod's 4 GiB now count on node 1.
    assert_ne!(manager.machine_state(), before);
    manager.allocate(&big, &c, &store).unwrap();
    manager.restore(snapshot).unwrap();
    assert_eq!(manager.machine_state(), before);
    assert_eq!(file(dir.path()), written);
    assert!(manager.container_memory("big", "app").is_empty());
}

/// `kubelet_memory_manager_pinning_{requests,errors}_total` count as upstream's static
/// policy does: each Guaranteed container (a second allocation of one already placed
/// included), not a Burstable one, and a failed allocation counts as both.
#[test]
fn pinning_counters_count_guaranteed_allocations_and_their_failures() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let manager = started(&state, MemoryPolicy::Static).unwrap();
    let counts = |m: &MemoryManager| {
        let metrics = m.metrics();
        (
            metrics.pinning_requests_total.load(Relaxed),
            metrics.pinning_errors_total.load(Relaxed),
        )
    };
    assert_eq!(counts(&manager), (0, 0));
    let (pod, c) = guaranteed("p1", GI, 0);
    manager.allocate(&pod, &c, &AffinityStore::new()).unwrap();
    manager.allocate(&pod, &c, &AffinityStore::new()).unwrap();
    assert_eq!(counts(&manager), (2, 0));

    let (mut burstable, mut b) = guaranteed("p2", GI, 0);
    b.resources.limits.memory_bytes = Some(2 * GI as i64);
    burstable.containers = vec![b.clone()];
    manager
        .allocate(&burstable, &b, &AffinityStore::new())
        .unwrap();
    assert_eq!(
        counts(&manager),
        (2, 0),
        "a Burstable container is not pinned"
    );

    // More memory than the machine has fails.
    let (huge, h) = guaranteed("p3", 64 * GI, 0);
    manager
        .allocate(&huge, &h, &AffinityStore::new())
        .unwrap_err();
    assert_eq!(counts(&manager), (3, 1));

    // A failed write counts as an error too.
    std::fs::remove_dir_all(&state).unwrap();
    std::fs::write(&state, b"not a dir").unwrap();
    let (pod, c) = guaranteed("p4", GI, 0);
    manager
        .allocate(&pod, &c, &AffinityStore::new())
        .unwrap_err();
    assert_eq!(counts(&manager), (4, 2));

    let none = started(&dir.path().join("none"), MemoryPolicy::None).unwrap();
    let (pod, c) = guaranteed("p5", GI, 0);
    none.allocate(&pod, &c, &AffinityStore::new()).unwrap();
    assert_eq!(counts(&none), (0, 0), "the None policy pins nothing");
}
