//! Upstream `policy_static_test.go` (v1.36, commit a70df224aff081f14dc98188065eb7ff21caf352)
//! tests that set `PodLevelResourceManagers` on throughout: `TestValidatePodScopeResources`
//! and `TestStaticPolicyAllocatePod`, with [`PodLevelResources::Managed`] (corral's gate on).
//!
//! How upstream's set-up maps onto corral's API:
//! - `validatePodScopeResources` is [`StaticPolicy::validate_pod_scope_resources`], its error
//!   text compared whole; `AllocatePod` is [`StaticPolicy::allocate_pod`] with the fake
//!   topology manager's hint as the affinity (`&TopologyHint{}` is
//!   [`TopologyHint::default`]); its `EmptyPodSharedPoolError` is
//!   [`AllocateError::EmptyPodSharedPool`], whose text is upstream's `Error()`.
//! - Assignments compare as `areContainerMemoryAssignmentsEqual`, machine states as
//!   `areMachineStatesEqual` (free and reserved summed over a node's `cells`); corral's
//!   pod-level blocks (upstream's `PodMemoryAssignments`, which the test does not read) are
//!   asserted too: the pod's budget once, on the pod's nodes.
//! - Not ported: the `requiredMetrics` of `TestStaticPolicyAllocatePod`
//!   (`ResourceManagerAllocationsTotal`, `…AllocationErrorsTotal`, `…ContainerAssignments`):
//!   corral-memmgr keeps no metrics. The split they count (containers with memory of their
//!   own, containers of the pod's shared pool) is asserted through each container's blocks.

use crate::support::state_file;
use std::collections::BTreeMap;
use std::sync::Arc;

use corral_checkpoint::{
    Checkpoint, MEMORY_MANAGER_FILE, MemoryManagerCheckpointV2, PodMemoryEntry,
};
use corral_memmgr::{
    AllocateError, Assignments, Block, MEMORY, MachineState, MemoryManager, MemoryManagerConfig,
    MemoryPolicy, MemoryReservation, StaticPolicy, SystemReserved, default_machine_state,
};
use corral_topology::memory::NumaMemory;
use corral_topology::topologymanager::{TopologyHint, TopologyManager, TopologyManagerConfig};
use corral_topology::{
    AffinityStore, Container, ContainerRestartPolicy, HintProvider, NumaNode, Pod,
    PodLevelResources, Quantity, QuantitySum,
};

use crate::support::{GI, MI, hint};
use crate::upstream_policy_static::{assert_assignments, assert_state, block, mem, node, nodes};

