//! The inputs of upstream's hint merge (`Policy.Merge`) as plain data: the `topology_merge`
//! conformance scenarios (`testdata/conformance/topology_merge.json`) and the
//! `PolicyMerge/*` inputs of `testdata/bench/go_bench.json` share one shape —
//! `numa_nodes: [id]`, `distances: {id: [distance]}` and `providers: [null | {resource:
//! null | [{affinity: null | [id], preferred}]}]`. Callers build their own types through the
//! constructors they pass in, so this crate stays free of corral's.
//!
//! Panics name the malformed field: these are test inputs checked into the repository.
//!
//! ```
//! use corral_testkit::merge_inputs::{numa_nodes, providers};
//!
//! let scenario = serde_json::json!({
//!     "numa_nodes": [0, 1],
//!     "distances": {"0": [10, 20], "1": [20, 10]},
//!     "providers": [null, {"cpu": [{"affinity": [1], "preferred": true}], "gpu": null}],
//! });
//! let nodes = numa_nodes(&scenario, |id, distances| (id, distances));
//! assert_eq!(nodes, [(0, Some(vec![10, 20])), (1, Some(vec![20, 10]))]);
//! let providers = providers(&scenario, |affinity, preferred| (affinity, preferred));
//! assert_eq!(providers[0], None);
//! let second = providers[1].as_ref().expect("a map");
//! assert_eq!(second["cpu"], Some(vec![(Some(vec![1]), true)]));
//! assert_eq!(second["gpu"], None);
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

/// One provider's hints: `None` (no hints at all) or resource → `None` (no preference) or
/// its hint list.
pub type Provider<H> = Option<BTreeMap<String, Option<Vec<H>>>>;

/// The NUMA nodes of `scenario["numa_nodes"]`, each built by `node(id, its row of
/// scenario["distances"] when there is one)`.
pub fn numa_nodes<N>(scenario: &Value, node: impl Fn(usize, Option<Vec<u64>>) -> N) -> Vec<N> {
    let distances = &scenario["distances"];
    scenario["numa_nodes"]
        .as_array()
        .expect("numa_nodes")
        .iter()
        .map(|id| {
            let id = usize::try_from(id.as_u64().expect("NUMA node id")).expect("NUMA node id");
            let row = distances[id.to_string()]
                .as_array()
                .map(|r| r.iter().map(|d| d.as_u64().expect("distance")).collect());
            node(id, row)
        })
        .collect()
}

/// One hint, `{affinity: null | [id], preferred}`, built by `hint(affinity, preferred)`.
pub fn hint<H>(value: &Value, hint: impl Fn(Option<Vec<usize>>, bool) -> H) -> H {
    let affinity = value["affinity"].as_array().map(|ids| {
        ids.iter()
            .map(|i| usize::try_from(i.as_u64().expect("NUMA id")).expect("NUMA id"))
            .collect()
    });
    hint(affinity, value["preferred"].as_bool().expect("preferred"))
}

/// Every provider of `scenario["providers"]` (none when the field is absent), each hint
/// built by `hint(affinity, preferred)`.
pub fn providers<H>(
    scenario: &Value,
    hint: impl Fn(Option<Vec<usize>>, bool) -> H,
) -> Vec<Provider<H>> {
    let build = |value: &Value| self::hint(value, &hint);
    scenario["providers"]
        .as_array()
        .map(|providers| {
            providers
                .iter()
                .map(|provider| {
                    provider.as_object().map(|resources| {
                        resources
                            .iter()
                            .map(|(name, list)| {
                                (
                                    name.clone(),
                                    list.as_array().map(|l| l.iter().map(build).collect()),
                                )
                            })
                            .collect()
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}
