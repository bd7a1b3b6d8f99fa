//! The topology_merge conformance vectors, checked here too with both the fast merge and
//! the exhaustive reference (so the reference is itself proven against upstream).

use std::collections::BTreeMap;
use std::path::Path;

use corral_topology::topologymanager::reference_merge;
use corral_topology::{
    NumaInfo, NumaMask, NumaNode, Policy, PolicyName, PolicyOptions, ProviderHints, TopologyHint,
};
use serde_json::Value;

fn hint(v: &Value) -> TopologyHint {
    let affinity = v["affinity"].as_array().map(|ids| {
        NumaMask::new(ids.iter().map(|i| i.as_u64().expect("id") as usize)).expect("mask")
    });
    TopologyHint::new(affinity, v["preferred"].as_bool().expect("preferred"))
}

fn provider(v: &Value) -> ProviderHints {
    v.as_object().map(|map| {
        map.iter()
            .map(|(k, list)| {
                (
                    k.clone(),
                    list.as_array().map(|l| l.iter().map(hint).collect()),
                )
            })
            .collect::<BTreeMap<_, _>>()
    })
}

#[test]
fn fast_and_reference_match_every_vector() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/conformance/topology_merge.json");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("vectors")).expect("json");
    let mut failures = Vec::new();
    let mut checked = 0;
    for scenario in doc["scenarios"].as_array().expect("scenarios") {
        let distances = &scenario["distances"];
        let nodes: Vec<NumaNode> = scenario["numa_nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|id| {
                let id = id.as_u64().expect("id") as usize;
                let row = distances[id.to_string()]
                    .as_array()
                    .map(|r| r.iter().map(|d| d.as_u64().expect("distance")).collect());
                NumaNode { id, distances: row }
            })
            .collect();
        let providers: Vec<ProviderHints> = scenario["providers"]
            .as_array()
            .map(|p| p.iter().map(provider).collect())
            .unwrap_or_default();
        for (variant, want) in scenario["results"].as_object().expect("results") {
            let (name, closest) = match variant.split_once('+') {
                Some((name, _)) => (name, true),
                None => (variant.as_str(), false),
            };
            let name: PolicyName = name.parse().expect("policy");
            let options = PolicyOptions {
                prefer_closest_numa: closest,
                ..PolicyOptions::default()
            };
            let policy = Policy::new(
                name,
                NumaInfo::new(&nodes, options.numa_distances()).expect("numa"),
                options,
            );
            let want_hint = hint(&want["best_hint"]);
            let want_admit = want["admit"].as_bool().expect("admit");
            for (which, got) in [
                ("fast", policy.merge(&providers)),
                ("reference", reference_merge(&policy, &providers)),
            ] {
                checked += 1;
                if got.best_hint != want_hint || got.admit != want_admit {
                    failures.push(format!(
                        "{} [{variant}] {which}: expected {want_hint:?}/{want_admit}, got {:?}/{}",
                        scenario["name"], got.best_hint, got.admit
                    ));
                }
            }
        }
    }
    assert!(checked > 1000, "only {checked} checks");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
