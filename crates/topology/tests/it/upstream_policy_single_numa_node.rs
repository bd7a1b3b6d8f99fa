//! Ported from upstream `pkg/kubelet/cm/topologymanager/policy_single_numa_node_test.go`
//! (`TestPolicySingleNumaNodeFilterHints` is a unit test beside `filter_single_numa_hints` in
//! `src/topologymanager/policy/tests.rs`, the function being crate-private).

use crate::support::policy_cases::{
    check_merge, four_nodes, merge_one_nil_hint, nil, policy, single_numa_node, two_nodes,
};
use corral_topology::{PolicyName, TopologyHint};

/// Upstream `TestPolicySingleNumaNodeCanAdmitPodResult`: `{nil, false}` is rejected.
#[test]
fn policy_single_numa_node_can_admit_pod_result() {
    let result = merge_one_nil_hint(PolicyName::SingleNumaNode, false);
    assert_eq!(result.best_hint, nil(false));
    assert!(!result.admit);
    assert!(policy(PolicyName::SingleNumaNode, &two_nodes(), false).is_alignment_guaranteed());
}

/// Upstream `TestPolicySingleNumaNodeMerge`: common + singleNumaNodePolicy.mergeTestCases over
/// `commonNUMAInfoFourNodes`.
#[test]
fn policy_single_numa_node_merge() {
    assert_eq!(merge_over_four_nodes(false), 21);
}

/// The same tables with prefer-closest-numa-nodes set: upstream's single-numa-node policy
/// always compares narrowest (its `compareNumaAffinityMasks` ignores the option), so the
/// answers do not change.
#[test]
fn policy_single_numa_node_merge_ignores_prefer_closest() {
    assert_eq!(merge_over_four_nodes(true), 21);
}

/// common + singleNumaNodePolicy.mergeTestCases over `commonNUMAInfoFourNodes`, admitting
/// preferred hints only; the number of cases checked.
fn merge_over_four_nodes(prefer_closest: bool) -> usize {
    let tables = [single_numa_node()];
    let admit = |hint: &TopologyHint| hint.preferred;
    check_merge(
        PolicyName::SingleNumaNode,
        &four_nodes(),
        prefer_closest,
        tables,
        admit,
    )
}