/// A container of upstream's helpers: `name`, its memory `(request, limit)` in bytes (with
/// one CPU requested and limited) or nothing, and whether it is a sidecar.
type Spec = (&'static str, Option<(u64, u64)>, bool);

fn container((name, memory, sidecar): Spec, cpu_always: bool) -> Container {
    let mut c = Container::new(name);
    if memory.is_some() || cpu_always {
        for list in [&mut c.resources.requests, &mut c.resources.limits] {
            list.cpu_millis = Some(1000);
        }
    }
    if let Some((request, limit)) = memory {
        c.resources.requests.memory_bytes = Some(i64::try_from(request).unwrap());
        c.resources.limits.memory_bytes = Some(i64::try_from(limit).unwrap());
    }
    c.restart_policy = sidecar.then_some(ContainerRestartPolicy::Always);
    c
}

/// An exclusive container: `bytes` of memory requested and limited.
const fn own(name: &'static str, bytes: u64) -> Spec {
    (name, Some((bytes, bytes)), false)
}

/// A container without memory (the pod's shared pool).
const fn shared(name: &'static str) -> Spec {
    (name, None, false)
}

/// A sidecar (restartable init container), with memory of its own or not.
const fn sidecar(name: &'static str, bytes: Option<u64>) -> Spec {
    (
        name,
        match bytes {
            Some(b) => Some((b, b)),
            None => None,
        },
        true,
    )
}

// ---- TestValidatePodScopeResources ----

/// Upstream `makeMultiContainerPodWithOptionsAndPodLevelResources`: uid `podUID`, pod-level
/// memory `budget` requested and limited (nothing else at pod level), containers without
/// memory have no resources at all.
fn scope_pod(budget: u64, init: &[Spec], app: &[Spec]) -> Pod {
    let mut resources = corral_topology::ResourceRequirements::default();
    for list in [&mut resources.requests, &mut resources.limits] {
        list.memory_bytes = Some(i64::try_from(budget).unwrap());
    }
    Pod {
        uid: "podUID".into(),
        name: "pod".into(),
        init_containers: init.iter().map(|&s| container(s, false)).collect(),
        containers: app.iter().map(|&s| container(s, false)).collect(),
        resources: Some(resources),
        ..Pod::default()
    }
}

/// `TestValidatePodScopeResources`, its 13 rows (all with both gates on, pod scope), on
/// upstream's machine: one node of 8 GiB, 256 MiB kept for the system.
#[test]
fn validate_pod_scope_resources() {
    let empty_pool = "pod rejected, sum of exclusive container memory requests equals pod budget, leaving no memory for shared containers";
    type Row = (&'static str, Pod, Option<&'static str>);
    let rows: Vec<Row> = vec![
        (
            "Valid: Pod-level != Guaranteed containers, has podSharedPool containers, PLR: Enabled, PLRM: Enabled",
            scope_pod(2 * GI, &[], &[own("c1", GI), shared("c2")]),
            None,
        ),
        (
            "Valid: Only Guaranteed containers, PLR: Enabled, PLRM: Enabled",
            scope_pod(2 * GI, &[], &[own("c1", GI), own("c2", GI)]),
            None,
        ),
        (
            "Valid: Only podSharedPool containers, PLR: Enabled, PLRM: Enabled",
            scope_pod(2 * GI, &[], &[shared("c1"), shared("c2")]),
            None,
        ),
        (
            "Valid: Pod-level == Guaranteed containers, has podSharedPool containers with request, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                6 * GI,
                &[],
                &[
                    own("c1", 3 * GI),
                    own("c2", 2 * GI),
                    ("c3", Some((500 * GI, GI)), false),
                    shared("c4"),
                ],
            ),
            None,
        ),
        (
            "Failure: Pod-level == Guaranteed containers, has podSharedPool containers, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                5 * GI,
                &[],
                &[own("c1", 2 * GI), own("c2", 3 * GI), shared("c3")],
            ),
            Some(empty_pool),
        ),
        (
            "Valid: Pod-level resources with standard and restartable init containers, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                2 * GI,
                &[own("init-c1", GI), sidecar("restartable-init-c1", Some(GI))],
                &[shared("c1")],
            ),
            None,
        ),
        (
            "Valid: Pod-level resources equal init and standard container resources without non-guaranteed containers do not produce empty shared pool error, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                2 * GI,
                &[sidecar("restartable-init-c1", Some(GI))],
                &[own("c1", GI)],
            ),
            None,
        ),
        (
            "Failure: Pod-level resources when guaranteed sidecar that equals pod resources and then non-guaranteed init container produce empty shared pool error, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                2 * GI,
                &[
                    sidecar("restartable-init-c1", Some(2 * GI)),
                    shared("init-c1"),
                ],
                &[],
            ),
            Some("pod rejected, pod has shared init containers but no memory available for them"),
        ),
        (
            "Valid: Pod-level resources when non-guaranteed standard init container first and then guaranteed sidecar container do not produce empty shared pool error, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                2 * GI,
                &[
                    shared("init-c1"),
                    sidecar("restartable-init-c1", Some(2 * GI)),
                ],
                &[],
            ),
            None,
        ),
        (
            "Valid: Pod-level resources when guaranteed standard init container first and then guaranteed sidecar container do not produce empty shared pool error, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                2 * GI,
                &[
                    own("init-c1", 2 * GI),
                    sidecar("restartable-init-c1", Some(2 * GI)),
                ],
                &[],
            ),
            None,
        ),
        (
            "Failure: Pod-level resources when guaranteed sidecar container first and then guaranteed standard init container produce empty shared pool error, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                2 * GI,
                &[
                    sidecar("restartable-init-c1", Some(2 * GI)),
                    own("init-c1", 2 * GI),
                ],
                &[],
            ),
            Some(
                "pod rejected, largest exclusive init container requests 2147483648 of memory, but only 0 available",
            ),
        ),
        (
            "Failure: Pod-level == Restartable guaranteed init containers, has podSharedPool containers, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                2 * GI,
                &[
                    sidecar("restartable-init-c1", Some(2 * GI)),
                    sidecar("restartable-init-c2", None),
                ],
                &[],
            ),
            Some(empty_pool),
        ),
        (
            "Valid: Pod-level resources with only restartable one init container and one standard container, PLR: Enabled, PLRM: Enabled",
            scope_pod(
                2 * GI,
                &[sidecar("restartable-init-c", Some(GI))],
                &[own("c1", GI)],
            ),
            None,
        ),
    ];
    let machine = BTreeMap::from([(
        0,
        NumaMemory {
            node: 0,
            memory_bytes: 8 * GI,
            huge_pages: vec![],
        },
    )]);
    let reserved: SystemReserved =
        BTreeMap::from([(0, BTreeMap::from([(MEMORY.to_owned(), 256 * MI)]))]);
    let mut policy = StaticPolicy::new(default_machine_state(&machine, &reserved).unwrap());
    policy.set_pod_level_resources(PodLevelResources::Managed);
    for (name, pod, want) in rows {
        let got = policy
            .validate_pod_scope_resources(&pod)
            .map_err(|e| e.to_string());
        assert_eq!(got, want.map_or(Ok(()), |e| Err(e.to_owned())), "{name}");
    }
}

