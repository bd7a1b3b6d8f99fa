//! Kubernetes v1.38's CPU manager fixes (issue #31), one test (or table) per upstream PR,
//! each PR's own expectations where its thread states them. Where a topology is not given in
//! the thread, the one here is the smallest that the stated expectation describes.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use corral_checkpoint::{Checkpoint, CpuManagerCheckpointV3, StateFile};
use corral_cpumgr::test_util::topology_index;
use corral_cpumgr::{
    ContainerCpuAssignments, ContainerMap, CpuManager, CpuSortingStrategy, CpuState, CpuStateFile,
    CpuStateFileVersion, DistributedOptions, Policy, SocketAlignment, StaticPolicy, TopologyIndex,
    UncoreCacheAlignment, take_by_topology_numa_distributed,
    take_by_topology_numa_distributed_with, take_by_topology_numa_packed,
};
use corral_topology::{
    Container, CpuSet, NumaMask, Pod, PodLevelResources, ResourceRequirements, TopologyHint,
};
use proptest::prelude::*;

use crate::support::harness::{Pods, Runtime};
use crate::support::make_pod;
use crate::support::static_cases::policy;
use crate::support::topologies::{
    dual_socket_ht, dual_socket_multi_numa_per_socket_ht, quad_socket_four_way_ht,
    single_socket_four_cores_no_ht,
};

fn set(s: &str) -> CpuSet {
    s.parse().unwrap()
}

/// Upstream #140730 ("kubelet: fix CPU manager hang in distribute-across-NUMA with
/// cpuGroupSize"), its `TestTakeByTopologyNUMADistributed` row: 5 free CPUs on each NUMA
/// node, no two of them siblings; 14 CPUs in groups of 2. Three nodes pass a raw-CPU count
/// (15 ≥ 14) but hold only 6 whole groups (12 CPUs); v1.37 then looped forever placing the
/// remainder. Counting whole groups per node, the 4-node spread is taken.
#[test]
fn distributed_counts_whole_groups_per_numa_node_pr_140730() {
    let got = take_by_topology_numa_distributed(
        &dual_socket_multi_numa_per_socket_ht(),
        &set("0-4,10-14,20-24,30-34"),
        14,
        2,
        CpuSortingStrategy::Packed,
    );
    assert_eq!(got.unwrap().to_string(), "0-3,10-13,20-23,30-31");
}

/// A random machine of 2-thread cores: 1–2 sockets, 1–4 NUMA nodes per socket, 1–6 cores
/// per NUMA node; core `c`'s threads are CPUs `c` and `c + cores`.
fn ht_machine(sockets: usize, numa_per_socket: usize, cores_per_numa: usize) -> Arc<TopologyIndex> {
    let numas = sockets * numa_per_socket;
    let cores = numas * cores_per_numa;
    let cpus = (0..2 * cores).map(|cpu| {
        let core = cpu % cores;
        let numa = core / cores_per_numa;
        [cpu, core, numa / numa_per_socket, numa, numa]
    });
    topology_index(cpus, [2 * cores, cores, sockets, numas, numas])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Upstream #140730's promise, attacked: with a group size of 2 (`full-pcpus-only` on
    /// 2-thread cores) the distributed algorithm returns for any availability — an error,
    /// or exactly the request from the available CPUs — as v1.37 (`legacy`) and with any of
    /// v1.38's options (a NUMA floor, #139456; socket alignment, #141238). A call that had
    /// not answered within a minute (it takes microseconds) fails the case instead of
    /// hanging the suite.
    #[test]
    fn distributed_with_groups_of_two_always_returns(
        sockets in 1usize..3,
        numa_per_socket in 1usize..5,
        cores_per_numa in 1usize..7,
        free in proptest::collection::vec(any::<bool>(), 96),
        groups in 0usize..24,
        spread in any::<bool>(),
        legacy in any::<bool>(),
        min_numas in 0usize..10,
        align in any::<bool>(),
    ) {
        let index = ht_machine(sockets, numa_per_socket, cores_per_numa);
        let available: CpuSet = index.all_cpus().iter().filter(|&c| free[c]).collect();
        let n = 2 * groups;
        let strategy = if spread { CpuSortingStrategy::Spread } else { CpuSortingStrategy::Packed };
        let options = DistributedOptions {
            min_numas,
            socket_alignment: if align { SocketAlignment::Prefer } else { SocketAlignment::Ignore },
            ..DistributedOptions::new(2, strategy)
        };
        let (tx, rx) = mpsc::channel();
        let (ix, avail) = (index.clone(), available.clone());
        std::thread::spawn(move || {
            let got = if legacy {
                take_by_topology_numa_distributed(&ix, &avail, n, 2, strategy)
            } else {
                take_by_topology_numa_distributed_with(&ix, &avail, n, options)
            };
            let _ = tx.send(got);
        });
        let got = rx.recv_timeout(Duration::from_secs(60));
        prop_assert!(got.is_ok(), "no answer for {} of {}", n, available);
        if let Ok(Ok(cpus)) = got {
            prop_assert_eq!(cpus.len(), n);
            prop_assert!(cpus.is_subset_of(&available), "{} not in {}", cpus, available);
        }
    }
}

