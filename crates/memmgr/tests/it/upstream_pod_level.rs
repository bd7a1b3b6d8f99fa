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

use std::collections::BTreeMap;

use corral_memmgr::{
    AllocateError, Assignments, Block, MEMORY, MachineState, StaticPolicy, SystemReserved,
    default_machine_state,
};
use corral_topology::memory::NumaMemory;
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{Container, ContainerRestartPolicy, Pod, PodLevelResources};

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
        let got = policy.validate_pod_scope_resources(&pod);
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
            assert_eq!(
                (&e, e.to_string().as_str()),
                (&AllocateError::EmptyPodSharedPool(text.to_owned()), text),
                "{}",
                row.name
            );
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
