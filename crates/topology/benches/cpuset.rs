//! CpuSet parse, format and set operations at 256 and 4096 CPUs.

use std::hint::black_box;
use std::time::Duration;

use corral_topology::CpuSet;
use criterion::{Criterion, criterion_group, criterion_main};

/// Every other pair of CPUs, plus a few gaps: many short ranges.
fn fragmented(n: usize, salt: usize) -> CpuSet {
    (0..n).filter(|c| (c * 7 + salt) % 5 < 3).collect()
}

fn cpuset_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpuset");
    for n in [256, 4096] {
        let a = fragmented(n, 0);
        let b = fragmented(n, 3);
        let text = a.to_string();
        group.bench_function(format!("parse/{n}"), |bench| {
            bench.iter(|| CpuSet::parse(black_box(&text)))
        });
        group.bench_function(format!("format/{n}"), |bench| {
            bench.iter(|| black_box(&a).to_string())
        });
        group.bench_function(format!("ranges/{n}"), |bench| {
            bench.iter(|| black_box(&a).ranges().fold(0, |acc, (s, e)| acc ^ s ^ e))
        });
        group.bench_function(format!("union/{n}"), |bench| {
            bench.iter(|| black_box(&a).union(black_box(&b)))
        });
        group.bench_function(format!("intersection/{n}"), |bench| {
            bench.iter(|| black_box(&a).intersection(black_box(&b)))
        });
        group.bench_function(format!("difference/{n}"), |bench| {
            bench.iter(|| black_box(&a).difference(black_box(&b)))
        });
        group.bench_function(format!("is_subset_of/{n}"), |bench| {
            bench.iter(|| black_box(&a).is_subset_of(black_box(&b)))
        });
        group.bench_function(format!("len/{n}"), |bench| {
            bench.iter(|| black_box(&a).len())
        });
        group.bench_function(format!("iterate/{n}"), |bench| {
            bench.iter(|| black_box(&a).iter().sum::<usize>())
        });
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)); targets = cpuset_benches);
criterion_main!(benches);
