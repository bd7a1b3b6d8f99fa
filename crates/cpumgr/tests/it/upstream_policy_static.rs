//! Ported tables of upstream `policy_static_test.go` (v1.32): `TestStaticPolicyName`,
//! `TestStaticPolicyStart` (all 8 rows), `TestStaticPolicyAdd` (every row, those on
//! `topoQuadSocketFourWayHT` included), `TestStaticPolicyReuseCPUs`, `TestStaticPolicyRemove`,
//! `TestTopologyAwareAllocateCPUs`, and the hint-generation cases of `TestGetTopologyHints`
//! shapes. The reserved-list, options and error-text tables are in
//! `upstream_policy_static_resv.rs`.

use corral_cpumgr::{
    AllocateError, ContainerCpuAssignments, CpuState, Policy, SmtAlignmentError, StaticPolicy,
    StaticPolicyOptions, ValidationError,
};
use corral_topology::{CpuSet, NumaMask, PolicyName, TopologyHint};

use crate::support::static_cases::*;
use crate::support::topologies::*;
use crate::support::*;

/// Upstream `TestStaticPolicyName`.
#[test]
fn static_policy_name() {
    assert_eq!(policy(single_socket_ht(), 1, "", &[]).name(), "static");
}

/// Upstream `TestStaticPolicyStart`.
#[test]
fn static_policy_start() {
    let two = [("fakePod", "0", "0-2"), ("fakePod", "1", "3-4")];
    let cases: Vec<(&str, usize, CpuState, Result<&str, String>)> = vec![
        (
            "non-corrupted state",
            0,
            state("1-11", &[("fakePod", "0", "0")]),
            Ok("1-11"),
        ),
        ("empty cpuset", 1, state("", &[]), Ok("0-11")),
        (
            "reserved cores 0 & 6 are not present in available cpuset",
            2,
            state("0-1", &[]),
            Err("not all reserved cpus: \"0,6\" are present in defaultCpuSet: \"0-1\"".into()),
        ),
        (
            "assigned core 2 is still present in available cpuset",
            0,
            state("2-11", &[("fakePod", "0", "0-2")]),
            Err(
                "pod: fakePod, container: 0 cpuset: \"0-2\" overlaps with default cpuset \"2-11\""
                    .into(),
            ),
        ),
        (
            "core 12 is not present in topology but is in state cpuset",
            0,
            state("5-12", &two),
            Err(
                "current set of available CPUs \"0-11\" doesn't match with CPUs in state \"0-12\""
                    .into(),
            ),
        ),
        (
            "core 11 is present in topology but is not in state cpuset",
            0,
            state("5-10", &two),
            Err(
                "current set of available CPUs \"0-11\" doesn't match with CPUs in state \"0-10\""
                    .into(),
            ),
        ),
    ];
    for (description, reserved, mut st, want) in cases {
        let mut p = policy(dual_socket_ht(), reserved, "", &[]);
        let got = p.start(&mut st).map_err(|e| e.to_string());
        match want {
            Ok(default) => {
                assert_eq!(got, Ok(()), "{description}");
                assert_eq!(st.default_cpu_set(), &set(default), "{description}");
            }
            Err(e) => assert_eq!(got, Err(e), "{description}"),
        }
    }
}

