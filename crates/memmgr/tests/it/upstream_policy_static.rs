//! Upstream `policy_static_test.go` (v1.36, commit a70df224) row by row: `TestStaticPolicyStart`,
//! `TestStaticPolicyAllocate`, `TestStaticPolicyAllocateWithInitContainers`,
//! `TestStaticPolicyAllocateWithRestartableInitContainers`, `TestStaticPolicyRemoveContainer`,
//! `TestStaticPolicyGetTopologyHints`, `TestStaticPolicyGetPodTopologyHints`,
//! `Test_getPodRequestedResources` and `Test_isAffinityViolatingNUMAAllocations`, as corral
//! runs by default: `PodLevelResources` on, `PodLevelResourceManagers` off (a pod with
//! pod-level resources gets no hints and no memory). The hint rows with
//! `PodLevelResourceManagers` on run with [`PodLevelResources::Managed`] (corral's gate on);
//! `TestStaticPolicyAllocatePod` and `TestValidatePodScopeResources`, which set the gate on
//! throughout, are ported in their own module (`upstream_pod_level`).
//!
//! How upstream's set-up maps onto corral's API:
//! - Upstream writes a row's machine state and assignments straight into its state; corral's
//!   policy takes them through [`StaticPolicy::restore`], which checks that the assignments
//!   account for the state. Two rows ("should do nothing once container(s) already exist
//!   under the state file") give a node `numberOfAssignments` 0 and no `cells` beside their
//!   blocks; here that node has the count and cell its blocks imply, given and expected
//!   alike. Rows with blocks and no machine state (hints regenerated from the blocks) get a
//!   roomy node holding them, allocated through the policy.
//! - The topology manager's hint upstream's fake store returns is `allocate`'s affinity;
//!   `&TopologyHint{}` is [`TopologyHint::default`].
//! - Machine states compare as upstream's `areMachineStatesEqual` (per resource the same
//!   total, system reserved and allocatable, and free and reserved summed over the node's
//!   `cells`), assignments as `areContainerMemoryAssignmentsEqual` (blocks in any order),
//!   errors by variant and upstream's text.
//! - Upstream's CPU quantity "1000Mi" in these pods is one CPU here: only its equality with
//!   the limit (the pod's QoS) matters.

use std::collections::BTreeMap;

use corral_memmgr::hints::MemoryHints;
use corral_memmgr::{
    AllocateError, Assignments, Block, MEMORY, MachineState, MachineStateError, MemoryTable,
    NodeState, RestoreError, StaticPolicy, SystemReserved, default_machine_state, pod_requested,
};
use corral_topology::memory::{HugePages, NumaMemory};
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{
    Container, ContainerRestartPolicy, Pod, PodLevelResources, ResourceRequirements,
};

use crate::support::{GI, HP1G, HP2M, MI, guaranteed, hint, pod, set};

// ---- Upstream's literals, compactly ----

/// Upstream's `MemoryTable` literal, in its field order: allocatable, free, reserved, system
/// reserved, total.
pub(crate) fn t(
    allocatable: u64,
    free: u64,
    reserved: u64,
    system_reserved: u64,
    total: u64,
) -> MemoryTable {
    MemoryTable {
        total,
        system_reserved,
        allocatable,
        reserved,
        free,
    }
}

/// A `memory` table (upstream's field order, as [`t`]).
pub(crate) fn mem(
    a: u64,
    free: u64,
    reserved: u64,
    sr: u64,
    total: u64,
) -> (&'static str, MemoryTable) {
    (MEMORY, t(a, free, reserved, sr, total))
}

/// A huge page table of `total` bytes, none kept for the system, `reserved` of them taken.
fn hp(resource: &'static str, total: u64, reserved: u64) -> (&'static str, MemoryTable) {
    (resource, t(total, total - reserved, reserved, 0, total))
}

/// The `memory` table upstream uses most: a 2 GiB node keeping 512 MiB for the system,
/// 1 GiB for its huge page, `free` of its 1.5 GiB allocatable bytes free.
fn mem_2g(free: u64) -> (&'static str, MemoryTable) {
    mem(1536 * MI, free, 1536 * MI - free, 512 * MI, 2 * GI)
}

/// A NUMA node: `numberOfAssignments`, `cells` and its tables.
pub(crate) fn node(assignments: u64, cells: &[usize], tables: &[(&str, MemoryTable)]) -> NodeState {
    NodeState {
        number_of_assignments: assignments,
        memory: tables
            .iter()
            .map(|(resource, table)| ((*resource).to_owned(), table.clone()))
            .collect(),
        cells: cells.to_vec(),
    }
}

/// A node of 512 MiB of memory (and 512 MiB for the system) and 1 GiB of pages, `r` and
/// `pages` bytes of them taken.
fn half_gi(cells: &[usize], r: u64, pages: u64, count: u64) -> NodeState {
    let m = mem(512 * MI, 512 * MI - r, r, 512 * MI, GI);
    node(count, cells, &[m, hp(HP1G, GI, pages)])
}

/// NUMA nodes 0, 1, … in order.
pub(crate) fn nodes(list: Vec<NodeState>) -> MachineState {
    list.into_iter().enumerate().collect()
}

pub(crate) fn block(numa_affinity: &[usize], resource: &str, size: u64) -> Block {
    Block {
        numa_affinity: numa_affinity.to_vec(),
        resource: resource.to_owned(),
        size,
    }
}