/// The order the spread strategy hands out `available` in: taking `n` CPUs one more at a
/// time, each step's new CPU (the packed algorithm with `spread` takes whole NUMA nodes and
/// sockets first, which here are always a prefix of the order).
fn spread_order(index: &TopologyIndex, available: &CpuSet) -> Vec<usize> {
    let take = |n| {
        take_by_topology_numa_packed(
            index,
            available,
            n,
            CpuSortingStrategy::Spread,
            UncoreCacheAlignment::Ignore,
        )
        .unwrap()
    };
    (1..=available.len())
        .map(|n| {
            let new = take(n).difference(&take(n - 1));
            assert_eq!(new.len(), 1, "taking {n} is not the order's prefix");
            new.min().unwrap()
        })
        .collect()
}

/// One socket and NUMA node whose cores hold the CPUs `cores[i]`.
fn one_socket(cores: &[&[usize]]) -> Arc<TopologyIndex> {
    let cpus: Vec<[usize; 5]> = cores
        .iter()
        .enumerate()
        .flat_map(|(core, cpus)| cpus.iter().map(move |&cpu| [cpu, core, 0, 0, 0]))
        .collect();
    topology_index(cpus.clone(), [cpus.len(), cores.len(), 1, 1, 1])
}

/// Upstream #140766 ("CPUMANAGER: spread CPUs across cores using topology", issue #140688):
/// `distribute-cpus-across-cores` hands out one CPU per core per pass over each socket's
/// sorted cores, not the socket's CPUs by id. Expectations from the PR
/// (`TestCPUAccumulatorFreeCPUsSpreadRoundRobin`): contiguous siblings, siblings far apart,
/// two sockets.
#[test]
fn spread_round_robins_over_cores_pr_140766() {
    let contiguous = one_socket(&[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]);
    assert_eq!(
        spread_order(&contiguous, contiguous.all_cpus()),
        [0, 2, 4, 6, 1, 3, 5, 7]
    );
    let arbitrary = one_socket(&[&[0, 7], &[2, 11], &[5, 9], &[1, 14]]);
    assert_eq!(
        spread_order(&arbitrary, arbitrary.all_cpus()),
        [0, 2, 5, 1, 7, 11, 9, 14]
    );
    // Two sockets (and NUMA nodes) of 4 cores with contiguous siblings.
    let cpus = (0..16).map(|cpu| [cpu, cpu / 2, cpu / 8, cpu / 8, cpu / 8]);
    let two_sockets = topology_index(cpus, [16, 8, 2, 2, 2]);
    assert_eq!(
        spread_order(&two_sockets, two_sockets.all_cpus()),
        [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15]
    );
    // `TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption`'s row "take a socket of cpus
    // from quad socket four way with HT, 12 cpus", as #140766 updated it (v1.37:
    // "0-2,9-10,13-14,21-22,25-26,33", several threads of one core): 12 distinct cores.
    let got = take_by_topology_numa_packed(
        &quad_socket_four_way_ht(),
        &set("0-287"),
        12,
        CpuSortingStrategy::Spread,
        UncoreCacheAlignment::Ignore,
    );
    assert_eq!(
        got.unwrap().to_string(),
        "0,50,57-58,71-72,79-80,87-88,95-96"
    );
    // Partly available: the socket's cores in upstream's core order (fewest free CPUs
    // first, then id), one CPU of each per pass — core {2,3} has only CPU 2 free.
    assert_eq!(
        spread_order(&contiguous, &set("0-2,4-7")),
        [2, 0, 4, 6, 1, 5, 7]
    );
}

/// CPUs per NUMA node of `cpus` on `index`, by NUMA id.
fn per_numa(index: &TopologyIndex, cpus: &CpuSet) -> Vec<(usize, usize)> {
    let mut counts = std::collections::BTreeMap::new();
    for cpu in cpus {
        *counts.entry(index.numa_of(cpu).unwrap()).or_insert(0) += 1;
    }
    counts.into_iter().collect()
}

