//! Ported from upstream `pkg/kubelet/cm/topologymanager/bitmask/bitmask_test.go`.
//!
//! corral deviation (documented on [`NumaMask`]): ids outside 0–63 are an error and leave the
//! mask unchanged, where upstream's variadic `Add`/`Remove` return an error too; upstream's
//! `Clear`/`Fill` mutate in place, corral's mask is a `Copy` value (`NumaMask::EMPTY`, or
//! `NumaMask::from_u64(u64::MAX)` for a full mask).

use corral_topology::{NumaMask, NumaMaskError};

fn m(ids: &[usize]) -> NumaMask {
    NumaMask::new(ids.iter().copied()).expect("ids below 64")
}

/// Upstream `TestNewEmptyiBitMask`.
#[test]
fn new_empty_bit_mask() {
    assert_eq!(NumaMask::EMPTY.to_string(), "00");
    assert_eq!(NumaMask::default(), NumaMask::EMPTY);
}

/// Upstream `TestNewBitMask`.
#[test]
fn new_bit_mask() {
    for (bits, want) in [(&[0][..], "01"), (&[1], "10"), (&[0, 1], "11")] {
        assert_eq!(m(bits).to_string(), want, "{bits:?}");
    }
}

/// Upstream `TestAdd`, including "Add BitMask with bits outside range 0-63" (-1 and 64 fail,
/// the mask stays "00").
#[test]
fn add() {
    for (bits, want) in [(&[0][..], "01"), (&[1], "10"), (&[0, 1], "11")] {
        let mut mask = NumaMask::EMPTY;
        for &bit in bits {
            mask.add(bit).expect("in range");
        }
        assert_eq!(mask.to_string(), want, "{bits:?}");
    }
    let mut mask = NumaMask::EMPTY;
    assert_eq!(mask.add(64), Err(NumaMaskError::OutOfRange { id: 64 }));
    assert_eq!(
        NumaMask::from_signed([-1]),
        Err(NumaMaskError::OutOfRange { id: -1 })
    );
    assert_eq!(mask.to_string(), "00");
}

/// Upstream `TestRemove`.
#[test]
fn remove() {
    for (set, remove, want) in [
        (&[0][..], &[0][..], "00"),
        (&[0, 1], &[1], "01"),
        (&[0, 1], &[0, 1], "00"),
    ] {
        let mut mask = m(set);
        for &bit in remove {
            mask.remove(bit).expect("in range");
        }
        assert_eq!(mask.to_string(), want, "{set:?} - {remove:?}");
    }
    // "Set bit 0. Attempt to remove bits outside range 0-63"
    let mut mask = m(&[0]);
    assert!(mask.remove(64).is_err());
    assert_eq!(mask.to_string(), "01");
}

/// Upstream `TestAnd` (`And(first, masks...)`, the first mask included in the list).
#[test]
fn and() {
    let cases: [(&[&[usize]], &str); 6] = [
        (&[&[0, 1], &[0, 1]], "11"),
        (&[&[0, 1], &[1]], "10"),
        (&[&[0], &[0, 1]], "01"),
        (&[&[0, 1], &[0, 1], &[1]], "10"),
        (&[&[0], &[0], &[1], &[0, 1]], "00"),
        (&[&[0, 1, 2, 3], &[1, 2, 3], &[2, 3], &[3]], "1000"),
    ];
    check_fold(&cases, NumaMask::and);
}

/// Upstream `TestOr`.
#[test]
fn or() {
    let cases: [(&[&[usize]], &str); 6] = [
        (&[&[0], &[]], "01"),
        (&[&[1], &[1]], "10"),
        (&[&[0], &[1]], "11"),
        (&[&[0, 1], &[0, 1]], "11"),
        (&[&[0], &[1], &[0, 1]], "11"),
        (&[&[3], &[2], &[1], &[0]], "1111"),
    ];
    check_fold(&cases, NumaMask::or);
}

/// Each case's masks folded with `op` from the first one (upstream's `And(first,
/// masks...)` / `Or(...)`, the first mask included in the list) print as expected.
fn check_fold(cases: &[(&[&[usize]], &str)], op: fn(NumaMask, NumaMask) -> NumaMask) {
    for &(masks, want) in cases {
        let first = m(masks[0]);
        let result = masks.iter().fold(first, |acc, ids| op(acc, m(ids)));
        assert_eq!(result.to_string(), want, "{masks:?}");
    }
}

