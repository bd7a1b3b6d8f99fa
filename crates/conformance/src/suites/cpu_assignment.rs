//! Suite `cpu_assignment`: upstream `takeByTopologyNUMAPacked` / `takeByTopologyNUMADistributed`
//! against `corral_cpumgr`. `TIMEOUT` cases (upstream never returns) pass when corral returns
//! within a second with an error or `num_cpus` CPUs drawn from `available`. `spread` means the
//! order of the release the file was recorded from (by CPU id before v1.38).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use corral_cpumgr::{
    CpuSortingStrategy, TopologyIndex, UncoreCacheAlignment, take_by_topology_numa_distributed,
    take_by_topology_numa_packed,
};
use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology, TopologyCounts};
use serde_json::Value;

use super::array;
use crate::mismatch::{Mismatch, bad_case, differs};
use crate::report::SuiteOutcome;

fn num(v: &Value, key: &str) -> Result<usize, Mismatch> {
    v[key]
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| bad_case!("`{key}` is not a non-negative integer: {}", v[key]))
}

fn topology(t: &Value) -> Result<TopologyIndex, Mismatch> {
    let records = t["cpus"]
        .as_array()
        .ok_or("topology without `cpus`")?
        .iter()
        .map(|c| {
            Ok(CpuRecord {
                cpu: num(c, "cpu")?,
                info: CpuInfo {
                    core: num(c, "core")?,
                    socket: num(c, "socket")?,
                    numa: num(c, "numa")?,
                    uncore: num(c, "uncore")?,
                },
            })
        })
        .collect::<Result<Vec<_>, Mismatch>>()?;
    let counts = TopologyCounts {
        num_cpus: num(t, "num_cpus")?,
        num_cores: num(t, "num_cores")?,
        num_sockets: num(t, "num_sockets")?,
        num_numa_nodes: num(t, "num_numa_nodes")?,
        num_uncore_caches: num(t, "num_uncore_cache")?,
    };
    let topo = CpuTopology::new(&records)
        .map_err(|e| bad_case!("{e}"))?
        .with_counts(counts);
    Ok(TopologyIndex::new(&topo))
}

/// The file's `topologies`, by name (a topology that does not parse maps to its error).
pub(super) fn topologies(doc: &Value) -> BTreeMap<String, Result<TopologyIndex, Mismatch>> {
    doc["topologies"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|t| {
            let name = t["name"].as_str().unwrap_or("?").to_owned();
            (name, topology(t))
        })
        .collect()
}

/// The topology a case names.
pub(super) fn topology_of<'a>(
    topos: &'a BTreeMap<String, Result<TopologyIndex, Mismatch>>,
    case: &Value,
) -> Result<&'a TopologyIndex, Mismatch> {
    let name = case["topology"].as_str().ok_or("case without `topology`")?;
    topos
        .get(name)
        .ok_or_else(|| bad_case!("unknown topology {name:?}"))?
        .as_ref()
        .map_err(|e| bad_case!("topology {name:?}: {e}"))
}

/// A cpuset in list form.
pub(super) fn cpuset(v: &Value, key: &str) -> Result<CpuSet, Mismatch> {
    let text = v[key]
        .as_str()
        .ok_or_else(|| bad_case!("`{key}` is not a string"))?;
    text.parse()
        .map_err(|e| bad_case!("`{key}` {text:?} does not parse: {e}"))
}

/// The Kubernetes minor release a vector file was recorded from (`about.upstream_kubernetes`,
/// "k8s.io/kubernetes v1.32.10 …"); `None` when the file does not say.
fn recorded_minor(doc: &Value) -> Option<u32> {
    doc["about"]["upstream_kubernetes"]
        .as_str()?
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v1."))?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// Check every case of one `cpu_assignment` vector file.
pub(crate) fn run(doc: &Value, out: &mut SuiteOutcome) {
    let topos = topologies(doc);
    let minor = recorded_minor(doc);
    for (i, case) in array(doc, "cases").iter().enumerate() {
        let label = format!(
            "cases[{i}] {} {} n={}",
            case["topology"].as_str().unwrap_or("?"),
            case["algorithm"].as_str().unwrap_or("?"),
            case["num_cpus"]
        );
        out.check(label, check(&topos, case, minor));
    }
}

fn check(
    topos: &BTreeMap<String, Result<TopologyIndex, Mismatch>>,
    case: &Value,
    minor: Option<u32>,
) -> Result<(), Mismatch> {
    let index = topology_of(topos, case)?;
    let available = cpuset(case, "available")?;
    let n = num(case, "num_cpus")?;
    let strategy: CpuSortingStrategy = case["cpu_sorting_strategy"]
        .as_str()
        .ok_or("no `cpu_sorting_strategy`")?
        .parse()
        .map_err(|e| bad_case!("{e}"))?;
    // `spread` listed a socket's CPUs by id before v1.38 (upstream #140766): a file recorded
    // from an older release is checked against that order.
    let strategy = match strategy {
        CpuSortingStrategy::Spread if minor.is_some_and(|m| m < 38) => {
            CpuSortingStrategy::SpreadByCpuId
        }
        strategy => strategy,
    };
    let started = Instant::now();
    let got = match case["algorithm"].as_str() {
        Some("takeByTopologyNUMAPacked") => take_by_topology_numa_packed(
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
        Some("takeByTopologyNUMADistributed") => take_by_topology_numa_distributed(
            index,
            &available,
            n,
            num(case, "cpu_group_size")?,
            strategy,
        ),
        other => return Err(bad_case!("unknown algorithm {other:?}")),
    };
    let took = started.elapsed();
    match (case["error"].as_str(), got) {
        (Some(e), got) if e.starts_with("TIMEOUT") => {
            if took >= Duration::from_secs(1) {
                return Err(differs!("took {took:?} (must return well under a second)"));
            }
            match got {
                Ok(set) if set.len() != n || !set.is_subset_of(&available) => Err(differs!(
                    "expected an error or {n} CPUs from {available}, got {set}"
                )),
                _ => Ok(()),
            }
        }
        (Some(_), Err(_)) => Ok(()),
        (Some(e), Ok(set)) => Err(differs!("expected error {e:?}, got {set:?}")),
        (None, Err(e)) => Err(differs!(
            "expected {:?}, got error {e}",
            case["result"].as_str().unwrap_or_default()
        )),
        (None, Ok(set)) => {
            let want = case["result"].as_str().unwrap_or_default();
            if set.to_string() == want {
                Ok(())
            } else {
                Err(differs!("expected {want:?}, got {:?}", set.to_string()))
            }
        }
    }
}
