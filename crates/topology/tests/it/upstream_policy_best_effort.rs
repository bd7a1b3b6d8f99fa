//! Ported from upstream `pkg/kubelet/cm/topologymanager/policy_best_effort_test.go`, running the
//! shared tables of `policy_test.go` (see `policy_cases`).

use crate::support::policy_cases::{
    best_effort, best_effort_closest_numa, best_effort_no_policies, check, common, eight_nodes,
    four_nodes, nil, p, policy, two_nodes,
};
use corral_topology::PolicyName;

/// Upstream `TestPolicyBestEffortCanAdmitPodResult`: best-effort admits whatever the merged
/// hint's preference. Both rows, reached through a merge that yields `{nil-or-default, false}`
/// and one that yields a preferred hint.
#[test]
fn policy_best_effort_can_admit_pod_result() {
    let policy = policy(PolicyName::BestEffort, &two_nodes(), false);
    // "Preferred is set to false in topology hints"
    let result = policy.merge(&[p(&[("resource", vec![nil(false)])])]);
    assert!(!result.best_hint.preferred);
    assert!(result.admit);
    // "Preferred is set to true in topology hints"
    let result = policy.merge(&[p(&[("resource", vec![nil(true)])])]);
    assert!(result.best_hint.preferred);
    assert!(result.admit);
}

/// Upstream `TestPolicyBestEffortMerge`: common + mergeTestCases + mergeTestCasesNoPolicies over
/// `commonNUMAInfoFourNodes`, narrowest-mask comparison.
#[test]
fn policy_best_effort_merge() {
    let nodes = four_nodes();
    let policy = policy(PolicyName::BestEffort, &nodes, false);
    let all = [0, 1, 2, 3];
    let mut cases = common();
    cases.extend(best_effort(&all));
    cases.extend(best_effort_no_policies());
    assert_eq!(check(&policy, &cases, |_| true), 28);
}

/// Upstream `TestPolicyBestEffortMergeClosestNUMA`: common + mergeTestCases +
/// mergeTestCasesClosestNUMA over `commonNUMAInfoEightNodes` with prefer-closest-numa-nodes.
#[test]
fn policy_best_effort_merge_closest_numa() {
    let nodes = eight_nodes();
    let policy = policy(PolicyName::BestEffort, &nodes, true);
    let all = [0, 1, 2, 3, 4, 5, 6, 7];
    let mut cases = common();
    cases.extend(best_effort(&all));
    cases.extend(best_effort_closest_numa());
    assert_eq!(check(&policy, &cases, |_| true), 30);
}
