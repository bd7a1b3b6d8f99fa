//! Discovery against the real-machine sysfs dumps in `testdata/sysfs` (every directory with
//! a `truth.json` whose `use` is true, so held-out dumps dropped in are checked too), compared
//! by the rules of `testdata/sysfs/README.md`: which CPUs share a package, a core, a NUMA node
//! and an L3, the online CPUs, NUMA node ids by value, and the distance rows. NUMA nodes are
//! compared by OS id through the topology's [`NumaIds`](corral_topology::NumaIds) (mask bits
//! are the ids unless some id is 64 or more, as in `48amd64-4pa2n6c-sparse`), and every
//! fixture's nodes must be usable by the topology manager.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use corral_topology::{CpuTopology, NumaDistances, NumaInfo, discover};
use serde_json::Value;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sysfs")
}

type Groups = Vec<BTreeSet<usize>>;

fn cpu_list(v: &Value) -> BTreeSet<usize> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_u64)
                .map(|n| n as usize)
                .collect()
        })
        .unwrap_or_default()
}

fn truth_groups(v: &Value) -> Option<Groups> {
    match v {
        Value::Array(groups) => Some(groups.iter().map(cpu_list).collect()),
        Value::Object(map) => Some(map.values().map(cpu_list).collect()),
        _ => None,
    }
}

/// For each CPU, the set of CPUs sharing `key(cpu)`.
fn sharing(topo: &CpuTopology, key: impl Fn(usize) -> usize) -> BTreeMap<usize, BTreeSet<usize>> {
    let cpus: Vec<usize> = topo.all_cpus().iter().collect();
    cpus.iter()
        .map(|&c| {
            (
                c,
                cpus.iter().copied().filter(|&o| key(o) == key(c)).collect(),
            )
        })
        .collect()
}

fn compare_groups(
    what: &str,
    ours: &BTreeMap<usize, BTreeSet<usize>>,
    truth: &Groups,
    out: &mut Vec<String>,
) {
    for group in truth {
        for cpu in group {
            match ours.get(cpu) {
                Some(mine) if mine == group => {}
                Some(mine) => out.push(format!(
                    "{what}: CPU {cpu} shares {mine:?}, truth {group:?}"
                )),
                None => out.push(format!("{what}: CPU {cpu} missing")),
            }
        }
    }
}

fn check(dir: &Path, truth: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let topo = match discover(dir) {
        Ok(topo) => topo,
        Err(e) => return vec![format!("discovery failed: {e}")],
    };
    let info = |cpu: usize| topo.cpu(cpu).expect("discovered CPU has info");
    let ids = topo.numa_ids();
    let online: BTreeSet<usize> = topo.all_cpus().iter().collect();
    let want_online = cpu_list(&truth["online_cpus"]);
    if online != want_online {
        out.push(format!("online CPUs {online:?}, truth {want_online:?}"));
    }
    let packages = sharing(&topo, |c| info(c).socket);
    if let Some(t) = truth_groups(&truth["packages"]) {
        compare_groups("package", &packages, &t, &mut out);
    }
    if let Some(t) = truth_groups(&truth["cores"]) {
        compare_groups("core", &sharing(&topo, |c| info(c).core), &t, &mut out);
    }
    if let Some(nodes) = truth["numa_nodes"].as_object() {
        let t: Groups = nodes
            .values()
            .map(cpu_list)
            .filter(|g| !g.is_empty())
            .collect();
        compare_groups("numa", &sharing(&topo, |c| info(c).numa), &t, &mut out);
        for (id, cpus) in nodes {
            let id: usize = id.parse().expect("numeric node id");
            let truth_cpus: BTreeSet<usize> =
                cpu_list(cpus).intersection(&online).copied().collect();
            for &cpu in &truth_cpus {
                let os = ids.os_id(info(cpu).numa);
                if os != Ok(id) {
                    out.push(format!("numa: CPU {cpu} on node {os:?}, truth {id}"));
                }
            }
            match ids.bit(id) {
                Ok(bit) if topo.numa_nodes().contains(&bit) => {
                    let mine: BTreeSet<usize> =
                        topo.details().cpus_in_numa_nodes([bit]).iter().collect();
                    if mine != truth_cpus {
                        out.push(format!(
                            "numa: node {id} (bit {bit}) has CPUs {mine:?}, truth {truth_cpus:?}"
                        ));
                    }
                }
                other => out.push(format!("numa: node {id} not reported ({other:?})")),
            }
        }
    }
    let manager_nodes = topo.numa_nodes_for_manager();
    let distances = if topo.has_numa_distances() {
        NumaDistances::Require
    } else {
        NumaDistances::Ignore
    };
    if let Err(e) = NumaInfo::new(&manager_nodes, distances) {
        out.push(format!("topology manager refuses the NUMA nodes: {e}"));
    }
    let uncore = sharing(&topo, |c| info(c).uncore);
    match truth_groups(&truth["l3"]) {
        Some(t) => compare_groups("l3", &uncore, &t, &mut out),
        None => {
            if uncore != packages {
                out.push("l3: no L3 in truth, but uncore groups are not the packages".into());
            }
        }
    }
    if let (Some(rows), Some(columns)) = (
        truth["numa_distances"].as_object(),
        truth["numa_distance_columns"].as_array(),
    ) {
        for (from, row) in rows {
            let from: usize = from.parse().expect("numeric node id");
            for (col, want) in columns.iter().zip(row.as_array().into_iter().flatten()) {
                let to = col.as_u64().expect("numeric column") as usize;
                let got = match (ids.bit(from), ids.bit(to)) {
                    (Ok(from), Ok(to)) => topo.numa_distance(from, to),
                    _ => None,
                };
                if got != want.as_u64() {
                    out.push(format!("distance {from}->{to}: {got:?}, truth {want}"));
                }
            }
        }
    }
    out
}

