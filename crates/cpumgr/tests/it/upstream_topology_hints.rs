//! Ported tables of upstream `topology_hints_test.go`: `TestPodGuaranteedCPUs`,
//! `TestGetTopologyHints` and `TestGetPodTopologyHints` (both over `returnTestCases`, through
//! the manager, stale-state removal included) and `TestGetPodTopologyHintsWithPolicyOptions`.

use std::collections::BTreeMap;
use std::sync::Arc;

use corral_cpumgr::{
    ContainerCpuAssignments, CpuManager, CpuState, StaticPolicy, StaticPolicyOptions,
    pod_guaranteed_cpus,
};
use corral_topology::{Container, CpuSet, HintProvider, Pod, PolicyName, ProviderHints};

use crate::support::harness::*;
use crate::support::topologies::*;
use crate::support::*;
use corral_cpumgr::TopologyIndex;

/// Upstream `TestPodGuaranteedCPUs`: (name, init containers, app containers, expected);
/// each container is (CPUs requested = limit, restartable).
#[test]
fn pod_guaranteed_cpus_table() {
    type C = &'static [(i64, bool)];
    #[rustfmt::skip]
    let rows: [(&str, C, C, usize); 12] = [
        ("TestCase01: if requestedCPU == 0, Pod is not Guaranteed Qos", &[(0, false)], &[(0, false)], 0),
        ("TestCase02: if requestedCPU == 0, Pod is not Guaranteed Qos", &[(0, false)], &[(2, false)], 0),
        ("TestCase03: if requestedCPU == 0, Pod is not Guaranteed Qos", &[(2, false)], &[(0, false)], 0),
        ("TestCase04: Guaranteed Pod requests 2 CPUs", &[(2, false)], &[(2, false)], 2),
        ("TestCase05: Guaranteed Pod requests 5 CPUs", &[(5, false)], &[(5, false)], 5),
        ("TestCase06: app requests more than init", &[(2, false)], &[(5, false)], 5),
        ("TestCase07: init requests more than app", &[(5, false)], &[(2, false)], 5),
        ("TestCase08: Sum of CPUs requested by multiple containers", &[(2, false), (4, false)], &[(2, false), (4, false)], 6),
        ("TestCase09: restartable init container + regular container", &[(1, true)], &[(1, false)], 2),
        ("TestCase10: multiple restartable init containers", &[(5, false), (1, true), (2, true), (3, true)], &[(1, false)], 7),
        ("TestCase11: multiple restartable and regular init containers", &[(5, false), (1, true), (2, true), (5, false), (3, true)], &[(1, false)], 8),
        ("TestCase12: restartable init, regular init and regular container", &[(10, true), (200, false)], &[(100, false)], 210),
    ];
    for (name, init, apps, want) in rows {
        let init: Vec<(i64, bool)> = init.iter().map(|&(n, s)| (n * 1000, s)).collect();
        let mut pod = make_pod_with_sidecars("podUID", &init, &[]);
        pod.containers = make_pod_with_sidecars(
            "podUID",
            &[],
            &apps.iter().map(|&(n, _)| n * 1000).collect::<Vec<_>>(),
        )
        .containers;
        assert_eq!(pod_guaranteed_cpus(&pod), want, "{name}");
    }
}

/// A hint as (NUMA nodes, preferred), the way the tables are compared.
type Hint = (Vec<usize>, bool);

/// One `returnTestCases` row: (name, CPUs requested, assignments of "fakePod"/"fakeContainer",
/// shared pool, expected hints sorted as upstream sorts them before comparing).
type Row = (&'static str, i64, &'static str, &'static str, Vec<Hint>);

fn return_test_cases() -> Vec<Row> {
    let first = || (vec![0], true);
    let second = || (vec![1], true);
    let cross = |preferred| (vec![0, 1], preferred);
    let pool = "2-11";
    vec![
        (
            "Request 2 CPUs, 4 available on NUMA 0, 6 available on NUMA 1",
            2,
            "",
            pool,
            vec![first(), second(), cross(false)],
        ),
        (
            "Request 5 CPUs, 4 available on NUMA 0, 6 available on NUMA 1",
            5,
            "",
            pool,
            vec![second(), cross(false)],
        ),
        (
            "Request 7 CPUs, 4 available on NUMA 0, 6 available on NUMA 1",
            7,
            "",
            pool,
            vec![cross(true)],
        ),
        (
            "Request 11 CPUs, 4 available on NUMA 0, 6 available on NUMA 1",
            11,
            "",
            pool,
            vec![],
        ),
        (
            "Request 2 CPUs, 1 available on NUMA 0, 1 available on NUMA 1",
            2,
            "",
            "0,3",
            vec![cross(false)],
        ),
        ("Request more CPUs than available", 5, "", "0-3", vec![]),
        (
            "Regenerate Single-Node NUMA Hints if already allocated 1/2",
            2,
            "0,6",
            "",
            vec![first(), cross(false)],
        ),
        (
            "Regenerate Single-Node NUMA Hints if already allocated 2/2",
            2,
            "3,9",
            "",
            vec![second(), cross(false)],
        ),
        (
            "Regenerate Cross-NUMA Hints if already allocated",
            11,
            "0-10",
            "",
            vec![cross(true)],
        ),
        (
            "Requested less than already allocated",
            2,
            "0,3,6,9",
            "",
            vec![],
        ),
        (
            "Requested more than already allocated",
            11,
            "0,3,6,9",
            "",
            vec![],
        ),
    ]
}

/// Upstream `TopologyHint.LessThan` order for sorting: preferred first, then narrower.
fn sorted(mut hints: Vec<Hint>) -> Vec<Hint> {
    hints.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(a.0.len().cmp(&b.0.len()))
            .then(a.0.cmp(&b.0))
    });
    hints
}