// ---- TestStaticPolicyAllocatePod ----

/// Upstream `getPodWithContainersAndPodLevelResources`: uid `uid`, pod-level CPU 3 and
/// memory (`request`, `limit`) bytes; every container requests and limits one CPU.
fn allocate_pod_pod(uid: &str, (request, limit): (u64, u64), init: &[Spec], app: &[Spec]) -> Pod {
    let mut resources = corral_topology::ResourceRequirements::default();
    resources.requests.cpu_millis = Some(3000);
    resources.limits.cpu_millis = Some(3000);
    resources.requests.memory_bytes = Some(i64::try_from(request).unwrap());
    resources.limits.memory_bytes = Some(i64::try_from(limit).unwrap());
    Pod {
        uid: uid.into(),
        name: uid.into(),
        init_containers: init.iter().map(|&s| container(s, true)).collect(),
        containers: app.iter().map(|&s| container(s, true)).collect(),
        resources: Some(resources),
        ..Pod::default()
    }
}

/// The machine state of every row: nodes 0 and 1 of 2 GiB of memory, 512 MiB of each kept
/// for the system, `reserved` bytes of their 1.5 GiB taken, in the node's group `cells`
/// (one assignment on a node where anything is taken).
fn two_nodes(reserved: [u64; 2], cells: [&[usize]; 2]) -> MachineState {
    let n = |i: usize| {
        let table = mem(
            1536 * MI,
            1536 * MI - reserved[i],
            reserved[i],
            512 * MI,
            2 * GI,
        );
        let count = u64::from(reserved[i] > 0);
        node(count, cells[i], &[table])
    };
    nodes(vec![n(0), n(1)])
}

fn fresh() -> MachineState {
    two_nodes([0, 0], [&[0], &[1]])
}

/// What a row expects: the machine state, the pod's nodes and each container's `memory`
/// block there (name, bytes).
type Allocated = (MachineState, &'static [usize], Vec<(&'static str, u64)>);

/// A row: the pod, the topology manager's hint, and the state, assignments (per container,
/// one `memory` block of so many bytes on the row's nodes) and pod-level block expected, or
/// upstream's error text.
struct AllocatePod {
    name: &'static str,
    pod: Pod,
    affinity: TopologyHint,
    want: Result<Allocated, &'static str>,
}

