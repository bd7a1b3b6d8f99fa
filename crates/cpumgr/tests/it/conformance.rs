//! Runs the shared conformance vectors `testdata/conformance/cpu_assignment.json` and
//! `cpu_hints.json` (produced by upstream's Go code) so plain `cargo test` covers them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_cpumgr::{
    CpuSortingStrategy, SocketAlignment, TopologyIndex, UncoreCacheAlignment,
    generate_cpu_topology_hints, take_by_topology_numa_distributed, take_by_topology_numa_packed,
};
use corral_testkit::conformance_topology::{hints, load_testdata, machines, num};
use corral_topology::{CpuSet, TopologyHint};
use serde_json::Value;

use crate::support::topologies::index;

fn load(name: &str) -> Value {
    load_testdata(&format!("testdata/conformance/{name}"))
}

/// Every topology of a vector file, indexed, by name.
fn topologies(doc: &Value) -> BTreeMap<String, Arc<TopologyIndex>> {
    machines(doc)
        .into_iter()
        .map(|(name, machine)| (name, index(&machine)))
        .collect()
}

fn set(v: &Value) -> CpuSet {
    v.as_str().expect("cpuset string").parse().expect("cpuset")
}

/// Hints as the conformance files write them: (NUMA node ids, preferred).
fn plain_hints(hints: &[TopologyHint]) -> Vec<(Vec<usize>, bool)> {
    hints
        .iter()
        .map(|h| {
            let nodes = h.numa_affinity.map(|m| m.get_bits()).unwrap_or_default();
            (nodes, h.preferred)
        })
        .collect()
}

/// Fails with (the first 20 of) `failures` unless there are none.
fn assert_all_passed(failures: &[String], cases: usize) {
    assert!(
        failures.is_empty(),
        "{} of {cases} failed:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

#[test]
fn cpu_assignment_vectors() {
    let doc = load("cpu_assignment.json");
    let topos = topologies(&doc);
    let mut failures = Vec::new();
    let cases = doc["cases"].as_array().expect("cases");
    for (i, case) in cases.iter().enumerate() {
        let index = &topos[case["topology"].as_str().expect("topology")];
        let available = set(&case["available"]);
        let n = num(case, "num_cpus");
        let strategy: CpuSortingStrategy = case["cpu_sorting_strategy"]
            .as_str()
            .expect("strategy")
            .parse()
            .expect("known strategy");
        let started = Instant::now();
        let got = match case["algorithm"].as_str().expect("algorithm") {
            "takeByTopologyNUMAPacked" => take_by_topology_numa_packed(
                index,
                &available,
                n,
                strategy,
                if case["prefer_align_by_uncore_cache"]
                    .as_bool()
                    .unwrap_or(false)
                {
                    UncoreCacheAlignment::Prefer
                } else {
                    UncoreCacheAlignment::Ignore
                },
            ),
            "takeByTopologyNUMADistributed" => take_by_topology_numa_distributed(
                index,
                &available,
                n,
                num(case, "cpu_group_size"),
                strategy,
            ),
            other => panic!("unknown algorithm {other}"),
        };
        let took = started.elapsed();
        let want_error = case["error"].as_str();
        let ok = match (want_error, &got) {
            (Some(e), got) if e.starts_with("TIMEOUT") => {
                took < Duration::from_secs(1)
                    && got
                        .as_ref()
                        .map_or(true, |s| s.len() == n && s.is_subset_of(&available))
            }
            (Some(_), Err(_)) => true,
            (None, Ok(s)) => s.to_string() == case["result"].as_str().unwrap_or_default(),
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "case {i} {}: want {:?}/{:?}, got {got:?}",
                case, case["result"], want_error
            ));
        }
    }
    assert_all_passed(&failures, cases.len());
}

#[test]
fn cpu_hints_vectors() {
    let doc = load("cpu_hints.json");
    let topos = topologies(&doc);
    let mut failures = Vec::new();
    let cases = doc["cases"].as_array().expect("cases");
    for case in cases {
        let index = &topos[case["topology"].as_str().expect("topology")];
        let got = generate_cpu_topology_hints(
            index,
            &set(&case["available"]),
            &set(&case["reusable"]),
            // Upstream takes an `int`; every request <= 0 behaves as 0 (all masks fit).
            case["request"].as_i64().expect("request").max(0) as usize,
            if case["align_by_socket"].as_bool().expect("align_by_socket") {
                SocketAlignment::Prefer
            } else {
                SocketAlignment::Ignore
            },
        );
        let got = plain_hints(&got);
        let want = hints(&case["hints"]);
        if got != want {
            failures.push(format!("{}: want {want:?}, got {got:?}", case["id"]));
        }
    }
    assert_all_passed(&failures, cases.len());
}
