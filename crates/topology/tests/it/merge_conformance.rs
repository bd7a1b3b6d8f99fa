//! The topology_merge conformance vectors, checked here too with both the fast merge and
//! the exhaustive reference (so the reference is itself proven against upstream).

use corral_testkit::conformance_topology::load_testdata;
use corral_testkit::merge_inputs;
use corral_topology::topologymanager::reference_merge;
use corral_topology::{
    NumaInfo, NumaMask, NumaNode, Policy, PolicyName, PolicyOptions, ProviderHints, TopologyHint,
};

fn to_hint(affinity: Option<Vec<usize>>, preferred: bool) -> TopologyHint {
    let mask = affinity.map(|ids| NumaMask::new(ids).expect("mask"));
    TopologyHint::new(mask, preferred)
}

#[test]
fn fast_and_reference_match_every_vector() {
    let doc = load_testdata("testdata/conformance/topology_merge.json");
    let mut failures = Vec::new();
    let mut checked = 0;
    for scenario in doc["scenarios"].as_array().expect("scenarios") {
        let nodes = merge_inputs::numa_nodes(scenario, |id, distances| NumaNode { id, distances });
        let providers: Vec<ProviderHints> = merge_inputs::providers(scenario, to_hint);
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
            let want_hint = merge_inputs::hint(&want["best_hint"], to_hint);
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