fn check_allocate_pod(row: AllocatePod) {
    let mut policy = StaticPolicy::new(fresh());
    policy.set_pod_level_resources(PodLevelResources::Managed);
    let before = policy.clone();
    let result = policy.allocate_pod(&row.pod, row.affinity);
    match (result, row.want) {
        (Ok(()), Ok((state, numa, containers))) => {
            let mut want = Assignments::new();
            if !containers.is_empty() {
                let blocks = containers
                    .iter()
                    .map(|&(c, size)| (c.to_owned(), vec![block(numa, MEMORY, size)]))
                    .collect();
                want.insert(row.pod.uid.clone(), blocks);
            }
            assert_assignments(row.name, policy.assignments(), &want);
            assert_state(row.name, policy.machine_state(), &state);
            let budget = row
                .pod
                .resources
                .as_ref()
                .and_then(|r| r.requests.memory_bytes)
                .map(|b| u64::try_from(b).unwrap());
            let pod_blocks: BTreeMap<String, Vec<Block>> = if containers.is_empty() {
                BTreeMap::new()
            } else {
                let blocks = vec![block(numa, MEMORY, budget.unwrap())];
                BTreeMap::from([(row.pod.uid.clone(), blocks)])
            };
            assert_eq!(policy.pod_blocks(), &pod_blocks, "{}: pod blocks", row.name);
        }
        (Err(e), Err(text)) => {
            assert!(
                matches!(e, AllocateError::EmptyPodSharedPool(_)),
                "{}: {e:?}",
                row.name
            );
            assert_eq!(e.to_string(), text, "{}", row.name);
            assert_eq!(
                policy, before,
                "{}: a refused pod changes nothing",
                row.name
            );
        }
        (got, want) => panic!("{}: got {got:?}, want {want:?}", row.name),
    }
}

