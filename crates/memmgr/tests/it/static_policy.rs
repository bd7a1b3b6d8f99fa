//! The static policy's hints and allocation, on facts from upstream `policy_static_test.go`
//! (v1.36: `TestStaticPolicyAllocate`, `TestStaticPolicyGetTopologyHints` and the init
//! container reuse tables of `TestStaticPolicyAllocateWithInitContainers` and
//! `TestStaticPolicyAllocateWithRestartableInitContainers`), with the expected states as
//! those tests give them.

use corral_memmgr::{AllocateError, MEMORY, StaticPolicy};
use corral_topology::ContainerRestartPolicy;
use corral_topology::topologymanager::TopologyHint;

use crate::support::{GI, HP1G, MI, container, free, hint, machine, pod, reserved};

/// "should allocate memory from the default NUMA node when no affinity is given": one node
/// with 1.5 GiB of memory and 1 GiB of huge pages; 1 GiB of each taken, two assignments.
#[test]
fn without_an_affinity_the_best_single_node_is_used() {
    let mut policy = StaticPolicy::new(machine(1, 1536 * MI, 1));
    let app = container("c", GI, GI);
    let p = pod("pod", vec![], vec![app.clone()]);
    policy.allocate(&p, &app, TopologyHint::default()).unwrap();
    assert_eq!(
        (free(&policy, 0, MEMORY), free(&policy, 0, HP1G)),
        (512 * MI, 0)
    );
    assert_eq!(policy.machine_state()[&0].number_of_assignments, 2);
    let blocks = policy.blocks("pod", "c").unwrap();
    assert!(blocks.iter().all(|b| b.numa_affinity == [0]));
    // Allocating again changes nothing; the hints are the container's own blocks.
    policy.allocate(&p, &app, TopologyHint::default()).unwrap();
    assert_eq!(free(&policy, 0, MEMORY), 512 * MI);
    let hints = policy.hints_for_container(&p, &app).unwrap();
    assert_eq!(hints[MEMORY], [hint(&[0], true)]);
}

/// Four nodes of 512 MiB and a 1 GiB request: the default is the narrowest pair, `[0,1]`.
#[test]
fn the_default_is_the_smallest_preferred_set_lowest_ids_first() {
    let mut policy = StaticPolicy::new(machine(4, 512 * MI, 0));
    let app = container("c", GI, 0);
    let p = pod("pod", vec![], vec![app.clone()]);
    let hints = policy.hints_for_container(&p, &app).unwrap();
    let preferred: Vec<_> = hints[MEMORY].iter().filter(|h| h.preferred).collect();
    assert_eq!(preferred.len(), 6, "every pair of four nodes");
    policy.allocate(&p, &app, TopologyHint::default()).unwrap();
    assert_eq!(policy.blocks("pod", "c").unwrap()[0].numa_affinity, [0, 1]);
    assert_eq!(policy.machine_state()[&0].cells, [0, 1]);
    // A single node of the group is no longer a hint; the group itself and unused nodes are.
    let other = container("d", 256 * MI, 0);
    let q = pod("pod2", vec![], vec![other.clone()]);
    let masks: Vec<_> = policy.hints_for_container(&q, &other).unwrap()[MEMORY]
        .iter()
        .map(|h| h.numa_affinity.unwrap().get_bits())
        .collect();
    assert!(
        !masks.contains(&vec![0]) && !masks.contains(&vec![1]),
        "{masks:?}"
    );
    assert!(
        masks.contains(&vec![2]) && !masks.contains(&vec![0, 2]),
        "{masks:?}"
    );
}

/// "should fail when the preferred hint violates NUMA node allocation": node 0 holds a
/// single-node allocation, and the hint spans nodes 0 and 1.
#[test]
fn a_group_over_a_node_of_single_node_allocations_is_refused() {
    let mut policy = StaticPolicy::new(machine(2, 2 * GI, 0));
    let first = container("a", GI, 0);
    let p = pod("pod", vec![], vec![first.clone()]);
    policy.allocate(&p, &first, hint(&[0], true)).unwrap();
    let before = policy.clone();
    let second = container("b", 3 * GI, 0);
    let q = pod("pod2", vec![], vec![second.clone()]);
    let err = policy
        .allocate(&q, &second, hint(&[0, 1], true))
        .unwrap_err();
    assert_eq!(err, AllocateError::ViolatesNumaAllocation);
    assert_eq!(
        err.to_string(),
        "[memorymanager] preferred hint violates NUMA node allocation"
    );
    assert_eq!(policy, before, "nothing changed");
}