/// The CPUs the static policy with `options` gives a container of `cpus` CPUs with the
/// topology manager's affinity `hint` (none: no preference), from `default` free CPUs.
fn allocate(
    topo: Arc<TopologyIndex>,
    options: &[(&str, &str)],
    default: &str,
    cpus: i64,
    hint: Option<&[usize]>,
) -> CpuSet {
    let mut policy = policy(topo, 0, "", options);
    let mut state = CpuState::new(set(default), ContainerCpuAssignments::new());
    let pod = make_pod("pod", "c", cpus * 1000, cpus * 1000);
    let hint = hint.map_or_else(TopologyHint::default, |bits| {
        TopologyHint::new(Some(NumaMask::new(bits.iter().copied()).unwrap()), true)
    });
    policy
        .allocate(&mut state, &pod, &pod.containers[0], hint)
        .unwrap();
    state.cpu_set("pod", "c").unwrap().clone()
}

/// Upstream #139456 ("Fix/cpumanager preserve numa affinity", issue #139430): with
/// `distribute-cpus-across-numa`, the topology manager's affinity's NUMA node count is the
/// floor of the distribution — an affinity of all 4 nodes (chosen for devices on all of
/// them) keeps 8 CPUs on all 4 (v1.37: on the one node that holds them). Without an
/// affinity, or with one of more nodes than have free CPUs, the fewest nodes, as before.
#[test]
fn distributed_keeps_the_affinitys_numa_nodes_pr_139456() {
    let numa = &[("distribute-cpus-across-numa", "true")];
    let topo = dual_socket_multi_numa_per_socket_ht;
    let all_four = allocate(topo(), numa, "0-79", 8, Some(&[0, 1, 2, 3]));
    assert_eq!(
        per_numa(&topo(), &all_four),
        [(0, 2), (1, 2), (2, 2), (3, 2)]
    );
    assert_eq!(all_four.to_string(), "0,10,20,30,40,50,60,70");
    let two = allocate(topo(), numa, "0-79", 8, Some(&[0, 2]));
    assert_eq!(per_numa(&topo(), &two), [(0, 4), (2, 4)]);
    // No affinity: the fewest nodes.
    let none = allocate(topo(), numa, "0-79", 8, None);
    assert_eq!(per_numa(&topo(), &none), [(0, 8)]);
    // The affinity names 4 nodes but only 0 and 1 have free CPUs: no floor.
    let short = allocate(topo(), numa, "0-19,40-59", 8, Some(&[0, 1, 2, 3]));
    assert_eq!(per_numa(&topo(), &short), [(0, 8)]);
    // Packing is unchanged by an affinity's size.
    let packed = allocate(topo(), &[], "0-79", 8, Some(&[0, 1, 2, 3]));
    assert_eq!(per_numa(&topo(), &packed), [(0, 8)]);
}

/// Upstream issue #141237, fixed by #141238 ("Fix deep copy bestCombo in
/// takeByTopologyNUMADistributed"): two sockets of 4 NUMA nodes of 32 single-thread cores
/// (NUMA n: CPUs 32n..32n+31), the last 2 CPUs of NUMA 3 and of NUMA 7 taken, so
/// 32/32/32/30 free per socket. 120 CPUs with `align-by-socket` fit socket 0 (126 free) and
/// must all come from it. Upstream's distributed walk kept its best combination as a slice
/// that later candidates overwrote, so socket 0's {0,1,2,3} was read as {0,1,3,6}.
fn issue_141237(options: &[(&str, &str)], hint: Option<&[usize]>) -> CpuSet {
    let cpus = (0..256).map(|cpu| [cpu, cpu, cpu / 128, cpu / 32, cpu / 32]);
    let topo = topology_index(cpus, [256, 256, 2, 8, 8]);
    allocate(topo, options, "0-125,128-253", 120, hint)
}

/// Upstream #141238 / issue #141237 with the issue's options, `distribute-cpus-across-cores`
/// and `align-by-socket`: with the topology manager's socket-0 affinity, and without one.
#[test]
fn align_by_socket_keeps_a_fitting_request_on_one_socket_pr_141238() {
    let options = &[
        ("distribute-cpus-across-cores", "true"),
        ("align-by-socket", "true"),
    ];
    let socket0 = set("0-127");
    for hint in [Some(&[0, 1, 2, 3][..]), None] {
        let got = issue_141237(options, hint);
        assert_eq!(got.len(), 120);
        assert!(got.is_subset_of(&socket0), "{hint:?}: {got}");
    }
}

