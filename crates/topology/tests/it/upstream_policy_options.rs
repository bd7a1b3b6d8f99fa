//! Ported from upstream `pkg/kubelet/cm/topologymanager/policy_options_test.go`.
//!
//! corral has no feature gates (see the `policy` module docs): every known option is
//! available, and an option name upstream does not know is an error. Upstream's test registers
//! two test-only options (`fancy-new-option` as beta, `fancy-alpha-option` as alpha); corral
//! has no such registry, so those rows assert that the names are refused as unknown.

use std::collections::BTreeMap;

use corral_topology::topologymanager::{
    DEFAULT_MAX_ALLOWABLE_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES, PREFER_CLOSEST_NUMA_NODES,
};
use corral_topology::{PolicyConfigError, PolicyOptions};

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
    // "fail to set option when TopologyManagerPolicyBetaOptions feature gate is not set":
    // no gates in corral, the option is simply accepted.
    assert_eq!(
        parse(&[(MAX_ALLOWABLE_NUMA_NODES, "8")]),
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
    // "test alpha options fail": the test-only option names are unknown to corral.
    for name in ["fancy-new-option", "fancy-alpha-option"] {
        assert_eq!(
            parse(&[(name, "true")]),
            Err(PolicyConfigError::UnknownOption(name.to_owned()))
        );
        assert!(err_text(&[(name, "true")]).contains("unknown Topology Manager Policy option"));
    }
}

/// Upstream `TestPolicyDefaultsAvailable` and `TestPolicyOptionsAvailable` (gates play no part
/// in corral): the two real options are available, an unknown name is not.
#[test]
fn policy_options_available() {
    let available = |name: &str, value: &str| parse(&[(name, value)]).is_ok();
    assert!(!available("this-option-does-not-exist", "true"));
    assert!(available(PREFER_CLOSEST_NUMA_NODES, "true"));
    assert!(available(MAX_ALLOWABLE_NUMA_NODES, "8"));
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
