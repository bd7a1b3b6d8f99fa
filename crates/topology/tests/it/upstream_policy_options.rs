//! Ported from upstream `pkg/kubelet/cm/topologymanager/policy_options_test.go` (store ids
//! 812633531, and 68670283988 of v1.38, whose rows for the two real options hold for v1.36),
//! with v1.36's levels: both options are GA, so no gate hides them.
//!
//! Upstream's tests register two test-only options at run time (`fancy-new-option` as beta,
//! `fancy-alpha-option` as alpha). corral has no such registry: [`PolicyOptions`] refuses
//! those names as unknown, and the gate rows are checked through [`check_option_level`], the
//! same check `PolicyOptions::from_map_gated` applies with each option's v1.36 level.

use std::collections::BTreeMap;

use corral_topology::topologymanager::{
    DEFAULT_MAX_ALLOWABLE_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES, PREFER_CLOSEST_NUMA_NODES,
    TopologyManagerConfig, check_option_level, option_maturity,
};
use corral_topology::{Feature, FeatureGates, Maturity, PolicyConfigError, PolicyOptions};

/// Upstream's test-only options.
const FANCY_BETA_OPTION: &str = "fancy-new-option";
const FANCY_ALPHA_OPTION: &str = "fancy-alpha-option";

/// v1.37's defaults with `feature` set to `on`.
fn gates_with(feature: Feature, on: bool) -> FeatureGates {
    FeatureGates::default().with(feature, on).unwrap()
}

/// The level upstream's test gives each name: the real options' v1.36 level, the test-only
/// ones the level upstream registers them at.
fn level(name: &str) -> Option<Maturity> {
    match name {
        FANCY_BETA_OPTION => Some(Maturity::Beta),
        FANCY_ALPHA_OPTION => Some(Maturity::Alpha),
        _ => option_maturity(name),
    }
}

fn parse(pairs: &[(&str, &str)]) -> Result<PolicyOptions, PolicyConfigError> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    PolicyOptions::from_map(&map)
}

fn opts(prefer_closest_numa: bool, max_allowable_numa_nodes: usize) -> PolicyOptions {
    PolicyOptions {
        prefer_closest_numa,
        max_allowable_numa_nodes,
    }
}

fn err_text(pairs: &[(&str, &str)]) -> String {
    parse(pairs).expect_err("should fail").to_string()
}

/// Upstream `TestNewTopologyManagerOptions`.
#[test]
fn new_topology_manager_options() {
    // "return TopologyManagerOptions with PreferClosestNUMA set to true"
    assert_eq!(
        parse(&[
            (PREFER_CLOSEST_NUMA_NODES, "true"),
            (MAX_ALLOWABLE_NUMA_NODES, "8")
        ]),
        Ok(opts(true, 8))
    );
    // "return TopologyManagerOptions with MaxAllowableNUMANodes set to 12"
    assert_eq!(
        parse(&[(MAX_ALLOWABLE_NUMA_NODES, "12")]),
        Ok(opts(false, 12))
    );
    // "fail to set option when TopologyManagerPolicyBetaOptions feature gate is not set"
    // (upstream's row while the option was beta): GA in v1.36, accepted with the gate off.
    let beta_off = gates_with(Feature::TopologyManagerPolicyBetaOptions, false);
    let map = BTreeMap::from([(MAX_ALLOWABLE_NUMA_NODES.to_owned(), "8".to_owned())]);
    assert_eq!(
        PolicyOptions::from_map_gated(&map, &beta_off),
        Ok(opts(false, 8))
    );
    // "return empty TopologyManagerOptions"
    assert_eq!(
        parse(&[]),
        Ok(opts(false, DEFAULT_MAX_ALLOWABLE_NUMA_NODES))
    );
    // "fail to parse options with error PreferClosestNUMANodes"
    assert!(
        err_text(&[(PREFER_CLOSEST_NUMA_NODES, "not a boolean")]).contains("bad value for option")
    );
    // "fail to parse options with error MaxAllowableNUMANodes"
    assert!(
        err_text(&[(MAX_ALLOWABLE_NUMA_NODES, "can't parse to int")])
            .contains("unable to convert policy option to integer")
    );
    // "test beta options success" / "test beta options fail" / "test alpha options success" /
    // "test alpha options fail": the test-only names are unknown to the parser (no
    // registry), and refused or let through by their level's gate as upstream's.
    for name in [FANCY_BETA_OPTION, FANCY_ALPHA_OPTION] {
        assert_eq!(
            parse(&[(name, "true")]),
            Err(PolicyConfigError::UnknownOption(name.to_owned()))
        );
        assert!(err_text(&[(name, "true")]).contains("unknown Topology Manager Policy option"));
    }
    let beta_on = gates_with(Feature::TopologyManagerPolicyBetaOptions, true);
    assert_eq!(
        check_option_level(FANCY_BETA_OPTION, level(FANCY_BETA_OPTION), &beta_on),
        Ok(())
    );
    assert_eq!(
        check_option_level(FANCY_BETA_OPTION, level(FANCY_BETA_OPTION), &beta_off)
            .unwrap_err()
            .to_string(),
        "Topology Manager Policy Beta-level Options not enabled, but option \"fancy-new-option\" provided"
    );
    let alpha_on = gates_with(Feature::TopologyManagerPolicyAlphaOptions, true);
    assert_eq!(
        check_option_level(FANCY_ALPHA_OPTION, level(FANCY_ALPHA_OPTION), &alpha_on),
        Ok(())
    );
    assert_eq!(
        check_option_level(
            FANCY_ALPHA_OPTION,
            level(FANCY_ALPHA_OPTION),
            &FeatureGates::default()
        ),
        Err(PolicyConfigError::AlphaOptionsNotEnabled(
            FANCY_ALPHA_OPTION.to_owned()
        ))
    );
}

