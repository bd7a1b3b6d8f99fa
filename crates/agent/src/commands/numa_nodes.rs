//! NUMA nodes and a refusal's explanation as `status` and `admit` print them: a table for
//! people, a camelCase document for `-o json|yaml`.

use std::collections::{BTreeMap, BTreeSet};

use corral_proto::corral::v1 as api;
use serde_json::{Value, json};

/// `1Gi`, `512Mi`: bytes in the largest binary unit that divides them.
pub(super) fn bytes(size: u64) -> String {
    corral_topology::QuantitySum::of(
        i64::try_from(size).unwrap_or(i64::MAX),
        corral_topology::QuantityFormat::BinarySi,
    )
    .to_string()
}

fn counts_json(counts: &[api::ResourceCounts]) -> Value {
    let by_name: BTreeMap<&str, Value> = counts
        .iter()
        .map(|c| {
            let value = json!({
                "capacity": c.capacity,
                "allocatable": c.allocatable,
                "free": c.free,
            });
            (c.resource.as_str(), value)
        })
        .collect();
    json!(by_name)
}

fn numa_node_json(node: &api::NumaNode) -> Value {
    let mut doc = json!({
        "id": node.id,
        "memory": counts_json(&node.memory),
        "devices": counts_json(&node.devices),
    });
    if let Some(cpus) = &node.cpus {
        doc["cpus"] = json!({
            "total": cpus.total,
            "reserved": cpus.reserved,
            "exclusive": cpus.exclusive,
            "free": cpus.free,
            "freeCpus": cpus.free_cpus,
        });
    }
    doc
}

/// The NUMA nodes as a document: `[{id, cpus: {total, reserved, exclusive, free,
/// freeCpus}, memory: {RESOURCE: {capacity, allocatable, free}}, devices: {…}}]`.
pub(super) fn numa_nodes_json(nodes: &[api::NumaNode]) -> Value {
    Value::from(nodes.iter().map(numa_node_json).collect::<Vec<_>>())
}

fn hint_json(hint: &api::Hint) -> Value {
    json!({
        // Empty: any NUMA node, `null` as the kubelet logs a nil mask.
        "numaAffinity": (!hint.numa_affinity.is_empty()).then_some(&hint.numa_affinity),
        "preferred": hint.preferred,
    })
}

/// A refusal's explanation as a document: `container` (`null` at pod scope), `numaNodes`
/// (as [`numa_nodes_json`], the resources asked for), `hints` (per provider, per resource:
/// the hints, `null` for no preference, `[]` for none possible), `bestHint`,
/// `policyAdmitted`.
pub(super) fn explanation_json(explanation: &api::Explanation) -> Value {
    let hints: Vec<Value> = explanation
        .providers
        .iter()
        .map(|provider| {
            let resources: BTreeMap<&str, Value> = provider
                .resources
                .iter()
                .map(|r| {
                    let hints = if r.no_preference {
                        Value::Null
                    } else {
                        Value::from(r.hints.iter().map(hint_json).collect::<Vec<_>>())
                    };
                    (r.resource.as_str(), hints)
                })
                .collect();
            let mut doc = json!({ "provider": provider.provider, "resources": resources });
            let not_listed: Vec<&str> = provider
                .resources
                .iter()
                .filter(|r| r.not_listed)
                .map(|r| r.resource.as_str())
                .collect();
            if !not_listed.is_empty() {
                doc["notListed"] = json!(not_listed);
            }
            doc
        })
        .collect();
    json!({
        "container": (!explanation.container.is_empty()).then_some(&explanation.container),
        "numaNodes": numa_nodes_json(&explanation.numa_nodes),
        "hints": hints,
        "bestHint": explanation.best_hint.as_ref().map(hint_json),
        "policyAdmitted": explanation.policy_admitted,
    })
}