/// Upstream `TestStaticPolicyAdd`: the options-insensitive cases (run without options and
/// with `full-pcpus-only`), the default-option cases, the `full-pcpus-only` cases and the
/// `align-by-socket` cases (those on `topoQuadSocketFourWayHT` are not ported).
#[test]
fn static_policy_add() {
    let insensitive = |options: &'static [(&'static str, &'static str)]| {
        vec![
            AddCase {
                description: "GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore",
                topo: single_socket_ht,
                reserved: 1,
                explicit: "",
                options,
                state: state("0-1,4-5", &[("fakePod", "fakeContainer100", "2-3,6-7")]),
                pod: ("fakeContainer3", 2000, 2000),
                hint: None,
                want: Ok("1,5"),
            },
            AddCase {
                description: "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket",
                topo: dual_socket_ht,
                reserved: 1,
                explicit: "",
                options,
                state: state("0-1,3-11", &[("fakePod", "fakeContainer100", "2")]),
                pod: ("fakeContainer3", 6000, 6000),
                hint: None,
                want: Ok("1,3,5,7,9,11"),
            },
            AddCase {
                description: "GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores",
                topo: dual_socket_ht,
                reserved: 1,
                explicit: "",
                options,
                state: state("0,2-4,6-11", &[("fakePod", "fakeContainer100", "1,5")]),
                pod: ("fakeContainer3", 6000, 6000),
                hint: None,
                want: Ok("2-4,8-10"),
            },
            AddCase {
                description: "GuPodMultipleCores, DualSocketNoHT, ExpectAllocOneSocket",
                topo: dual_socket_no_ht,
                reserved: 1,
                explicit: "",
                options,
                state: state("0-1,3-7", &[("fakePod", "fakeContainer100", "")]),
                pod: ("fakeContainer1", 4000, 4000),
                hint: None,
                want: Ok("4-7"),
            },
            AddCase {
                description: "GuPodMultipleCores, DualSocketNoHT, ExpectAllocFourCores",
                topo: dual_socket_no_ht,
                reserved: 1,
                explicit: "",
                options,
                state: state("0-1,3,6-7", &[("fakePod", "fakeContainer100", "4-5")]),
                pod: ("fakeContainer1", 4000, 4000),
                hint: None,
                want: Ok("1,3,6-7"),
            },
            AddCase {
                description: "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocketOneCore",
                topo: dual_socket_ht,
                reserved: 1,
                explicit: "",
                options,
                state: state("0-1,3-11", &[("fakePod", "fakeContainer100", "2")]),
                pod: ("fakeContainer3", 8000, 8000),
                hint: None,
                want: Ok("1,3-5,7,9-11"),
            },
            AddCase {
                description: "NonGuPod, SingleSocketHT, NoAlloc",
                topo: single_socket_ht,
                reserved: 1,
                explicit: "",
                options,
                state: state("0-7", &[]),
                pod: ("fakeContainer1", 1000, 2000),
                hint: None,
                want: Ok(""),
            },
            AddCase {
                description: "GuPodNonIntegerCore, SingleSocketHT, NoAlloc",
                topo: single_socket_ht,
                reserved: 1,
                explicit: "",
                options,
                state: state("0-7", &[]),
                pod: ("fakeContainer4", 977, 977),
                hint: None,
                want: Ok(""),
            },
        ]
    };
    let mut cases = insensitive(&[]);
    cases.extend(insensitive(&[("full-pcpus-only", "true")]));
    // defaultOptionsTestCases
    cases.extend([
        AddCase {
            description: "GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU",
            topo: single_socket_ht,
            reserved: 1,
            explicit: "",
            options: &[],
            state: state("0-7", &[]),
            pod: ("fakeContainer2", 1000, 1000),
            hint: None,
            want: Ok("4"),
        },
        AddCase {
            description: "GuPodSingleCore, SingleSocketHT, ExpectError",
            topo: single_socket_ht,
            reserved: 1,
            explicit: "",
            options: &[],
            state: state("0-7", &[]),
            pod: ("fakeContainer2", 8000, 8000),
            hint: None,
            want: Err(not_enough(8, 7)),
        },
        AddCase {
            description: "GuPodMultipleCores, SingleSocketHT, ExpectSameAllocation",
            topo: single_socket_ht,
            reserved: 1,
            explicit: "",
            options: &[],
            state: state("0-1,4-5", &[("fakePod", "fakeContainer3", "2-3,6-7")]),
            pod: ("fakeContainer3", 4000, 4000),
            hint: None,
            want: Ok("2-3,6-7"),
        },
        AddCase {
            description: "GuPodMultipleCores, DualSocketHT, NoAllocExpectError",
            topo: dual_socket_ht,
            reserved: 1,
            explicit: "",
            options: &[],
            state: state("0,4-11", &[("fakePod", "fakeContainer100", "1-3")]),
            pod: ("fakeContainer5", 10000, 10000),
            hint: None,
            want: Err(not_enough(10, 8)),
        },
        AddCase {
            description: "GuPodMultipleCores, SingleSocketHT, NoAllocExpectError",
            topo: single_socket_ht,
            reserved: 1,
            explicit: "",
            options: &[],
            state: state("0,7", &[("fakePod", "fakeContainer100", "1-6")]),
            pod: ("fakeContainer5", 2000, 2000),
            hint: None,
            want: Err(not_enough(2, 1)),
        },
    ]);
    // smtalignOptionTestCases
    let smt = |requested, per_core, available, physical| {
        AllocateError::SmtAlignment(SmtAlignmentError {
            requested_cpus: requested,
            cpus_per_core: per_core,
            available_physical_cpus: available,
            caused_by_physical_cpus: physical,
        })
    };
    const FULL: &[(&str, &str)] = &[("full-pcpus-only", "true")];
    cases.extend([
        AddCase {
            description: "GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU (full-pcpus-only)",
            topo: single_socket_ht,
            reserved: 1,
            explicit: "",
            options: FULL,
            state: state("0-7", &[]),
            pod: ("fakeContainer2", 1000, 1000),
            hint: None,
            want: Err(smt(1, 2, 0, false)),
        },
        AddCase {
            description: "GuPodManyCores, topoDualSocketHT, ExpectDoNotAllocPartialCPU",
            topo: dual_socket_ht,
            reserved: 2,
            explicit: "1,6",
            options: FULL,
            state: state("0,2-5,7-11", &[]),
            pod: ("fakeContainerBug113537_1", 10000, 10000),
            hint: None,
            want: Err(smt(10, 2, 8, true)),
        },
        AddCase {
            description: "GuPodManyCores, topoDualSocketHT, AutoReserve, ExpectAllocAllCPUs",
            topo: dual_socket_ht,
            reserved: 2,
            explicit: "",
            options: FULL,
            state: state("1-5,7-11", &[]),
            pod: ("fakeContainerBug113537_2", 10000, 10000),
            hint: None,
            want: Ok("1-5,7-11"),
        },
        AddCase {
            description: "GuPodManyCores, topoDualSocketHT, ExpectAllocAllCPUs",
            topo: dual_socket_ht,
            reserved: 2,
            explicit: "0,6",
            options: FULL,
            state: state("1-5,7-11", &[]),
            pod: ("fakeContainerBug113537_2", 10000, 10000),
            hint: None,
            want: Ok("1-5,7-11"),
        },
    ]);
    // alignBySocketOptionTestCases
    cases.extend([
        AddCase { description: "Align by socket: true, cpu's within same socket of numa in hint are part of allocation", topo: dual_socket_multi_numa_per_socket_ht, reserved: 1, explicit: "", options: &[("align-by-socket", "true")], state: state("2,11,21-22", &[]), pod: ("fakeContainer2", 2000, 2000), hint: Some(&[0, 2]), want: Ok("2,11") },
        AddCase { description: "Align by socket: false, cpu's are taken strictly from NUMA nodes in hint", topo: dual_socket_multi_numa_per_socket_ht, reserved: 1, explicit: "", options: &[("align-by-socket", "false")], state: state("2,11,21-22", &[]), pod: ("fakeContainer2", 2000, 2000), hint: Some(&[0, 2]), want: Ok("2,21") },
    ]);
    for case in cases {
        run_add(case);
    }
}