fn cpu_hints(hints: corral_topology::ProviderHints) -> Vec<Hint> {
    let Some(map) = hints else {
        return Vec::new();
    };
    map.get("cpu")
        .cloned()
        .flatten()
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

/// A manager as upstream's tests build one: the static policy over `topo` with nothing
/// reserved, the state as given (no `Start` validation), and the pods of the assignments
/// active.
fn hints_manager(
    topo: Arc<TopologyIndex>,
    options: StaticPolicyOptions,
    state: &CpuState,
) -> CpuManager {
    let pods = Arc::new(Pods::default());
    *pods.pods.lock().unwrap() = state
        .assignments()
        .iter()
        .map(|(uid, containers)| Pod {
            uid: uid.clone(),
            containers: containers.keys().map(Container::new).collect(),
            ..Pod::default()
        })
        .collect();
    let policy = StaticPolicy::new(
        Arc::clone(&topo),
        0,
        &CpuSet::new(),
        options,
        PolicyName::None,
    )
    .unwrap();
    manager_with_state(
        topo,
        Box::new(policy),
        state,
        pods,
        Arc::new(Runtime::default()),
    )
}

fn row_state(assigned: &str, pool: &str) -> CpuState {
    let mut a = ContainerCpuAssignments::new();
    if !assigned.is_empty() {
        a.entry("fakePod".into())
            .or_default()
            .insert("fakeContainer".into(), assigned.parse().unwrap());
    }
    CpuState::new(pool.parse().unwrap(), a)
}

/// Every `returnTestCases` row through the manager, hints asked with `ask`.
fn check_return_test_cases(ask: impl Fn(&CpuManager, &Pod) -> ProviderHints) {
    for (name, n, assigned, pool, want) in return_test_cases() {
        let m = hints_manager(
            hints_machine_info(),
            StaticPolicyOptions::default(),
            &row_state(assigned, pool),
        );
        let pod = make_pod("fakePod", "fakeContainer", n * 1000, n * 1000);
        let got = cpu_hints(ask(&m, &pod));
        assert_eq!(sorted(got), sorted(want), "{name}");
    }
}

/// Upstream `TestGetTopologyHints` (container scope).
#[test]
fn get_topology_hints() {
    check_return_test_cases(|m, pod| m.hints_for_container(pod, &pod.containers[0]));
}

/// Upstream `TestGetPodTopologyHints` (pod scope, same rows).
#[test]
fn get_pod_topology_hints() {
    check_return_test_cases(|m, pod| m.hints_for_pod(pod));
}

/// Upstream `TestGetPodTopologyHintsWithPolicyOptions` on
/// `topoDualSocketMultiNumaPerSocketHT` (NUMA 0-1 on socket 0, 2-3 on socket 1).
#[test]
fn get_pod_topology_hints_with_policy_options() {
    let all_with_0 = |preferred: &[Vec<usize>]| -> Vec<Hint> {
        [
            vec![0],
            vec![0, 1],
            vec![0, 2],
            vec![0, 3],
            vec![0, 1, 2],
            vec![0, 1, 3],
            vec![0, 2, 3],
            vec![0, 1, 2, 3],
        ]
        .into_iter()
        .map(|m| {
            let p = preferred.contains(&m);
            (m, p)
        })
        .collect()
    };
    let rows: [(&str, bool, i64, &str, Vec<Hint>); 3] = [
        (
            "AlignBySocket:false, Preferred hints does not contains socket aligned hints",
            false,
            2,
            "2-3,11",
            all_with_0(&[vec![0]]),
        ),
        (
            "AlignBySocket:true Preferred hints contains socket aligned hints",
            true,
            2,
            "2-3,11",
            all_with_0(&[vec![0], vec![0, 1]]),
        ),
        (
            "AlignBySocket:true Preferred hints are spread across socket since 2 sockets are required",
            true,
            41,
            "0-28,40-57",
            vec![(vec![0, 1, 2], true), (vec![0, 1, 2, 3], true)],
        ),
    ];
    for (name, align, n, pool, want) in rows {
        let options = StaticPolicyOptions::from_map(&BTreeMap::from([(
            "align-by-socket".to_owned(),
            align.to_string(),
        )]))
        .unwrap();
        let m = hints_manager(
            dual_socket_multi_numa_per_socket_ht(),
            options,
            &row_state("", pool),
        );
        let pod = make_pod("fakePod", "fakeContainer", n * 1000, n * 1000);
        let got = cpu_hints(m.hints_for_pod(&pod));
        assert_eq!(sorted(got), sorted(want), "{name}");
    }
}