/// Issue #141237's result (NUMA 0,1,3,6: 30 CPUs on each of four nodes over both sockets)
/// is the distributed algorithm's (the issue's "distributes CPUs evenly across NUMA
/// nodes"): with `distribute-cpus-across-numa` and `align-by-socket` the request stays on
/// socket 0 — v1.37 corral, ignoring sockets and reading the walk as Go did, took NUMA
/// 0,1,2,6 without an affinity.
#[test]
fn align_by_socket_keeps_a_distributed_request_on_one_socket_pr_141238() {
    let options = &[
        ("distribute-cpus-across-numa", "true"),
        ("align-by-socket", "true"),
    ];
    let socket0 = set("0-127");
    for hint in [Some(&[0, 1, 2, 3][..]), None] {
        let got = issue_141237(options, hint);
        assert_eq!(got.len(), 120);
        assert!(got.is_subset_of(&socket0), "{hint:?}: {got}");
    }
}

/// A container of a pod managed at pod level: exclusive when given CPUs (request = limit,
/// with memory), else without resources (the pod's shared pool).
fn pod_level_container(name: &str, cpus: Option<i64>) -> Container {
    let mut c = Container::new(name);
    if let Some(cpus) = cpus {
        for list in [&mut c.resources.requests, &mut c.resources.limits] {
            list.cpu_millis = Some(cpus * 1000);
            list.memory_bytes = Some(1 << 30);
        }
    }
    c
}

/// A Guaranteed pod with a pod-level budget of `cpus` CPUs and the app containers `apps`.
fn pod_level(uid: &str, cpus: i64, apps: Vec<Container>) -> Pod {
    let mut resources = ResourceRequirements::default();
    for list in [&mut resources.requests, &mut resources.limits] {
        list.cpu_millis = Some(cpus * 1000);
        list.memory_bytes = Some(4 << 30);
    }
    Pod {
        uid: uid.into(),
        containers: apps,
        resources: Some(resources),
        ..Pod::default()
    }
}

/// The static policy with `PodLevelResourceManagers` on, CPU 0 reserved.
fn pod_level_policy(topo: Arc<TopologyIndex>) -> StaticPolicy {
    let mut p = policy(topo, 1, "0", &[]);
    p.set_pod_level_resources(PodLevelResources::Managed);
    p
}

/// A restored state: the free CPUs, the pod's CPUs and its containers' entries.
fn restored(default: &str, pod: &str, pod_cpus: &str, containers: &[(&str, &str)]) -> CpuState {
    let mut state = CpuState::new(set(default), ContainerCpuAssignments::new());
    state.set_pod_cpu_set(pod, set(pod_cpus));
    for (name, cpus) in containers {
        state.set_cpu_set(pod, name, set(cpus));
    }
    state
}

/// Upstream #141041 ("Fix CPU Manager re-allocations for pods using pod-level resources
/// after kubelet restarts", issue #140989), its example: 4 CPUs, CPU 0 reserved, the pod's
/// CPUs 1-2 restored from the checkpoint, 0,3 free. Re-admitting the pod reuses what was
/// restored as-is — v1.37 upstream allocated the budget again and was refused "not enough
/// cpus available" (or moved the pod, leaking its old CPUs).
#[test]
fn pod_level_state_is_restored_as_is_pr_141041() {
    let mut p = pod_level_policy(single_socket_four_cores_no_ht());
    let pod = pod_level(
        "p",
        2,
        vec![
            pod_level_container("a", Some(1)),
            pod_level_container("b", None),
        ],
    );
    let mut state = restored("0,3", "p", "1-2", &[("a", "1"), ("b", "2")]);
    let before = state.clone();
    p.allocate_pod(&mut state, &pod, TopologyHint::default())
        .unwrap();
    assert_eq!(state, before);
}

/// #141041 with a partial checkpoint: the pod's CPUs and one container's entry restored,
/// the other's missing. Only the missing one is computed, from the restored pod CPUs with
/// the same partitioning (here: the pod's shared pool, what the exclusive container does
/// not hold). v1.37 corral left it without an entry.
#[test]
fn a_partial_pod_level_checkpoint_computes_only_the_missing_containers_pr_141041() {
    let mut p = pod_level_policy(dual_socket_ht());
    let pod = pod_level(
        "p",
        3,
        vec![
            pod_level_container("a", Some(1)),
            pod_level_container("b", Some(1)),
            pod_level_container("c", None),
        ],
    );
    let mut state = restored("0-1,3,5,7-11", "p", "2,4,6", &[("b", "4")]);
    p.allocate_pod(&mut state, &pod, TopologyHint::default())
        .unwrap();
    assert_eq!(
        state.cpu_set("p", "b").map(ToString::to_string).as_deref(),
        Some("4")
    );
    let a = state.cpu_set("p", "a").cloned().expect("a computed");
    assert_eq!(a.len(), 1);
    assert!(a.is_subset_of(&set("2,6")), "{a}");
    let c = state.cpu_set("p", "c").cloned().expect("c computed");
    assert_eq!(c, set("2,6").difference(&a));
    // Nothing left the pod's CPUs, nothing else was taken.
    assert_eq!(
        state.pod_cpu_set("p").map(ToString::to_string).as_deref(),
        Some("2,4,6")
    );
    assert_eq!(state.default_cpu_set().to_string(), "0-1,3,5,7-11");
}

