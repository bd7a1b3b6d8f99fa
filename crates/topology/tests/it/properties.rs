//! Property tests: the fast merge equals upstream's exhaustive walk and returns a hint some
//! combination produced; single-numa-node never admits a multi-node affinity; `CpuSet`
//! agrees with a `BTreeSet` model; parsing a printed set gives it back; NUMA ids renumbered
//! for masks keep their order, round-trip, and leave a topology's groups unchanged.

use std::collections::{BTreeMap, BTreeSet};

use corral_topology::topologymanager::reference_merge;
use corral_topology::{
    CpuInfo, CpuRecord, CpuSet, CpuTopology, NumaDistances, NumaIds, NumaInfo, NumaMask, NumaNode,
    Policy, PolicyName, PolicyOptions, ProviderHints, TopologyHint,
};
use proptest::prelude::*;

fn hint() -> impl Strategy<Value = TopologyHint> {
    (prop::option::weighted(0.85, 0u64..256), any::<bool>())
        .prop_map(|(bits, preferred)| TopologyHint::new(bits.map(NumaMask::from_u64), preferred))
}

fn hint_list() -> impl Strategy<Value = Option<Vec<TopologyHint>>> {
    prop::option::weighted(0.9, prop::collection::vec(hint(), 0..7))
}

fn provider() -> impl Strategy<Value = ProviderHints> {
    prop::option::weighted(
        0.9,
        prop::collection::btree_map(
            prop::sample::select(vec!["cpu", "memory", "example.com/gpu"]).prop_map(String::from),
            hint_list(),
            0..3,
        ),
    )
}

/// Machine: a non-empty subset of NUMA ids 0..8 with symmetric distances.
fn machine() -> impl Strategy<Value = Vec<NumaNode>> {
    (1u64..256, prop::collection::vec(10u64..40, 64)).prop_map(|(bits, raw)| {
        let ids: Vec<usize> = NumaMask::from_u64(bits).iter().collect();
        let width = ids.last().map_or(0, |m| m + 1);
        ids.iter()
            .map(|&a| NumaNode {
                id: a,
                distances: Some(
                    (0..width)
                        .map(|b| {
                            if a == b {
                                10
                            } else {
                                raw[(a.min(b) * 8 + a.max(b)) % 64]
                            }
                        })
                        .collect(),
                ),
            })
            .collect()
    })
}

fn policies(nodes: &[NumaNode]) -> Vec<Policy> {
    let mut out = Vec::new();
    for name in PolicyName::ALL {
        for prefer_closest_numa in [false, true] {
            let options = PolicyOptions {
                prefer_closest_numa,
                ..PolicyOptions::default()
            };
            let numa = NumaInfo::new(nodes, options.numa_distances()).expect("valid machine");
            out.push(Policy::new(name, numa, options));
        }
    }
    out
}