/// `TestStaticPolicyAllocatePod`, its 10 rows (both gates on; the metrics are not ported,
/// see the module's notes). Container blocks only partition the pod's budget: the machine
/// state takes the budget once, one assignment on each of the pod's nodes.
#[test]
fn static_policy_allocate_pod() {
    let both: [&[usize]; 2] = [&[0, 1], &[0, 1]];
    let rows = vec![
        AllocatePod {
            name: "should successfully allocate memory for a guaranteed pod with pod-level resources",
            pod: allocate_pod_pod("pod1", (GI, GI), &[], &[own("container1", 512 * MI)]),
            affinity: hint(&[0], true),
            want: Ok((
                two_nodes([GI, 0], [&[0], &[1]]),
                &[0],
                vec![("container1", 512 * MI)],
            )),
        },
        // The hint's node 1 has 1.5 GiB free: extended to nodes 0 and 1.
        AllocatePod {
            name: "scope: pod, should allocate exclusive memory to a guaranteed pod with pod-level resources and guaranteed container, multi NUMA node, PodLevelResourceManagers enabled",
            pod: allocate_pod_pod("pod2", (2 * GI, 2 * GI), &[], &[own("container1", GI)]),
            affinity: hint(&[1], true),
            want: Ok((
                two_nodes([512 * MI, 1536 * MI], both),
                &[0, 1],
                vec![("container1", GI)],
            )),
        },
        AllocatePod {
            name: "scope: pod, should allocate exclusive memory to a guaranteed pod with pod-level resources and non-guaranteed container, multi NUMA node, PodLevelResourceManagers enabled",
            pod: allocate_pod_pod(
                "pod3",
                (2 * GI, 2 * GI),
                &[],
                &[shared("container1"), shared("container2")],
            ),
            affinity: hint(&[0, 1], true),
            want: Ok((
                two_nodes([GI, GI], both),
                &[0, 1],
                vec![("container1", 2 * GI), ("container2", 2 * GI)],
            )),
        },
        AllocatePod {
            name: "scope: pod, should allocate exclusive memory to a guaranteed pod with pod-level resources and mix of guaranteed and non-guaranteed containers, multi NUMA node, PodLevelResourceManagers enabled",
            pod: allocate_pod_pod(
                "pod3",
                (2 * GI, 2 * GI),
                &[],
                &[
                    own("container1", GI),
                    shared("container2"),
                    shared("container3"),
                ],
            ),
            affinity: hint(&[0, 1], true),
            want: Ok((
                two_nodes([GI, GI], both),
                &[0, 1],
                vec![("container1", GI), ("container2", GI), ("container3", GI)],
            )),
        },
        AllocatePod {
            name: "scope: pod, should allocate exclusive memory to a guaranteed pod with pod-level resources and mix of guaranteed standard and guaranteed init containers, multi NUMA node, PodLevelResourceManagers enabled",
            pod: allocate_pod_pod(
                "pod4",
                (2 * GI, 2 * GI),
                &[own("init-container1", 2 * GI)],
                &[own("container1", GI), shared("container2")],
            ),
            affinity: hint(&[0, 1], true),
            want: Ok((
                two_nodes([GI, GI], both),
                &[0, 1],
                vec![
                    ("init-container1", 2 * GI),
                    ("container1", GI),
                    ("container2", GI),
                ],
            )),
        },
        // A regular init container without memory gets the budget less the sidecars before
        // it; the sidecar's 1 GiB and container1's leave 1 GiB to the shared pool.
        AllocatePod {
            name: "scope: pod, should allocate exclusive memory to a guaranteed pod with pod-level resources and mix of guaranteed standard and guaranteed restartable and non-guaranteed standard init containers, multi NUMA node, PodLevelResourceManagers enabled",
            pod: allocate_pod_pod(
                "pod4",
                (3 * GI, 3 * GI),
                &[
                    shared("init-container1"),
                    sidecar("init-restartable-container2", Some(GI)),
                    shared("init-container3"),
                ],
                &[own("container1", GI), shared("container2")],
            ),
            affinity: hint(&[0, 1], true),
            want: Ok((
                two_nodes([1536 * MI, 1536 * MI], both),
                &[0, 1],
                vec![
                    ("init-container1", 3 * GI),
                    ("init-restartable-container2", GI),
                    ("init-container3", 2 * GI),
                    ("container1", GI),
                    ("container2", GI),
                ],
            )),
        },
        // A sidecar without memory shares the pool (3 GiB less container1's).
        AllocatePod {
            name: "scope: pod, should allocate exclusive memory to a guaranteed pod with pod-level resources and mix of guaranteed standard and non-guaranteed restartable and standard init containers, multi NUMA node, PodLevelResourceManagers enabled",
            pod: allocate_pod_pod(
                "pod4",
                (3 * GI, 3 * GI),
                &[
                    shared("init-container1"),
                    sidecar("init-restartable-container2", None),
                    shared("init-container3"),
                ],
                &[own("container1", GI), shared("container2")],
            ),
            affinity: hint(&[0, 1], true),
            want: Ok((
                two_nodes([1536 * MI, 1536 * MI], both),
                &[0, 1],
                vec![
                    ("init-container1", 3 * GI),
                    ("init-restartable-container2", 2 * GI),
                    ("init-container3", 3 * GI),
                    ("container1", GI),
                    ("container2", 2 * GI),
                ],
            )),
        },
        AllocatePod {
            name: "scope: pod, should allocate exclusive memory to a guaranteed pod with pod-level resources and mix of guaranteed standard and non-guaranteed init containers, multi NUMA node, PodLevelResourceManagers enabled",
            pod: allocate_pod_pod(
                "pod4",
                (2 * GI, 2 * GI),
                &[shared("init-container1")],
                &[own("container1", GI), shared("container2")],
            ),
            affinity: hint(&[0, 1], true),
            want: Ok((
                two_nodes([GI, GI], both),
                &[0, 1],
                vec![
                    ("init-container1", 2 * GI),
                    ("container1", GI),
                    ("container2", GI),
                ],
            )),
        },
        AllocatePod {
            name: "scope: pod, should reject a pod that would result in an empty pod shared pool",
            pod: allocate_pod_pod(
                "pod3",
                (2 * GI, 2 * GI),
                &[],
                &[
                    own("container1", GI),
                    own("container2", GI),
                    shared("container3"),
                ],
            ),
            affinity: TopologyHint::default(),
            want: Err(
                "pod rejected, sum of exclusive container memory requests equals pod budget, leaving no memory for shared containers",
            ),
        },
        // Burstable at pod level (1 GiB requested, 2 GiB limit): nothing, no error.
        AllocatePod {
            name: "scope: pod, should not allocate exclusive memory to a non-guaranteed pod with pod-level resources and guaranteed containers, PodLevelResourceManagers enabled",
            pod: allocate_pod_pod(
                "pod3",
                (GI, 2 * GI),
                &[],
                &[
                    own("container1", GI),
                    shared("container2"),
                    shared("container3"),
                ],
            ),
            affinity: TopologyHint::default(),
            want: Ok((fresh(), &[], vec![])),
        },
    ];
    for row in rows {
        check_allocate_pod(row);
    }
}

