//! The searches against brute force on small inputs.

use super::*;
use crate::topologymanager::NumaInfo;

fn brute<C: Constraint>(c: &C, candidates: NumaMask, size: usize) -> Vec<NumaMask> {
    // Only constraints without state are checked by brute force.
    let mut out = Vec::new();
    let ids: Vec<usize> = candidates.iter().collect();
    NumaMask::iterate_masks(&ids, |m| {
        if m.count() == size && c.accept(&c.start(), m.as_u64()) {
            out.push(m);
        }
    });
    out
}

#[test]
fn intersection_finds_the_narrowest_and_the_closest() {
    let demand = Demand::per_node([(0, 4), (1, 4), (2, 8), (5, 3), (7, 6)], 9);
    let fit = Intersection {
        required: NumaMask::EMPTY,
        demands: vec![&demand],
        no_singletons: NumaMask::EMPTY,
    };
    let candidates = NumaMask::new([0, 1, 2, 5, 7]).unwrap();
    for size in 1..=5 {
        let all = brute(&fit, candidates, size);
        let got = best_of_size(&fit, candidates, size, &MaskOrder::Narrowest);
        assert_eq!(got, all.iter().copied().min(), "size {size}");
    }
    assert_eq!(min_size(&fit, candidates, 1), Some(2));

    let rows: Vec<Vec<u64>> = (0..8)
        .map(|a| {
            (0..8)
                .map(|b: usize| {
                    if a == b {
                        10
                    } else {
                        10 + (a.abs_diff(b) as u64 * 7) % 13
                    }
                })
                .collect()
        })
        .collect();
    let nodes: Vec<_> = (0..8)
        .map(|id| crate::NumaNode {
            id,
            distances: Some(rows[id].clone()),
        })
        .collect();
    let info = NumaInfo::new(&nodes, crate::NumaDistances::Require).unwrap();
    let order = MaskOrder::Closest(&info);
    for size in 1..=5 {
        let all = brute(&fit, candidates, size);
        let expected = all.iter().copied().reduce(|best, m| {
            if order.candidate_wins(best, m) {
                m
            } else {
                best
            }
        });
        assert_eq!(
            best_of_size(&fit, candidates, size, &order),
            expected,
            "size {size}"
        );
    }
}

#[test]
fn split_shares_the_left_out_nodes() {
    // Two cores over nodes 0–3: each can spare any node but its own required one.
    let a = Core {
        within: NumaMask::new([0, 1, 2, 3]).unwrap(),
        required: NumaMask::new([0]).unwrap(),
        demands: vec![Demand::per_node([(0, 1), (1, 1), (2, 1), (3, 1)], 2)],
        no_singletons: NumaMask::EMPTY,
    };
    let b = Core {
        within: NumaMask::new([0, 1, 2, 3]).unwrap(),
        required: NumaMask::new([3]).unwrap(),
        demands: vec![Demand::per_node([(0, 1), (1, 1), (2, 1), (3, 1)], 2)],
        no_singletons: NumaMask::EMPTY,
    };
    let top = NumaMask::new([0, 1, 2, 3]).unwrap();
    let split = Split::new(vec![&a, &b], top);
    // {0} = {0,1,2} ∩ {0,3}: a drops 3, b drops 1 and 2.
    let got = best_of_size(&split, top, 1, &MaskOrder::Narrowest);
    assert_eq!(got, Some(NumaMask::new([0]).unwrap()));
    // With three nodes needed each core drops one node: two left out at most.
    let a3 = Core {
        demands: vec![Demand::per_node([(0, 1), (1, 1), (2, 1), (3, 1)], 3)],
        ..a.clone()
    };
    let b3 = Core {
        demands: vec![Demand::per_node([(0, 1), (1, 1), (2, 1), (3, 1)], 3)],
        ..b.clone()
    };
    let split = Split::new(vec![&a3, &b3], top);
    assert_eq!(best_of_size(&split, top, 1, &MaskOrder::Narrowest), None);
    assert_eq!(
        best_of_size(&split, top, 2, &MaskOrder::Narrowest),
        Some(NumaMask::new([0, 1]).unwrap()),
        "{{0,1,2}} ∩ {{0,1,3}}"
    );
}

mod random {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The joint bound and the closest-first seed never change an answer: up to 3
        /// demands pulling apart, distances nearly tied, against brute force.
        #[test]
        fn bounds_and_seeds_keep_the_exact_answer(
            count in 2usize..=9,
            amounts in prop::collection::vec(prop::collection::vec(0u64..6, 9), 1..=3),
            needs in prop::collection::vec(0u64..20, 3),
            far in prop::collection::vec(0u64..3, 81),
            required in any::<u64>(),
        ) {
            let demands: Vec<Demand> = amounts
                .iter()
                .zip(&needs)
                .map(|(per_node, &need)| {
                    Demand::per_node(per_node.iter().copied().enumerate().take(count), need)
                })
                .collect();
            let candidates = NumaMask::from_u64((1u64 << count) - 1);
            let fit = Intersection {
                required: NumaMask::from_u64(required & required >> 4 & candidates.as_u64()),
                demands: demands.iter().collect(),
                no_singletons: NumaMask::EMPTY,
            };
            let nodes: Vec<_> = (0..count)
                .map(|a| crate::NumaNode {
                    id: a,
                    distances: Some(
                        (0..count)
                            .map(|b| if a == b { 10 } else { 20 + far[a.min(b) * 9 + a.max(b)] })
                            .collect(),
                    ),
                })
                .collect();
            let info = NumaInfo::new(&nodes, crate::NumaDistances::Require).unwrap();
            for order in [MaskOrder::Narrowest, MaskOrder::Closest(&info)] {
                for size in 1..=count {
                    let expected = brute(&fit, candidates, size).into_iter().reduce(|best, m| {
                        if order.candidate_wins(best, m) { m } else { best }
                    });
                    prop_assert_eq!(best_of_size(&fit, candidates, size, &order), expected);
                }
            }
        }
    }
}
