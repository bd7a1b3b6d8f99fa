//! The shared merge tables of upstream `pkg/kubelet/cm/topologymanager/policy_test.go`
//! (`commonPolicyMergeTestCases`, `bestEffortPolicy.mergeTestCases`,
//! `mergeTestCasesNoPolicies`, `mergeTestCasesClosestNUMA`,
//! `singleNumaNodePolicy.mergeTestCases` and the `commonNUMAInfo*` machines), written as Rust
//! data for the per-policy test files that run them, as upstream's per-policy tests do.

use std::collections::BTreeMap;

use corral_topology::topologymanager::reference_merge;
use corral_topology::{
    MergeResult, NumaInfo, NumaMask, NumaNode, Policy, PolicyName, PolicyOptions, ProviderHints,
    TopologyHint,
};

/// A hint over `ids` (upstream `NewTestBitMask(ids...)`).
pub(crate) fn h(ids: &[usize], preferred: bool) -> TopologyHint {
    TopologyHint::new(
        Some(NumaMask::new(ids.iter().copied()).expect("ids below 64")),
        preferred,
    )
}

/// A hint with a nil affinity.
pub(crate) fn nil(preferred: bool) -> TopologyHint {
    TopologyHint::new(None, preferred)
}

/// One provider's hints: resource name → hint list.
pub(crate) fn p(resources: &[(&str, Vec<TopologyHint>)]) -> ProviderHints {
    Some(
        resources
            .iter()
            .map(|(r, l)| ((*r).to_owned(), Some(l.clone())))
            .collect(),
    )
}

/// A provider returning a nil hint list for `resource`.
pub(crate) fn p_nil_list(resource: &str) -> ProviderHints {
    Some(BTreeMap::from([(resource.to_owned(), None)]))
}

/// A provider returning an empty (non-nil) map.
pub(crate) fn p_empty_map() -> ProviderHints {
    Some(BTreeMap::new())
}

/// One row of a merge table.
pub(crate) struct Case {
    /// Upstream's case name.
    pub(crate) name: &'static str,
    /// What each provider returned.
    pub(crate) providers: Vec<ProviderHints>,
    /// The merged hint upstream expects.
    pub(crate) expected: TopologyHint,
}

fn case(name: &'static str, providers: Vec<ProviderHints>, expected: TopologyHint) -> Case {
    Case {
        name,
        providers,
        expected,
    }
}

/// Upstream `commonPolicyMergeTestCases` (9 cases).
pub(crate) fn common() -> Vec<Case> {
    vec![
        case(
            "Two providers, 1 hint each, same mask, both preferred 1/2",
            vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[0], true)])]),
            ],
            h(&[0], true),
        ),
        case(
            "Two providers, 1 hint each, same mask, both preferred 2/2",
            vec![
                p(&[("resource1", vec![h(&[1], true)])]),
                p(&[("resource2", vec![h(&[1], true)])]),
            ],
            h(&[1], true),
        ),
        case(
            "Two providers, 1 no hints, 1 single hint preferred 1/2",
            vec![None, p(&[("resource", vec![h(&[0], true)])])],
            h(&[0], true),
        ),
        case(
            "Two providers, 1 no hints, 1 single hint preferred 2/2",
            vec![None, p(&[("resource", vec![h(&[1], true)])])],
            h(&[1], true),
        ),
        case(
            "Two providers, 1 with 2 hints, 1 with single hint matching 1/2",
            vec![
                p(&[("resource1", vec![h(&[0], true), h(&[1], true)])]),
                p(&[("resource2", vec![h(&[0], true)])]),
            ],
            h(&[0], true),
        ),
        case(
            "Two providers, 1 with 2 hints, 1 with single hint matching 2/2",
            vec![
                p(&[("resource1", vec![h(&[0], true), h(&[1], true)])]),
                p(&[("resource2", vec![h(&[1], true)])]),
            ],
            h(&[1], true),
        ),
        case(
            "Two providers, both with 2 hints, matching narrower preferred hint from both",
            vec![
                p(&[("resource1", vec![h(&[0], true), h(&[1], true)])]),
                p(&[("resource2", vec![h(&[0], true), h(&[0, 1], false)])]),
            ],
            h(&[0], true),
        ),
        case(
            "Ensure less narrow preferred hints are chosen over narrower non-preferred hints",
            vec![
                p(&[("resource1", vec![h(&[1], true), h(&[0, 1], false)])]),
                p(&[(
                    "resource2",
                    vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)],
                )]),
            ],
            h(&[1], true),
        ),
        case(
            "Multiple resources, same provider",
            vec![p(&[
                ("resource1", vec![h(&[1], true), h(&[0, 1], false)]),
                (
                    "resource2",
                    vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)],
                ),
            ])],
            h(&[1], true),
        ),
    ]
}

