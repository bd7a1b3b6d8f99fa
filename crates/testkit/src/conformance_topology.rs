//! The conformance files of `testdata/` (vectors produced by upstream's Go code): loading
//! them, their topologies (`{name, num_*, cpus: [{cpu, core, socket, numa, uncore}]}`) as
//! plain [`Machine`]s, and the fields the CPU tests and benches read.
//!
//! Panics name the missing field: these are test inputs checked into the repository.
//!
//! ```
//! use corral_testkit::conformance_topology::{load_testdata, machines};
//!
//! let doc = load_testdata("testdata/conformance/cpu_assignment.json");
//! let machines = machines(&doc);
//! assert!(!machines.is_empty());
//! assert!(machines.values().all(|m| m.cpus.len() == m.counts.cpus));
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

use crate::upstream_topologies::{Counts, CpuPlace, Machine};

/// The JSON file at `rel`, a path relative to the workspace root.
pub fn load_testdata(rel: &str) -> Value {
    let path = crate::workspace_root().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `file` of the vector called `name` in the conformance file at `rel` (a checkpoint
/// vector file: `{vectors: [{name, file, …}]}`).
pub fn vector_file(rel: &str, name: &str) -> String {
    let doc = load_testdata(rel);
    let vectors = doc["vectors"]
        .as_array()
        .unwrap_or_else(|| panic!("{rel}: no vectors"));
    let vector = vectors.iter().find(|v| v["name"] == name);
    let vector = vector.unwrap_or_else(|| panic!("{rel}: no vector {name}"));
    text(vector, "file").to_owned()
}

/// A required unsigned field.
pub fn num(v: &Value, key: &str) -> usize {
    let n = v[key].as_u64().unwrap_or_else(|| panic!("{key} missing"));
    usize::try_from(n).unwrap_or_else(|_| panic!("{key} = {n} does not fit a usize"))
}

/// A required string field.
pub fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing or not a string"))
}

/// An optional boolean field: absent (or not a bool) is `false`, as the vector files leave
/// out flags that are off.
pub fn flag(v: &Value, key: &str) -> bool {
    v[key].as_bool().unwrap_or(false)
}

/// Every topology of a vector file, by name.
pub fn machines(doc: &Value) -> BTreeMap<String, Machine> {
    doc["topologies"]
        .as_array()
        .expect("topologies")
        .iter()
        .map(|t| {
            let name = t["name"].as_str().expect("name").to_owned();
            let cpus = t["cpus"]
                .as_array()
                .expect("cpus")
                .iter()
                .map(|c| CpuPlace {
                    cpu: num(c, "cpu"),
                    core: num(c, "core"),
                    socket: num(c, "socket"),
                    numa: num(c, "numa"),
                    uncore: num(c, "uncore"),
                })
                .collect();
            let counts = Counts {
                cpus: num(t, "num_cpus"),
                cores: num(t, "num_cores"),
                sockets: num(t, "num_sockets"),
                numa_nodes: num(t, "num_numa_nodes"),
                uncore_caches: num(t, "num_uncore_cache"),
            };
            (name.clone(), Machine { name, cpus, counts })
        })
        .collect()
}

/// A list of topology hints, `[{affinity: [node…], preferred}]`, as (NUMA node ids,
/// preferred) pairs.
pub fn hints(v: &Value) -> Vec<(Vec<usize>, bool)> {
    v.as_array()
        .expect("hints")
        .iter()
        .map(|h| {
            let nodes = h["affinity"]
                .as_array()
                .expect("affinity")
                .iter()
                .map(|x| usize::try_from(x.as_u64().expect("node id")).expect("node id"))
                .collect();
            (nodes, h["preferred"].as_bool().expect("preferred"))
        })
        .collect()
}
