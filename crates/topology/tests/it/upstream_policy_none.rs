//! Ported from upstream `pkg/kubelet/cm/topologymanager/policy_none_test.go`.

use crate::support::policy_cases::{h, nil, p};
use corral_topology::{NumaInfo, Policy, PolicyName, PolicyOptions, ProviderHints, TopologyHint};

fn none_policy() -> Policy {
    let info = NumaInfo::from_ids([]).expect("no nodes");
    Policy::new(PolicyName::None, info, PolicyOptions::default())
}

/// Upstream `TestPolicyNoneName`.
#[test]
fn policy_none_name() {
    assert_eq!(none_policy().name().as_str(), "none");
    assert!(!none_policy().is_alignment_guaranteed());
}

/// Upstream `TestPolicyNoneCanAdmitPodResult`: admitted whatever the hint's preference.
#[test]
fn policy_none_can_admit_pod_result() {
    for hint in [nil(false), nil(true)] {
        let result = none_policy().merge(&[p(&[("resource", vec![hint])])]);
        assert!(result.admit, "{hint:?}");
    }
}

/// Upstream `TestPolicyNoneMerge`: always the zero hint `{nil, false}`, admitted.
#[test]
fn policy_none_merge() {
    let cases: [(&str, Vec<ProviderHints>); 3] = [
        ("merged empty providers hints", vec![]),
        (
            "merge with a single provider with a single preferred resource",
            vec![p(&[("resource", vec![h(&[0, 1], true)])])],
        ),
        (
            "merge with a single provider with a single non-preferred resource",
            vec![p(&[("resource", vec![h(&[0, 1], false)])])],
        ),
    ];
    for (name, providers) in cases {
        let result = none_policy().merge(&providers);
        assert!(
            result.best_hint.is_equal(&TopologyHint::default()),
            "{name}"
        );
        assert!(result.admit, "{name}");
    }
}