/// Upstream `SMTAlignmentError` messages.
#[test]
fn smt_alignment_error_messages() {
    let odd = SmtAlignmentError {
        requested_cpus: 1,
        cpus_per_core: 2,
        available_physical_cpus: 0,
        caused_by_physical_cpus: false,
    };
    assert_eq!(
        odd.to_string(),
        "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2"
    );
    let short = SmtAlignmentError {
        requested_cpus: 10,
        cpus_per_core: 2,
        available_physical_cpus: 8,
        caused_by_physical_cpus: true,
    };
    assert_eq!(
        short.to_string(),
        "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 8, requested CPUs = 10, CPUs per core = 2"
    );
    let admission: corral_topology::AllocationError = AllocateError::SmtAlignment(short).into();
    assert!(
        matches!(admission, corral_topology::AllocationError::Admission { ref reason, .. } if reason == "SMTAlignmentError")
    );
}

/// Upstream `TestStaticPolicyReuseCPUs`.
#[test]
fn static_policy_reuse_cpus() {
    let mut p = policy(single_socket_ht(), 0, "", &[]);
    let pod = make_multi_container_pod("fakePod", &[(4000, 4000)], &[(2000, 2000)]);
    let mut st = state("0-7", &[]);
    for (_, c) in pod.all_containers() {
        p.allocate(&mut st, &pod, c, TopologyHint::default())
            .unwrap();
    }
    assert_eq!(st.default_cpu_set(), &set("2-3,6-7"));
    p.remove_container(&mut st, "fakePod", "initContainer-0");
    assert_eq!(st.default_cpu_set(), &set("1-3,5-7"));
    assert!(st.cpu_set("fakePod", "initContainer-0").is_none());
}