/// The two non-preferred wide hints of resource1 in every `bestNonPreferredAffinityCount` case.
fn wide_non_preferred() -> Vec<TopologyHint> {
    vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)]
}

/// Upstream `bestEffortPolicy.mergeTestCases(numaNodes)` (17 cases); `all` is `numaNodes`.
pub(crate) fn best_effort(all: &[usize]) -> Vec<Case> {
    vec![
        case(
            "Two providers, 2 hints each, same mask (some with different bits), same preferred",
            vec![
                p(&[("resource1", vec![h(&[0, 1], true), h(&[0, 2], true)])]),
                p(&[("resource2", vec![h(&[0, 1], true), h(&[0, 2], true)])]),
            ],
            h(&[0, 1], true),
        ),
        case("TopologyHint not set", vec![], h(all, true)),
        case(
            "HintProvider returns empty non-nil map[string][]TopologyHint",
            vec![p_empty_map()],
            h(all, true),
        ),
        case(
            "HintProvider returns -nil map[string][]TopologyHint from provider",
            vec![p_nil_list("resource")],
            h(all, true),
        ),
        case(
            "HintProvider returns empty non-nil map[string][]TopologyHint from provider",
            vec![p(&[("resource", vec![])])],
            h(all, false),
        ),
        case(
            "Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
            vec![p(&[("resource", vec![nil(true)])])],
            h(all, true),
        ),
        case(
            "Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
            vec![p(&[("resource", vec![nil(false)])])],
            h(all, false),
        ),
        case(
            "Two providers, 1 hint each, no common mask",
            vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[1], true)])]),
            ],
            h(all, false),
        ),
        case(
            "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
            vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[0], false)])]),
            ],
            h(&[0], false),
        ),
        case(
            "Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
            vec![
                p(&[("resource1", vec![h(&[1], true)])]),
                p(&[("resource2", vec![h(&[1], false)])]),
            ],
            h(&[1], false),
        ),
        case(
            "Two providers, 1 hint each, 1 wider mask, both preferred 1/2",
            vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[0, 1], true)])]),
            ],
            h(&[0], false),
        ),
        case(
            "Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
            vec![
                p(&[("resource1", vec![h(&[0], true), h(&[1], true)])]),
                p(&[("resource2", vec![h(&[0, 1], false)])]),
            ],
            h(&[0], false),
        ),
        case(
            "Two providers, 1 hint each, 1 wider mask, both preferred 2/2",
            vec![
                p(&[("resource1", vec![h(&[1], true)])]),
                p(&[("resource2", vec![h(&[0, 1], true)])]),
            ],
            h(&[1], false),
        ),
        case(
            "bestNonPreferredAffinityCount (1)",
            vec![
                p(&[("resource1", wide_non_preferred())]),
                p(&[("resource2", vec![h(&[0, 1], false)])]),
            ],
            h(&[0, 1], false),
        ),
        case(
            "bestNonPreferredAffinityCount (2)",
            vec![
                p(&[("resource1", wide_non_preferred())]),
                p(&[("resource2", vec![h(&[0, 3], false)])]),
            ],
            h(&[0, 3], false),
        ),
        case(
            "bestNonPreferredAffinityCount (3)",
            vec![
                p(&[("resource1", wide_non_preferred())]),
                p(&[("resource2", vec![h(&[1, 2], false)])]),
            ],
            h(&[1, 2], false),
        ),
        case(
            "bestNonPreferredAffinityCount (4)",
            vec![
                p(&[("resource1", wide_non_preferred())]),
                p(&[("resource2", vec![h(&[2, 3], false)])]),
            ],
            h(&[2, 3], false),
        ),
    ]
}

