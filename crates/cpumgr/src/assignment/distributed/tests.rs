//! The distributed take under the decision budget.

use super::search::{Reading, hand_out, mean, standard_deviation};
use super::*;
use crate::assignment::combinations::{GoSlices, Loop, iterate_combinations};

use crate::test_util::topology_index;

/// `nodes` NUMA nodes of `per_node` single-thread cores, 16 nodes to a socket.
fn machine(nodes: usize, per_node: usize) -> std::sync::Arc<TopologyIndex> {
    let per_socket = nodes.min(16);
    let sockets = nodes.div_ceil(per_socket);
    let cpus = (0..nodes * per_node)
        .map(|c| [c, c, c / per_node / per_socket, c / per_node, c / per_node]);
    topology_index(
        cpus,
        [nodes * per_node, nodes * per_node, sockets, nodes, nodes],
    )
}

/// `got` is `n` CPUs of `available`, `per_node` or fewer per NUMA node.
fn assert_valid(got: &Result<CpuSet, TakeError>, available: &CpuSet, n: usize) {
    let got = got.as_ref().expect("an allocation");
    assert_eq!(got.len(), n, "{got}");
    assert!(got.is_subset_of(available), "{got} not in {available}");
}

/// The NUMA nodes `got` uses, with the CPUs taken on each (4 CPUs to a node).
fn per_node(got: &CpuSet) -> std::collections::BTreeMap<usize, usize> {
    let mut nodes = std::collections::BTreeMap::new();
    for cpu in got {
        *nodes.entry(cpu / 4).or_default() += 1;
    }
    nodes
}

/// The issue-29 inputs (distribute on, every node free): 32 nodes asking 32 CPUs walks
/// C(32, 8) combinations, 64 asking 81 C(64, 21), each with its remainder subsets.
/// Within one decision's budget the answer is valid and spread as upstream's would be:
/// the fewest nodes that balance, the distribution on each.
#[test]
fn adversarial_inputs_finish_within_the_budget() {
    for (nodes, n, spread) in [(32, 32, 8), (64, 81, 21)] {
        let ix = machine(nodes, 4);
        let all = ix.all_cpus().clone();
        let (got, effort) = bounded(DECISION_STEPS, || {
            take_by_topology_numa_distributed(&ix, &all, n, 1, CpuSortingStrategy::Packed)
        });
        assert!(effort.steps <= DECISION_STEPS, "{nodes}: {effort:?}");
        assert!(!effort.exact, "{nodes}: the walk should have been cut");
        assert_valid(&got, &all, n);
        let used = per_node(got.as_ref().unwrap());
        assert_eq!(used.len(), spread, "{nodes}: {used:?}");
        let distribution = n / spread;
        assert!(
            used.values()
                .all(|&c| c == distribution || c == distribution + 1)
        );
    }
}

/// With (almost) no budget the search falls back to the first fitting combination in
/// upstream's walk order, found without walking, still a valid allocation, also where
/// the first combinations walked cannot take the request (the nodes with fewest free
/// CPUs come first).
#[test]
fn a_tiny_budget_still_allocates_validly() {
    let ix = machine(64, 4);
    let all = ix.all_cpus().clone();
    // Nodes 0-31 keep 1 free CPU, nodes 32-63 all 4: 81 CPUs need 21 nodes of the
    // second half (3 each, the remainder 18 on the first of them).
    let fragmented: CpuSet = (0..64usize)
        .flat_map(|node| {
            let keep = if node < 32 { 1 } else { 4 };
            (node * 4..node * 4 + keep).collect::<Vec<_>>()
        })
        .collect();
    for budget in [0, 1, 5, 40, 400] {
        for (available, n, group) in [
            (&all, 81, 1),
            (&all, 32, 1),
            (&all, 80, 2),
            (&fragmented, 81, 1),
            (&fragmented, 60, 1),
            (&fragmented, 100, 1),
        ] {
            let (got, effort) = bounded(budget, || {
                take_by_topology_numa_distributed(
                    &ix,
                    available,
                    n,
                    group,
                    CpuSortingStrategy::Packed,
                )
            });
            assert!(effort.steps <= budget);
            assert_valid(&got, available, n);
        }
    }
    let (got, _) = bounded(5, || {
        take_by_topology_numa_distributed(&ix, &fragmented, 81, 1, CpuSortingStrategy::Packed)
    });
    let used = per_node(&got.unwrap());
    assert_eq!(
        used.keys().copied().collect::<Vec<_>>(),
        (32..53).collect::<Vec<_>>()
    );
    assert!(used.values().all(|&c| c == 3 || c == 4), "{used:?}");
}

/// Every `k`-combination of `search`'s nodes in walk order, and whether it fits.
fn first_walked(search: &Search<'_>, k: usize) -> Option<Vec<usize>> {
    let mut slices = GoSlices::new();
    let mut first = None;
    iterate_combinations(&mut slices, search.numas, k, &mut |slices, r| {
        let combo = slices.get(r);
        if search.fits(combo) {
            first = Some(combo.to_vec());
            return Loop::Break;
        }
        Loop::Continue
    });
    first
}

proptest::proptest! {
    /// The first fitting combination found without walking is the one the walk meets
    /// first, and its whole remainder set takes the remainder.
    #[test]
    fn first_fitting_is_the_first_the_walk_meets(
        free in proptest::collection::vec(0i64..9, 1..11),
        num_cpus in 1i64..40,
        group in 1i64..4,
    ) {
        let num_cpus = num_cpus * group;
        let numas: Vec<usize> = (0..free.len()).filter(|&n| free[n] > 0).collect();
        let socket_of = vec![None; free.len()];
        let search = Search { numas: &numas, free: &free, socket_of: &socket_of, reading: Reading::GoAliased, num_cpus, group };
        for k in 1..=numas.len() {
            let first = search.first_fitting(k);
            proptest::prop_assert_eq!(&first, &first_walked(&search, k), "k = {}", k);
            if let Some(combo) = first {
                let mut after = free.clone();
                let distribution = search.distribution(k);
                for &n in &combo {
                    after[n] -= distribution;
                }
                let remainder = num_cpus - distribution * k as i64;
                let set = search.whole_remainder_set(&combo);
                proptest::prop_assert!(hand_out(&mut after, &set, remainder, group));
                proptest::prop_assert!(search.score(&combo).0.is_some());
            }
        }
    }
}

#[test]
fn rounding_matches_upstream() {
    assert_eq!(mean([1, 2].into_iter()), 1.5);
    assert_eq!(mean([1, 1, 2].into_iter()), 1.333);
    assert_eq!(
        standard_deviation([2, 4, 4, 4, 5, 5, 7, 9].into_iter()),
        2.0
    );
    assert_eq!(standard_deviation([0, 1].into_iter()), 0.5);
    assert_eq!(standard_deviation([1, 1, 2].into_iter()), 0.471);
}

#[test]
fn hand_out_detects_no_progress() {
    let mut after = vec![3, 3];
    assert!(!hand_out(&mut after, &[0, 1], 6, 2));
    let mut after = vec![4, 4];
    assert!(hand_out(&mut after, &[0, 1], 6, 2));
    assert_eq!(after, vec![0, 2]);
}
