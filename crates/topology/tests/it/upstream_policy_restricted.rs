//! Ported from upstream `pkg/kubelet/cm/topologymanager/policy_restricted_test.go`. Upstream's
//! restricted policy embeds the best-effort one, so its merge tests run the best-effort tables
//! of `policy_test.go` (see `policy_cases`); only admission differs.

use crate::support::policy_cases::{
    best_effort, best_effort_closest_numa, best_effort_no_policies, check_can_admit, check_merge,
    eight_nodes, four_nodes, policy, two_nodes,
};
use corral_topology::{PolicyName, TopologyHint};

/// Upstream `TestPolicyRestrictedName`.
#[test]
fn policy_restricted_name() {
    let policy = policy(PolicyName::Restricted, &two_nodes(), false);
    assert_eq!(policy.name().as_str(), "restricted");
    assert_eq!(
        "restricted".parse::<PolicyName>(),
        Ok(PolicyName::Restricted)
    );
}

/// Upstream `TestPolicyRestrictedCanAdmitPodResult`: admitted exactly when the merged hint is
/// preferred.
#[test]
fn policy_restricted_can_admit_pod_result() {
    // "Preferred is set to false in topology hints", "Preferred is set to true in topology
    // hints": (preferred, admitted).
    check_can_admit(PolicyName::Restricted, [(false, false), (true, true)]);
}

/// Upstream `TestPolicyRestrictedMerge`: common + mergeTestCases + mergeTestCasesNoPolicies over
/// `commonNUMAInfoFourNodes`.
#[test]
fn policy_restricted_merge() {
    let tables = [best_effort(&[0, 1, 2, 3]), best_effort_no_policies()];
    let admit = |hint: &TopologyHint| hint.preferred;
    let checked = check_merge(PolicyName::Restricted, &four_nodes(), false, tables, admit);
    assert_eq!(checked, 28);
}

/// Upstream `TestPolicyRestrictedMergeClosestNUMA`: common + mergeTestCases +
/// mergeTestCasesClosestNUMA over `commonNUMAInfoEightNodes` with prefer-closest-numa-nodes.
#[test]
fn policy_restricted_merge_closest_numa() {
    let tables = [
        best_effort(&[0, 1, 2, 3, 4, 5, 6, 7]),
        best_effort_closest_numa(),
    ];
    let admit = |hint: &TopologyHint| hint.preferred;
    let checked = check_merge(PolicyName::Restricted, &eight_nodes(), true, tables, admit);
    assert_eq!(checked, 30);
}
