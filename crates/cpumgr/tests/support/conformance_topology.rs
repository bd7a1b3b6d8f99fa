//! Topologies in the conformance files' shape (`{name, num_*, cpus: [{cpu, core, socket,
//! numa, uncore}]}`) as `TopologyIndex`es, for the conformance test and the Go-anchor bench.

use std::collections::BTreeMap;

use corral_cpumgr::TopologyIndex;
use corral_topology::{CpuInfo, CpuRecord, CpuTopology, TopologyCounts};
use serde_json::Value;

/// A required unsigned field.
pub(crate) fn num(v: &Value, key: &str) -> usize {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} missing")) as usize
}

/// Every topology of a vector file, by name.
pub(crate) fn topologies(doc: &Value) -> BTreeMap<String, TopologyIndex> {
    doc["topologies"]
        .as_array()
        .expect("topologies")
        .iter()
        .map(|t| {
            let records: Vec<CpuRecord> = t["cpus"]
                .as_array()
                .expect("cpus")
                .iter()
                .map(|c| CpuRecord {
                    cpu: num(c, "cpu"),
                    info: CpuInfo {
                        core: num(c, "core"),
                        socket: num(c, "socket"),
                        numa: num(c, "numa"),
                        uncore: num(c, "uncore"),
                    },
                })
                .collect();
            let counts = TopologyCounts {
                num_cpus: num(t, "num_cpus"),
                num_cores: num(t, "num_cores"),
                num_sockets: num(t, "num_sockets"),
                num_numa_nodes: num(t, "num_numa_nodes"),
                num_uncore_caches: num(t, "num_uncore_cache"),
            };
            let topo = CpuTopology::new(&records)
                .expect("topology")
                .with_counts(counts);
            (
                t["name"].as_str().expect("name").to_owned(),
                TopologyIndex::new(&topo),
            )
        })
        .collect()
}
