//! The workspace's dependency rules, checked on `cargo metadata`'s resolved graph:
//! the foundation crates (`corral-topology`, `corral-checkpoint`, `corral-nrt`, and
//! `corral-memmgr`, whose core must be usable without tokio) pull in no async runtime
//! and no gRPC/protobuf stack through their normal (non-dev) dependencies, with default
//! features; no crate of ours depends on one above it in the layering; every crate of ours
//! has its row in the layering; and the test-support crates (`corral-testkit`, a leaf, and
//! `corral-conformance`) are normal dependencies of `xtask` only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Crates that must stay free of the heavy stack.
const FOUNDATION: &[&str] = &[
    "corral-topology",
    "corral-checkpoint",
    "corral-memmgr",
    "corral-nrt",
];
/// Packages the foundation crates must not reach.
const FORBIDDEN_IN_FOUNDATION: &[&str] = &["tokio", "tonic", "prost", "hyper", "h2"];
/// Allowed internal edges: crate → crates of ours it may depend on (normal deps).
const LAYERS: &[(&str, &[&str])] = &[
    ("corral-topology", &[]),
    ("corral-checkpoint", &[]),
    ("corral-proto", &[]),
    ("corral-nrt", &[]),
    ("corral-cpumgr", &["corral-topology", "corral-checkpoint"]),
    ("corral-memmgr", &["corral-topology", "corral-checkpoint"]),
    (
        "corral-devicemgr",
        &["corral-topology", "corral-checkpoint", "corral-proto"],
    ),
    (
        "corral-dra",
        &["corral-checkpoint", "corral-proto", "corral-topology"],
    ),
    (
        "corral-agent",
        &[
            "corral-topology",
            "corral-checkpoint",
            "corral-proto",
            "corral-cpumgr",
            "corral-memmgr",
            "corral-devicemgr",
            "corral-dra",
            "corral-nrt",
        ],
    ),
    // Test support: the testkit is a leaf (plain data, no corral type); the conformance
    // runner checks the managers through their public APIs.
    ("corral-testkit", &[]),
    (
        "corral-conformance",
        &[
            "corral-topology",
            "corral-checkpoint",
            "corral-cpumgr",
            "corral-devicemgr",
        ],
    ),
];
/// Crates only `xtask` may have as a normal dependency (others: dev-dependencies only).
const TEST_SUPPORT: &[&str] = &["corral-testkit", "corral-conformance"];
/// The workspace's automation crate, outside the layering.
const XTASK: &str = "xtask";

/// Every broken rule, one line each (empty when all hold).
pub(crate) fn check(root: &Path) -> Result<Vec<String>> {
    let metadata: Value = serde_json::from_slice(&host_metadata(root)?)?;
    Ok(violations(&metadata))
}

/// `cargo metadata` (JSON bytes) of the workspace for this platform only, offline: cargo has
/// the sources of what builds here, not of other platforms' dependencies (e.g. Windows
/// console crates). Read by the dependency rules and by CI's cargo-deny step.
pub(crate) fn host_metadata(root: &Path) -> Result<Vec<u8>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let host = host_triple()?;
    let output = Command::new(&cargo)
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host])
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(output.stdout)
}

/// The host's target triple, from `rustc -vV`.
pub(crate) fn host_triple() -> Result<String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let output = Command::new(rustc)
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .context("rustc -vV names no host")
}

