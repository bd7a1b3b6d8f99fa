//! Criterion benches of CPU assignment, hints and the static policy's allocate/release cycle
//! on synthetic machines of 16, 64, 256 and 1024 CPUs (1, 2, 4 and 8 NUMA nodes; 2 threads
//! per core; 2 uncore caches per NUMA node), with a full and a fragmented (about half free)
//! pool, for each assignment option.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use corral_cpumgr::{
    CpuSortingStrategy, CpuState, Policy, SocketAlignment, StaticPolicy, StaticPolicyOptions,
    TopologyIndex, UncoreCacheAlignment, generate_cpu_topology_hints,
    take_by_topology_numa_distributed, take_by_topology_numa_packed,
};
use corral_topology::{
    Container, CpuInfo, CpuRecord, CpuSet, CpuTopology, Pod, PolicyName, TopologyHint,
};
use criterion::{Criterion, criterion_group, criterion_main};

/// `cpus` CPUs over `numa` NUMA nodes (one socket per two NUMA nodes, at least one), 2
/// threads per core (CPU n and n + cpus/2 are siblings), 2 uncore caches per NUMA node.
fn machine(cpus: usize, numa: usize) -> TopologyIndex {
    let cores = cpus / 2;
    let per_numa = cores / numa;
    let sockets = numa.div_ceil(2);
    let records: Vec<CpuRecord> = (0..cpus)
        .map(|cpu| {
            let core = cpu % cores;
            let node = core / per_numa;
            CpuRecord {
                cpu,
                info: CpuInfo {
                    core,
                    socket: node * sockets / numa,
                    numa: node,
                    uncore: core / (per_numa / 2).max(1),
                },
            }
        })
        .collect();
    TopologyIndex::new(&CpuTopology::new(&records).expect("topology"))
}

/// About half of `all`, chosen by a fixed LCG.
fn fragmented(all: &CpuSet) -> CpuSet {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    all.iter()
        .filter(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            x >> 63 == 1
        })
        .collect()
}

fn guaranteed(uid: &str, cpus: i64) -> (Pod, Container) {
    let mut c = Container::new("app");
    for list in [&mut c.resources.requests, &mut c.resources.limits] {
        list.cpu_millis = Some(cpus * 1000);
        list.memory_bytes = Some(1 << 30);
    }
    let pod = Pod {
        uid: uid.into(),
        containers: vec![c.clone()],
        ..Pod::default()
    };
    (pod, c)
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpumgr");
    for (cpus, numa) in [(16, 1), (64, 2), (256, 4), (1024, 8)] {
        let index = machine(cpus, numa);
        let all = index.all_cpus().clone();
        let frag = fragmented(&all);
        let take = (cpus / 8).max(2);
        for (pool_name, pool) in [("full", &all), ("fragmented", &frag)] {
            let id = |what: &str| format!("{what}/{cpus}cpu-{numa}numa/{pool_name}/take{take}");
            for (name, strategy, uncore) in [
                (
                    "packed",
                    CpuSortingStrategy::Packed,
                    UncoreCacheAlignment::Ignore,
                ),
                (
                    "spread",
                    CpuSortingStrategy::Spread,
                    UncoreCacheAlignment::Ignore,
                ),
                (
                    "uncore",
                    CpuSortingStrategy::Packed,
                    UncoreCacheAlignment::Prefer,
                ),
            ] {
                group.bench_function(id(name), |b| {
                    b.iter(|| {
                        take_by_topology_numa_packed(
                            &index,
                            black_box(pool),
                            take,
                            strategy,
                            uncore,
                        )
                    })
                });
            }
            for group_size in [1, 2] {
                group.bench_function(id(&format!("distributed-g{group_size}")), |b| {
                    b.iter(|| {
                        take_by_topology_numa_distributed(
                            &index,
                            black_box(pool),
                            take,
                            group_size,
                            CpuSortingStrategy::Packed,
                        )
                    })
                });
            }
            group.bench_function(id("hints"), |b| {
                b.iter(|| {
                    generate_cpu_topology_hints(
                        &index,
                        black_box(pool),
                        &CpuSet::new(),
                        take,
                        SocketAlignment::Ignore,
                    )
                })
            });
        }
        // Allocate + release through the static policy (1 CPU reserved).
        let policy = StaticPolicy::new(
            Arc::new(index.clone()),
            1,
            &CpuSet::new(),
            StaticPolicyOptions::default(),
            PolicyName::None,
        )
        .expect("policy");
        let mut state = CpuState::default();
        let mut p = policy.clone();
        p.start(&mut state).expect("start");
        let (pod, container) = guaranteed("bench", take as i64);
        group.bench_function(
            format!("allocate-release/{cpus}cpu-{numa}numa/take{take}"),
            |b| {
                b.iter(|| {
                    p.allocate(&mut state, &pod, &container, TopologyHint::default())
                        .expect("allocates");
                    p.remove_container(&mut state, "bench", "app");
                })
            },
        );
    }
    group.finish();
}

criterion_group!(name = cpumgr; config = Criterion::default().sample_size(10).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_millis(600)); targets = benches);
criterion_main!(cpumgr);