/// Upstream `TestStaticPolicyRemove`.
#[test]
fn static_policy_remove() {
    let cases: [(&str, CpuState, &str); 4] = [
        (
            "fakeContainer1",
            state("4-7", &[("fakePod", "fakeContainer1", "1-3")]),
            "1-7",
        ),
        (
            "fakeContainer1",
            state(
                "",
                &[
                    ("fakePod", "fakeContainer1", "1-3"),
                    ("fakePod", "fakeContainer2", "4-7"),
                ],
            ),
            "1-3",
        ),
        (
            "fakeContainer1",
            state(
                "6-7",
                &[
                    ("fakePod", "fakeContainer1", "1,3,5"),
                    ("fakePod", "fakeContainer2", "2,4"),
                ],
            ),
            "1,3,5-7",
        ),
        (
            "fakeContainer2",
            state("2,4,6-7", &[("fakePod", "fakeContainer1", "1,3,5")]),
            "2,4,6-7",
        ),
    ];
    for (container, mut st, want) in cases {
        let mut p = policy(single_socket_ht(), 0, "", &[]);
        p.remove_container(&mut st, "fakePod", container);
        assert_eq!(st.default_cpu_set(), &set(want));
        assert!(st.cpu_set("fakePod", container).is_none());
    }
}

/// Upstream `TestTopologyAwareAllocateCPUs` (through `Allocate` with the hint).
#[test]
fn topology_aware_allocate_cpus() {
    let cases: [(usize, Option<&[usize]>, &str); 5] = [
        (2, None, "0,6"),
        (2, Some(&[0]), "0,6"),
        (2, Some(&[1]), "1,7"),
        (8, Some(&[0]), "0-2,4,6-8,10"),
        (8, Some(&[1]), "0-1,3,5-7,9,11"),
    ];
    for (n, mask, want) in cases {
        let mut p = policy(dual_socket_ht(), 0, "", &[]);
        let mut st = state("0-11", &[]);
        p.start(&mut st).unwrap();
        let pod = make_pod("fakePod", "c", n as i64 * 1000, n as i64 * 1000);
        let hint = TopologyHint::new(
            mask.map(|m| NumaMask::new(m.iter().copied()).unwrap()),
            true,
        );
        p.allocate(&mut st, &pod, &pod.containers[0], hint).unwrap();
        assert_eq!(st.cpu_set("fakePod", "c"), Some(&set(want)), "{n} {mask:?}");
    }
}

/// Upstream `TestStaticPolicyAddWithResvList` / `NewStaticPolicy` reservation checks.
#[test]
fn reservation() {
    let p = policy(single_socket_ht(), 2, "", &[]);
    assert_eq!(p.reserved_cpus(), &set("0,4"));
    let p = policy(dual_socket_ht(), 2, "1,6", &[]);
    assert_eq!(p.reserved_physical_cpus(), &set("0-1,6-7"));
    let err = StaticPolicy::new(
        single_socket_ht(),
        2,
        &set("0"),
        StaticPolicyOptions::default(),
        PolicyName::None,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[cpumanager] unable to reserve the required amount of CPUs (size of 0 did not equal 2)"
    );
    let err = StaticPolicy::new(
        single_socket_ht(),
        9,
        &CpuSet::new(),
        StaticPolicyOptions::default(),
        PolicyName::None,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[cpumanager] unable to reserve the required amount of CPUs (size of  did not equal 9)"
    );
    // strict-cpu-reservation keeps reserved CPUs out of the shared pool.
    let mut p = policy(
        single_socket_ht(),
        1,
        "",
        &[("strict-cpu-reservation", "true")],
    );
    let mut st = state("", &[]);
    p.start(&mut st).unwrap();
    assert_eq!(st.default_cpu_set(), &set("1-7"));
    let mut bad = state("0-7", &[]);
    assert!(matches!(
        p.start(&mut bad),
        Err(ValidationError::StrictReservedInDefault { .. })
    ));
}

