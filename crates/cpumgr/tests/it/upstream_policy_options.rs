//! Ported tables of upstream `pkg/kubelet/cm/cpumanager/policy_options_test.go` (store id
//! 570006010): `TestPolicyDefaultsAvailable`, `TestPolicyOptionsAvailable`,
//! `TestValidateStaticPolicyOptions`, `TestPolicyOptionsCompatibility`, with the option
//! levels of v1.36 (the test file read predates them: its rows expect `full-pcpus-only`
//! behind `CPUManagerPolicyBetaOptions` and `distribute-cpus-across-numa` behind the alpha
//! gate; the expectations below are v1.36's and say so where they differ).
//!
//! v1.36: `full-pcpus-only`, `strict-cpu-reservation`, `prefer-align-cpus-by-uncorecache`
//! GA (no gate); `distribute-cpus-across-numa` beta (`CPUManagerPolicyBetaOptions`, on by
//! default); `align-by-socket`, `distribute-cpus-across-cores` alpha
//! (`CPUManagerPolicyAlphaOptions`, off by default). As upstream's `featuregatetesting`, a
//! row sets one gate and leaves the other at its default.

use std::collections::BTreeMap;

use corral_cpumgr::{
    ALIGN_BY_SOCKET, ALL_OPTIONS, DISTRIBUTE_CPUS_ACROSS_CORES, DISTRIBUTE_CPUS_ACROSS_NUMA,
    FULL_PCPUS_ONLY, OptionMaturity, OptionsError, PREFER_ALIGN_CPUS_BY_UNCORECACHE,
    STRICT_CPU_RESERVATION, StaticPolicyOptions, option_maturity,
};
use corral_testkit::upstream_topologies::{self as upstream, Machine};
use corral_topology::{Feature, FeatureGates, PolicyName, TopologyCounts};

use Feature::{CpuManagerPolicyAlphaOptions as Alpha, CpuManagerPolicyBetaOptions as Beta};

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// v1.36's defaults with `feature` set to `on`.
fn gates_with(feature: Feature, on: bool) -> FeatureGates {
    FeatureGates::default().with(feature, on).unwrap()
}

/// Upstream `CheckPolicyOptionAvailable(option)` under `gates`: whether the option alone,
/// set to true, is accepted.
fn available(option: &str, gates: &FeatureGates) -> bool {
    StaticPolicyOptions::from_map_gated(&map(&[(option, "true")]), gates).is_ok()
}

/// Upstream `TestPolicyDefaultsAvailable`: v1.36's default gates.
#[test]
fn policy_defaults_available() {
    let defaults = FeatureGates::default();
    let rows = [
        ("this-option-does-not-exist", false),
        (FULL_PCPUS_ONLY, true),
        // Not in upstream's table: the other options at v1.36's defaults.
        (STRICT_CPU_RESERVATION, true),
        (PREFER_ALIGN_CPUS_BY_UNCORECACHE, true),
        (DISTRIBUTE_CPUS_ACROSS_NUMA, true),
        (ALIGN_BY_SOCKET, false),
        (DISTRIBUTE_CPUS_ACROSS_CORES, false),
    ];
    for (option, expected) in rows {
        assert_eq!(available(option, &defaults), expected, "{option}");
    }
}

/// Upstream `TestPolicyOptionsAvailable`: option × gate × gate state → available.
#[test]
fn policy_options_available() {
    let rows = [
        ("this-option-does-not-exist", Beta, false, false),
        ("this-option-does-not-exist", Beta, true, false),
        (FULL_PCPUS_ONLY, Beta, true, true),
        // Upstream's row expects false (the option was beta); GA since v1.33.
        (FULL_PCPUS_ONLY, Beta, false, true),
        (ALIGN_BY_SOCKET, Alpha, true, true),
        (ALIGN_BY_SOCKET, Beta, true, false),
        (DISTRIBUTE_CPUS_ACROSS_NUMA, Alpha, true, true),
        // Upstream's row expects false (the option was alpha); beta in v1.36.
        (DISTRIBUTE_CPUS_ACROSS_NUMA, Beta, true, true),
        (DISTRIBUTE_CPUS_ACROSS_CORES, Alpha, true, true),
        (DISTRIBUTE_CPUS_ACROSS_CORES, Beta, true, false),
        // v1.36's rows for the options upstream's table predates.
        (DISTRIBUTE_CPUS_ACROSS_NUMA, Beta, false, false),
        (STRICT_CPU_RESERVATION, Beta, false, true),
        (STRICT_CPU_RESERVATION, Alpha, false, true),
        (PREFER_ALIGN_CPUS_BY_UNCORECACHE, Beta, false, true),
        (PREFER_ALIGN_CPUS_BY_UNCORECACHE, Alpha, false, true),
    ];
    for (option, gate, enabled, expected) in rows {
        assert_eq!(
            available(option, &gates_with(gate, enabled)),
            expected,
            "{option} {gate}={enabled}"
        );
    }
}

