//! Criterion benches of the memory manager's static policy on an 8-NUMA machine (64 GiB
//! per node) with 4 huge page sizes (64Ki, 2Mi, 32Mi, 1Gi): hints for a container asking
//! memory and every page size (all 255 sets of nodes checked) on an empty machine and on
//! one where every node holds single-node memory; a container's allocate-then-remove
//! cycle; the default machine state. No upstream Go timings exist for these.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use corral_memmgr::{MEMORY, StaticPolicy, SystemReserved, default_machine_state};
use corral_topology::memory::{HugePages, NumaMemory};
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{Container, NumaMask, Pod};
use criterion::{Criterion, criterion_group, criterion_main};

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;
const NODES: usize = 8;
/// Page sizes in KiB: 64Ki, 2Mi, 32Mi, 1Gi.
const PAGE_SIZES_KIB: [u64; 4] = [64, 2048, 32 << 10, 1 << 20];

fn machine() -> BTreeMap<usize, NumaMemory> {
    (0..NODES)
        .map(|node| {
            let huge_pages = PAGE_SIZES_KIB
                .iter()
                .map(|&kib| HugePages {
                    page_size_kib: kib,
                    count: GI / (kib * 1024),
                })
                .collect();
            let memory = NumaMemory {
                node,
                memory_bytes: 64 * GI,
                huge_pages,
            };
            (node, memory)
        })
        .collect()
}

fn reserved() -> SystemReserved {
    (0..NODES)
        .map(|n| (n, BTreeMap::from([(MEMORY.to_owned(), GI)])))
        .collect()
}

/// A Guaranteed container asking `memory` bytes and 64 MiB of every page size.
fn container(name: &str, memory: u64) -> Container {
    let mut c = Container::new(name);
    for list in [&mut c.resources.requests, &mut c.resources.limits] {
        list.cpu_millis = Some(1000);
        list.memory_bytes = Some(memory as i64);
        for kib in PAGE_SIZES_KIB {
            let name = HugePages {
                page_size_kib: kib,
                count: 0,
            }
            .resource_name();
            list.extended.insert(name, (64 * MI) as i64);
        }
    }
    c
}

fn pod(uid: &str, container: &Container) -> Pod {
    Pod {
        uid: uid.into(),
        containers: vec![container.clone()],
        ..Pod::default()
    }
}

fn on_node(node: usize) -> TopologyHint {
    TopologyHint {
        numa_affinity: Some(NumaMask::new([node]).unwrap()),
        preferred: true,
    }
}

fn benches(c: &mut Criterion) {
    let default = default_machine_state(&machine(), &reserved()).unwrap();
    let mut group = c.benchmark_group("memmgr/8numa_4pagesizes");
    group.bench_function("default_machine_state", |b| {
        b.iter(|| default_machine_state(black_box(&machine()), &reserved()).unwrap())
    });
    let empty = StaticPolicy::new(default.clone());
    let asking = container("app", 8 * GI);
    let new_pod = pod("new", &asking);
    group.bench_function("hints/empty", |b| {
        b.iter(|| empty.hints_for_container(black_box(&new_pod), &asking))
    });
    let mut busy = StaticPolicy::new(default.clone());
    for node in 0..NODES {
        let c = container("app", 16 * GI);
        busy.allocate(&pod(&format!("p{node}"), &c), &c, on_node(node))
            .unwrap();
    }
    group.bench_function("hints/every_node_used", |b| {
        b.iter(|| busy.hints_for_container(black_box(&new_pod), &asking))
    });
    group.bench_function("allocate_remove", |b| {
        let mut policy = busy.clone();
        b.iter(|| {
            policy
                .allocate(black_box(&new_pod), &asking, on_node(3))
                .unwrap();
            policy.remove_container("new", "app");
        })
    });
    group.finish();
}

criterion_group! {
    name = memmgr;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(memmgr);
