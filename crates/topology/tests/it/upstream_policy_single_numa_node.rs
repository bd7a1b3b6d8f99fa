//! Ported from upstream `pkg/kubelet/cm/topologymanager/policy_single_numa_node_test.go`
//! (`TestPolicySingleNumaNodeFilterHints` is a unit test beside `filter_single_numa_hints` in
//! `src/topologymanager/policy/tests.rs`, the function being crate-private).

use crate::support::policy_cases::{
    check, common, four_nodes, nil, p, policy, single_numa_node, two_nodes,
};
use corral_topology::PolicyName;

/// Upstream `TestPolicySingleNumaNodeCanAdmitPodResult`: `{nil, false}` is rejected.
#[test]
fn policy_single_numa_node_can_admit_pod_result() {
    let policy = policy(PolicyName::SingleNumaNode, &two_nodes(), false);
    let result = policy.merge(&[p(&[("resource", vec![nil(false)])])]);
    assert_eq!(result.best_hint, nil(false));
    assert!(!result.admit);
    assert!(policy.is_alignment_guaranteed());
}

/// Upstream `TestPolicySingleNumaNodeMerge`: common + singleNumaNodePolicy.mergeTestCases over
/// `commonNUMAInfoFourNodes`.
#[test]
fn policy_single_numa_node_merge() {
    let nodes = four_nodes();
    let policy = policy(PolicyName::SingleNumaNode, &nodes, false);
    let mut cases = common();
    cases.extend(single_numa_node());
    assert_eq!(check(&policy, &cases, |hint| hint.preferred), 21);
}

/// The same tables with prefer-closest-numa-nodes set: upstream's single-numa-node policy
/// always compares narrowest (its `compareNumaAffinityMasks` ignores the option), so the
/// answers do not change.
#[test]
fn policy_single_numa_node_merge_ignores_prefer_closest() {
    let nodes = four_nodes();
    let policy = policy(PolicyName::SingleNumaNode, &nodes, true);
    let mut cases = common();
    cases.extend(single_numa_node());
    assert_eq!(check(&policy, &cases, |hint| hint.preferred), 21);
}