/// Every option under every combination of the two gates, with upstream's message for each
/// refusal.
#[test]
fn every_option_under_every_gate_combination() {
    for (alpha, beta) in [(false, false), (false, true), (true, false), (true, true)] {
        let gates = gates_with(Alpha, alpha).with(Beta, beta).unwrap();
        for option in ALL_OPTIONS {
            let got = StaticPolicyOptions::from_map_gated(&map(&[(option, "true")]), &gates)
                .map(drop)
                .map_err(|e| e.to_string());
            let want = match option_maturity(option) {
                Some(OptionMaturity::Alpha) if !alpha => Err(format!(
                    "CPU Manager Policy Alpha-level Options not enabled, but option \"{option}\" provided"
                )),
                Some(OptionMaturity::Beta) if !beta => Err(format!(
                    "CPU Manager Policy Beta-level Options not enabled, but option \"{option}\" provided"
                )),
                _ => Ok(()),
            };
            assert_eq!(got, want, "{option} alpha={alpha} beta={beta}");
        }
        // An unknown name is unknown whatever the gates.
        assert_eq!(
            StaticPolicyOptions::from_map_gated(&map(&[("bogus", "true")]), &gates),
            Err(OptionsError::Unknown {
                name: "bogus".into()
            })
        );
    }
    let levels: Vec<_> = ALL_OPTIONS.iter().map(|o| option_maturity(o)).collect();
    assert_eq!(
        levels,
        [
            Some(OptionMaturity::Alpha), // align-by-socket
            Some(OptionMaturity::Alpha), // distribute-cpus-across-cores
            Some(OptionMaturity::Beta),  // distribute-cpus-across-numa
            Some(OptionMaturity::Ga),    // full-pcpus-only
            Some(OptionMaturity::Ga),    // prefer-align-cpus-by-uncorecache
            Some(OptionMaturity::Ga),    // strict-cpu-reservation
        ]
    );
}

fn counts(machine: &Machine) -> TopologyCounts {
    let c = machine.counts;
    TopologyCounts {
        num_cpus: c.cpus,
        num_cores: c.cores,
        num_sockets: c.sockets,
        num_numa_nodes: c.numa_nodes,
        num_uncore_caches: c.uncore_caches,
    }
}

/// Upstream `TestValidateStaticPolicyOptions` (options parsed with
/// `CPUManagerPolicyAlphaOptions` on, as upstream's test sets it).
#[test]
fn validate_static_policy_options() {
    let dual = counts(&upstream::dual_socket_multi_numa_per_socket_ht());
    let more_sockets = counts(&upstream::fake_multi_socket_dual_socket_per_numa_ht());
    let rows = [
        (
            "Align by socket not enabled",
            FULL_PCPUS_ONLY,
            dual,
            PolicyName::SingleNumaNode,
            None,
        ),
        (
            "Align by socket enabled with topology manager single numa node",
            ALIGN_BY_SOCKET,
            dual,
            PolicyName::SingleNumaNode,
            Some(OptionsError::AlignBySocketWithSingleNumaNode),
        ),
        (
            "Align by socket enabled with num_sockets > num_numa",
            ALIGN_BY_SOCKET,
            more_sockets,
            PolicyName::None,
            Some(OptionsError::AlignBySocketHardware),
        ),
        (
            "Align by socket enabled: with topology manager None policy",
            ALIGN_BY_SOCKET,
            dual,
            PolicyName::None,
            None,
        ),
        (
            "Align by socket enabled: with topology manager best-effort policy",
            ALIGN_BY_SOCKET,
            dual,
            PolicyName::BestEffort,
            None,
        ),
        (
            "Align by socket enabled: with topology manager restricted policy",
            ALIGN_BY_SOCKET,
            dual,
            PolicyName::Restricted,
            None,
        ),
    ];
    let alpha = gates_with(Alpha, true);
    for (description, option, counts, policy, expected) in rows {
        let options =
            StaticPolicyOptions::from_map_gated(&map(&[(option, "true")]), &alpha).unwrap();
        assert_eq!(
            options.validate(counts, policy).err(),
            expected,
            "{description}"
        );
    }
    // Upstream's messages, typo included.
    assert_eq!(
        OptionsError::AlignBySocketWithSingleNumaNode.to_string(),
        "Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option"
    );
    assert_eq!(
        OptionsError::AlignBySocketHardware.to_string(),
        "Align by socket is not compatible with hardware where number of sockets are more than number of NUMA"
    );
}