/// The two `bestNonPreferredAffinityCount` (5)/(6) inputs, shared by the narrowest and the
/// closest tables, which expect different answers.
fn count_five_six() -> [Vec<ProviderHints>; 2] {
    [
        vec![
            p(&[("resource1", wide_non_preferred())]),
            p(&[("resource2", vec![h(&[1, 2], false), h(&[2, 3], false)])]),
        ],
        vec![
            p(&[("resource1", wide_non_preferred())]),
            p(&[(
                "resource2",
                vec![
                    h(&[1, 2, 3], false),
                    h(&[1, 2], false),
                    h(&[1, 3], false),
                    h(&[2, 3], false),
                ],
            )]),
        ],
    ]
}

/// Upstream `bestEffortPolicy.mergeTestCasesNoPolicies` (2 cases: narrowest mask wins).
pub(crate) fn best_effort_no_policies() -> Vec<Case> {
    let [five, six] = count_five_six();
    vec![
        case("bestNonPreferredAffinityCount (5)", five, h(&[1, 2], false)),
        case("bestNonPreferredAffinityCount (6)", six, h(&[1, 2], false)),
    ]
}

/// Upstream `bestEffortPolicy.mergeTestCasesClosestNUMA` (4 cases, eight-node machine).
pub(crate) fn best_effort_closest_numa() -> Vec<Case> {
    let [five, six] = count_five_six();
    vec![
        case(
            "Two providers, 2 hints each, same mask (some with different bits), same preferred",
            vec![
                p(&[("resource1", vec![h(&[0, 4], true), h(&[0, 2], true)])]),
                p(&[("resource2", vec![h(&[0, 4], true), h(&[0, 2], true)])]),
            ],
            h(&[0, 2], true),
        ),
        case(
            "Two providers, 2 hints each, different mask",
            vec![
                p(&[("resource1", vec![h(&[4], true), h(&[0, 2], true)])]),
                p(&[("resource2", vec![h(&[4], true), h(&[0, 2], true)])]),
            ],
            h(&[4], true),
        ),
        case("bestNonPreferredAffinityCount (5)", five, h(&[2, 3], false)),
        case("bestNonPreferredAffinityCount (6)", six, h(&[2, 3], false)),
    ]
}

/// Upstream `singleNumaNodePolicy.mergeTestCases` (12 cases).
pub(crate) fn single_numa_node() -> Vec<Case> {
    vec![
        case("TopologyHint not set", vec![], nil(true)),
        case(
            "HintProvider returns empty non-nil map[string][]TopologyHint",
            vec![p_empty_map()],
            nil(true),
        ),
        case(
            "HintProvider returns -nil map[string][]TopologyHint from provider",
            vec![p_nil_list("resource")],
            nil(true),
        ),
        case(
            "HintProvider returns empty non-nil map[string][]TopologyHint from provider",
            vec![p(&[("resource", vec![])])],
            nil(false),
        ),
        case(
            "Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
            vec![p(&[("resource", vec![nil(true)])])],
            nil(true),
        ),
        case(
            "Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
            vec![p(&[("resource", vec![nil(false)])])],
            nil(false),
        ),
        case(
            "Two providers, 1 hint each, no common mask",
            vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[1], true)])]),
            ],
            nil(false),
        ),
        case(
            "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
            vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[0], false)])]),
            ],
            nil(false),
        ),
        case(
            "Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
            vec![
                p(&[("resource1", vec![h(&[1], true)])]),
                p(&[("resource2", vec![h(&[1], false)])]),
            ],
            nil(false),
        ),
        case(
            "Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
            vec![
                p(&[("resource1", vec![h(&[0], true), h(&[1], true)])]),
                p(&[("resource2", vec![h(&[0, 1], false)])]),
            ],
            nil(false),
        ),
        case(
            "Single NUMA hint generation",
            vec![p(&[
                ("resource1", vec![h(&[0, 1], true)]),
                (
                    "resource2",
                    vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)],
                ),
            ])],
            nil(false),
        ),
        case(
            "One no-preference provider",
            vec![
                p(&[(
                    "resource1",
                    vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)],
                )]),
                None,
            ],
            h(&[0], true),
        ),
    ]
}

fn numa(rows: &[&[u64]]) -> Vec<NumaNode> {
    rows.iter()
        .enumerate()
        .map(|(id, row)| NumaNode {
            id,
            distances: Some(row.to_vec()),
        })
        .collect()
}