/// Upstream `TestPolicyDefaultsAvailable`: v1.36's default gates.
#[test]
fn policy_defaults_available() {
    let defaults = FeatureGates::default();
    for (option, expected_available) in [
        ("this-option-does-not-exist", false),
        (PREFER_CLOSEST_NUMA_NODES, true),
        (MAX_ALLOWABLE_NUMA_NODES, true),
    ] {
        let available = check_option_level(option, option_maturity(option), &defaults).is_ok();
        assert_eq!(available, expected_available, "{option}");
    }
}

/// Upstream `TestPolicyOptionsAvailable`: option × gate × gate state → available, with the
/// test-only options at upstream's levels.
#[test]
fn policy_options_available() {
    use Feature::{
        TopologyManagerPolicyAlphaOptions as Alpha, TopologyManagerPolicyBetaOptions as Beta,
    };
    let rows = [
        ("this-option-does-not-exist", Beta, false, false),
        ("this-option-does-not-exist", Beta, true, false),
        (PREFER_CLOSEST_NUMA_NODES, Beta, false, true),
        (PREFER_CLOSEST_NUMA_NODES, Alpha, false, true),
        (MAX_ALLOWABLE_NUMA_NODES, Beta, false, true),
        (MAX_ALLOWABLE_NUMA_NODES, Alpha, false, true),
        (FANCY_ALPHA_OPTION, Alpha, true, true),
        (FANCY_ALPHA_OPTION, Alpha, false, false),
        (FANCY_BETA_OPTION, Beta, true, true),
        (FANCY_BETA_OPTION, Beta, false, false),
    ];
    for (option, gate, enabled, expected_available) in rows {
        let gates = gates_with(gate, enabled);
        let available = check_option_level(option, level(option), &gates).is_ok();
        assert_eq!(available, expected_available, "{option} {gate}={enabled}");
        // The parser agrees for the real options and the unknown name.
        if level(option) == option_maturity(option) {
            let value = if option == MAX_ALLOWABLE_NUMA_NODES {
                "8"
            } else {
                "true"
            };
            let map = BTreeMap::from([(option.to_owned(), value.to_owned())]);
            assert_eq!(
                PolicyOptions::from_map_gated(&map, &gates).is_ok(),
                expected_available,
                "{option} {gate}={enabled}"
            );
        }
    }
    // Every combination of the two gates: v1.36's two options are always available.
    for (alpha, beta) in [(false, false), (false, true), (true, false), (true, true)] {
        let gates = gates_with(Alpha, alpha).with(Beta, beta).unwrap();
        let map = BTreeMap::from([
            (PREFER_CLOSEST_NUMA_NODES.to_owned(), "true".to_owned()),
            (MAX_ALLOWABLE_NUMA_NODES.to_owned(), "16".to_owned()),
        ]);
        assert_eq!(
            PolicyOptions::from_map_gated(&map, &gates),
            Ok(opts(true, 16))
        );
    }
}

/// `TopologyManagerPolicyOptions` is GA and locked on in v1.37 (kube_features.go at k/k
/// 45b76a34: `{1.32 GA true LockToDefault}`, "remove in 1.37"), so the kubelet's refusal of
/// options with the gate off (`cmd/kubelet/app/server.go`, v1.36) cannot happen: turning the
/// gate off is refused instead, and options are taken under every policy.
#[test]
fn policy_options_feature_gate() {
    let locked = FeatureGates::from_map(&BTreeMap::from([(
        "TopologyManagerPolicyOptions".to_owned(),
        false,
    )]))
    .unwrap_err();
    assert_eq!(
        locked.to_string(),
        "cannot set feature gate TopologyManagerPolicyOptions to false, feature is locked to true"
    );
    let map = BTreeMap::from([
        (PREFER_CLOSEST_NUMA_NODES.to_owned(), "true".to_owned()),
        (MAX_ALLOWABLE_NUMA_NODES.to_owned(), "8".to_owned()),
    ]);
    for policy in ["best-effort", "restricted", "single-numa-node"] {
        let config = TopologyManagerConfig::from_strings_gated(
            policy,
            "pod",
            Some(&map),
            &FeatureGates::default(),
        )
        .unwrap();
        assert_eq!(config.options, opts(true, 8), "{policy}");
    }
}

/// Facts of upstream `NewPolicyOptions` the tables above rely on: Go `strconv.ParseBool`
/// spellings, and `max-allowable-numa-nodes` below the default of 8 is refused.
#[test]
fn option_value_rules() {
    for t in ["1", "t", "T", "TRUE", "true", "True"] {
        assert_eq!(
            parse(&[(PREFER_CLOSEST_NUMA_NODES, t)]),
            Ok(opts(true, 8)),
            "{t}"
        );
    }
    for f in ["0", "f", "F", "FALSE", "false", "False"] {
        assert_eq!(
            parse(&[(PREFER_CLOSEST_NUMA_NODES, f)]),
            Ok(opts(false, 8)),
            "{f}"
        );
    }
    assert!(parse(&[(PREFER_CLOSEST_NUMA_NODES, "yes")]).is_err());
    assert!(err_text(&[(MAX_ALLOWABLE_NUMA_NODES, "7")]).contains("should not be less than 8"));
    assert_eq!(
        parse(&[(MAX_ALLOWABLE_NUMA_NODES, "+9")]),
        Ok(opts(false, 9))
    );
}
