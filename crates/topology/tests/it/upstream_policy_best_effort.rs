//! Ported from upstream `pkg/kubelet/cm/topologymanager/policy_best_effort_test.go`, running the
//! shared tables of `policy_test.go` (see `policy_cases`).

use crate::support::policy_cases::{
    best_effort, best_effort_closest_numa, best_effort_no_policies, check_can_admit, check_merge,
    eight_nodes, four_nodes,
};
use corral_topology::PolicyName;

/// Upstream `TestPolicyBestEffortCanAdmitPodResult`: best-effort admits whatever the merged
/// hint's preference. Both rows, reached through a merge that yields `{nil-or-default, false}`
/// and one that yields a preferred hint.
#[test]
fn policy_best_effort_can_admit_pod_result() {
    // "Preferred is set to false in topology hints", "Preferred is set to true in topology
    // hints": (preferred, admitted).
    check_can_admit(PolicyName::BestEffort, [(false, true), (true, true)]);
}

/// Upstream `TestPolicyBestEffortMerge`: common + mergeTestCases + mergeTestCasesNoPolicies over
/// `commonNUMAInfoFourNodes`, narrowest-mask comparison.
#[test]
fn policy_best_effort_merge() {
    let tables = [best_effort(&[0, 1, 2, 3]), best_effort_no_policies()];
    let checked = check_merge(PolicyName::BestEffort, &four_nodes(), false, tables, |_| {
        true
    });
    assert_eq!(checked, 28);
}

/// Upstream `TestPolicyBestEffortMergeClosestNUMA`: common + mergeTestCases +
/// mergeTestCasesClosestNUMA over `commonNUMAInfoEightNodes` with prefer-closest-numa-nodes.
#[test]
fn policy_best_effort_merge_closest_numa() {
    let tables = [
        best_effort(&[0, 1, 2, 3, 4, 5, 6, 7]),
        best_effort_closest_numa(),
    ];
    let checked = check_merge(PolicyName::BestEffort, &eight_nodes(), true, tables, |_| {
        true
    });
    assert_eq!(checked, 30);
}
