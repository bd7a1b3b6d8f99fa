//! Property tests: the memory manager's hint family lists exactly upstream's
//! `calculateHints` list, and `findBestHint` over it (with or without nodes to hold) is the
//! family's `best_containing` — on random machines (sparse node ids, memory-only and
//! memory-less nodes, huge pages) after random allocations (so nodes are used, grouped,
//! full), with random memory reusable from init containers.

use std::collections::BTreeMap;

use corral_memmgr::hints::{Requested, calculate_hint_family, calculate_hints, find_best_hint};
use corral_memmgr::{MEMORY, StaticPolicy, SystemReserved, default_machine_state};
use corral_topology::memory::{HugePages, NumaMemory};
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{Container, NumaMask, Pod};
use proptest::prelude::*;

const MI: u64 = 1 << 20;
const PAGES: &str = "hugepages-2Mi";

fn container(name: &str, memory_mi: u64, pages: u64) -> Container {
    let mut c = Container::new(name);
    for list in [&mut c.resources.requests, &mut c.resources.limits] {
        list.cpu_millis = Some(1000);
        list.memory_bytes = Some((memory_mi * MI) as i64);
        if pages > 0 {
            list.extended.insert(PAGES.into(), (pages * 2 * MI) as i64);
        }
    }
    c
}

fn mask_of(ids: &[usize], bits: u64) -> NumaMask {
    NumaMask::new(
        ids.iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .map(|(_, &id)| id),
    )
    .expect("ids below 64")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn family_lists_calculate_hints(
        ids in prop::collection::btree_set(0usize..64, 1..=8),
        memory in prop::collection::vec(prop_oneof![1 => Just(0u64), 4 => 256u64..4096], 8),
        pages in prop::collection::vec(0u64..64, 8),
        allocations in prop::collection::vec((1u64..3000, 0u64..40, any::<u64>()), 0..8),
        request in (1u64..6000, 0u64..100),
        reusable in prop::collection::vec((any::<u64>(), 0u64..3000), 0..3),
        hold in any::<u64>(),
    ) {
        let ids: Vec<usize> = ids.into_iter().collect();
        let nodes: BTreeMap<usize, NumaMemory> = ids
            .iter()
            .enumerate()
            .map(|(i, &node)| {
                let count = if memory[i] == 0 { 0 } else { pages[i] };
                let huge_pages = vec![HugePages { page_size_kib: 2048, count }];
                (node, NumaMemory { node, memory_bytes: memory[i] * MI, huge_pages })
            })
            .collect();
        let default = default_machine_state(&nodes, &SystemReserved::new()).expect("machine");
        let mut policy = StaticPolicy::new(default);
        for (i, &(memory_mi, pages, bits)) in allocations.iter().enumerate() {
            let c = container("c", memory_mi, pages);
            let pod = Pod { uid: format!("pod{i}"), containers: vec![c.clone()], ..Pod::default() };
            let mask = mask_of(&ids, bits);
            let hint = if mask.is_empty() {
                TopologyHint::default()
            } else {
                TopologyHint { numa_affinity: Some(mask), preferred: bits & 1 << 40 != 0 }
            };
            let _ = policy.allocate(&pod, &c, hint);
        }
        let state = policy.machine_state();
        let mut requested = Requested::from([(MEMORY.to_owned(), request.0 * MI)]);
        if request.1 > 0 {
            requested.insert(PAGES.to_owned(), request.1 * 2 * MI);
        }
        let reuse: BTreeMap<NumaMask, u64> = reusable
            .iter()
            .map(|&(bits, mi)| (mask_of(&ids, bits), mi * MI))
            .filter(|(m, _)| !m.is_empty())
            .collect();
        let reusable_fn = |mask: NumaMask, resource: &str| {
            if resource == MEMORY { reuse.get(&mask).copied().unwrap_or(0) } else { 0 }
        };
        let listed = calculate_hints(state, &requested, reusable_fn);
        let family = calculate_hint_family(state, &requested, reusable_fn, reuse.keys().copied());
        let expected = listed.get(MEMORY).cloned().unwrap_or_default();
        prop_assert_eq!(family.to_hints(), expected.clone());
        if family.is_empty() {
            prop_assert!(listed.is_empty());
        }
        for nodes in [NumaMask::EMPTY, mask_of(&ids, hold & hold >> 4)] {
            let holding: Vec<TopologyHint> = expected
                .iter()
                .copied()
                .filter(|h| h.numa_affinity.is_some_and(|m| m.and(nodes) == nodes))
                .collect();
            prop_assert_eq!(family.best_containing(nodes), find_best_hint(&holding));
        }
    }
}