/// Upstream `commonNUMAInfoTwoNodes`.
pub(crate) fn two_nodes() -> Vec<NumaNode> {
    numa(&[&[10, 11], &[11, 10]])
}

/// Upstream `commonNUMAInfoFourNodes`.
pub(crate) fn four_nodes() -> Vec<NumaNode> {
    numa(&[
        &[10, 11, 12, 12],
        &[11, 10, 12, 12],
        &[12, 12, 10, 11],
        &[12, 12, 11, 10],
    ])
}

/// Upstream `commonNUMAInfoEightNodes` (row 7 is asymmetric upstream too).
pub(crate) fn eight_nodes() -> Vec<NumaNode> {
    numa(&[
        &[10, 11, 12, 12, 30, 30, 30, 30],
        &[11, 10, 12, 12, 30, 30, 30, 30],
        &[12, 12, 10, 11, 30, 30, 30, 30],
        &[12, 12, 11, 10, 30, 30, 30, 30],
        &[30, 30, 30, 30, 10, 11, 12, 12],
        &[30, 30, 30, 30, 11, 10, 12, 12],
        &[30, 30, 30, 30, 12, 12, 10, 11],
        &[30, 30, 30, 30, 12, 12, 13, 10],
    ])
}

/// A policy over `nodes`, with distances kept when `prefer_closest`.
pub(crate) fn policy(name: PolicyName, nodes: &[NumaNode], prefer_closest: bool) -> Policy {
    let options = PolicyOptions {
        prefer_closest_numa: prefer_closest,
        ..PolicyOptions::default()
    };
    let info = NumaInfo::new(nodes, options.numa_distances()).expect("valid NUMA nodes");
    Policy::new(name, info, options)
}

/// Upstream `testPolicyMerge`: every case's merged hint, with corral's fast merge and with the
/// exhaustive reference walk; `admit(hint)` is the policy's admission rule (upstream
/// `canAdmitPodResult`), checked on the same results.
pub(crate) fn check(
    policy: &Policy,
    cases: &[Case],
    admit: impl Fn(&TopologyHint) -> bool,
) -> usize {
    for case in cases {
        for (how, result) in [
            ("fast", policy.merge(&case.providers)),
            ("reference", reference_merge(policy, &case.providers)),
        ] {
            assert_eq!(
                result.best_hint,
                case.expected,
                "{} ({how} merge, {})",
                case.name,
                policy.name()
            );
            assert_eq!(
                result.admit,
                admit(&case.expected),
                "{} ({how} merge admission, {})",
                case.name,
                policy.name()
            );
        }
    }
    cases.len()
}

/// Upstream's `TestPolicy*Merge` shape: `policy` over `nodes` (distances kept when
/// `prefer_closest`) checked on `commonPolicyMergeTestCases` followed by `tables`, admitting
/// as `admit` says; the number of cases checked.
pub(crate) fn check_merge(
    name: PolicyName,
    nodes: &[NumaNode],
    prefer_closest: bool,
    tables: impl IntoIterator<Item = Vec<Case>>,
    admit: impl Fn(&TopologyHint) -> bool,
) -> usize {
    let policy = policy(name, nodes, prefer_closest);
    let mut cases = common();
    for table in tables {
        cases.extend(table);
    }
    check(&policy, &cases, admit)
}

/// Upstream's `TestPolicy*CanAdmitPodResult` shape: `name` over two nodes merging one
/// provider's single nil-affinity hint with the given preference.
pub(crate) fn merge_one_nil_hint(name: PolicyName, preferred: bool) -> MergeResult {
    policy(name, &two_nodes(), false).merge(&[p(&[("resource", vec![nil(preferred)])])])
}

/// Upstream's `TestPolicy*CanAdmitPodResult` rows: for each `(preferred, admitted)`, the
/// merge of one nil-affinity hint with that preference keeps it and admits as given.
pub(crate) fn check_can_admit(name: PolicyName, rows: impl IntoIterator<Item = (bool, bool)>) {
    for (preferred, admitted) in rows {
        let result = merge_one_nil_hint(name, preferred);
        assert_eq!(result.best_hint.preferred, preferred, "{name} {preferred}");
        assert_eq!(result.admit, admitted, "{name} {preferred}");
    }
}