// ---- TestMemoryManagerRestoreState, TestMemoryManagerRestorePartialPodCheckpoint ----
//
// Upstream `policy_static_restore_test.go`: `TestMemoryManagerRestoreState` at v1.36
// (a70df224aff081f14dc98188065eb7ff21caf352, 4 rows), and its v1.37 development version
// (stored copy id 65922933765, after PR #141077; the tool that read it gives no commit), which
// adds two rows, the restored pod's hints and a second `AllocatePod` after the restart, and
// `TestMemoryManagerRestorePartialPodCheckpoint`. Upstream's `NewManager` / `Start` over a
// state directory are `MemoryManager::new` / `start` over a `CheckpointStore`; its fake
// topology manager's hint is the affinity stored for every container.

/// Upstream `returnMachineInfo()` with `reservedMemory` 1 GiB of memory on each node and a
/// node allocatable reservation of 2 GiB, the gate on (`Managed`) or off.
fn restore_config(gate_on: bool) -> MemoryManagerConfig {
    let mut sum = QuantitySum::new(None);
    sum.add(&Quantity::parse("2Gi").unwrap()).unwrap();
    MemoryManagerConfig {
        policy: MemoryPolicy::Static,
        reserved_memory: vec![
            MemoryReservation::new(0, [(MEMORY, "1Gi")]).unwrap(),
            MemoryReservation::new(1, [(MEMORY, "1Gi")]).unwrap(),
        ],
        node_allocatable_reservation: BTreeMap::from([(MEMORY.to_owned(), sum)]),
        pod_level_resources: if gate_on {
            PodLevelResources::Managed
        } else {
            PodLevelResources::Unmanaged
        },
    }
}

fn restore_manager(gate_on: bool, dir: &std::path::Path) -> MemoryManager {
    let machine = crate::support::numa_memory(2, 10 * GI, 1 << 20, 5);
    let manager = MemoryManager::new(&restore_config(gate_on), &machine).unwrap();
    manager.start(state_file(dir)).unwrap();
    manager
}

/// `getPodWithContainersAndPodLevelResources("pod1", budget, budget, nil, containers)`: no
/// pod-level resources without a budget.
fn restore_pod(budget: Option<u64>, app: &[Spec]) -> Pod {
    let mut pod = allocate_pod_pod("pod1", (budget.unwrap_or(0), budget.unwrap_or(0)), &[], app);
    if budget.is_none() {
        pod.resources = None;
    }
    pod
}

/// The memory hints of a pod: (nodes, preferred) each.
fn memory_hints(
    hints: Option<BTreeMap<String, Option<Vec<TopologyHint>>>>,
) -> Vec<(Vec<usize>, bool)> {
    hints
        .and_then(|h| h.get(MEMORY).cloned().flatten())
        .unwrap_or_default()
        .into_iter()
        .map(|h| {
            (
                h.numa_affinity.map(|m| m.get_bits()).unwrap_or_default(),
                h.preferred,
            )
        })
        .collect()
}

/// A row of `TestMemoryManagerRestoreState`.
struct RestoreRow {
    name: &'static str,
    gate_on: bool,
    budget: Option<u64>,
    containers: &'static [Spec],
    allocation_affinity: Option<&'static [usize]>,
    /// The restored pod's memory hint (one, preferred), or none.
    restored_hint: Option<&'static [usize]>,
}

