//! Ported from `k8s.io/utils` `cpuset/cpuset_test.go` (kubernetes/utils), plus
//! `TestCPUSetBuilder` from the kubelet's older `pkg/kubelet/cm/cpuset` copy (the builder was
//! removed when the package moved to `k8s.io/utils`; the fact it checked — a finished set does
//! not change when the builder goes on — holds for corral's value type).

use corral_topology::CpuSet;

fn new(cpus: &[usize]) -> CpuSet {
    CpuSet::from_cpus(cpus)
}

/// Upstream `TestCPUSetBuilder` (kubelet's former copy).
#[test]
fn cpuset_builder() {
    let elems = [1, 2, 3, 4, 5];
    let mut builder = CpuSet::new();
    for elem in elems {
        builder.insert(elem);
    }
    let result = builder.clone();
    for elem in elems {
        assert!(result.contains(elem), "{elem}");
    }
    assert_eq!(result.len(), elems.len());
    builder.insert(6);
    assert!(
        !result.contains(6),
        "adding after taking the result has no effect"
    );
}

/// Upstream `TestCPUSetSize`.
#[test]
fn cpuset_size() {
    assert_eq!(new(&[]).len(), 0);
    assert_eq!(new(&[5]).len(), 1);
    assert_eq!(new(&[1, 2, 3, 4, 5]).len(), 5);
}

/// Upstream `TestCPUSetIsEmpty`.
#[test]
fn cpuset_is_empty() {
    assert!(new(&[]).is_empty());
    assert!(!new(&[5]).is_empty());
    assert!(!new(&[1, 2, 3, 4, 5]).is_empty());
}

/// Upstream `TestCPUSetContains`.
#[test]
fn cpuset_contains() {
    let cases: [(&[usize], &[usize], &[usize]); 3] = [
        (&[], &[], &[1, 2, 3, 4, 5]),
        (&[5], &[5], &[1, 2, 3, 4]),
        (&[1, 2, 4, 5], &[1, 2, 4, 5], &[0, 3, 6]),
    ];
    for (set, must, must_not) in cases {
        let set = new(set);
        for &cpu in must {
            assert!(set.contains(cpu), "{set} contains {cpu}");
        }
        for &cpu in must_not {
            assert!(!set.contains(cpu), "{set} does not contain {cpu}");
        }
    }
}

/// CPU lists and the same CPUs ascending: upstream's `TestCPUSetEqual` (its equal rows)
/// and `TestCPUSetList` have the same four rows.
const IN_ORDER: [(&[usize], &[usize]); 4] = [
    (&[], &[]),
    (&[5], &[5]),
    (&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 5]),
    (&[5, 4, 3, 2, 1], &[1, 2, 3, 4, 5]),
];

/// Upstream `TestCPUSetEqual`.
#[test]
fn cpuset_equal() {
    for (a, b) in IN_ORDER {
        assert_eq!(new(a), new(b), "{a:?} == {b:?}");
    }
    let not_equal: [(&[usize], &[usize]); 6] = [
        (&[], &[5]),
        (&[5], &[]),
        (&[], &[1, 2, 3, 4, 5]),
        (&[1, 2, 3, 4, 5], &[]),
        (&[5], &[1, 2, 3, 4, 5]),
        (&[1, 2, 3, 4, 5], &[5]),
    ];
    for (a, b) in not_equal {
        assert_ne!(new(a), new(b), "{a:?} != {b:?}");
    }
}

/// Upstream `TestCPUSetIsSubsetOf`.
#[test]
fn cpuset_is_subset_of() {
    let subset: [(&[usize], &[usize]); 9] = [
        (&[], &[]),
        (&[5], &[5]),
        (&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 5]),
        (&[], &[5]),
        (&[], &[1, 2, 3, 4, 5]),
        (&[5], &[1, 2, 3, 4, 5]),
        (&[1, 2, 3], &[1, 2, 3, 4, 5]),
        (&[4, 5], &[1, 2, 3, 4, 5]),
        (&[2, 3], &[1, 2, 3, 4, 5]),
    ];
    for (a, b) in subset {
        assert!(new(a).is_subset_of(&new(b)), "{a:?} ⊆ {b:?}");
    }
    let not_subset: [(&[usize], &[usize]); 2] = [(&[5], &[]), (&[6], &[5])];
    for (a, b) in not_subset {
        assert!(!new(a).is_subset_of(&new(b)), "{a:?} ⊄ {b:?}");
    }
}