/// Hints as upstream `TestGetTopologyHints` / `TestGetPodTopologyHints` shape them: nil for
/// non-guaranteed, regenerated for existing allocations, `[]` for a size mismatch, reusable
/// CPUs of init containers counted.
#[test]
fn hints_for_container() {
    let p = policy(dual_socket_ht(), 0, "", &[]);
    let st = state("0-11", &[]);
    let burstable = make_pod("p", "c", 1000, 2000);
    assert!(
        p.hints_for_container(&st, &burstable, &burstable.containers[0])
            .is_none()
    );
    let pod = make_pod("p", "c", 2000, 2000);
    let hints = p
        .hints_for_container(&st, &pod, &pod.containers[0])
        .unwrap();
    let cpu = hints["cpu"].as_ref().unwrap();
    let masks: Vec<_> = cpu
        .iter()
        .map(|h| (h.numa_affinity.unwrap().get_bits(), h.preferred))
        .collect();
    assert_eq!(
        masks,
        vec![(vec![0], true), (vec![1], true), (vec![0, 1], false)]
    );
    // Already allocated with a different size: unsatisfiable.
    let st = state("0-3,5-9,11", &[("p", "c", "4,10"), ("p", "d", "")]);
    let pod4 = make_pod("p", "c", 4000, 4000);
    assert_eq!(
        p.hints_for_container(&st, &pod4, &pod4.containers[0])
            .unwrap()["cpu"],
        Some(vec![])
    );
    // Already allocated with the same size: regenerated from the allocation (4,10: node 0).
    let hints = p
        .hints_for_container(&st, &pod, &pod.containers[0])
        .unwrap();
    assert_eq!(
        hints["cpu"].as_ref().unwrap()[0]
            .numa_affinity
            .unwrap()
            .get_bits(),
        vec![0]
    );
    // Pod scope: max(init, sum(app)).
    let pod = make_multi_container_pod("q", &[(4000, 4000)], &[(1000, 1000), (2000, 2000)]);
    assert_eq!(corral_cpumgr::pod_guaranteed_cpus(&pod), 4);
    let pod = make_pod_with_sidecars("r", &[(1000, true), (4000, false)], &[2000]);
    assert_eq!(corral_cpumgr::pod_guaranteed_cpus(&pod), 5);
}