fn violations(metadata: &Value) -> Vec<String> {
    // package id → (name, normal dependency ids)
    let mut names = BTreeMap::new();
    let mut normal_deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        if let (Some(id), Some(name)) = (package["id"].as_str(), package["name"].as_str()) {
            names.insert(id.to_owned(), name.to_owned());
        }
    }
    for node in metadata["resolve"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(id) = node["id"].as_str() else {
            continue;
        };
        let deps = node["deps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|dep| {
                dep["dep_kinds"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|kind| kind["kind"].is_null())
            })
            .filter_map(|dep| dep["pkg"].as_str().map(str::to_owned))
            .collect();
        normal_deps.insert(id.to_owned(), deps);
    }
    let id_of = |name: &str| {
        names
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(id, _)| id.clone())
    };
    let mut problems = Vec::new();
    for crate_name in FOUNDATION {
        let Some(start) = id_of(crate_name) else {
            problems.push(format!("{crate_name} is missing from the workspace"));
            continue;
        };
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(id) = stack.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            let name = names.get(&id).map(String::as_str).unwrap_or("?");
            if FORBIDDEN_IN_FOUNDATION.contains(&name) {
                problems.push(format!("{crate_name} depends on {name}"));
            }
            stack.extend(normal_deps.get(&id).cloned().unwrap_or_default());
        }
    }
    for (crate_name, allowed) in LAYERS {
        let Some(id) = id_of(crate_name) else {
            continue;
        };
        for dep in normal_deps.get(&id).into_iter().flatten() {
            let dep_name = names.get(dep).map(String::as_str).unwrap_or("?");
            if dep_name.starts_with("corral-") && !allowed.contains(&dep_name) {
                problems.push(format!("{crate_name} must not depend on {dep_name}"));
            }
        }
    }
    for id in metadata["workspace_members"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = id.as_str().and_then(|id| names.get(id)).map(String::as_str);
        if let Some(name) = name.filter(|n| n.starts_with("corral-"))
            && !LAYERS.iter().any(|(layer, _)| *layer == name)
        {
            problems.push(format!(
                "{name} has no row in the dependency rules (LAYERS)"
            ));
        }
    }
    for (id, deps) in &normal_deps {
        let name = names.get(id).map(String::as_str).unwrap_or("?");
        if name == XTASK {
            continue;
        }
        for dep in deps {
            let dep_name = names.get(dep).map(String::as_str).unwrap_or("?");
            if TEST_SUPPORT.contains(&dep_name) {
                problems.push(format!(
                    "{name} must not depend on {dep_name} (test support: dev-dependencies only)"
                ));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_keeps_its_dependency_rules() {
        let problems = check(&crate::workspace_root()).unwrap();
        assert_eq!(problems, Vec::<String>::new());
    }

    #[test]
    fn a_forbidden_edge_is_reported() {
        let metadata = serde_json::json!({
            "packages": [
                {"id": "t", "name": "corral-topology"},
                {"id": "c", "name": "corral-checkpoint"},
                {"id": "mm", "name": "corral-memmgr"},
                {"id": "nrt", "name": "corral-nrt"},
                {"id": "m", "name": "mid"},
                {"id": "k", "name": "tokio"},
            ],
            "resolve": {"nodes": [
                {"id": "t", "deps": [{"pkg": "m", "dep_kinds": [{"kind": null}]}]},
                {"id": "m", "deps": [{"pkg": "k", "dep_kinds": [{"kind": null}]}]},
                {"id": "c", "deps": [{"pkg": "k", "dep_kinds": [{"kind": "dev"}]}]},
                {"id": "mm", "deps": []},
                {"id": "nrt", "deps": []},
                {"id": "k", "deps": []},
            ]},
        });
        assert_eq!(
            violations(&metadata),
            vec!["corral-topology depends on tokio".to_string()]
        );
    }

    #[test]
    fn test_support_and_unlisted_crates_are_reported() {
        let normal = serde_json::json!([{"kind": null}]);
        let dev = serde_json::json!([{"kind": "dev"}]);
        let metadata = serde_json::json!({
            "packages": [
                {"id": "t", "name": "corral-topology"},
                {"id": "c", "name": "corral-checkpoint"},
                {"id": "k", "name": "corral-testkit"},
                {"id": "f", "name": "corral-conformance"},
                {"id": "n", "name": "corral-nri"},
                {"id": "mm", "name": "corral-memmgr"},
                {"id": "nrt", "name": "corral-nrt"},
                {"id": "x", "name": "xtask"},
            ],
            "workspace_members": ["t", "c", "k", "f", "n", "mm", "nrt", "x"],
            "resolve": {"nodes": [
                {"id": "t", "deps": [{"pkg": "k", "dep_kinds": dev}]},
                {"id": "c", "deps": [{"pkg": "f", "dep_kinds": normal}]},
                {"id": "k", "deps": [{"pkg": "t", "dep_kinds": normal}]},
                {"id": "f", "deps": [{"pkg": "t", "dep_kinds": normal}]},
                {"id": "n", "deps": []},
                {"id": "mm", "deps": []},
                {"id": "nrt", "deps": []},
                {"id": "x", "deps": [
                    {"pkg": "f", "dep_kinds": normal},
                    {"pkg": "k", "dep_kinds": normal},
                ]},
            ]},
        });
        assert_eq!(
            violations(&metadata),
            vec![
                "corral-checkpoint must not depend on corral-conformance".to_string(),
                "corral-testkit must not depend on corral-topology".to_string(),
                "corral-nri has no row in the dependency rules (LAYERS)".to_string(),
                "corral-checkpoint must not depend on corral-conformance (test support: \
                 dev-dependencies only)"
                    .to_string(),
            ]
        );
    }
}