/// Upstream `TestClear`: a cleared mask is the empty mask, printed "00".
#[test]
fn clear() {
    for bits in [&[0][..], &[1], &[0, 1]] {
        let mut mask = m(bits);
        mask = mask.and(NumaMask::EMPTY);
        assert_eq!(mask.to_string(), "00", "{bits:?}");
    }
}

/// Upstream `TestFill`: a filled mask prints 64 ones whatever it held.
#[test]
fn fill() {
    for bits in [&[][..], &[0], &[0, 1]] {
        let mask = m(bits).or(NumaMask::from_u64(u64::MAX));
        assert_eq!(mask.to_string(), "1".repeat(64), "{bits:?}");
        assert_eq!(mask.count(), 64);
    }
}

/// Upstream `TestIsEmpty`.
#[test]
fn is_empty() {
    assert!(m(&[]).is_empty());
    assert!(!m(&[0]).is_empty());
    assert!(!m(&[0, 1]).is_empty());
}

/// Upstream `TestIsSet` (bit 64 is never set).
#[test]
fn is_set() {
    assert!(!m(&[]).is_set(0));
    assert!(m(&[0]).is_set(0));
    assert!(m(&[0, 1]).is_set(1));
    assert!(!m(&[0, 1]).is_set(64));
}

/// Upstream `TestAnySet`.
#[test]
fn any_set() {
    assert!(!m(&[]).any_set(&[0, 1]));
    assert!(m(&[0]).any_set(&[0, 1]));
    assert!(m(&[0, 1]).any_set(&[0, 1]));
    assert!(!m(&[0, 1]).any_set(&[64, 65]));
    assert!(!m(&[1, 2]).any_set(&[0, 3]));
}

/// Upstream `TestIsEqual`.
#[test]
fn is_equal() {
    assert!(m(&[]).is_equal(m(&[])));
    assert!(!m(&[]).is_equal(m(&[0])));
    assert!(m(&[0]).is_equal(m(&[0])));
    assert!(!m(&[0]).is_equal(m(&[1])));
    assert!(m(&[0, 1]).is_equal(m(&[0, 1])));
}

/// Upstream `TestCount`.
#[test]
fn count() {
    assert_eq!(m(&[]).count(), 0);
    assert_eq!(m(&[0]).count(), 1);
    assert_eq!(m(&[0, 1]).count(), 2);
}

/// Upstream `TestGetBits` (upstream's nil slice for the empty mask is corral's empty vector).
#[test]
fn get_bits() {
    assert_eq!(m(&[]).get_bits(), Vec::<usize>::new());
    assert_eq!(m(&[0]).get_bits(), vec![0]);
    assert_eq!(m(&[0, 1]).get_bits(), vec![0, 1]);
}

/// Upstream `TestIsNarrowerThan`.
#[test]
fn is_narrower_than() {
    assert!(m(&[0]).is_narrower_than(m(&[0, 1])));
    assert!(!m(&[0, 1]).is_narrower_than(m(&[0])));
    assert!(m(&[0]).is_narrower_than(m(&[1])));
    assert!(!m(&[1]).is_narrower_than(m(&[0])));
}

/// `IsLessThan` / `IsGreaterThan` (upstream `TestIsLessThan` / `TestIsGreaterThan` are not in
/// the test file version available to this port; these rows check the integer order that
/// `bitmask.go` defines and that the prefer-closest tie-break relies on).
#[test]
fn is_less_and_greater_than() {
    for (a, b, less) in [
        (&[0][..], &[0][..], false),
        (&[1], &[0], false),
        (&[0], &[1], true),
        (&[0, 1], &[2], true),
        (&[2], &[0, 1], false),
    ] {
        assert_eq!(m(a).is_less_than(m(b)), less, "{a:?} < {b:?}");
        assert_eq!(m(b).is_greater_than(m(a)), less, "{b:?} > {a:?}");
    }
}

/// Upstream `TestIterateBitMasks`: over ids 0..n every non-empty mask comes exactly once
/// (2^n − 1 callbacks).
#[test]
fn iterate_bit_masks() {
    for numbits in [1usize, 2, 4, 8, 16] {
        let bits: Vec<usize> = (0..numbits).collect();
        let mut seen = std::collections::BTreeSet::new();
        let mut calls = 0usize;
        NumaMask::iterate_masks(&bits, |mask| {
            calls += 1;
            seen.insert(mask.as_u64());
        });
        assert_eq!(calls, (1 << numbits) - 1, "{numbits} bits");
        assert_eq!(seen.len(), calls, "{numbits} bits: every mask once");
    }
}
