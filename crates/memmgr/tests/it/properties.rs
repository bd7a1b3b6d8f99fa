//! Properties over random admissions on a four-node machine: no node is ever
//! over-committed (reserved + free = allocatable on every node and resource), and
//! releasing every container restores the exact default state.

use std::collections::BTreeMap;

use corral_memmgr::{MEMORY, StaticPolicy, SystemReserved, default_machine_state};
use corral_topology::memory::{HugePages, NumaMemory};
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{Container, NumaMask, Pod};
use proptest::prelude::*;

const MI: u64 = 1 << 20;

fn container(name: &str, memory_mi: u64, pages: u64) -> Container {
    let mut c = Container::new(name);
    for list in [&mut c.resources.requests, &mut c.resources.limits] {
        list.cpu_millis = Some(1000);
        list.memory_bytes = Some((memory_mi * MI) as i64);
        if pages > 0 {
            list.extended
                .insert("hugepages-2Mi".into(), (pages * 2 * MI) as i64);
        }
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn never_overcommitted_and_release_restores(
        requests in proptest::collection::vec((1u64..1500, 0u64..300, 0u64..16), 1..24),
    ) {
        let nodes: BTreeMap<usize, NumaMemory> = (0..4)
            .map(|node| {
                let huge_pages = vec![HugePages { page_size_kib: 2048, count: 256 }];
                (node, NumaMemory { node, memory_bytes: 2048 * MI, huge_pages })
            })
            .collect();
        let reserved: SystemReserved = BTreeMap::from([(0, BTreeMap::from([(MEMORY.to_owned(), 128 * MI)]))]);
        let default = default_machine_state(&nodes, &reserved).unwrap();
        let mut policy = StaticPolicy::new(default.clone());
        let mut admitted = Vec::new();
        for (i, &(memory, pages, mask_bits)) in requests.iter().enumerate() {
            let c = container("c", memory, pages);
            let uid = format!("pod{i}");
            let p = Pod { uid: uid.clone(), containers: vec![c.clone()], ..Pod::default() };
            let ids: Vec<usize> = (0..4).filter(|b| mask_bits & (1 << b) != 0).collect();
            let hint = match NumaMask::new(ids) {
                Ok(mask) if !mask.is_empty() => TopologyHint { numa_affinity: Some(mask), preferred: false },
                _ => TopologyHint::default(),
            };
            let before = policy.clone();
            match policy.allocate(&p, &c, hint) {
                Ok(()) => admitted.push(uid),
                Err(_) => prop_assert_eq!(&policy, &before, "a refusal changes nothing"),
            }
            for node in policy.machine_state().values() {
                for table in node.memory.values() {
                    prop_assert_eq!(table.reserved + table.free, table.allocatable);
                }
            }
        }
        for uid in admitted {
            policy.remove_container(&uid, "c");
        }
        prop_assert_eq!(policy.machine_state(), &default);
    }
}
