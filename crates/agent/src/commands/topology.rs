//! `corral topology`: the discovered machine, as a table or as JSON.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use std::collections::BTreeMap;

use corral_topology::memory::NumaMemory;
use corral_topology::sysfs::discover_memory;
use corral_topology::{CpuSet, CpuTopology};

use crate::cli::OutputFormat;
use crate::commands::print_document;
use crate::output::outln;

pub(crate) fn run(host_root: &Path, output: OutputFormat) -> Result<ExitCode> {
    let topology = corral_topology::discover(host_root)
        .with_context(|| format!("discovering the CPU topology under {}", host_root.display()))?;
    let memory = discover_memory(host_root)
        .with_context(|| format!("discovering NUMA memory under {}", host_root.display()))?;
    match output {
        OutputFormat::Json => print_document(&document(&topology, &memory)?, false)?,
        OutputFormat::Yaml => print_document(&document(&topology, &memory)?, true)?,
        OutputFormat::Table => outln!("{}", table(&topology, &memory).trim_end_matches('\n')),
        OutputFormat::Wide => {
            outln!("{}", table(&topology, &memory));
            outln!("{}", cpu_table(&topology).trim_end_matches('\n'));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The document of `-o json|yaml`, camelCase as every corral document: what
/// corral-topology writes (`cpus`, each with `cpu`, `core`, `socket`, `numa`, `uncore`;
/// `numa_distances`, rows by NUMA node id; `numa_nodes`) with its keys in camelCase
/// (`numaDistances`, `numaNodes`), plus `counts` and `memory` (per NUMA node: `numaNode`,
/// `memoryBytes`, `hugePages` with `resource`, `pageSizeKiB`, `count`). NUMA nodes are OS
/// ids.
fn document(
    topology: &CpuTopology,
    memory: &BTreeMap<usize, NumaMemory>,
) -> Result<serde_json::Value> {
    let doc: serde_json::Value =
        serde_json::from_str(&topology.to_json()).context("corral-topology wrote invalid JSON")?;
    let serde_json::Value::Object(written) = doc else {
        anyhow::bail!("the topology document is not an object");
    };
    let mut object: serde_json::Map<String, serde_json::Value> = written
        .into_iter()
        .map(|(key, value)| (camel_case(&key), value))
        .collect();
    object.insert(
        "numaNodes".into(),
        serde_json::json!(topology.numa_ids().os_ids()),
    );
    object.insert(
        "counts".into(),
        serde_json::json!({
            "cpus": topology.num_cpus(),
            "cores": topology.num_cores(),
            "sockets": topology.num_sockets(),
            "numaNodes": topology.num_numa_nodes(),
            "uncoreCaches": topology.num_uncore_caches(),
        }),
    );
    let memory: Vec<serde_json::Value> = memory
        .values()
        .map(|node| {
            let pages: Vec<serde_json::Value> = node
                .huge_pages
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "resource": p.resource_name(),
                        "pageSizeKiB": p.page_size_kib,
                        "count": p.count,
                    })
                })
                .collect();
            serde_json::json!({
                "numaNode": node.node,
                "memoryBytes": node.memory_bytes,
                "hugePages": pages,
            })
        })
        .collect();
    object.insert("memory".into(), memory.into());
    Ok(object.into())
}

/// Bytes for people: GiB with one decimal, or MiB below 1 GiB; `-` for none.
fn human_bytes(bytes: u64) -> String {
    const GIB: u64 = 1 << 30;
    match bytes {
        0 => "-".into(),
        b if b >= GIB => format!("{:.1}Gi", b as f64 / GIB as f64),
        b => format!("{}Mi", b >> 20),
    }
}

/// A node's huge pages: `2Mi×512,1Gi×4`, or `-`.
fn huge_pages_text(node: Option<&NumaMemory>) -> String {
    let pages: Vec<String> = node
        .map(|n| {
            n.huge_pages
                .iter()
                .filter(|p| p.count > 0)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            format!(
                "{}×{}",
                p.resource_name().trim_start_matches("hugepages-"),
                p.count
            )
        })
        .collect();
    if pages.is_empty() {
        "-".into()
    } else {
        pages.join(",")
    }
}

/// `numa_distances` → `numaDistances`.
fn camel_case(key: &str) -> String {
    let mut parts = key.split('_');
    let mut out = parts.next().unwrap_or_default().to_owned();
    for part in parts {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

/// `-o wide`'s addition: one line per CPU (its core, socket, NUMA node and uncore cache).
fn cpu_table(topology: &CpuTopology) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<6} {:<6} {:<8} {:<6} UNCORE",
        "CPU", "CORE", "SOCKET", "NUMA"
    );
    for cpu in topology.all_cpus().iter() {
        let Some(info) = topology.cpu(cpu) else {
            continue;
        };
        let numa = topology.numa_ids().os_id(info.numa).unwrap_or(info.numa);
        let _ = writeln!(
            out,
            "{:<6} {:<6} {:<8} {:<6} {}",
            cpu, info.core, info.socket, numa, info.uncore
        );
    }
    out
}

/// A table for people: a summary, then one line per NUMA node (with its memory and huge
/// pages), then the distance matrix.
fn table(topology: &CpuTopology, memory: &BTreeMap<usize, NumaMemory>) -> String {
    let details = topology.details();
    let os_id = |bit: usize| topology.numa_ids().os_id(bit).unwrap_or(bit);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} CPUs, {} cores, {} sockets, {} NUMA nodes, {} uncore caches",
        topology.num_cpus(),
        topology.num_cores(),
        topology.num_sockets(),
        topology.num_numa_nodes(),
        topology.num_uncore_caches()
    );
    let _ = writeln!(
        out,
        "\n{:<6} {:<8} {:<8} {:<10} {:<9} {:<16} CPUS",
        "NUMA", "SOCKETS", "CORES", "UNCORE", "MEMORY", "HUGEPAGES"
    );
    for &node in topology.numa_nodes() {
        let cpus = details.cpus_in_numa_nodes([node]);
        let sockets: CpuSet = cpus
            .iter()
            .filter_map(|cpu| topology.cpu(cpu).map(|i| i.socket))
            .collect();
        let cores: CpuSet = cpus
            .iter()
            .filter_map(|cpu| topology.cpu(cpu).map(|i| i.core))
            .collect();
        let uncores: CpuSet = cpus
            .iter()
            .filter_map(|cpu| topology.cpu(cpu).map(|i| i.uncore))
            .collect();
        let node_memory = memory.get(&os_id(node));
        let _ = writeln!(
            out,
            "{:<6} {:<8} {:<8} {:<10} {:<9} {:<16} {}",
            os_id(node),
            sockets.to_string(),
            cores.len(),
            uncores.to_string(),
            human_bytes(node_memory.map_or(0, |n| n.memory_bytes)),
            huge_pages_text(node_memory),
            if cpus.is_empty() {
                "-".to_string()
            } else {
                cpus.to_string()
            }
        );
    }
    if topology.has_numa_distances() {
        let nodes = topology.numa_nodes();
        let _ = write!(out, "\nDISTANCES");
        for &to in nodes {
            let _ = write!(out, " {:>4}", os_id(to));
        }
        out.push('\n');
        for &from in nodes {
            let _ = write!(out, "{:<9}", os_id(from));
            for &to in nodes {
                match topology.numa_distance(from, to) {
                    Some(d) => {
                        let _ = write!(out, " {d:>4}");
                    }
                    None => out.push_str("    -"),
                }
            }
            out.push('\n');
        }
    }
    out
}
