//! Upstream's test topologies (`policy_test.go`), as Rust data for unit and integration tests
//! (integration tests include this file with `#[path]`).
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use corral_topology::{CpuInfo, CpuRecord, CpuTopology, TopologyCounts};

use crate::TopologyIndex;

fn build(
    n: usize,
    place: impl Fn(usize) -> (usize, usize, usize),
    counts: TopologyCounts,
) -> Arc<TopologyIndex> {
    let records: Vec<CpuRecord> = (0..n)
        .map(|cpu| {
            let (core, socket, numa) = place(cpu);
            CpuRecord {
                cpu,
                info: CpuInfo {
                    core,
                    socket,
                    numa,
                    uncore: 0,
                },
            }
        })
        .collect();
    let topo = CpuTopology::new(&records)
        .expect("fixture topology")
        .with_counts(counts);
    Arc::new(TopologyIndex::new(&topo))
}

fn counts(cpus: usize, cores: usize, sockets: usize, numa: usize) -> TopologyCounts {
    TopologyCounts {
        num_cpus: cpus,
        num_cores: cores,
        num_sockets: sockets,
        num_numa_nodes: numa,
        num_uncore_caches: 1,
    }
}

/// `topoSingleSocketHT`: 1 socket, 4 cores × 2 threads; CPU n and n+4 share core n.
pub fn single_socket_ht() -> Arc<TopologyIndex> {
    build(8, |cpu| (cpu % 4, 0, 0), counts(8, 4, 1, 1))
}

/// `topoDualSocketHT`: 2 sockets (= NUMA nodes) × 3 cores × 2 threads; core = cpu % 6,
/// socket = core % 2.
pub fn dual_socket_ht() -> Arc<TopologyIndex> {
    build(
        12,
        |cpu| {
            let core = cpu % 6;
            (core, core % 2, core % 2)
        },
        counts(12, 6, 2, 2),
    )
}

/// `topoTripleSocketHT`: 3 sockets × 3 cores × 2 threads, all NUMA node 0; CPUs 0-5 are
/// socket 1, 6-11 socket 0, 12-17 socket 2.
pub fn triple_socket_ht() -> Arc<TopologyIndex> {
    build(
        18,
        |cpu| {
            let core = cpu / 2;
            let socket = [1, 0, 2][cpu / 6];
            (core, socket, 0)
        },
        counts(18, 9, 3, 1),
    )
}

/// `topoDualSocketNoHT`: 2 sockets (= NUMA nodes) × 4 single-thread cores.
pub fn dual_socket_no_ht() -> Arc<TopologyIndex> {
    build(8, |cpu| (cpu, cpu / 4, cpu / 4), counts(8, 8, 2, 2))
}

/// `topoDualSocketMultiNumaPerSocketHT` (dual Xeon Gold 6230): 2 sockets × 2 NUMA nodes ×
/// 10 cores × 2 threads; core = cpu % 40, socket = core / 20, NUMA = core / 10.
pub fn dual_socket_multi_numa_per_socket_ht() -> Arc<TopologyIndex> {
    build(
        80,
        |cpu| {
            let core = cpu % 40;
            (core, core / 20, core / 10)
        },
        counts(80, 40, 2, 4),
    )
}

/// `fakeTopoMultiSocketDualSocketPerNumaHT`: the previous one with sockets and NUMA nodes
/// flipped: 4 sockets of 10 cores, 2 NUMA nodes of 2 sockets.
pub fn fake_multi_socket_dual_socket_per_numa_ht() -> Arc<TopologyIndex> {
    build(
        80,
        |cpu| {
            let core = cpu % 40;
            (core, core / 10, core / 20)
        },
        counts(80, 40, 4, 2),
    )
}
