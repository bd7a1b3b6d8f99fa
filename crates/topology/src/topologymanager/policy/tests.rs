//! Upstream `policy_single_numa_node_test.go` `TestPolicySingleNumaNodeFilterHints`, against the
//! crate-private filter. Upstream returns nil for a list with nothing kept; corral's empty list
//! is the same "no hint" for the merge.

use std::borrow::Cow;

use super::filter_single_numa_hints;
use crate::NumaMask;
use crate::topologymanager::TopologyHint;

fn h(ids: &[usize], preferred: bool) -> TopologyHint {
    TopologyHint::new(
        Some(NumaMask::new(ids.iter().copied()).expect("ids below 64")),
        preferred,
    )
}

fn nil(preferred: bool) -> TopologyHint {
    TopologyHint::new(None, preferred)
}

/// One table row: name, hint lists in, hint lists out.
type Row = (&'static str, Vec<Vec<TopologyHint>>, Vec<Vec<TopologyHint>>);

fn filter(lists: Vec<Vec<TopologyHint>>) -> Vec<Vec<TopologyHint>> {
    let lists: Vec<Cow<'_, [TopologyHint]>> = lists.into_iter().map(Cow::Owned).collect();
    filter_single_numa_hints(lists)
        .into_iter()
        .map(|l| l.into_owned())
        .collect()
}

/// Upstream `TestPolicySingleNumaNodeFilterHints` (5 cases).
#[test]
fn policy_single_numa_node_filter_hints() {
    let cases: [Row; 5] = [
        ("filter empty resources", vec![], vec![]),
        (
            "filter hints with nil socket mask 1/2",
            vec![vec![nil(false)], vec![nil(true)]],
            vec![vec![], vec![nil(true)]],
        ),
        (
            "filter hints with nil socket mask 2/2",
            vec![
                vec![h(&[0], true), nil(false)],
                vec![h(&[1], true), nil(true)],
            ],
            vec![vec![h(&[0], true)], vec![h(&[1], true), nil(true)]],
        ),
        (
            "filter hints with empty resource socket mask",
            vec![vec![h(&[1], true), h(&[0], true), nil(false)], vec![]],
            vec![vec![h(&[1], true), h(&[0], true)], vec![]],
        ),
        (
            "filter hints with wide sockemask",
            vec![
                vec![
                    h(&[0], true),
                    h(&[1], true),
                    h(&[1, 2], false),
                    h(&[0, 1, 2], false),
                    nil(false),
                ],
                vec![
                    h(&[1, 2], false),
                    h(&[0, 1, 2], false),
                    h(&[0, 2], false),
                    h(&[3], false),
                ],
                vec![h(&[1, 2], false), h(&[0, 1, 2], false), h(&[0, 2], false)],
            ],
            vec![vec![h(&[0], true), h(&[1], true)], vec![], vec![]],
        ),
    ];
    for (name, input, expected) in cases {
        assert_eq!(filter(input), expected, "{name}");
    }
}