/// The tables of upstream's usual node: [`mem_2g`] and 1 GiB of pages, all free.
fn unused_2g() -> [(&'static str, MemoryTable); 2] {
    [mem_2g(1536 * MI), hp(HP1G, GI, 0)]
}

/// Blocks of `size` bytes of memory and of 1 GiB pages on `numa`.
fn both(numa: &[usize], size: u64) -> Vec<Block> {
    vec![block(numa, MEMORY, size), block(numa, HP1G, size)]
}

/// (pod uid, container, blocks) → assignments.
fn assigned(list: Vec<(&str, &str, Vec<Block>)>) -> Assignments {
    let mut out = Assignments::new();
    for (uid, container, blocks) in list {
        out.entry(uid.to_owned())
            .or_default()
            .insert(container.to_owned(), blocks);
    }
    out
}

/// Every resource of `resources` with the same hints, `(nodes, preferred)` each.
fn hints(resources: &[&str], list: &[(&[usize], bool)]) -> Option<MemoryHints> {
    let list: Vec<TopologyHint> = list.iter().map(|(n, p)| hint(n, *p)).collect();
    Some(
        resources
            .iter()
            .map(|r| ((*r).to_owned(), list.clone()))
            .collect(),
    )
}

/// `requirementsGuaranteed`: 1 GiB of memory and 1 GiB of 1 GiB pages.
fn req_guaranteed(name: &str) -> Container {
    guaranteed(name, &[(MEMORY, GI), (HP1G, GI)])
}

/// `requirementsBurstable`: the requests of `requirementsGuaranteed`, limits of 2 GiB.
fn req_burstable(name: &str) -> Container {
    let mut c = req_guaranteed(name);
    for resource in [MEMORY, HP1G] {
        set(&mut c.resources.limits, resource, 2 * GI);
    }
    c
}

/// Upstream's `getPod`: one app container.
fn get_pod(uid: &str, container: Container) -> Pod {
    pod(uid, vec![], vec![container])
}

/// Upstream's `getPodWithPodLevelResources`: `getPod` with pod-level resources, 1 GiB of
/// memory and one CPU (`podLevelRequirementsGuaranteed`) or half a CPU requested
/// (`podLevelRequirementsBurstable`).
fn pod_level(uid: &str, guaranteed_pod: bool, container: Container) -> Pod {
    let mut p = get_pod(uid, container);
    let mut resources = ResourceRequirements::default();
    resources.limits.cpu_millis = Some(1000);
    resources.requests.cpu_millis = Some(if guaranteed_pod { 1000 } else { 500 });
    for list in [&mut resources.limits, &mut resources.requests] {
        set(list, MEMORY, GI);
    }
    p.resources = Some(resources);
    p
}

/// No NUMA affinity from the topology manager, preferred or not.
fn no_affinity(preferred: bool) -> TopologyHint {
    TopologyHint {
        numa_affinity: None,
        preferred,
    }
}

// ---- Set-up and comparisons ----

/// The policy of a row's machine state and assignments (see the module's notes).
fn policy(state: &MachineState, assignments: &Assignments) -> StaticPolicy {
    if assignments.is_empty() {
        return StaticPolicy::new(state.clone());
    }
    if state.is_empty() {
        return holding(assignments);
    }
    StaticPolicy::restore(state, assignments.clone(), unassigned(state))
        .unwrap_or_else(|e| panic!("the row's assignments do not account for its state: {e}"))
}

/// `state` with every block given back: what the machine had before them.
fn unassigned(state: &MachineState) -> MachineState {
    let mut before = state.clone();
    for node in before.values_mut() {
        node.number_of_assignments = 0;
        for table in node.memory.values_mut() {
            table.free += table.reserved;
            table.reserved = 0;
        }
    }
    before
}

/// One roomy node (32 GiB of memory, 16 GiB each of 1 GiB and 2 MiB pages) holding
/// `assignments`: each container's blocks allocated to a Guaranteed container asking their
/// sizes, with their nodes as the affinity.
fn holding(assignments: &Assignments) -> StaticPolicy {
    let pages = |page_size_kib, count| HugePages {
        page_size_kib,
        count,
    };
    let huge_pages = vec![pages(1 << 20, 16), pages(2048, 8192)];
    let roomy = NumaMemory {
        node: 0,
        memory_bytes: 64 * GI,
        huge_pages,
    };
    let machine = default_machine_state(&BTreeMap::from([(0, roomy)]), &BTreeMap::new()).unwrap();
    let mut policy = StaticPolicy::new(machine);
    for (uid, containers) in assignments {
        for (name, blocks) in containers {
            let asks: Vec<(&str, u64)> = blocks.iter().map(|b| (&*b.resource, b.size)).collect();
            let c = guaranteed(name, &asks);
            let affinity = hint(&blocks[0].numa_affinity, true);
            let p = pod(uid, vec![], vec![c.clone()]);
            policy.allocate(&p, &c, affinity).unwrap();
        }
    }
    assert_eq!(sorted(policy.assignments()), sorted(assignments));
    policy
}

/// Each container's blocks in one order (upstream compares them in any order).
fn sorted(assignments: &Assignments) -> Assignments {
    let mut out = assignments.clone();
    for blocks in out.values_mut().flat_map(BTreeMap::values_mut) {
        blocks
            .sort_by(|a, b| (&a.resource, &a.numa_affinity).cmp(&(&b.resource, &b.numa_affinity)));
    }
    out
}

/// Upstream's `areMachineStatesEqual`.
pub(crate) fn same_state(got: &MachineState, want: &MachineState) -> bool {
    let set = |cells: &[usize]| {
        let mut cells = cells.to_vec();
        cells.sort_unstable();
        cells
    };
    // Free and reserved bytes of `resource` over the nodes of `cells`.
    let over = |state: &MachineState, cells: &[usize], resource: &str| {
        let tables = cells.iter().map(|c| state.get(c)?.memory.get(resource));
        tables
            .map(|table| table.map(|t| (t.free, t.reserved)))
            .try_fold((0, 0), |sum, t| t.map(|(f, r)| (sum.0 + f, sum.1 + r)))
    };
    got.len() == want.len()
        && got.iter().all(|(id, node)| {
            let Some(other) = want.get(id) else {
                return false;
            };
            let tables_agree = node.memory.iter().all(|(resource, table)| {
                other.memory.get(resource).is_some_and(|w| {
                    (table.total, table.system_reserved, table.allocatable)
                        == (w.total, w.system_reserved, w.allocatable)
                        && over(got, &node.cells, resource) == over(want, &node.cells, resource)
                })
            });
            node.number_of_assignments == other.number_of_assignments
                && set(&node.cells) == set(&other.cells)
                && node.memory.len() == other.memory.len()
                && tables_agree
        })
}

pub(crate) fn assert_state(row: &str, got: &MachineState, want: &MachineState) {
    assert!(
        same_state(got, want),
        "{row}: machine state\n got {got:#?}\nwant {want:#?}"
    );
}

pub(crate) fn assert_assignments(row: &str, got: &Assignments, want: &Assignments) {
    assert_eq!(sorted(got), sorted(want), "{row}: assignments");
}

// ---- TestStaticPolicyStart ----

/// A row of `TestStaticPolicyStart`: a stored state and assignments, checked at start
/// against the machine.
struct Start {
    name: &'static str,
    /// cadvisor's nodes: memory bytes and 1 GiB pages.
    machine: &'static [(u64, u64)],
    /// `memory` kept for the system, per node (none past the list).
    reserved: &'static [u64],
    state: MachineState,
    assignments: Assignments,
    /// The state started with (the assignments unchanged), or upstream's error and text.
    want: Result<MachineState, (RestoreError, &'static str)>,
}

/// A row on one of upstream's usual machines (512 MiB of memory for the system on node 0)
/// whose state does not match it.
fn refused(
    name: &'static str,
    machine: &'static [(u64, u64)],
    state: MachineState,
    assignments: Assignments,
) -> Start {
    let want = Err((
        RestoreError::MachineStateDiffers,
        "[memorymanager] the expected machine state is different from the real one",
    ));
    let reserved = &[512 * MI];
    Start {
        name,
        machine,
        reserved,
        state,
        assignments,
        want,
    }
}

impl Start {
    /// The row's nodes and their system reserved memory.
    fn machine(&self) -> (BTreeMap<usize, NumaMemory>, SystemReserved) {
        let node = |(id, &(memory_bytes, pages)): (usize, &(u64, u64))| {
            let huge_pages = (pages > 0).then_some(HugePages {
                page_size_kib: 1 << 20,
                count: pages,
            });
            let huge_pages = huge_pages.into_iter().collect();
            (
                id,
                NumaMemory {
                    node: id,
                    memory_bytes,
                    huge_pages,
                },
            )
        };
        let reserved = self.reserved.iter().enumerate();
        let reserved = reserved.map(|(id, &r)| (id, BTreeMap::from([(MEMORY.to_owned(), r)])));
        (
            self.machine.iter().enumerate().map(node).collect(),
            reserved.collect(),
        )
    }

    /// Upstream's `getDefaultMachineState`, with its `uint64` arithmetic wrapping where a
    /// node has less memory than its huge pages and system reserved memory.
    fn wrapping_default(&self) -> MachineState {
        let state = self
            .machine
            .iter()
            .enumerate()
            .map(|(id, &(memory, pages))| {
                let system = self.reserved.get(id).copied().unwrap_or(0);
                let allocatable = memory.wrapping_sub(system).wrapping_sub(pages * GI);
                let mut tables = vec![mem(allocatable, allocatable, 0, system, memory)];
                if pages > 0 {
                    tables.push(hp(HP1G, pages * GI, 0));
                }
                node(0, &[id], &tables)
            });
        nodes(state.collect())
    }
}

/// Starts the row's policy on the machine's default state. Where upstream's default state
/// wraps (three rows give a node more huge pages and system memory than memory), corral
/// refuses to build one; the row's state is then checked against upstream's wrapped one.
fn check_start(row: Start) {
    let (machine, reserved) = row.machine();
    let default = match default_machine_state(&machine, &reserved) {
        Ok(default) => {
            assert_eq!(default, row.wrapping_default(), "{}", row.name);
            default
        }
        Err(e) => {
            assert!(
                matches!(e, MachineStateError::Overcommitted { node: 0, .. }),
                "{}: {e:?}",
                row.name
            );
            let wrapped = row.wrapping_default();
            assert!(
                wrapped[&0].memory[MEMORY].allocatable > 1 << 63,
                "{}",
                row.name
            );
            wrapped
        }
    };
    let started = StaticPolicy::restore(&row.state, row.assignments.clone(), default);
    match (started, &row.want) {
        (Ok(policy), Ok(want)) => {
            assert_state(row.name, policy.machine_state(), want);
            assert_assignments(row.name, policy.assignments(), &row.assignments);
        }
        (Err(e), Err((want, text))) => {
            assert_eq!((&e, e.to_string().as_str()), (want, *text), "{}", row.name);
        }
        (got, want) => panic!("{}: got {got:?}, want {want:?}", row.name),
    }
}

/// `TestStaticPolicyStart`, its 15 rows. The first has no machine (upstream fails before
/// reading it), so it keeps no memory for the system either.
#[test]
fn static_policy_start() {
    let one = |count, tables: &[(&str, MemoryTable)]| nodes(vec![node(count, &[0], tables)]);
    let fresh = one(0, &unused_2g());
    let none = Assignments::new;
    let container1 = |blocks| assigned(vec![("pod1", "container1", blocks)]);
    let hp_gi = |uid, name| (uid, name, vec![block(&[0], HP1G, GI)]);
    let named = |pod: &str| (pod.to_owned(), "container1".to_owned());
    let (pod, container) = named("pod1");
    let mut rows = vec![
        Start {
            name: "should fail, if machine state is empty, but it has memory assignments",
            machine: &[],
            reserved: &[],
            state: MachineState::new(),
            assignments: assigned(vec![(
                "pod",
                "container1",
                vec![block(&[0], MEMORY, 512 * MI)],
            )]),
            want: Err((
                RestoreError::EmptyMachineState,
                "[memorymanager] machine state can not be empty when it has memory assignments",
            )),
        },
        Start {
            want: Ok(one(
                0,
                &[
                    mem(1536 * MI, 1536 * MI, 0, 512 * MI, 3 * GI),
                    hp(HP1G, GI, 0),
                ],
            )),
            ..refused(
                "should fill the state with default values, when the state is empty",
                &[(3 * GI, 1)],
                MachineState::new(),
                none(),
            )
        },
        refused(
            "should fail when machine state does not have all NUMA nodes",
            &[(2 * GI, 1), (2 * GI, 1)],
            fresh.clone(),
            none(),
        ),
        refused(
            "should fail when machine state does not have memory resource",
            &[(2 * GI, 1)],
            one(0, &[hp(HP1G, GI, 0)]),
            none(),
        ),
        refused(
            "should fail when machine state has wrong size of total memory",
            &[(2 * GI, 1)],
            one(0, &[mem(1536 * MI, 1536 * MI, 0, 512 * MI, 1536 * MI)]),
            none(),
        ),
        refused(
            "should fail when machine state has wrong size of system reserved memory",
            &[(2 * GI, 1)],
            one(0, &[mem(1536 * MI, 1536 * MI, 0, 1024, 2 * GI)]),
            none(),
        ),
        refused(
            "should fail when machine state reserved memory is different from the memory of all containers memory assignments",
            &[(2 * GI, 1)],
            one(1, &[mem_2g(1536 * MI)]),
            assigned(vec![(
                "pod",
                "container1",
                vec![block(&[0], MEMORY, 512 * MI)],
            )]),
        ),
        refused(
            "should fail when machine state has wrong size of hugepages",
            &[(2 * GI, 2)],
            fresh.clone(),
            none(),
        ),
        refused(
            "should fail when machine state has wrong size of system reserved hugepages",
            &[(2 * GI, 2)],
            one(0, &[mem_2g(1536 * MI), (HP1G, t(GI, GI, 0, GI, 2 * GI))]),
            none(),
        ),
        refused(
            "should fail when the hugepages reserved machine state is different from the hugepages of all containers memory assignments",
            &[(2 * GI, 4)],
            one(2, &[mem_2g(1536 * MI), hp(HP1G, 4 * GI, 3 * GI)]),
            assigned(vec![
                hp_gi("pod1", "container1"),
                hp_gi("pod2", "container2"),
            ]),
        ),
        Start {
            want: Err((
                RestoreError::UnknownNode {
                    pod: pod.clone(),
                    container: container.clone(),
                },
                "[memorymanager] (pod: pod1, container: container1) the memory assignment uses the NUMA that does not exist",
            )),
            ..refused(
                "should fail when machine state does not have NUMA node that used under the memory assignment",
                &[(2 * GI, 1)],
                fresh,
                container1(vec![block(&[1], MEMORY, GI)]),
            )
        },
        Start {
            want: Err((
                RestoreError::UnknownResource { pod, container },
                "[memorymanager] (pod: pod1, container: container1) the memory assignment uses memory resource that does not exist",
            )),
            ..refused(
                "should fail when machine state does not have resource that used under the memory assignment",
                &[(2 * GI, 1)],
                one(2, &unused_2g()),
                container1(vec![block(&[0], MEMORY, GI), block(&[0], HP2M, GI)]),
            )
        },
        refused(
            "should fail when machine state number of assignments is different from the expected one",
            &[(2 * GI, 1)],
            one(1, &unused_2g()),
            container1(both(&[0], GI)),
        ),
    ];
    // "should validate cross NUMA reserved memory vs container assignments".
    let cross = |free| {
        let m = mem(640 * MI, free, 640 * MI - free, 512 * MI, 2176 * MI);
        node(4, &[0, 1], &[m, hp(HP1G, GI, GI)])
    };
    let cross = nodes(vec![cross(0), cross(256 * MI)]);
    let two = |memory, pages| vec![block(&[0, 1], MEMORY, memory), block(&[0, 1], HP1G, pages)];
    rows.push(Start {
        name: "should validate cross NUMA reserved memory vs container assignments",
        machine: &[(2176 * MI, 1), (2176 * MI, 1)],
        reserved: &[512 * MI, 512 * MI],
        state: cross.clone(),
        assignments: assigned(vec![
            ("pod1", "container1", two(768 * MI, GI)),
            ("pod2", "container2", two(256 * MI, GI)),
        ]),
        want: Ok(cross),
    });
    // "should validate the totalFree and totalReserved size for a resource within a group":
    // the state splits the group's memory otherwise than the expected one, with the same sums.
    let group = |free0: u64, free1: u64| {
        let n = |free| {
            node(
                2,
                &[0, 1],
                &[mem(220 * MI, free, 220 * MI - free, 20 * MI, 240 * MI)],
            )
        };
        nodes(vec![n(free0), n(free1)])
    };
    let memory = |size| vec![block(&[0, 1], MEMORY, size)];
    rows.push(Start {
        name: "should validate the totalFree and totalReserved size for a resource within a group",
        machine: &[(240 * MI, 0), (240 * MI, 0)],
        reserved: &[20 * MI, 20 * MI],
        state: group(10 * MI, 180 * MI),
        assignments: assigned(vec![
            ("pod1", "container1", memory(240 * MI)),
            ("pod2", "container2", memory(10 * MI)),
        ]),
        want: Ok(group(30 * MI, 160 * MI)),
    });
    assert_eq!(rows.len(), 15);
    rows.into_iter().for_each(check_start);
}

// ---- TestStaticPolicyAllocate, …WithInitContainers, …WithRestartableInitContainers ----

/// A row of the allocation tables.
struct Allocation {
    name: &'static str,
    state: MachineState,
    assignments: Assignments,
    pod: Pod,
    /// The topology manager's hint for every container.
    affinity: TopologyHint,
    /// The state and assignments in the end, or upstream's error and its text.
    want: Result<(MachineState, Assignments), (AllocateError, &'static str)>,
}

/// Allocates the row's first app container (`TestStaticPolicyAllocate`) or every container,
/// init containers first (the init container tables), stopping at the first error.
fn check_allocation(row: Allocation, every: bool) {
    let mut policy = policy(&row.state, &row.assignments);
    let before = policy.clone();
    let containers: Vec<&Container> = if every {
        row.pod
            .init_containers
            .iter()
            .chain(&row.pod.containers)
            .collect()
    } else {
        vec![&row.pod.containers[0]]
    };
    let result = containers
        .into_iter()
        .try_for_each(|c| policy.allocate(&row.pod, c, row.affinity));
    match (result, &row.want) {
        (Ok(()), Ok((state, assignments))) => {
            assert_assignments(row.name, policy.assignments(), assignments);
            assert_state(row.name, policy.machine_state(), state);
        }
        (Err(e), Err((want, text))) => {
            assert_eq!((&e, e.to_string().as_str()), (want, *text), "{}", row.name);
            assert_eq!(
                policy, before,
                "{}: a failed allocation changes nothing",
                row.name
            );
        }
        (got, want) => panic!("{}: got {got:?}, want {want:?}", row.name),
    }
}

/// The node of "should do nothing for non-guaranteed pods" and "… with pod level
/// resources": 1.5 GiB of memory and 1 GiB of pages free, no `cells`.
fn untouched() -> MachineState {
    nodes(vec![node(0, &[], &unused_2g())])
}

/// Node 0 holds 512 MiB of 1 GiB (its container `pod1/container1`), nodes 1 and 2 have
/// 512 MiB each; 1 GiB of pages each.
fn half_used_of_three() -> (MachineState, Assignments) {
    let n = |count, cells: &[usize], a: u64, r: u64| {
        node(
            count,
            cells,
            &[mem(a, a - r, r, 512 * MI, 1536 * MI), hp(HP1G, GI, 0)],
        )
    };
    let state = nodes(vec![
        n(1, &[0], GI, 512 * MI),
        n(0, &[1], 512 * MI, 0),
        n(0, &[2], 512 * MI, 0),
    ]);
    let held = assigned(vec![(
        "pod1",
        "container1",
        vec![block(&[0], MEMORY, 512 * MI)],
    )]);
    (state, held)
}

/// `TestStaticPolicyAllocate`, its 10 rows (the last with `PodLevelResources` on).
#[test]
fn static_policy_allocate() {
    let guaranteed_of = |uid, name| get_pod(uid, req_guaranteed(name));
    let single =
        |count, m: (&'static str, MemoryTable), pages| nodes(vec![node(count, &[0], &[m, pages])]);
    // "should do nothing once container already exists under the state file": upstream's
    // node has no assignment and no cells beside its block (see the module's notes).
    let existing = single(1, mem_2g(512 * MI), hp(HP1G, GI, 0));
    let existing_blocks = assigned(vec![("pod1", "container1", vec![block(&[0], MEMORY, GI)])]);
    let (three, held) = half_used_of_three();
    // "should fail when NUMA affinity … did not satisfy container requirements and extended
    // hint generation failed": nodes 1 and 2 are a group with 512 MiB free each.
    let grouped = || node(1, &[1, 2], &[mem_2g(512 * MI), hp(HP1G, GI, 0)]);
    let rows = vec![
        Allocation {
            name: "should do nothing for non-guaranteed pods",
            state: untouched(),
            assignments: Assignments::new(),
            pod: get_pod("pod1", req_burstable("container1")),
            affinity: TopologyHint::default(),
            want: Ok((untouched(), Assignments::new())),
        },
        Allocation {
            name: "should do nothing once container already exists under the state file",
            state: existing.clone(),
            assignments: existing_blocks.clone(),
            pod: guaranteed_of("pod1", "container1"),
            affinity: TopologyHint::default(),
            want: Ok((existing, existing_blocks)),
        },
        Allocation {
            name: "should calculate a default topology hint when no NUMA affinity was provided by the topology manager hint",
            state: single(0, mem_2g(1536 * MI), hp(HP1G, GI, 0)),
            assignments: Assignments::new(),
            pod: guaranteed_of("pod1", "container1"),
            affinity: TopologyHint::default(),
            want: Ok((
                single(2, mem_2g(512 * MI), hp(HP1G, GI, GI)),
                assigned(vec![("pod1", "container1", both(&[0], GI))]),
            )),
        },
        Allocation {
            name: "should fail when no NUMA affinity was provided under the topology manager hint and calculation of the default hint failed",
            state: single(2, mem_2g(512 * MI), hp(HP1G, GI, GI)),
            assignments: assigned(vec![("pod1", "container1", both(&[0], GI))]),
            pod: guaranteed_of("pod2", "container2"),
            affinity: TopologyHint::default(),
            want: Err((
                AllocateError::NoDefaultAffinity,
                "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available",
            )),
        },
        Allocation {
            name: "should fail when no NUMA affinity was provided under the topology manager preferred hint and default hint has preferred false",
            state: three.clone(),
            assignments: held.clone(),
            pod: guaranteed_of("pod2", "container2"),
            affinity: no_affinity(true),
            want: Err((
                AllocateError::NoDefaultPreferredHint,
                "[memorymanager] failed to find the default preferred hint",
            )),
        },
        Allocation {
            name: "should fail when NUMA affinity provided under the topology manager hint did not satisfy container requirements and extended hint generation failed",
            state: nodes(vec![half_gi(&[0], 0, 0, 0), grouped(), grouped()]),
            assignments: Assignments::new(),
            pod: guaranteed_of("pod1", "container1"),
            affinity: hint(&[0], false),
            want: Err((
                AllocateError::NoExtension,
                "[memorymanager] failed to find NUMA nodes to extend the current topology hint",
            )),
        },
        Allocation {
            name: "should fail when the topology manager provided the preferred hint and extended hint has preferred false",
            state: three,
            assignments: held,
            pod: guaranteed_of("pod2", "container2"),
            affinity: hint(&[1], true),
            want: Err((
                AllocateError::NoExtendedPreferredHint,
                "[memorymanager] failed to find the extended preferred hint",
            )),
        },
        Allocation {
            name: "should succeed to allocate memory from multiple NUMA nodes",
            state: nodes((0..4).map(|i| half_gi(&[i], 0, 0, 0)).collect()),
            assignments: Assignments::new(),
            pod: guaranteed_of("pod1", "container1"),
            affinity: no_affinity(true),
            want: Ok((
                nodes(vec![
                    half_gi(&[0, 1], 512 * MI, GI, 2),
                    half_gi(&[0, 1], 512 * MI, 0, 2),
                    half_gi(&[2], 0, 0, 0),
                    half_gi(&[3], 0, 0, 0),
                ]),
                assigned(vec![("pod1", "container1", both(&[0, 1], GI))]),
            )),
        },
        Allocation {
            name: "should validate NUMA node can not have both single and cross NUMA node memory allocations",
            state: nodes(vec![
                node(
                    1,
                    &[0],
                    &[
                        mem(1536 * MI, 512 * MI, GI, 512 * MI, 2176 * MI),
                        hp(HP1G, GI, 0),
                    ],
                ),
                node(
                    0,
                    &[1],
                    &[
                        mem(512 * MI, 512 * MI, 0, 512 * MI, 2176 * MI),
                        hp(HP1G, GI, 0),
                    ],
                ),
            ]),
            assignments: assigned(vec![("pod1", "container1", vec![block(&[0], MEMORY, GI)])]),
            pod: guaranteed_of("pod2", "container1"),
            affinity: hint(&[0, 1], true),
            want: Err((
                AllocateError::ViolatesNumaAllocation,
                "[memorymanager] preferred hint violates NUMA node allocation",
            )),
        },
        Allocation {
            name: "should do nothing for guaranteed pod with pod level resources",
            state: untouched(),
            assignments: Assignments::new(),
            pod: pod_level("pod1", true, req_guaranteed("container1")),
            affinity: TopologyHint::default(),
            want: Ok((untouched(), Assignments::new())),
        },
    ];
    assert_eq!(rows.len(), 10);
    rows.into_iter()
        .for_each(|row| check_allocation(row, false));
}

/// A row of the init container tables: one node of `memory` (allocatable, total) bytes,
/// 512 MiB of it for the system, and `pages` bytes of 1 GiB pages; containers `(name, GiB,
/// sidecar)` asking the GiB of memory and of pages each, allocated with no affinity; in
/// the end `reserved` GiB of each taken, two assignments a container, and each init
/// container's blocks `left[i]` GiB.
fn reuse(
    name: &'static str,
    memory: (u64, u64),
    pages: u64,
    inits: &[(&str, u64, bool)],
    apps: &[(&str, u64)],
    left: &[u64],
    reserved: u64,
) -> Allocation {
    let (allocatable, total) = memory;
    let ask = |name: &str, gi: u64| guaranteed(name, &[(MEMORY, gi * GI), (HP1G, gi * GI)]);
    let init: Vec<Container> = inits
        .iter()
        .map(|&(name, gi, sidecar)| {
            let mut c = ask(name, gi);
            c.restart_policy = sidecar.then_some(ContainerRestartPolicy::Always);
            c
        })
        .collect();
    let app = apps.iter().map(|&(name, gi)| ask(name, gi)).collect();
    let state = |count, taken| {
        let m = mem(allocatable, allocatable - taken, taken, 512 * MI, total);
        nodes(vec![node(count, &[0], &[m, hp(HP1G, pages, taken)])])
    };
    let sizes = inits.iter().zip(left).map(|(&(name, ..), &gi)| (name, gi));
    let sizes = sizes.chain(apps.iter().copied());
    let blocks = sizes.map(|(name, gi)| ("pod1", name, both(&[0], gi * GI)));
    let count = 2 * (inits.len() + apps.len()) as u64;
    Allocation {
        name,
        state: state(0, 0),
        assignments: Assignments::new(),
        pod: pod("pod1", init, app),
        affinity: TopologyHint::default(),
        want: Ok((state(count, reserved * GI), assigned(blocks.collect()))),
    }
}

/// `TestStaticPolicyAllocateWithInitContainers`, its 4 rows. The last row's stale reusable
/// memory of another pod (`"pod0": {}`) cannot be planted through corral's API; the row
/// runs without it (it holds nothing either way).
#[test]
fn static_policy_allocate_with_init_containers() {
    let apps = ["container1", "container2"];
    let inits = ["initContainer1", "initContainer2"];
    // (name, machine, GiB asked by the init and the app containers, the init containers'
    // blocks in the end, GiB reserved in the end).
    type Row = (&'static str, u64, [u64; 2], [u64; 2], [u64; 2], u64);
    let rows: [Row; 4] = [
        (
            "should re-use init containers memory, init containers requests 1Gi and 2Gi, apps containers 3Gi and 4Gi",
            8,
            [1, 2],
            [3, 4],
            [0, 0],
            7,
        ),
        (
            "should re-use init containers memory, init containers requests 4Gi and 3Gi, apps containers 2Gi and 1Gi",
            8,
            [4, 3],
            [2, 1],
            [0, 1],
            4,
        ),
        (
            "should re-use init containers memory, init containers requests 7Gi and 4Gi, apps containers 4Gi and 3Gi",
            8,
            [7, 4],
            [4, 3],
            [0, 0],
            7,
        ),
        (
            "should re-use init containers memory, init containers requests 7Gi and 4Gi, apps containers 5Gi and 2Gi",
            10,
            [7, 4],
            [5, 2],
            [0, 0],
            7,
        ),
    ];
    let rows = rows.map(|(name, machine, init, app, left, reserved)| {
        let init: Vec<_> = inits
            .iter()
            .zip(init)
            .map(|(n, gi)| (*n, gi, false))
            .collect();
        let app: Vec<_> = apps.iter().copied().zip(app).collect();
        // Upstream's 8 GiB node keeps 512 MiB of its memory for the system; its 10 GiB
        // node's table does not take them off its allocatable memory.
        let memory = if machine == 8 {
            (7680 * MI, 8 * GI)
        } else {
            (10 * GI, 10 * GI)
        };
        reuse(name, memory, machine * GI, &init, &app, &left, reserved)
    });
    rows.into_iter().for_each(|row| check_allocation(row, true));
}

/// `TestStaticPolicyAllocateWithRestartableInitContainers`, its 2 rows. In the first,
/// upstream's node has no assignment and no cells beside the two blocks (see the module's
/// notes).
#[test]
fn static_policy_allocate_with_restartable_init_containers() {
    let mut sidecar = req_guaranteed("initContainer1");
    sidecar.restart_policy = Some(ContainerRestartPolicy::Always);
    let blocks = |name| ("pod1", name, vec![block(&[0], MEMORY, GI)]);
    let held = assigned(vec![blocks("initContainer1"), blocks("container1")]);
    let state = nodes(vec![node(
        2,
        &[0],
        &[
            mem(2560 * MI, 512 * MI, 2048 * MI, 512 * MI, 3 * GI),
            hp(HP1G, 2 * GI, 0),
        ],
    )]);
    let existing = Allocation {
        name: "should do nothing once containers already exist under the state file",
        state: state.clone(),
        assignments: held.clone(),
        pod: pod("pod1", vec![sidecar], vec![req_guaranteed("container1")]),
        affinity: TopologyHint::default(),
        want: Ok((state, held)),
    };
    let sidecars = reuse(
        "should not re-use restartable init containers memory",
        (7 * GI, 7680 * MI),
        7 * GI,
        &[
            ("initContainer1", 1, false),
            ("restartableInitContainer2", 2, true),
            ("initContainer3", 3, false),
            ("restartableInitContainer4", 4, true),
        ],
        &[("container1", 1)],
        &[0, 2, 0, 4],
        7,
    );
    for row in [existing, sidecars] {
        check_allocation(row, true);
    }
}

// ---- TestStaticPolicyRemoveContainer ----

/// `TestStaticPolicyRemoveContainer`, its 3 rows: `pod1/container1` removed, the state
/// expected, no assignment left.
#[test]
fn static_policy_remove_container() {
    let rows = [
        (
            "should do nothing when the container does not exist under the state",
            untouched(),
            Assignments::new(),
            untouched(),
        ),
        (
            "should delete the container assignment and update the machine state",
            nodes(vec![node(2, &[0], &[mem_2g(512 * MI), hp(HP1G, GI, GI)])]),
            assigned(vec![("pod1", "container1", both(&[0], GI))]),
            nodes(vec![node(0, &[0], &unused_2g())]),
        ),
        (
            "should delete the cross NUMA container assignment and update the machine state",
            nodes(vec![
                half_gi(&[0, 1], 512 * MI, GI, 2),
                half_gi(&[0, 1], 512 * MI, 0, 2),
            ]),
            assigned(vec![("pod1", "container1", both(&[0, 1], GI))]),
            nodes(vec![half_gi(&[0], 0, 0, 0), half_gi(&[1], 0, 0, 0)]),
        ),
    ];
    for (name, state, assignments, want) in rows {
        let mut policy = policy(&state, &assignments);
        policy.remove_container("pod1", "container1");
        assert_assignments(name, policy.assignments(), &Assignments::new());
        assert_state(name, policy.machine_state(), &want);
    }
}

// ---- TestStaticPolicyGetTopologyHints, TestStaticPolicyGetPodTopologyHints ----

/// A row of the hint tables: hints for the pod's first app container, or for the pod.
struct Hints {
    name: &'static str,
    state: MachineState,
    assignments: Assignments,
    pod: Pod,
    want: Option<MemoryHints>,
    /// `PodLevelResourceManagers` (and `PodLevelResources`) on: the policy manages pods
    /// with pod-level resources ([`PodLevelResources::Managed`]).
    gate_on: bool,
}

fn check_hints(rows: Vec<Hints>, of: impl Fn(&StaticPolicy, &Pod) -> Option<MemoryHints>) {
    for row in rows {
        let mut policy = policy(&row.state, &row.assignments);
        if row.gate_on {
            policy.set_pod_level_resources(PodLevelResources::Managed);
        }
        assert_eq!(of(&policy, &row.pod), row.want, "{}", row.name);
    }
}

/// Nodes 0 and 1 of 2 GiB of memory and 1 GiB of pages, unused.
fn two_free_nodes() -> MachineState {
    let n = |id| {
        node(
            0,
            &[id],
            &[mem(2 * GI, 2 * GI, 0, 512 * MI, 3 * GI), hp(HP1G, GI, 0)],
        )
    };
    nodes(vec![n(0), n(1)])
}

/// [`two_free_nodes`] without huge pages (the memory-only nodes of the pod-scope rows with
/// the gate on).
fn two_free_memory_nodes() -> MachineState {
    let n = |id| node(0, &[id], &[mem(2 * GI, 2 * GI, 0, 512 * MI, 3 * GI)]);
    nodes(vec![n(0), n(1)])
}

/// A row with no machine state, no assignment.
fn bare(name: &'static str, pod: Pod) -> Hints {
    let (state, assignments, want) = (MachineState::new(), Assignments::new(), None);
    Hints {
        name,
        state,
        assignments,
        pod,
        want,
        gate_on: false,
    }
}

/// [`bare`] with `PodLevelResourceManagers` on.
fn bare_on(name: &'static str, pod: Pod) -> Hints {
    Hints {
        gate_on: true,
        ..bare(name, pod)
    }
}

/// A row whose `pod1/container1` holds `blocks`, asking `requirementsGuaranteed`.
fn held(name: &'static str, blocks: Vec<Block>, want: Option<MemoryHints>) -> Hints {
    let assignments = assigned(vec![("pod1", "container1", blocks)]);
    let pod = get_pod("pod1", req_guaranteed("container1"));
    Hints {
        name,
        state: MachineState::new(),
        assignments,
        pod,
        want,
        gate_on: false,
    }
}

/// `TestStaticPolicyGetTopologyHints`, its 10 rows; the last two with
/// `PodLevelResourceManagers` on. With the gate on, a Guaranteed pod's container that is
/// itself equivalent to Guaranteed is hinted on its own request (memory and pages); a
/// Burstable pod gets none.
#[test]
fn static_policy_get_topology_hints() {
    let resources = [MEMORY, HP1G];
    let group = |free: u64, pages_resource, pages_total, pages_reserved| {
        let m = mem_2g(free);
        node(
            2,
            &[0, 1],
            &[m, hp(pages_resource, pages_total, pages_reserved)],
        )
    };
    let unused = |id| node(0, &[id], &unused_2g());
    let hp2m_pod = get_pod(
        "pod2",
        guaranteed("container2", &[(MEMORY, GI), (HP2M, 16 * MI)]),
    );
    let rows = vec![
        bare(
            "should not provide topology hints for non-guaranteed pods",
            get_pod("pod1", req_burstable("container1")),
        ),
        held(
            "should provide topology hints based on the existent memory assignment",
            both(&[0], GI),
            hints(&resources, &[(&[0], true)]),
        ),
        Hints {
            name: "should calculate new topology hints, when the container does not exist under assignments",
            state: nodes(vec![
                group(0, HP1G, GI, GI),
                group(GI, HP1G, GI, GI),
                unused(2),
                unused(3),
            ]),
            assignments: assigned(vec![("pod1", "container1", both(&[0, 1], 2 * GI))]),
            pod: get_pod("pod2", req_guaranteed("container2")),
            want: hints(&resources, &[(&[2], true), (&[3], true), (&[2, 3], false)]),
            gate_on: false,
        },
        held(
            "should fail when number of existing memory assignment resources are different from resources requested by container",
            vec![block(&[0], MEMORY, GI)],
            None,
        ),
        held(
            "should fail when existing memory assignment resources are different from resources requested by container",
            vec![block(&[0], MEMORY, GI), block(&[0], HP2M, GI)],
            None,
        ),
        held(
            "should fail when existing memory assignment size is different from one requested by the container",
            vec![block(&[0], MEMORY, 512 * MI), block(&[0], HP1G, GI)],
            None,
        ),
        Hints {
            name: "should not return preferred hints with multiple NUMA nodes for the pod with resources satisfied by a single NUMA node",
            state: nodes(vec![
                group(0, HP2M, 20 * MI, 20 * MI),
                group(GI, HP2M, 20 * MI, 4 * MI),
            ]),
            assignments: assigned(vec![(
                "pod1",
                "container1",
                vec![
                    block(&[0, 1], MEMORY, 2 * GI),
                    block(&[0, 1], HP2M, 24 * MI),
                ],
            )]),
            pod: hp2m_pod,
            want: hints(&[MEMORY, HP2M], &[(&[0, 1], false)]),
            gate_on: false,
        },
        bare(
            "should not provide topology hints for guaranteed pod with pod level resources",
            pod_level("pod1", true, req_guaranteed("container1")),
        ),
        Hints {
            name: "should provide pod topology hints for guaranteed pod with pod level resources when PodLevelResourceManagers is enabled",
            state: two_free_nodes(),
            assignments: Assignments::new(),
            pod: pod_level("pod1", true, req_guaranteed("container1")),
            want: hints(&resources, &[(&[0], true), (&[1], true), (&[0, 1], false)]),
            gate_on: true,
        },
        bare_on(
            "should not provide pod topology hints for burstable pod with pod level resources when PodLevelResourceManagers is enabled",
            pod_level("pod1", false, req_guaranteed("container1")),
        ),
    ];
    check_hints(rows, |policy, pod| {
        policy.hints_for_container(pod, &pod.containers[0])
    });
}

/// `TestStaticPolicyGetPodTopologyHints`, its 7 rows; the last four with
/// `PodLevelResourceManagers` on. With the gate on, a Guaranteed pod with pod-level
/// resources is hinted on its pod-level requests (1 GiB of memory, no pages), whatever its
/// containers ask (Burstable ones included); a Burstable pod gets none.
#[test]
fn static_policy_get_pod_topology_hints() {
    let rows = vec![
        Hints {
            name: "should provide pod topology hints for guaranteed pod without container level resources when PodLevelResources and PodLevelResourceManagers are disabled",
            state: two_free_nodes(),
            assignments: Assignments::new(),
            pod: get_pod("pod1", req_guaranteed("container1")),
            want: hints(
                &[MEMORY, HP1G],
                &[(&[0], true), (&[1], true), (&[0, 1], false)],
            ),
            gate_on: false,
        },
        bare(
            "should not provide pod topology hints for burstable pod with container level resources when PodLevelResources and PodLevelResourceManagers are disabled",
            get_pod("pod1", req_burstable("container1")),
        ),
        bare(
            "should not provide pod topology hints for guaranteed pod with pod level resources when PodLevelResourceManagers is disabled",
            pod_level("pod1", true, req_guaranteed("container1")),
        ),
        Hints {
            name: "should provide pod topology hints for guaranteed pod with pod level resources when PodLevelResourceManagers is enabled",
            state: two_free_memory_nodes(),
            assignments: Assignments::new(),
            pod: pod_level("pod1", true, req_guaranteed("container1")),
            want: hints(&[MEMORY], &[(&[0], true), (&[1], true), (&[0, 1], false)]),
            gate_on: true,
        },
        Hints {
            name: "should provide pod topology hints for guaranteed pod with pod level resources that overrides container level resources",
            state: two_free_memory_nodes(),
            assignments: Assignments::new(),
            pod: pod_level("pod1", true, req_burstable("container1")),
            want: hints(&[MEMORY], &[(&[0], true), (&[1], true), (&[0, 1], false)]),
            gate_on: true,
        },
        bare_on(
            "should not provide pod topology hints for burstable pod with pod level resources when PodLevelResourceManagers is enabled",
            pod_level("pod1", false, req_guaranteed("container1")),
        ),
        bare_on(
            "should not provide pod topology hints for burstable pod with pod level and container level burstable resources",
            pod_level("pod1", false, req_burstable("container1")),
        ),
    ];
    check_hints(rows, |policy, pod| policy.hints_for_pod(pod));
}

// ---- Test_getPodRequestedResources, Test_isAffinityViolatingNUMAAllocations ----

/// `Test_getPodRequestedResources`, its 5 rows: containers requesting (without limits)
/// GiB of memory and of 1 GiB pages; init containers marked `true` are restartable.
#[test]
fn get_pod_requested_resources() {
    let requests = |name: String, (memory, pages): (u64, u64)| {
        let mut c = Container::new(name);
        set(&mut c.resources.requests, MEMORY, memory * GI);
        set(&mut c.resources.requests, HP1G, pages * GI);
        c
    };
    type Row = (
        &'static str,
        [((u64, u64), bool); 2],
        [(u64, u64); 2],
        (u64, u64),
    );
    let rows: [Row; 5] = [
        (
            "maximum resources of init containers > total resources of containers",
            [((1, 1), false), ((4, 4), false)],
            [(1, 1), (2, 2)],
            (4, 4),
        ),
        (
            "maximum resources of init containers < total resources of containers",
            [((1, 1), false), ((3, 3), false)],
            [(2, 2), (3, 3)],
            (5, 5),
        ),
        (
            "calculate different resources independently",
            [((1, 1), false), ((3, 4), false)],
            [(2, 1), (3, 2)],
            (5, 4),
        ),
        (
            "maximum resources of init containers > total resources of long running containers, including restartable init containers",
            [((2, 2), true), ((4, 4), false)],
            [(1, 1), (2, 2)],
            (6, 6),
        ),
        (
            "maximum resources of init containers < total resources of long running containers, including restartable init containers",
            [((2, 2), true), ((4, 4), false)],
            [(2, 2), (3, 3)],
            (7, 7),
        ),
    ];
    for (name, inits, apps, (memory, pages)) in rows {
        let init = inits.iter().enumerate().map(|(i, &(gi, sidecar))| {
            let mut c = requests(format!("initContainer{}", i + 1), gi);
            c.restart_policy = sidecar.then_some(ContainerRestartPolicy::Always);
            c
        });
        let app = apps
            .iter()
            .enumerate()
            .map(|(i, &gi)| requests(format!("container{}", i + 1), gi));
        let p = pod("", init.collect(), app.collect());
        let want = BTreeMap::from([
            (MEMORY.to_owned(), memory * GI),
            (HP1G.to_owned(), pages * GI),
        ]);
        assert_eq!(pod_requested(&p), want, "{name}");
    }
}

/// `Test_isAffinityViolatingNUMAAllocations`, its 3 rows, through `allocate` with the row's
/// affinity: upstream's nodes (assignment count and cells) with 4 GiB of memory and of pages
/// free each, so that the affinity holds the container and only the groups decide.
#[test]
fn is_affinity_violating_numa_allocations() {
    type Row = (
        &'static str,
        &'static [(u64, &'static [usize])],
        &'static [usize],
        bool,
    );
    let rows: [Row; 3] = [
        (
            "violating NUMA allocations because given affinity asks for NUMA ID 1 which is on different cells group",
            &[(1, &[0, 1]), (1, &[0, 1]), (1, &[2]), (0, &[3])],
            &[1, 2],
            true,
        ),
        (
            "violating NUMA allocations because given affinity with multiple nodes asks for NUMA ID 1 which is used for a single NUMA node memory allocation",
            &[(0, &[0, 1]), (1, &[1])],
            &[0, 1],
            true,
        ),
        (
            "valid affinity, no prior assignments",
            &[(0, &[0]), (0, &[1])],
            &[0, 1],
            false,
        ),
    ];
    for (name, states, affinity, violation) in rows {
        let roomy = [mem(4 * GI, 4 * GI, 0, 0, 4 * GI), hp(HP1G, 4 * GI, 0)];
        let state = states
            .iter()
            .map(|&(count, cells)| node(count, cells, &roomy));
        let mut policy = StaticPolicy::new(nodes(state.collect()));
        let p = get_pod("pod", req_guaranteed("container"));
        let result = policy.allocate(&p, &p.containers[0], hint(affinity, false));
        if violation {
            assert_eq!(result, Err(AllocateError::ViolatesNumaAllocation), "{name}");
        } else {
            assert_eq!(result, Ok(()), "{name}");
            let blocks = policy.blocks("pod", "container").unwrap();
            assert!(
                blocks.iter().all(|b| b.numa_affinity == affinity),
                "{name}: {blocks:?}"
            );
        }
    }
}