#[test]
fn every_usable_fixture_matches_its_truth() {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("testdata/sysfs exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.join("truth.json").is_file())
        .collect();
    entries.sort();
    let mut checked = 0;
    let mut failures = Vec::new();
    for dir in entries {
        let text = std::fs::read_to_string(dir.join("truth.json")).expect("readable truth");
        let truth: Value = serde_json::from_str(&text).expect("valid truth JSON");
        if truth["use"] != Value::Bool(true) {
            continue;
        }
        checked += 1;
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mismatches = check(&dir, &truth);
        if mismatches.is_empty() {
            println!("PASS {name}");
        } else {
            for m in &mismatches {
                println!("  {name}: {m}");
            }
            println!("FAIL {name}: {} mismatches", mismatches.len());
            failures.push(name);
        }
    }
    assert!(checked >= 16, "only {checked} usable fixtures found");
    assert!(failures.is_empty(), "fixtures failing: {failures:?}");
}

#[test]
fn json_document_lists_every_cpu() {
    let topo = discover(&fixtures_dir().join("48amd64-4pa2n6c-sparse")).expect("discovers");
    let doc: Value = serde_json::from_str(&topo.to_json()).expect("valid JSON");
    assert_eq!(doc["cpus"].as_array().map(Vec::len), Some(48));
    assert_eq!(doc["cpus"][6]["numa"], 1);
    assert_eq!(
        doc["numa_distances"]["33"].as_array().map(Vec::len),
        Some(8)
    );
}

#[test]
fn discovers_the_running_machine() {
    let topo = match corral_topology::discover_host() {
        Ok(topo) => topo,
        // Not every CI sandbox exposes sysfs; the error must then name what it tried.
        Err(e) => {
            assert!(e.to_string().contains("sys"), "{e}");
            return;
        }
    };
    assert!(topo.num_cpus() >= 1);
    assert_eq!(topo.num_cpus(), topo.all_cpus().len());
    assert!(topo.num_cores() >= 1 && topo.num_cores() <= topo.num_cpus());
    assert!(topo.num_sockets() >= 1 && topo.num_sockets() <= topo.num_cores());
    assert!(topo.num_numa_nodes() >= 1);
    let details = topo.details();
    assert_eq!(details.cpus_in_cores(details.cores()), *topo.all_cpus());
    assert_eq!(
        details.cpus_in_numa_nodes(details.numa_nodes()),
        *topo.all_cpus()
    );
    if let Ok(n) = std::thread::available_parallelism() {
        assert!(topo.num_cpus() >= n.get().min(topo.num_cpus()));
    }
}
