//! Suite `topology_merge`: upstream topology manager `Policy.Merge` against
//! `corral_topology::Policy::merge`, for every policy with and without
//! `prefer-closest-numa-nodes`.

use std::collections::BTreeMap;

use corral_topology::{
    NumaInfo, NumaMask, NumaNode, Policy, PolicyName, PolicyOptions, ProviderHints, TopologyHint,
};
use serde_json::Value;

use crate::mismatch::{Mismatch, bad_case, differs};
use crate::report::SuiteOutcome;

/// Check every scenario and policy variant of one `topology_merge` vector file.
pub(crate) fn run(doc: &Value, out: &mut SuiteOutcome) {
    let scenarios = doc["scenarios"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, scenario) in scenarios.iter().enumerate() {
        let name = scenario["name"].as_str().unwrap_or("?");
        let label = format!("scenarios[{i}] {name}");
        let parsed = parse_scenario(scenario);
        let Some(results) = scenario["results"].as_object() else {
            out.check(&label, Err(bad_case!("no results object")));
            continue;
        };
        for (variant, want) in results {
            let case = format!("{label} [{variant}]");
            let result = parsed
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|(nodes, providers)| check_variant(nodes, providers, variant, want));
            out.check(case, result);
        }
    }
}

fn parse_scenario(scenario: &Value) -> Result<(Vec<NumaNode>, Vec<ProviderHints>), Mismatch> {
    let distances = scenario["distances"].as_object();
    let nodes = scenario["numa_nodes"]
        .as_array()
        .ok_or("numa_nodes is not a list")?
        .iter()
        .map(|id| {
            let id = id.as_u64().ok_or_else(|| bad_case!("bad NUMA id {id}"))? as usize;
            let row = distances
                .and_then(|d| d.get(&id.to_string()))
                .and_then(Value::as_array)
                .map(|row| row.iter().map(|d| d.as_u64().unwrap_or(0)).collect());
            Ok(NumaNode { id, distances: row })
        })
        .collect::<Result<Vec<_>, Mismatch>>()?;
    // `null` is a nil provider list: no providers at all.
    let providers = match &scenario["providers"] {
        Value::Null => &[][..],
        other => other
            .as_array()
            .ok_or("providers is not a list")?
            .as_slice(),
    };
    let providers = providers
        .iter()
        .map(parse_provider)
        .collect::<Result<Vec<_>, Mismatch>>()?;
    Ok((nodes, providers))
}

fn parse_provider(provider: &Value) -> Result<ProviderHints, Mismatch> {
    let Some(map) = provider.as_object() else {
        return Ok(None);
    };
    let mut resources = BTreeMap::new();
    for (resource, hints) in map {
        let list = match hints.as_array() {
            None => None,
            Some(hints) => Some(
                hints
                    .iter()
                    .map(parse_hint)
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        resources.insert(resource.clone(), list);
    }
    Ok(Some(resources))
}

fn parse_affinity(value: &Value) -> Result<Option<NumaMask>, Mismatch> {
    match value.as_array() {
        None => Ok(None),
        Some(ids) => {
            let ids: Vec<i64> = ids
                .iter()
                .map(|v| v.as_i64().ok_or_else(|| bad_case!("bad NUMA id {v}")))
                .collect::<Result<_, _>>()?;
            NumaMask::from_signed(ids)
                .map(Some)
                .map_err(|e| bad_case!("{e}"))
        }
    }
}

fn parse_hint(hint: &Value) -> Result<TopologyHint, Mismatch> {
    Ok(TopologyHint::new(
        parse_affinity(&hint["affinity"])?,
        hint["preferred"]
            .as_bool()
            .ok_or("hint without preferred")?,
    ))
}

fn check_variant(
    nodes: &[NumaNode],
    providers: &[ProviderHints],
    variant: &str,
    want: &Value,
) -> Result<(), Mismatch> {
    let (name, prefer_closest) = match variant.split_once('+') {
        None => (variant, false),
        Some((name, "prefer-closest-numa-nodes")) => (name, true),
        Some((_, option)) => return Err(bad_case!("unknown option {option:?} in variant")),
    };
    let name: PolicyName = name.parse().map_err(|e| bad_case!("{e}"))?;
    let options = PolicyOptions {
        prefer_closest_numa: prefer_closest,
        ..PolicyOptions::default()
    };
    let numa = NumaInfo::new(nodes, options.numa_distances()).map_err(|e| bad_case!("{e}"))?;
    let result = Policy::new(name, numa, options).merge(providers);
    let want_hint = parse_hint(&want["best_hint"])?;
    let want_admit = want["admit"].as_bool().ok_or("no admit")?;
    if result.best_hint != want_hint || result.admit != want_admit {
        return Err(differs!(
            "expected {} admit={want_admit}, got {} admit={}",
            show(want_hint),
            show(result.best_hint),
            result.admit
        ));
    }
    Ok(())
}

fn show(hint: TopologyHint) -> String {
    match hint.numa_affinity {
        None => format!("{{affinity: null, preferred: {}}}", hint.preferred),
        Some(m) => format!(
            "{{affinity: {:?}, preferred: {}}}",
            m.get_bits(),
            hint.preferred
        ),
    }
}
