//! Runs the shared conformance vectors `testdata/conformance/cpu_assignment.json` and
//! `cpu_hints.json` (produced by upstream's Go code) so plain `cargo test` covers them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use corral_cpumgr::{
    CpuSortingStrategy, SocketAlignment, TopologyIndex, UncoreCacheAlignment,
    generate_cpu_topology_hints, take_by_topology_numa_distributed, take_by_topology_numa_packed,
};
use corral_testkit::conformance_topology::{flag, hints, load_testdata, machines, num, text};
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

/// The CPU time this thread has used so far (user and system, in clock ticks of 10 ms):
/// what a computation costs, whatever else the machine runs meanwhile (wall-clock time on
/// a busy machine is a multiple of it).
fn thread_cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("/proc/thread-self/stat");
    // After the command name (which ends with ')'): utime is the 12th field, stime the 13th.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("comm") + 2..]
        .split(' ')
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
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

/// Checks every case of the vector file `name` on its topology with `check` (given the case's
/// position and the case; `Some` is a failure's description), then fails with (the first 20
/// of) the failures unless there are none.
fn check_vectors(name: &str, check: impl Fn(&TopologyIndex, usize, &Value) -> Option<String>) {
    let doc = load(name);
    let topos = topologies(&doc);
    let cases = doc["cases"].as_array().expect("cases");
    let failures: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, case)| check(&topos[text(case, "topology")], i, case))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        cases.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// The Kubernetes minor release a vector file was recorded from (`about.upstream_kubernetes`,
/// "k8s.io/kubernetes v1.32.10 …").
fn recorded_minor(doc: &Value) -> u32 {
    let about = doc["about"]["upstream_kubernetes"]
        .as_str()
        .expect("about.upstream_kubernetes");
    let version = about
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v1."))
        .expect("a v1.x version");
    version
        .split('.')
        .next()
        .and_then(|minor| minor.parse().ok())
        .expect("a minor version")
}

/// The strategy a vector's `cpu_sorting_strategy` meant in the release it was recorded from:
/// `spread` listed a socket's CPUs by id before v1.38 (#140766).
fn strategy_as_recorded(name: &str, minor: u32) -> CpuSortingStrategy {
    match name.parse().expect("known strategy") {
        CpuSortingStrategy::Spread if minor < 38 => CpuSortingStrategy::SpreadByCpuId,
        strategy => strategy,
    }
}

#[test]
fn cpu_assignment_vectors() {
    let minor = recorded_minor(&load("cpu_assignment.json"));
    check_vectors("cpu_assignment.json", |index, i, case| {
        let available = set(&case["available"]);
        let n = num(case, "num_cpus");
        let strategy = strategy_as_recorded(text(case, "cpu_sorting_strategy"), minor);
        let uncore = if flag(case, "prefer_align_by_uncore_cache") {
            UncoreCacheAlignment::Prefer
        } else {
            UncoreCacheAlignment::Ignore
        };
        let started = thread_cpu_time();
        let got = match text(case, "algorithm") {
            "takeByTopologyNUMAPacked" => {
                take_by_topology_numa_packed(index, &available, n, strategy, uncore)
            }
            "takeByTopologyNUMADistributed" => take_by_topology_numa_distributed(
                index,
                &available,
                n,
                num(case, "cpu_group_size"),
                strategy,
            ),
            other => panic!("unknown algorithm {other}"),
        };
        let took = thread_cpu_time().saturating_sub(started);
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
        (!ok).then(|| {
            format!(
                "case {i} {}: want {:?}/{:?}, got {got:?}",
                case, case["result"], want_error
            )
        })
    });
}

#[test]
fn cpu_hints_vectors() {
    check_vectors("cpu_hints.json", |index, _, case| {
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
        (got != want).then(|| format!("{}: want {want:?}, got {got:?}", case["id"]))
    });
}