/// #141041: when the restored pod CPUs cannot hold the pod's containers, every CPU of the
/// pod goes back to the shared pool (and the pod is refused), rather than staying pinned
/// to a pod that will not run.
#[test]
fn a_failed_pod_level_restore_releases_all_the_pods_cpus_pr_141041() {
    let mut p = pod_level_policy(dual_socket_ht());
    let pod = pod_level(
        "p",
        4,
        vec![
            pod_level_container("a", Some(2)),
            pod_level_container("b", Some(1)),
            pod_level_container("c", None),
        ],
    );
    // A checkpoint that holds only 2 of the pod's 4 CPUs, "c" on one of them: "a" and "b"
    // need 3.
    let mut state = restored("0-1,3,5-11", "p", "2,4", &[("c", "4")]);
    let got = p.allocate_pod(&mut state, &pod, TopologyHint::default());
    assert!(got.is_err(), "{got:?}");
    assert!(state.pod_cpu_set("p").is_none());
    assert!(state.assignments().get("p").is_none());
    assert_eq!(state.default_cpu_set().to_string(), "0-11");
}

/// #141041: pod-scope hints of a restored pod come from its restored CPUs (v1.37 compared
/// each shared container's entry with its zero exclusive CPUs and answered no hint at all,
/// which `restricted` refuses).
#[test]
fn pod_scope_hints_come_from_the_restored_pod_cpus_pr_141041() {
    let p = pod_level_policy(dual_socket_ht());
    let pod = pod_level(
        "p",
        2,
        vec![
            pod_level_container("a", Some(1)),
            pod_level_container("b", None),
        ],
    );
    // NUMA 0 is CPUs 0,2,4,6,8,10.
    let state = restored("0-1,3,5-11", "p", "2,4", &[("a", "2"), ("b", "4")]);
    let hints = p.hints_for_pod(&state, &pod).unwrap()["cpu"]
        .clone()
        .unwrap();
    let numa0 = TopologyHint::new(Some(NumaMask::new([0]).unwrap()), true);
    assert_eq!(hints.first(), Some(&numa0), "{hints:?}");
    assert!(
        hints
            .iter()
            .all(|h| h.numa_affinity.is_some_and(|m| m.is_set(0))),
        "{hints:?}"
    );
}

/// #141041 through the manager: the failed re-admission's release is kept and written (the
/// manager otherwise undoes a failed allocation), so the refused pod holds nothing.
#[test]
fn the_manager_keeps_and_writes_a_failed_restores_release_pr_141041() {
    let pod = pod_level(
        "p",
        4,
        vec![
            pod_level_container("a", Some(2)),
            pod_level_container("b", Some(1)),
            pod_level_container("c", None),
        ],
    );
    let state = restored("0-1,3,5-11", "p", "2,4", &[("c", "4")]);
    let CpuStateFile::V3(v3) = state.to_file("static", CpuStateFileVersion::V3) else {
        panic!("a v3 file");
    };
    let file = StateFile::in_memory();
    file.stage_checkpoint(&v3).unwrap();
    let manager = CpuManager::with_policy(
        dual_socket_ht(),
        Box::new(pod_level_policy(dual_socket_ht())),
        Duration::from_secs(10),
    )
    .with_pod_level_resources(PodLevelResources::Managed)
    .without_start_validation();
    let pods = Arc::new(Pods::default());
    pods.pods.lock().unwrap().push(pod.clone());
    manager
        .start(
            file.clone(),
            pods,
            Arc::new(Runtime::default()),
            ContainerMap::new(),
        )
        .unwrap();
    assert!(manager.allocate_pod(&pod, TopologyHint::default()).is_err());
    assert_eq!(manager.state().default_cpu_set().to_string(), "0-11");
    assert!(manager.state().pod_cpu_set("p").is_none());
    let written = CpuManagerCheckpointV3::decode(&file.load().unwrap().unwrap()).unwrap();
    assert_eq!(written.default_cpu_set, "0-11");
}