/// Upstream `TestPolicyOptionsCompatibility` (the gate each row turns on, the options, an
/// error expected), then every pair v1.36 refuses, in upstream's order of checks.
#[test]
fn policy_options_compatibility() {
    let rows = [
        (
            "FullPhysicalCPUsOnly set to true only",
            Beta,
            vec![(FULL_PCPUS_ONLY, "true")],
            false,
        ),
        (
            "DistributeCPUsAcrossCores set to true only",
            Alpha,
            vec![(DISTRIBUTE_CPUS_ACROSS_CORES, "true")],
            false,
        ),
        (
            "FullPhysicalCPUsOnly and DistributeCPUsAcrossCores options can not coexist",
            Alpha,
            vec![
                (FULL_PCPUS_ONLY, "true"),
                (DISTRIBUTE_CPUS_ACROSS_CORES, "true"),
            ],
            true,
        ),
    ];
    for (description, gate, options, expected_err) in rows {
        let got = StaticPolicyOptions::from_map_gated(&map(&options), &gates_with(gate, true));
        assert_eq!(got.is_err(), expected_err, "{description}");
    }
    let alpha = gates_with(Alpha, true);
    let pairs = [
        (FULL_PCPUS_ONLY, DISTRIBUTE_CPUS_ACROSS_CORES),
        (DISTRIBUTE_CPUS_ACROSS_NUMA, DISTRIBUTE_CPUS_ACROSS_CORES),
        (
            PREFER_ALIGN_CPUS_BY_UNCORECACHE,
            DISTRIBUTE_CPUS_ACROSS_CORES,
        ),
        (
            PREFER_ALIGN_CPUS_BY_UNCORECACHE,
            DISTRIBUTE_CPUS_ACROSS_NUMA,
        ),
    ];
    for (first, second) in pairs {
        let both = map(&[(first, "true"), (second, "true")]);
        assert_eq!(
            StaticPolicyOptions::from_map_gated(&both, &alpha)
                .unwrap_err()
                .to_string(),
            format!("static policy options {first} and {second} can not be used at the same time")
        );
        // A pair with either option off is no conflict.
        for off in [first, second] {
            let one_off = map(&[
                (first, if off == first { "false" } else { "true" }),
                (second, if off == second { "false" } else { "true" }),
            ]);
            assert!(
                StaticPolicyOptions::from_map_gated(&one_off, &alpha).is_ok(),
                "{first}/{second}, {off} off"
            );
        }
    }
    // Every other pair goes together.
    for (i, first) in ALL_OPTIONS.iter().enumerate() {
        for second in &ALL_OPTIONS[i + 1..] {
            let refused = pairs
                .iter()
                .any(|p| *p == (*first, *second) || *p == (*second, *first));
            let both = map(&[(first, "true"), (second, "true")]);
            assert_eq!(
                StaticPolicyOptions::from_map_gated(&both, &alpha).is_err(),
                refused,
                "{first} + {second}"
            );
        }
    }
    // Three at once: upstream's first pair in its order of checks is the one reported.
    let three = map(&[
        (FULL_PCPUS_ONLY, "true"),
        (DISTRIBUTE_CPUS_ACROSS_NUMA, "true"),
        (DISTRIBUTE_CPUS_ACROSS_CORES, "true"),
    ]);
    assert_eq!(
        StaticPolicyOptions::from_map_gated(&three, &alpha),
        Err(OptionsError::Incompatible {
            first: FULL_PCPUS_ONLY,
            second: DISTRIBUTE_CPUS_ACROSS_CORES
        })
    );
}

/// Upstream `NewStaticPolicyOptions`'s other refusals and the `none` policy's, word for word.
#[test]
fn option_value_errors() {
    let defaults = FeatureGates::default();
    assert_eq!(
        StaticPolicyOptions::from_map_gated(&map(&[(FULL_PCPUS_ONLY, "yes")]), &defaults)
            .unwrap_err()
            .to_string(),
        "bad value for option \"full-pcpus-only\": strconv.ParseBool: parsing \"yes\": invalid syntax"
    );
    assert_eq!(
        StaticPolicyOptions::from_map_gated(&map(&[("no-such-option", "true")]), &defaults)
            .unwrap_err()
            .to_string(),
        "unknown CPU Manager Policy option: \"no-such-option\""
    );
    // The gate is checked before the value (upstream: CheckPolicyOptionAvailable first).
    assert_eq!(
        StaticPolicyOptions::from_map_gated(&map(&[(ALIGN_BY_SOCKET, "yes")]), &defaults),
        Err(OptionsError::AlphaNotEnabled {
            name: ALIGN_BY_SOCKET.into()
        })
    );
    // `from_map` is every gate on.
    assert!(StaticPolicyOptions::from_map(&map(&[(ALIGN_BY_SOCKET, "true")])).is_ok());
}