/// Upstream `TestStaticPolicyStart`, the `StrictCPUReservationOption` rows.
#[test]
fn static_policy_start_strict_reservation() {
    const STRICT: &[(&str, &str)] = &[("strict-cpu-reservation", "true")];
    // Reserved 0,6 (2 CPUs taken by topology); CPU 0 is still in the shared pool.
    let mut p = policy(dual_socket_ht(), 2, "", STRICT);
    let mut st = state("0-1", &[]);
    assert_eq!(
        p.start(&mut st).map_err(|e| e.to_string()),
        Err("some of strictly reserved cpus: \"0\" are present in defaultCpuSet: \"0-1\"".into())
    );
    // Nothing reserved; an assignment still overlaps the shared pool.
    let mut p = policy(dual_socket_ht(), 0, "", STRICT);
    let mut st = state("2-11", &[("fakePod", "0", "0-2")]);
    assert_eq!(
        p.start(&mut st).map_err(|e| e.to_string()),
        Err(
            "pod: fakePod, container: 0 cpuset: \"0-2\" overlaps with default cpuset \"2-11\""
                .into()
        )
    );
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Upstream `TestStaticPolicyAdd`, every row on `topoQuadSocketFourWayHT`: the three
/// options-insensitive rows (run without options and with `full-pcpus-only`, as upstream
/// permutes them), the two default-option rows and the `full-pcpus-only` SMT-level-4 row.
#[test]
fn static_policy_add_quad_socket_four_way_ht() {
    let topo = quad_socket_four_way_ht();
    let all = topo.all_cpus().clone();
    let socket = |s: usize| -> CpuSet {
        all.iter()
            .filter(|&c| topo.topology().cpu(c).map(|i| i.socket) == Some(s))
            .collect()
    };
    let (sock0, sock1) = (socket(0), socket(1));
    assert_eq!((sock0.len(), sock1.len()), (72, 72));
    let list = |cpus: &[usize]| CpuSet::from_iter(cpus.iter().copied());
    let st = |default: &CpuSet| {
        let mut a = ContainerCpuAssignments::new();
        a.entry("fakePod".to_owned())
            .or_default()
            .insert("fakeContainer100".to_owned(), all.difference(default));
        CpuState::new(default.clone(), a)
    };

    let three_sockets = list(&[
        1, 25, 13, 38, 2, 9, 11, 35, 23, 48, 12, 51, 53, 173, 113, 233, 54, 61,
    ]);
    let sock1_plus = sock1.union(&list(&[
        10, 34, 22, 47, 53, 173, 61, 181, 108, 228, 115, 235,
    ]));
    let insensitive = |options: &'static [(&'static str, &'static str)]| {
        [
            // All of socket 0 is free, some CPUs of each other socket are taken.
            AddCase {
                description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocSock0",
                topo: quad_socket_four_way_ht,
                reserved: 0,
                explicit: "",
                options,
                state: st(&all.difference(&list(&[3, 11, 4, 5, 6, 7]))),
                pod: ("fakeContainer5", 72000, 72000),
                hint: None,
                want: Ok(leak(sock0.to_string())),
            },
            // Two full cores on three sockets plus partial cores: the full cores.
            AddCase {
                description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllFullCoresFromThreeSockets",
                topo: quad_socket_four_way_ht,
                reserved: 0,
                explicit: "",
                options,
                state: st(&three_sockets),
                pod: ("fakeCcontainer5", 12000, 12000),
                hint: None,
                want: Ok(leak(
                    list(&[1, 25, 13, 38, 11, 35, 23, 48, 53, 173, 113, 233]).to_string(),
                )),
            },
            // All of socket 1, one full core and partial cores: socket 1 and the full core.
            AddCase {
                description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllSock1+FullCore",
                topo: quad_socket_four_way_ht,
                reserved: 0,
                explicit: "",
                options,
                state: st(&sock1_plus),
                pod: ("fakeContainer5", 76000, 76000),
                hint: None,
                want: Ok(leak(sock1.union(&list(&[10, 34, 22, 47])).to_string())),
            },
        ]
    };
    let mut cases: Vec<AddCase> = insensitive(&[]).into_iter().collect();
    cases.extend(insensitive(&[("full-pcpus-only", "true")]));
    let partial = list(&[10, 11, 53, 67, 52]);
    let seven = list(&[10, 11, 53, 37, 55, 67, 52]);
    cases.extend([
        // Only partial cores are free anywhere: all of them.
        AddCase {
            description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocCPUs",
            topo: quad_socket_four_way_ht,
            reserved: 0,
            explicit: "",
            options: &[],
            state: {
                // Upstream's row: CPUs 37 and 55 are in neither the pool nor the assignment.
                let mut s = st(&seven);
                s.set_default_cpu_set(partial.clone());
                s
            },
            pod: ("fakeContainer5", 5000, 5000),
            hint: None,
            want: Ok(leak(partial.to_string())),
        },
        AddCase {
            description: "GuPodMultipleCores, topoQuadSocketFourWayHT, NoAlloc",
            topo: quad_socket_four_way_ht,
            reserved: 0,
            explicit: "",
            options: &[],
            state: st(&seven),
            pod: ("fakeContainer5", 76000, 76000),
            hint: None,
            want: Err(not_enough(76, 7)),
        },
        // SMT level 4: 15 CPUs are not whole cores.
        AddCase {
            description: "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocOneCPUs",
            topo: quad_socket_four_way_ht,
            reserved: 8,
            explicit: "",
            options: &[("full-pcpus-only", "true")],
            state: CpuState::new(all.clone(), ContainerCpuAssignments::new()),
            pod: ("fakeContainer15", 15000, 15000),
            hint: None,
            want: Err(AllocateError::SmtAlignment(SmtAlignmentError {
                requested_cpus: 15,
                cpus_per_core: 4,
                available_physical_cpus: 0,
                caused_by_physical_cpus: false,
            })),
        },
    ]);
    assert_eq!(cases.len(), 9);
    for case in cases {
        run_add(case);
    }
}