/// Upstream `TestCPUSetUnion` (variadic upstream; a fold of binary unions here).
#[test]
fn cpuset_union() {
    let all: &[usize] = &[1, 2, 3, 4, 5];
    /// s1, the others, the expected union.
    type Row<'a> = (&'a [usize], &'a [&'a [usize]], &'a [usize]);
    let cases: [Row<'_>; 15] = [
        (&[5], &[], &[5]),
        (&[], &[&[]], &[]),
        (&[], &[&[5]], &[5]),
        (&[5], &[&[]], &[5]),
        (&[5], &[&[5]], &[5]),
        (&[], &[all], all),
        (all, &[&[]], all),
        (all, &[all], all),
        (&[5], &[all], all),
        (all, &[&[5]], all),
        (&[1, 2], &[&[3, 4, 5]], all),
        (&[1, 2, 3], &[&[3, 4, 5]], all),
        (&[], &[all, &[4, 5]], all),
        (all, &[&[], &[4]], all),
        (all, &[all, &[1, 5]], all),
    ];
    for (s1, others, expected) in cases {
        let result = others
            .iter()
            .fold(new(s1), |acc, other| acc.union(&new(other)));
        assert_eq!(result, new(expected), "{s1:?} ∪ {others:?}");
        // The in-place form agrees.
        let mut in_place = new(s1);
        for other in others {
            in_place.union_with(&new(other));
        }
        assert_eq!(in_place, result);
    }
}

/// Upstream `TestCPUSetIntersection` and `TestCPUSetDifference`, whose rows have the same
/// operands: (a, b, a ∩ b, a − b).
#[test]
fn cpuset_intersection_and_difference() {
    let all: &[usize] = &[1, 2, 3, 4, 5];
    type Row<'a> = (&'a [usize], &'a [usize], &'a [usize], &'a [usize]);
    let cases: [Row<'_>; 11] = [
        (&[], &[], &[], &[]),
        (&[], &[5], &[], &[]),
        (&[5], &[], &[], &[5]),
        (&[5], &[5], &[5], &[]),
        (&[], all, &[], &[]),
        (all, &[], &[], all),
        (all, all, all, &[]),
        (&[5], all, &[5], &[]),
        (all, &[5], &[5], &[1, 2, 3, 4]),
        (&[1, 2], &[3, 4, 5], &[], &[1, 2]),
        (&[1, 2, 3], &[3, 4, 5], &[3], &[1, 2]),
    ];
    for (a, b, both, only_a) in cases {
        assert_eq!(new(a).intersection(&new(b)), new(both), "{a:?} ∩ {b:?}");
        assert_eq!(new(a).intersection_len(&new(b)), both.len());
        assert_eq!(new(a).intersects(&new(b)), !both.is_empty());
        assert_eq!(new(a).difference(&new(b)), new(only_a), "{a:?} − {b:?}");
    }
}

/// Upstream `TestCPUSetList` (`List` and the sorted `UnsortedList`; corral's iteration is
/// always ascending).
#[test]
fn cpuset_list() {
    for (set, expected) in IN_ORDER {
        assert_eq!(new(set).to_vec(), expected, "{set:?}");
        assert_eq!(new(set).iter().collect::<Vec<_>>(), expected);
        assert_eq!(new(set).into_iter().collect::<Vec<_>>(), expected);
    }
}

/// Upstream `TestCPUSetString`.
#[test]
fn cpuset_string() {
    let cases: [(&[usize], &str); 4] = [
        (&[], ""),
        (&[5], "5"),
        (&[1, 2, 3, 4, 5], "1-5"),
        (&[1, 2, 3, 5, 6, 8], "1-3,5-6,8"),
    ];
    for (set, expected) in cases {
        assert_eq!(new(set).to_string(), expected, "{set:?}");
    }
}

/// Upstream `TestParse`: 8 accepted inputs, 22 refused.
#[test]
fn parse() {
    let positive: [(&str, &[usize]); 8] = [
        ("", &[]),
        ("5", &[5]),
        ("1,2,3,4,5", &[1, 2, 3, 4, 5]),
        ("1-5", &[1, 2, 3, 4, 5]),
        ("1-2,3-5", &[1, 2, 3, 4, 5]),
        ("5,4,3,2,1", &[1, 2, 3, 4, 5]),
        ("3-6,1-5", &[1, 2, 3, 4, 5, 6]),
        ("3-3,5-5", &[3, 5]),
    ];
    for (input, expected) in positive {
        assert_eq!(CpuSet::parse(input), Ok(new(expected)), "{input:?}");
    }
    let negative = [
        // Non-numeric entries
        "nonnumeric",
        "non-numeric",
        "no,numbers",
        "0-a",
        "a-0",
        "0,a",
        "a,0",
        "1-2,a,3-5",
        // Incomplete sequences
        "0,",
        "0,,",
        ",3",
        ",,3",
        "0,,3",
        // Incomplete ranges and/or negative numbers
        "-1",
        "1-",
        "1,2-,3",
        "1,-2,3",
        "-1--2",
        "--1",
        "1--",
        // Reversed ranges
        "3-0",
        "0--3",
    ];
    assert_eq!(negative.len(), 22);
    for input in negative {
        assert!(CpuSet::parse(input).is_err(), "{input:?} must not parse");
    }
}

/// Upstream `TestClone`.
#[test]
fn clone() {
    let original = new(&[1, 2, 3, 4, 5]);
    let clone = original.clone();
    assert_eq!(original, clone);
}
