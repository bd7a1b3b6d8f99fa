//! `corral topology`: the discovered machine, as a table or as JSON.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use corral_topology::{CpuSet, CpuTopology};

use crate::cli::OutputFormat;
use crate::output::outln;

pub(crate) fn run(host_root: &Path, output: OutputFormat) -> Result<ExitCode> {
    let topology = corral_topology::discover(host_root)
        .with_context(|| format!("discovering the CPU topology under {}", host_root.display()))?;
    match output {
        OutputFormat::Json => outln!("{}", json(&topology)?),
        OutputFormat::Table => outln!("{}", table(&topology).trim_end_matches('\n')),
    }
    Ok(ExitCode::SUCCESS)
}

/// The JSON document: `cpus` and `numa_distances` exactly as corral-topology writes them,
/// plus counts and the NUMA node list.
fn json(topology: &CpuTopology) -> Result<String> {
    let mut doc: serde_json::Value =
        serde_json::from_str(&topology.to_json()).context("corral-topology wrote invalid JSON")?;
    let object = doc
        .as_object_mut()
        .context("the topology document is not an object")?;
    object.insert(
        "numa_nodes".into(),
        serde_json::json!(topology.numa_ids().os_ids()),
    );
    object.insert(
        "counts".into(),
        serde_json::json!({
            "cpus": topology.num_cpus(),
            "cores": topology.num_cores(),
            "sockets": topology.num_sockets(),
            "numa_nodes": topology.num_numa_nodes(),
            "uncore_caches": topology.num_uncore_caches(),
        }),
    );
    Ok(serde_json::to_string_pretty(&doc)?)
}

/// A table for people: a summary, then one line per NUMA node, then the distance matrix.
fn table(topology: &CpuTopology) -> String {
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
        "\n{:<6} {:<8} {:<8} {:<10} CPUS",
        "NUMA", "SOCKETS", "CORES", "UNCORE"
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
        let _ = writeln!(
            out,
            "{:<6} {:<8} {:<8} {:<10} {}",
            os_id(node),
            sockets.to_string(),
            cores.len(),
            uncores.to_string(),
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
