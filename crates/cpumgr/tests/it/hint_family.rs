//! Property test: the CPU hint family lists exactly upstream's `generateCPUTopologyHints`
//! list (`generate_cpu_topology_hints`), on random machines — sparse NUMA ids, several
//! NUMA nodes per socket or one, random free and reusable CPUs, with and without
//! `align-by-socket`.

use corral_cpumgr::{
    SocketAlignment, TopologyIndex, cpu_topology_hint_family, generate_cpu_topology_hints,
};
use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology};
use proptest::prelude::*;

/// Up to 8 NUMA nodes (ids spread over 0–63), each with 1–6 CPUs, on 1–4 sockets.
fn machine() -> impl Strategy<Value = Vec<CpuRecord>> {
    (
        prop::collection::btree_set(0usize..64, 1..=8),
        prop::collection::vec(1usize..=6, 8),
        1usize..=4,
    )
        .prop_map(|(ids, cpus, sockets)| {
            let per_socket = ids.len().div_ceil(sockets);
            let mut records = Vec::new();
            for (i, &numa) in ids.iter().enumerate() {
                for _ in 0..cpus[i] {
                    let cpu = records.len();
                    records.push(CpuRecord {
                        cpu,
                        info: CpuInfo {
                            core: cpu,
                            socket: i / per_socket,
                            numa,
                            uncore: numa,
                        },
                    });
                }
            }
            records
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn family_lists_upstreams_hints(
        records in machine(),
        free in prop::collection::vec(any::<bool>(), 48),
        reuse in prop::collection::vec(prop::bool::weighted(0.1), 48),
        request in 0usize..30,
        by_socket in any::<bool>(),
    ) {
        let index = TopologyIndex::new(&CpuTopology::new(&records).expect("valid topology"));
        let available: CpuSet = (0..records.len()).filter(|&c| free[c]).collect();
        let reusable: CpuSet = (0..records.len()).filter(|&c| reuse[c]).collect();
        let alignment = if by_socket { SocketAlignment::Prefer } else { SocketAlignment::Ignore };
        let list = generate_cpu_topology_hints(&index, &available, &reusable, request, alignment);
        let family = cpu_topology_hint_family(&index, &available, &reusable, request, alignment);
        prop_assert_eq!(family.to_hints(), list);
    }
}