/// Every (merged mask, preferred) some permutation of the filtered lists produces.
fn produced(policy: &Policy, providers: &[ProviderHints]) -> BTreeSet<(u64, bool)> {
    let mut lists: Vec<Vec<TopologyHint>> = Vec::new();
    for p in providers {
        match p {
            Some(map) if !map.is_empty() => {
                for list in map.values() {
                    lists.push(match list {
                        None => vec![TopologyHint::new(None, true)],
                        Some(l) if l.is_empty() => vec![TopologyHint::new(None, false)],
                        Some(l) => l.clone(),
                    });
                }
            }
            _ => lists.push(vec![TopologyHint::new(None, true)]),
        }
    }
    let default = policy.numa_info().default_affinity();
    let mut out = BTreeSet::new();
    fn walk(
        lists: &[Vec<TopologyHint>],
        acc: &mut Vec<TopologyHint>,
        default: NumaMask,
        out: &mut BTreeSet<(u64, bool)>,
    ) {
        let Some((first, rest)) = lists.split_first() else {
            let non_nil: Vec<NumaMask> = acc.iter().filter_map(|h| h.numa_affinity).collect();
            let mask = non_nil.iter().fold(default, |m, a| m.and(*a));
            let preferred =
                acc.iter().all(|h| h.preferred) && non_nil.windows(2).all(|w| w[0] == w[1]);
            out.insert((mask.as_u64(), preferred));
            return;
        };
        for h in first {
            acc.push(*h);
            walk(rest, acc, default, out);
            acc.pop();
        }
    }
    walk(&lists, &mut Vec::new(), default, &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn merge_equals_reference(nodes in machine(), providers in prop::collection::vec(provider(), 0..4)) {
        for policy in policies(&nodes) {
            let fast = policy.merge(&providers);
            let slow = reference_merge(&policy, &providers);
            prop_assert_eq!(fast, slow, "policy {} {:?}", policy.name(), policy.options());
        }
    }

    #[test]
    fn merged_hint_is_produced_by_some_combination(nodes in machine(), providers in prop::collection::vec(provider(), 0..4)) {
        for policy in policies(&nodes) {
            if !matches!(policy.name(), PolicyName::BestEffort | PolicyName::Restricted) {
                continue;
            }
            let result = policy.merge(&providers);
            let mask = result.best_hint.numa_affinity.expect("merged hints carry a mask");
            let default = policy.numa_info().default_affinity();
            let fallback = mask == default && !result.best_hint.preferred;
            prop_assert!(
                fallback || produced(&policy, &providers).contains(&(mask.as_u64(), result.best_hint.preferred)),
                "{:?} not produced", result.best_hint
            );
        }
    }

    #[test]
    fn single_numa_node_never_admits_several_nodes(nodes in machine(), providers in prop::collection::vec(provider(), 0..4)) {
        let numa = NumaInfo::new(&nodes, NumaDistances::Ignore).expect("valid machine");
        let policy = Policy::new(PolicyName::SingleNumaNode, numa, PolicyOptions::default());
        let result = policy.merge(&providers);
        if result.admit
            && let Some(mask) = result.best_hint.numa_affinity
        {
            prop_assert_eq!(mask.count(), 1);
        }
    }

    #[test]
    fn cpuset_agrees_with_btreeset(
        a in prop::collection::btree_set(prop_oneof![0usize..300, 0usize..5000, 65530usize..65545], 0..60),
        b in prop::collection::btree_set(prop_oneof![0usize..300, 0usize..5000, 65530usize..65545], 0..60),
    ) {
        let sa: CpuSet = a.iter().copied().collect();
        let sb: CpuSet = b.iter().copied().collect();
        let v = |s: &CpuSet| s.iter().collect::<Vec<_>>();
        prop_assert_eq!(v(&sa.union(&sb)), a.union(&b).copied().collect::<Vec<_>>());
        prop_assert_eq!(v(&sa.intersection(&sb)), a.intersection(&b).copied().collect::<Vec<_>>());
        prop_assert_eq!(v(&sa.difference(&sb)), a.difference(&b).copied().collect::<Vec<_>>());
        prop_assert_eq!(sa.is_subset_of(&sb), a.is_subset(&b));
        prop_assert_eq!(sa.len(), a.len());
        prop_assert_eq!(sa.min(), a.first().copied());
        prop_assert_eq!(sa.max(), a.last().copied());
        prop_assert_eq!(sa.intersection_len(&sb), a.intersection(&b).count());
        prop_assert_eq!(sa.intersects(&sb), !a.is_disjoint(&b));
        prop_assert_eq!(sa == sb, a == b);
        for x in a.iter().chain(&b) {
            prop_assert_eq!(sa.contains(*x), a.contains(x));
        }
        let mut removed = sa.clone();
        for x in &b { removed.remove(*x); }
        prop_assert_eq!(removed, sa.difference(&sb));
    }

    #[test]
    fn numa_ids_keep_order_and_round_trip(
        nodes in prop::collection::btree_set(prop_oneof![0usize..64, 0usize..300, 60usize..70], 1..=64),
        pick in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let ids = NumaIds::new(nodes.iter().copied()).expect("at most 64 nodes");
        prop_assert_eq!(ids.is_identity(), nodes.iter().all(|&n| n < 64));
        let list: Vec<usize> = nodes.iter().copied().collect();
        prop_assert_eq!(ids.os_ids(), &list[..]);
        let mut last = None;
        for &n in &nodes {
            let bit = ids.bit(n).expect("a node has a bit");
            prop_assert!(bit < 64);
            prop_assert!(last.is_none_or(|l| l < bit), "bits follow id order");
            last = Some(bit);
            prop_assert_eq!(ids.os_id(bit), Ok(n));
        }
        let chosen: BTreeSet<usize> = pick.iter().map(|i| *i.get(&list)).collect();
        let mask = ids.mask_of(chosen.iter().copied()).expect("nodes of the machine");
        prop_assert_eq!(mask.count(), chosen.len());
        prop_assert_eq!(ids.os_ids_of(mask), Ok(chosen.into_iter().collect::<Vec<_>>()));
    }

    #[test]
    fn renumbered_topology_keeps_its_groups(
        numa_of_cpu in prop::collection::vec(prop_oneof![0usize..4, 60usize..80, 1000usize..1003], 1..40),
    ) {
        let records: Vec<CpuRecord> = numa_of_cpu
            .iter()
            .enumerate()
            .map(|(cpu, &numa)| CpuRecord { cpu, info: CpuInfo { core: cpu, socket: 0, numa, uncore: 0 } })
            .collect();
        let topo = CpuTopology::new(&records).expect("valid records");
        let ids = topo.numa_ids();
        let os: BTreeSet<usize> = numa_of_cpu.iter().copied().collect();
        prop_assert_eq!(ids.os_ids(), &os.iter().copied().collect::<Vec<_>>()[..]);
        prop_assert_eq!(ids.is_identity(), os.iter().all(|&n| n < 64));
        prop_assert_eq!(topo.numa_nodes().len(), os.len());
        for &node in &os {
            let bit = ids.bit(node).expect("a node of the machine");
            prop_assert!(topo.numa_nodes().contains(&bit));
            let want: CpuSet = (0..numa_of_cpu.len()).filter(|&c| numa_of_cpu[c] == node).collect();
            prop_assert_eq!(topo.details().cpus_in_numa_nodes([bit]), want);
        }
        prop_assert!(NumaInfo::new(&topo.numa_nodes_for_manager(), NumaDistances::Ignore).is_ok());
    }

    #[test]
    fn parse_format_roundtrip(a in prop::collection::btree_set(prop_oneof![0usize..200, 65530usize..65540, 1usize<<40..(1usize<<40) + 3], 0..80)) {
        let set: CpuSet = a.iter().copied().collect();
        let text = set.to_string();
        prop_assert_eq!(CpuSet::parse(&text), Ok(set.clone()));
        // And the printed form is canonical: parsing any list of the same ids prints it.
        let scrambled: Vec<String> = a.iter().rev().map(ToString::to_string).collect();
        prop_assert_eq!(CpuSet::parse(&scrambled.join(",")).map(|s| s.to_string()), Ok(text));
    }
}

#[test]
fn merge_with_no_machine_nodes_falls_back_to_empty_default() {
    let policy = Policy::new(
        PolicyName::BestEffort,
        NumaInfo::from_ids([]).expect("empty"),
        PolicyOptions::default(),
    );
    let hints = BTreeMap::from([("cpu".to_owned(), Some(vec![TopologyHint::new(None, true)]))]);
    let result = policy.merge(&[Some(hints)]);
    assert_eq!(
        result.best_hint,
        TopologyHint::new(Some(NumaMask::EMPTY), false)
    );
    assert_eq!(result, reference_merge(&policy, &[None]));
}
