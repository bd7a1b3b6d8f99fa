//! Upstream `policy_test.go` tables for the merger's internals: `TestMaxOfMinAffinityCounts`
//! and `TestCompareHintsNarrowest`.

use std::borrow::Cow;

use super::{MaskOrder, candidate_wins, max_of_min_affinity_counts};
use crate::NumaMask;
use crate::topologymanager::TopologyHint;

fn m(ids: &[usize]) -> NumaMask {
    NumaMask::new(ids.iter().copied()).expect("ids below 64")
}

fn t(ids: &[usize]) -> TopologyHint {
    TopologyHint::new(Some(m(ids)), true)
}

/// Upstream `TestMaxOfMinAffinityCounts` (7 cases).
#[test]
fn max_of_min_affinity_counts_table() {
    let cases: [(Vec<Vec<TopologyHint>>, usize); 7] = [
        (vec![], 0),
        (vec![vec![t(&[])]], 0),
        (vec![vec![t(&[0])]], 1),
        (vec![vec![t(&[0, 1])]], 2),
        (vec![vec![t(&[0, 1]), t(&[0, 1, 2])]], 2),
        (
            vec![vec![t(&[0, 1]), t(&[0, 1, 2])], vec![t(&[0, 1, 2])]],
            3,
        ),
        (
            vec![
                vec![t(&[0, 1]), t(&[0, 1, 2])],
                vec![t(&[0, 1, 2]), t(&[0, 1, 2, 3])],
            ],
            3,
        ),
    ];
    for (lists, expected) in cases {
        let lists: Vec<Cow<'_, [TopologyHint]>> = lists.into_iter().map(Cow::Owned).collect();
        assert_eq!(max_of_min_affinity_counts(&lists), expected, "{lists:?}");
    }
}

/// Upstream `TestCompareHintsNarrowest` (25 cases, plus one of corral's): which of `current` and `candidate` the
/// merger keeps, given `bestNonPreferredAffinityCount`. Upstream passes -1 where the count
/// plays no part; those rows never reach the count comparison, so 0 stands in for it here.
#[test]
fn compare_hints_narrowest() {
    type Hint = (&'static [usize], bool);
    #[allow(clippy::type_complexity)]
    let cases: [(&str, usize, Option<Hint>, Hint, &str); 26] = [
        (
            "candidate.NUMANodeAffinity.Count() == 0 (1)",
            0,
            None,
            (&[], false),
            "current",
        ),
        (
            "candidate.NUMANodeAffinity.Count() == 0 (2)",
            0,
            Some((&[], true)),
            (&[], false),
            "current",
        ),
        ("current == nil (1)", 0, None, (&[0], true), "candidate"),
        ("current == nil (2)", 0, None, (&[0], false), "candidate"),
        (
            "!current.Preferred && candidate.Preferred",
            0,
            Some((&[0], false)),
            (&[0], true),
            "candidate",
        ),
        (
            "current.Preferred && !candidate.Preferred",
            0,
            Some((&[0], true)),
            (&[0], false),
            "current",
        ),
        (
            "current.Preferred && candidate.Preferred (1)",
            0,
            Some((&[0], true)),
            (&[0], true),
            "current",
        ),
        (
            "current.Preferred && candidate.Preferred (2)",
            0,
            Some((&[0, 1], true)),
            (&[0], true),
            "candidate",
        ),
        (
            "current.Preferred && candidate.Preferred (3)",
            0,
            Some((&[0], true)),
            (&[0, 1], true),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (1.1)",
            1,
            Some((&[0, 1], false)),
            (&[0, 1], false),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (1.2)",
            1,
            Some((&[1, 2], false)),
            (&[0, 1], false),
            "candidate",
        ),
        (
            "!current.Preferred && !candidate.Preferred (1.3)",
            1,
            Some((&[0, 1], false)),
            (&[1, 2], false),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (2.1)",
            2,
            Some((&[0, 1], false)),
            (&[0], false),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (2.2)",
            2,
            Some((&[0, 1], false)),
            (&[0, 1], false),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (2.3)",
            2,
            Some((&[1, 2], false)),
            (&[0, 1], false),
            "candidate",
        ),
        (
            "!current.Preferred && !candidate.Preferred (2.4)",
            2,
            Some((&[0, 1], false)),
            (&[1, 2], false),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (3a)",
            2,
            Some((&[0], false)),
            (&[0, 1, 2], false),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (3b)",
            2,
            Some((&[0], false)),
            (&[0, 1], false),
            "candidate",
        ),
        (
            "!current.Preferred && !candidate.Preferred (3ca.1)",
            3,
            Some((&[0], false)),
            (&[0, 1], false),
            "candidate",
        ),
        (
            "!current.Preferred && !candidate.Preferred (3ca.2)",
            3,
            Some((&[0], false)),
            (&[1, 2], false),
            "candidate",
        ),
        (
            "!current.Preferred && !candidate.Preferred (3ca.3)",
            4,
            Some((&[0, 1], false)),
            (&[1, 2, 3], false),
            "candidate",
        ),
        (
            "!current.Preferred && !candidate.Preferred (3cb)",
            4,
            Some((&[1, 2, 3], false)),
            (&[0, 1], false),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (3cc.1)",
            4,
            Some((&[0, 1, 2], false)),
            (&[0, 1, 2], false),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (3cc.2)",
            4,
            Some((&[0, 1, 2], false)),
            (&[1, 2, 3], false),
            "current",
        ),
        (
            "!current.Preferred && !candidate.Preferred (3cc.3)",
            4,
            Some((&[1, 2, 3], false)),
            (&[0, 1, 2], false),
            "candidate",
        ),
        // Not an upstream row: the first row again with the empty candidate preferred.
        (
            "empty preferred candidate never wins",
            0,
            None,
            (&[], true),
            "current",
        ),
    ];
    for (name, count, current, candidate, expected) in cases {
        let current = current.map(|(ids, preferred)| (m(ids), preferred));
        let candidate = (m(candidate.0), candidate.1);
        let wins = candidate_wins(&MaskOrder::Narrowest, count, current, candidate);
        let got = if wins { "candidate" } else { "current" };
        assert_eq!(got, expected, "{name}");
    }
}