/// `TestMemoryManagerRestoreState`, the 6 rows of its v1.37 development version (the 4 of
/// v1.36 among them); both gates on or both off except "PodLevelResources enabled,
/// PodLevelResourceManagers disabled" (corral's gate off). A pod with pod-level resources
/// and the gate on is allocated at pod level, any other pod container by container; the
/// manager is restarted on the same directory; the pod's blocks, its containers' blocks and
/// (v1.37) its memory hint are restored, and (v1.37) allocating the restored pod again
/// changes nothing. The rows "Container-level pod, features enabled / disabled" expect the
/// restored two-container pod (2 × 100 MiB) a preferred hint on node 0: its containers'
/// blocks summed (PR #141070), where v1.36 compared its first container's 100 MiB with the
/// pod's 200 MiB and gave none.
#[test]
fn memory_manager_restore_state() {
    const ONE: &[Spec] = &[own("container1", 100 * MI)];
    const TWO: &[Spec] = &[own("container1", 100 * MI), own("container2", 100 * MI)];
    const HALVES: &[Spec] = &[own("container1", 50 * MI), own("container2", 50 * MI)];
    let rows = [
        RestoreRow {
            name: "PodLevelResources and PodLevelResourceManagers enabled",
            gate_on: true,
            budget: Some(128 * MI),
            containers: ONE,
            allocation_affinity: None,
            restored_hint: Some(&[0]),
        },
        RestoreRow {
            name: "Pod topology hint is restored from a non-zero NUMA node",
            gate_on: true,
            budget: Some(128 * MI),
            containers: ONE,
            allocation_affinity: Some(&[1]),
            restored_hint: Some(&[1]),
        },
        RestoreRow {
            name: "Pod topology hint is restored from a multi-container pod allocation",
            gate_on: true,
            budget: Some(128 * MI),
            containers: HALVES,
            allocation_affinity: None,
            restored_hint: Some(&[0]),
        },
        RestoreRow {
            name: "PodLevelResources enabled, PodLevelResourceManagers disabled",
            gate_on: false,
            budget: Some(128 * MI),
            containers: ONE,
            allocation_affinity: None,
            restored_hint: None,
        },
        RestoreRow {
            name: "Container-level pod, features enabled",
            gate_on: true,
            budget: None,
            containers: TWO,
            allocation_affinity: None,
            restored_hint: Some(&[0]),
        },
        RestoreRow {
            name: "Container-level pod, features disabled",
            gate_on: false,
            budget: None,
            containers: TWO,
            allocation_affinity: None,
            restored_hint: Some(&[0]),
        },
    ];
    for row in rows {
        let name = row.name;
        let dir = tempfile::tempdir().unwrap();
        let pod = restore_pod(row.budget, row.containers);
        let store = AffinityStore::new();
        if let Some(nodes) = row.allocation_affinity {
            for c in &pod.containers {
                store.set_affinity(&pod.uid, &c.name, hint(nodes, true));
            }
        }
        let first = restore_manager(row.gate_on, dir.path());
        let pod_level = row.gate_on && row.budget.is_some();
        if pod_level {
            first.allocate_pod(&pod, &store).unwrap();
        } else {
            for c in &pod.containers {
                first.allocate(&pod, c, &store).unwrap();
            }
        }
        let nodes: &[usize] = row.allocation_affinity.unwrap_or(&[0]);
        let want_pod_blocks = match row.budget {
            Some(budget) if pod_level => vec![block(nodes, MEMORY, budget)],
            _ => vec![],
        };
        assert_eq!(first.pod_memory(&pod.uid), want_pod_blocks, "{name}");
        let (state, assignments) = (first.machine_state(), first.assignments());
        drop(first);

        let again = restore_manager(row.gate_on, dir.path());
        assert_eq!(
            again.pod_memory(&pod.uid),
            want_pod_blocks,
            "{name}: restored"
        );
        for (c, spec) in pod.containers.iter().zip(row.containers) {
            let want = match spec.1 {
                // Pod-level resources with the gate off: the pod gets nothing.
                _ if row.budget.is_some() && !row.gate_on => vec![],
                Some((bytes, _)) => vec![block(nodes, MEMORY, bytes)],
                None => unreachable!(),
            };
            assert_eq!(
                again.container_memory(&pod.uid, &c.name),
                want,
                "{name}: {}",
                c.name
            );
        }
        let want_hints: Vec<(Vec<usize>, bool)> = row
            .restored_hint
            .map(|n| vec![(n.to_vec(), true)])
            .unwrap_or_default();
        assert_eq!(
            memory_hints(again.hints_for_pod(&pod)),
            want_hints,
            "{name}: hints"
        );
        if pod_level {
            again.allocate_pod(&pod, &AffinityStore::new()).unwrap();
            assert_eq!(again.pod_memory(&pod.uid), want_pod_blocks, "{name}: again");
            assert_eq!(again.assignments(), assignments, "{name}: again");
            assert_eq!(again.machine_state(), state, "{name}: again");
        }
    }
}

