//! The exact inputs of `testdata/bench/go_bench.json` this crate implements
//! (`takeByTopologyNUMAPacked/*`, `takeByTopologyNUMADistributed/*`,
//! `generateCPUTopologyHints/*`): topologies loaded from the conformance files, each output
//! checked once against the recorded one, then benchmarked as `go/<name>` so
//! `cargo xtask bench` prints Go's median beside corral's.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use corral_cpumgr::test_util::topology_index;
use corral_cpumgr::{
    CpuSortingStrategy, SocketAlignment, TopologyIndex, UncoreCacheAlignment,
    generate_cpu_topology_hints, take_by_topology_numa_distributed, take_by_topology_numa_packed,
};
use corral_testkit::conformance_topology::{flag, hints, load_testdata, machines, num, text};
use corral_topology::CpuSet;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;

fn set(v: &Value) -> CpuSet {
    v.as_str().expect("cpuset").parse().expect("parses")
}

fn go_benches(c: &mut Criterion) {
    let doc = load_testdata("testdata/bench/go_bench.json");
    let topos: BTreeMap<String, Arc<TopologyIndex>> =
        machines(&load_testdata("testdata/conformance/cpu_assignment.json"))
            .into_iter()
            .map(|(name, m)| (name, topology_index(m.cpu_ids(), m.counts.values())))
            .collect();
    let mut group = c.benchmark_group("go");
    for bench in doc["benchmarks"].as_array().expect("benchmarks") {
        let name = bench["name"].as_str().expect("name");
        let inputs = &bench["inputs"];
        let output = &bench["output"];
        let topo_name = |v: &Value| -> String {
            v["topology"]
                .as_str()
                .expect("topology")
                .split(' ')
                .next()
                .unwrap_or_default()
                .to_owned()
        };
        if name.starts_with("takeByTopologyNUMAPacked/")
            || name.starts_with("takeByTopologyNUMADistributed/")
        {
            let index = &topos[&topo_name(inputs)];
            let available = set(&inputs["available"]);
            let n = num(inputs, "num_cpus");
            let strategy: CpuSortingStrategy = text(inputs, "cpu_sorting_strategy")
                .parse()
                .expect("strategy");
            let packed = name.starts_with("takeByTopologyNUMAPacked/");
            let uncore = if flag(inputs, "prefer_align_by_uncore_cache") {
                UncoreCacheAlignment::Prefer
            } else {
                UncoreCacheAlignment::Ignore
            };
            let group_size = inputs["cpu_group_size"].as_u64().unwrap_or(1) as usize;
            let run = |available: &CpuSet| {
                if packed {
                    take_by_topology_numa_packed(index, available, n, strategy, uncore)
                } else {
                    take_by_topology_numa_distributed(index, available, n, group_size, strategy)
                }
            };
            let got = run(&available).expect("allocates");
            assert_eq!(
                Some(got.to_string().as_str()),
                output["result"].as_str(),
                "{name}"
            );
            group.bench_function(name, |b| b.iter(|| run(black_box(&available))));
        } else if name.starts_with("generateCPUTopologyHints/") {
            let index = &topos[&topo_name(inputs)];
            let available = set(&inputs["available"]);
            let reusable = set(&inputs["reusable"]);
            let request = num(inputs, "request");
            let align = if flag(inputs, "align_by_socket") {
                SocketAlignment::Prefer
            } else {
                SocketAlignment::Ignore
            };
            let got = generate_cpu_topology_hints(index, &available, &reusable, request, align);
            let got: Vec<(Vec<usize>, bool)> = got
                .iter()
                .map(|h| {
                    (
                        h.numa_affinity.map(|m| m.get_bits()).unwrap_or_default(),
                        h.preferred,
                    )
                })
                .collect();
            assert_eq!(got, hints(&output["hints"]), "{name}");
            group.bench_function(name, |b| {
                b.iter(|| {
                    generate_cpu_topology_hints(
                        index,
                        black_box(&available),
                        &reusable,
                        request,
                        align,
                    )
                })
            });
        }
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)); targets = go_benches);
criterion_main!(benches);