/// One table line per NUMA node: its CPUs (total, reserved, held exclusively, free, which),
/// then the free amount of each memory and device resource (`-` where it has none).
pub(super) fn numa_table(nodes: &[api::NumaNode]) -> Vec<String> {
    let memory: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| n.memory.iter().map(|m| m.resource.as_str()))
        .collect();
    let devices: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| n.devices.iter().map(|d| d.resource.as_str()))
        .collect();
    let with_cpus = nodes.iter().any(|n| n.cpus.is_some());
    let mut header = format!("{:<4}", "NUMA");
    if with_cpus {
        header.push_str(&format!(
            "  {:<4}  {:<8}  {:<9}  {:<4}  {:<16}",
            "CPUS", "RESERVED", "EXCLUSIVE", "FREE", "FREE CPUS"
        ));
    }
    for name in memory.iter().chain(&devices) {
        header.push_str(&format!("  {:<16}", format!("{name} FREE")));
    }
    let mut lines = vec![header.trim_end().to_owned()];
    for node in nodes {
        let mut line = format!("{:<4}", node.id);
        if with_cpus {
            match &node.cpus {
                Some(c) => line.push_str(&format!(
                    "  {:<4}  {:<8}  {:<9}  {:<4}  {:<16}",
                    c.total,
                    c.reserved,
                    c.exclusive,
                    c.free,
                    if c.free_cpus.is_empty() {
                        "-"
                    } else {
                        &c.free_cpus
                    }
                )),
                None => line.push_str(&format!(
                    "  {:<4}  {:<8}  {:<9}  {:<4}  {:<16}",
                    "-", "-", "-", "-", "-"
                )),
            }
        }
        for name in &memory {
            let free = node.memory.iter().find(|m| m.resource == *name);
            let cell = free.map_or_else(|| "-".to_owned(), |m| bytes(m.free));
            line.push_str(&format!("  {cell:<16}"));
        }
        for name in &devices {
            let free = node.devices.iter().find(|d| d.resource == *name);
            let cell = free.map_or_else(|| "-".to_owned(), |d| d.free.to_string());
            line.push_str(&format!("  {cell:<16}"));
        }
        lines.push(line.trim_end().to_owned());
    }
    lines
}

fn hint_text(hint: &api::Hint) -> String {
    let nodes = if hint.numa_affinity.is_empty() {
        "any".to_owned()
    } else {
        let ids: Vec<String> = hint.numa_affinity.iter().map(i64::to_string).collect();
        ids.join(",")
    };
    format!("{{{nodes}}}{}", if hint.preferred { "*" } else { "" })
}

/// The explanation as indented lines under a rejection: what each NUMA node had free, each
/// provider's hints (`*`: preferred), the best hint.
pub(super) fn explanation_lines(explanation: &api::Explanation) -> Vec<String> {
    let whom = if explanation.container.is_empty() {
        "the pod".to_owned()
    } else {
        format!("container {}", explanation.container)
    };
    let mut lines = vec![format!(
        "{whom}: what each NUMA node had when it was decided"
    )];
    lines.extend(numa_table(&explanation.numa_nodes));
    lines.push(format!(
        "{:<16}  {:<24}  HINTS (* preferred)",
        "HINT PROVIDER", "RESOURCE"
    ));
    for provider in &explanation.providers {
        for r in &provider.resources {
            let hints = if r.no_preference {
                "no preference".to_owned()
            } else if r.not_listed {
                "too many to list".to_owned()
            } else if r.hints.is_empty() {
                "none: cannot be satisfied".to_owned()
            } else {
                r.hints.iter().map(hint_text).collect::<Vec<_>>().join(" ")
            };
            lines.push(format!(
                "{:<16}  {:<24}  {hints}",
                provider.provider, r.resource
            ));
        }
    }
    if let Some(best) = &explanation.best_hint {
        let verdict = if explanation.policy_admitted {
            "admitted by the policy; a provider's allocation refused it"
        } else {
            "refused by the policy"
        };
        lines.push(format!("best hint: {} ({verdict})", hint_text(best)));
    }
    lines.iter().map(|line| format!("  {line}")).collect()
}