/// `TestMemoryManagerRestorePartialPodCheckpoint` (v1.37 development, id 65922933765): a
/// kubelet with both gates on (pod scope, best-effort) stopped after writing the pod's
/// pod-level block of an admission and before its containers' blocks and the machine
/// state: the file holds a pod entry (128 MiB on node 0), no container entry, the machine
/// state untouched. Upstream accepts refusing the file at start, refusing the pod, or
/// admitting it whole. corral's own writes cannot leave such a file (a change is written
/// once, whole), but a kubelet's can; corral admits the pod again: the pod-level block the
/// validated machine state does not hold is dropped at start, and the pod then gets its
/// budget, its container's blocks and a hint on node 0, as upstream requires of an
/// admission.
#[test]
fn memory_manager_restore_partial_pod_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let mut pod = restore_pod(Some(128 * MI), &[own("container1", 100 * MI)]);
    pod.uid = "podUID".into();
    let before = restore_manager(true, dir.path()).machine_state().unwrap();

    // What the interrupted kubelet left: its fresh v2 file plus the pod's entry.
    let path = dir.path().join(MEMORY_MANAGER_FILE);
    let mut v2 = MemoryManagerCheckpointV2::decode(&std::fs::read(&path).unwrap()).unwrap();
    let entry = PodMemoryEntry {
        memory_blocks: Some(vec![corral_checkpoint::Block {
            numa_affinity: Some(vec![0]),
            resource: MEMORY.into(),
            size: 128 * MI,
        }]),
    };
    v2.pod_entries = Some(BTreeMap::from([("podUID".to_owned(), entry)]));
    std::fs::write(&path, v2.encode().unwrap()).unwrap();

    let restored = Arc::new(restore_manager(true, dir.path()));
    assert_eq!(restored.machine_state().unwrap(), before);
    assert_eq!(
        restored.pod_memory("podUID"),
        vec![],
        "the orphan block is dropped"
    );

    let nodes = [0, 1].map(|id| NumaNode {
        id,
        distances: None,
    });
    let config =
        TopologyManagerConfig::from_strings("best-effort", "pod", &BTreeMap::new()).unwrap();
    let mut topology = TopologyManager::new(&config, &nodes)
        .unwrap()
        .with_pod_level_resources(PodLevelResources::Managed);
    topology.add_hint_provider(restored.clone());
    let admitted = topology.admit(&pod);
    assert!(admitted.admit, "{admitted:?}");
    assert_eq!(topology.affinity("podUID", "container1"), hint(&[0], true));
    assert_eq!(
        restored.container_memory("podUID", "container1"),
        vec![block(&[0], MEMORY, 100 * MI)]
    );
    assert_eq!(
        restored.pod_memory("podUID"),
        vec![block(&[0], MEMORY, 128 * MI)]
    );
    let after = restored.machine_state().unwrap();
    assert_ne!(
        after, before,
        "the pod's reservation is in the machine state"
    );
    let taken = before[&0].memory[MEMORY].free - after[&0].memory[MEMORY].free;
    assert_eq!(taken, 128 * MI);
    // And it is what the file now holds, once.
    let written = MemoryManagerCheckpointV2::decode(&std::fs::read(&path).unwrap()).unwrap();
    let entries = written.pod_entries.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries["podUID"].memory_blocks.as_ref().unwrap()[0].size,
        128 * MI
    );
}
