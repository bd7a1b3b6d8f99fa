//! The exact inputs of `testdata/bench/go_bench.json` that this crate implements
//! (`PolicyMerge/*`, `cpuset.Parse/*`, `cpuset.String/*`), loaded at start-up, checked once
//! against the recorded output, and benchmarked as `go/<name>` so `cargo xtask bench` prints
//! Go's median beside corral's.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use corral_testkit::conformance_topology::load_testdata;
use corral_testkit::merge_inputs;
use corral_topology::{
    CpuSet, NumaInfo, NumaMask, NumaNode, Policy, PolicyName, PolicyOptions, ProviderHints,
    TopologyHint,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;

fn to_hint(affinity: Option<Vec<usize>>, preferred: bool) -> TopologyHint {
    let mask = affinity.map(|ids| NumaMask::new(ids).expect("mask"));
    TopologyHint::new(mask, preferred)
}

fn merge_input(inputs: &Value) -> (Policy, Vec<ProviderHints>) {
    let nodes = merge_inputs::numa_nodes(inputs, |id, distances| NumaNode { id, distances });
    let options = inputs["policy_options"]
        .as_object()
        .expect("policy_options");
    let options: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect();
    let options = PolicyOptions::from_map(&options).expect("options");
    let name: PolicyName = inputs["policy"]
        .as_str()
        .expect("policy")
        .parse()
        .expect("policy name");
    let numa = NumaInfo::new(&nodes, options.numa_distances()).expect("numa info");
    let providers = merge_inputs::providers(inputs, to_hint);
    (Policy::new(name, numa, options), providers)
}

fn go_benches(c: &mut Criterion) {
    let doc = load_testdata("testdata/bench/go_bench.json");
    let mut group = c.benchmark_group("go");
    for bench in doc["benchmarks"].as_array().expect("benchmarks") {
        let name = bench["name"].as_str().expect("name");
        let inputs = &bench["inputs"];
        let output = &bench["output"];
        if name.starts_with("PolicyMerge/") {
            let (policy, providers) = merge_input(inputs);
            let got = policy.merge(&providers);
            assert_eq!(
                got.best_hint,
                merge_inputs::hint(&output["best_hint"], to_hint),
                "{name}"
            );
            assert_eq!(Some(got.admit), output["admit"].as_bool(), "{name}");
            group.bench_function(name, |b| {
                b.iter(|| black_box(&policy).merge(black_box(&providers)))
            });
        } else if name.starts_with("cpuset.Parse/") {
            let text = inputs["s"].as_str().expect("s");
            let set = CpuSet::parse(text).expect("parses");
            assert_eq!(Some(set.len() as u64), output["size"].as_u64(), "{name}");
            group.bench_function(name, |b| b.iter(|| CpuSet::parse(black_box(text))));
        } else if name.starts_with("cpuset.String/") {
            let set = CpuSet::parse(inputs["s"].as_str().expect("s")).expect("parses");
            assert_eq!(
                Some(set.to_string().as_str()),
                output["string"].as_str(),
                "{name}"
            );
            group.bench_function(name, |b| b.iter(|| black_box(&set).to_string()));
        }
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)); targets = go_benches);
criterion_main!(benches);