/// A hint whose nodes do not hold the request is extended to the best set containing them;
/// no such set is upstream's error.
#[test]
fn a_hint_too_small_is_extended() {
    let mut policy = StaticPolicy::new(machine(2, GI, 0));
    let app = container("c", GI + 512 * MI, 0);
    let p = pod("pod", vec![], vec![app.clone()]);
    policy.allocate(&p, &app, hint(&[1], false)).unwrap();
    assert_eq!(policy.blocks("pod", "c").unwrap()[0].numa_affinity, [0, 1]);
    let huge = container("d", 4 * GI, 0);
    let q = pod("pod2", vec![], vec![huge.clone()]);
    let err = policy.allocate(&q, &huge, hint(&[0], false)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "[memorymanager] failed to find NUMA nodes to extend the current topology hint"
    );
    let err = policy
        .allocate(&q, &huge, TopologyHint::default())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
    );
}

/// Upstream's init container reuse vectors (GiB, memory on one node): init containers'
/// memory is reused by the later containers of the pod; (init, app, reserved in the end).
#[test]
fn init_container_memory_is_reused() {
    for (init, app, total) in [
        (&[1, 2][..], &[3, 4][..], 7),
        (&[4, 3], &[2, 1], 4),
        (&[7, 4], &[4, 3], 7),
        (&[7, 4], &[5, 2], 7),
    ] {
        let mut policy = StaticPolicy::new(machine(1, 16 * GI, 0));
        let inits: Vec<_> = init
            .iter()
            .enumerate()
            .map(|(i, &g)| container(&format!("init{i}"), g * GI, 0))
            .collect();
        let apps: Vec<_> = app
            .iter()
            .enumerate()
            .map(|(i, &g)| container(&format!("app{i}"), g * GI, 0))
            .collect();
        let p = pod("pod", inits.clone(), apps.clone());
        for c in inits.iter().chain(&apps) {
            policy.allocate(&p, c, hint(&[0], true)).unwrap();
        }
        assert_eq!(
            reserved(&policy, 0, MEMORY),
            total * GI,
            "{init:?} / {app:?}"
        );
        if init == [4, 3] {
            let size = |name: &str| policy.blocks("pod", name).unwrap()[0].size;
            assert_eq!(
                (size("init0"), size("init1")),
                (0, GI),
                "init blocks shrink"
            );
        }
    }
}

/// "should not re-use restartable init containers memory": init1 1Gi, sidecar2 2Gi,
/// init3 3Gi, sidecar4 4Gi, app 1Gi, of memory and huge pages each: 7 GiB reserved of
/// each, ten assignments, the regular init containers' blocks shrunk to nothing.
#[test]
fn sidecars_reuse_init_memory_but_are_not_reused() {
    let mut policy = StaticPolicy::new(machine(1, 16 * GI, 16));
    let sidecar = |name: &str, g: u64| {
        let mut c = container(name, g * GI, g * GI);
        c.restart_policy = Some(ContainerRestartPolicy::Always);
        c
    };
    let inits = vec![
        container("init1", GI, GI),
        sidecar("sidecar2", 2),
        container("init3", 3 * GI, 3 * GI),
        sidecar("sidecar4", 4),
    ];
    let app = container("app", GI, GI);
    let p = pod("pod", inits.clone(), vec![app.clone()]);
    for c in inits.iter().chain([&app]) {
        policy.allocate(&p, c, hint(&[0], true)).unwrap();
    }
    assert_eq!(reserved(&policy, 0, MEMORY), 7 * GI);
    assert_eq!(reserved(&policy, 0, HP1G), 7 * GI);
    assert_eq!(policy.machine_state()[&0].number_of_assignments, 10);
    let sizes: Vec<u64> = ["init1", "sidecar2", "init3", "sidecar4", "app"]
        .iter()
        .map(|name| policy.blocks("pod", name).unwrap()[0].size / GI)
        .collect();
    assert_eq!(sizes, [0, 2, 0, 4, 1]);
}

/// Removing every container gives back exactly the default state.
#[test]
fn removal_restores_the_default_state() {
    let default = machine(2, GI, 2);
    let mut policy = StaticPolicy::new(default.clone());
    let a = container("a", GI + 512 * MI, GI);
    let b = container("b", 256 * MI, 0);
    let p = pod("pod", vec![], vec![a.clone(), b.clone()]);
    policy.allocate(&p, &a, TopologyHint::default()).unwrap();
    policy.allocate(&p, &b, TopologyHint::default()).unwrap();
    assert_ne!(policy.machine_state(), &default);
    policy.remove_container("pod", "a");
    policy.remove_container("pod", "b");
    assert_eq!(policy.machine_state(), &default);
    assert!(policy.assignments().is_empty());
}
