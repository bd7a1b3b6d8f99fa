//! Ported tables of upstream `policy_static_test.go` (v1.32) about explicit reserved CPUs,
//! option parsing and error texts: `TestStaticPolicyStartWithResvList`,
//! `TestStaticPolicyAddWithResvList`, `TestStaticPolicyDoNotReuseCPUs`,
//! `TestStaticPolicyOptions` and `TestSMTAlignmentErrorText`.

use std::collections::BTreeMap;

use corral_cpumgr::{
    ContainerCpuAssignments, CpuState, Policy, SmtAlignmentError, StaticPolicy, StaticPolicyOptions,
};
use corral_topology::{PolicyName, TopologyHint};

use crate::support::static_cases::*;
use crate::support::topologies::*;
use crate::support::*;

/// Policy options as name/value pairs.
type Options = &'static [(&'static str, &'static str)];

/// Upstream `TestStaticPolicyStartWithResvList`: (description, reserved count, reserved
/// list, options, default set, expected pool or error).
#[test]
fn static_policy_start_with_resv_list() {
    const STRICT: &[(&str, &str)] = &[("strict-cpu-reservation", "true")];
    type Row = (
        &'static str,
        usize,
        &'static str,
        Options,
        &'static str,
        Result<&'static str, &'static str>,
    );
    let cases: [Row; 4] = [
        ("empty cpuset", 2, "0-1", &[], "", Ok("0-11")),
        (
            "empty cpuset with StrictCPUReservationOption enabled",
            2,
            "0-1",
            STRICT,
            "",
            Ok("2-11"),
        ),
        (
            "reserved cores 0 & 1 are not present in available cpuset",
            2,
            "0-1",
            &[],
            "2-5",
            Err("not all reserved cpus: \"0-1\" are present in defaultCpuSet: \"2-5\""),
        ),
        (
            "reserved cores 0 & 1 are present in available cpuset with StrictCPUReservationOption enabled",
            2,
            "0-1",
            STRICT,
            "0-5",
            Err("some of strictly reserved cpus: \"0-1\" are present in defaultCpuSet: \"0-5\""),
        ),
    ];
    for (description, n, reserved, options, default, want) in cases {
        let mut p = policy(dual_socket_ht(), n, reserved, options);
        let mut st = state(default, &[]);
        match (p.start(&mut st), want) {
            (Ok(()), Ok(pool)) => assert_eq!(st.default_cpu_set(), &set(pool), "{description}"),
            (got, want) => assert_eq!(
                got.map_err(|e| e.to_string()),
                want.map(|_| ()).map_err(str::to_owned),
                "{description}"
            ),
        }
    }
    // "inconsistency between numReservedCPUs and reserved": refused by NewStaticPolicy.
    let err = StaticPolicy::new(
        dual_socket_ht(),
        1,
        &set("0-1"),
        StaticPolicyOptions::default(),
        PolicyName::None,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[cpumanager] unable to reserve the required amount of CPUs (size of 0-1 did not equal 1)"
    );
}

/// Upstream `TestStaticPolicyAddWithResvList`.
#[test]
fn static_policy_add_with_resv_list() {
    // (description, reserved count, reserved list, state, pod, expected CPUs or error) on
    // SingleSocketHT, no options, no hint.
    #[rustfmt::skip]
    let cases = [
        ("GuPodSingleCore, SingleSocketHT, ExpectError", 1, "0", state("0-7", &[]), ("fakeContainer2", 8000, 8000), Err(not_enough(8, 7))),
        ("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", 2, "0-1", state("0-7", &[]), ("fakeContainer2", 1000, 1000), Ok("4")),
        ("GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", 2, "0-1", state("0-1,4-5", &[("fakePod", "fakeContainer100", "2-3,6-7")]), ("fakeContainer3", 2000, 2000), Ok("4-5")),
    ];
    for (description, reserved, explicit, state, pod, want) in cases {
        let (topo, options, hint) = (single_socket_ht, &[] as Options, None);
        run_add(AddCase {
            description,
            topo,
            reserved,
            explicit,
            options,
            state,
            pod,
            hint,
            want,
        });
    }
}

/// Upstream `TestStaticPolicyDoNotReuseCPUs`: a restartable init container (sidecar) keeps
/// its CPUs, the app container gets others.
#[test]
fn static_policy_do_not_reuse_cpus() {
    let mut p = policy(single_socket_ht(), 0, "", &[]);
    let pod = make_pod_with_sidecars("podUID", &[(4000, true)], &[2000]);
    let mut st = CpuState::new(set("0-7"), ContainerCpuAssignments::new());
    for (_, c) in pod.all_containers() {
        p.allocate(&mut st, &pod, c, TopologyHint::default())
            .unwrap();
    }
    assert_eq!(st.default_cpu_set(), &set("3,7"));
}

/// Upstream `TestStaticPolicyOptions`: (description, options, parsed value or error).
#[test]
fn static_policy_options() {
    let full = StaticPolicyOptions {
        full_physical_cpus_only: true,
        ..StaticPolicyOptions::default()
    };
    let cases: [(&str, Options, Option<StaticPolicyOptions>); 7] = [
        ("nil args", &[], Some(StaticPolicyOptions::default())),
        ("empty args", &[], Some(StaticPolicyOptions::default())),
        ("bad single arg", &[("badValue1", "")], None),
        (
            "bad multiple arg",
            &[("badValue1", ""), ("badvalue2", "aaaa")],
            None,
        ),
        ("good arg", &[("full-pcpus-only", "true")], Some(full)),
        (
            "good arg, bad value",
            &[("full-pcpus-only", "enabled!")],
            None,
        ),
        (
            "bad arg intermixed",
            &[("full-pcpus-only", "1"), ("badvalue2", "lorem ipsum")],
            None,
        ),
    ];
    for (description, options, want) in cases {
        let map: BTreeMap<String, String> = options
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(
            StaticPolicyOptions::from_map(&map).ok(),
            want,
            "{description}"
        );
    }
}

/// Upstream `TestSMTAlignmentErrorText`.
#[test]
fn smt_alignment_error_text() {
    let err = |requested_cpus, cpus_per_core, available_physical_cpus, caused_by_physical_cpus| {
        SmtAlignmentError {
            requested_cpus,
            cpus_per_core,
            available_physical_cpus,
            caused_by_physical_cpus,
        }
        .to_string()
    };
    assert_eq!(
        err(15, 4, 0, false),
        "SMT Alignment Error: requested 15 cpus not multiple cpus per core = 4"
    );
    // No physical CPUs at all, flag missing: the old message.
    assert_eq!(
        err(4, 2, 0, false),
        "SMT Alignment Error: requested 4 cpus not multiple cpus per core = 2"
    );
    assert_eq!(
        err(4, 2, 0, true),
        "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 0, requested CPUs = 4, CPUs per core = 2"
    );
}
