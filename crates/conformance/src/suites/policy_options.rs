//! Suite `policy_options`: the CPU manager's static policy options under the
//! `CPUManagerPolicy{Alpha,Beta}Options` gates (`cpu_manager[]`) and the topology manager's
//! policy options (`topology_manager[]`), as v1.36 parses and refuses them.
//!
//! A case is `{name, options, gates?, error, error_one_of?, parsed}`: `parsed` (the flags)
//! when accepted, else the error text — exactly `error`, or one of `error_one_of` where
//! upstream's answer depends on Go's random map order (corral checks options in name order,
//! which must be one of upstream's possible answers).

use std::collections::BTreeMap;

use corral_cpumgr::StaticPolicyOptions;
use corral_topology::topologymanager::PolicyOptions;
use corral_topology::{Feature, FeatureGates};
use serde_json::{Value, json};

use super::check_each;
use crate::mismatch::{Mismatch, bad_case, differs};
use crate::report::SuiteOutcome;

/// Check every case of one `policy_options` file.
pub(crate) fn run(doc: &Value, out: &mut SuiteOutcome) {
    check_each(doc, "cpu_manager", out, check_cpu);
    check_each(doc, "topology_manager", out, check_topology);
}

fn options(case: &Value) -> Result<BTreeMap<String, String>, Mismatch> {
    serde_json::from_value(case["options"].clone()).map_err(|e| bad_case!("bad options: {e}"))
}

/// Compares an answer with the case's: the parsed flags, or the error.
fn compare(case: &Value, got: Result<Value, impl std::fmt::Display>) -> Result<(), Mismatch> {
    let name = case["name"].as_str().unwrap_or("?");
    match (got, &case["parsed"]) {
        (Ok(flags), want) if !want.is_null() => {
            if &flags == want {
                Ok(())
            } else {
                Err(differs!("{name}: parsed {flags}, expected {want}"))
            }
        }
        (Ok(flags), _) => Err(differs!("{name}: accepted ({flags}), expected an error")),
        (Err(err), _) => {
            let err = err.to_string();
            let allowed: Vec<&str> = match case["error"].as_str() {
                Some(one) => vec![one],
                None => case["error_one_of"]
                    .as_array()
                    .map(|all| all.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default(),
            };
            if allowed.contains(&err.as_str()) {
                Ok(())
            } else {
                Err(differs!(
                    "{name}: error {err:?}, expected one of {allowed:?}"
                ))
            }
        }
    }
}

fn check_cpu(case: &Value) -> Result<(), Mismatch> {
    let mut gates = FeatureGates::default();
    for (gate, feature) in [
        (
            "CPUManagerPolicyAlphaOptions",
            Feature::CpuManagerPolicyAlphaOptions,
        ),
        (
            "CPUManagerPolicyBetaOptions",
            Feature::CpuManagerPolicyBetaOptions,
        ),
    ] {
        if let Some(on) = case["gates"][gate].as_bool() {
            gates
                .set(feature, on)
                .map_err(|e| bad_case!("gate {gate}: {e}"))?;
        }
    }
    let got = StaticPolicyOptions::from_map_gated(&options(case)?, &gates).map(|o| {
        json!({
            "full_pcpus_only": o.full_physical_cpus_only,
            "distribute_cpus_across_numa": o.distribute_cpus_across_numa,
            "align_by_socket": o.align_by_socket,
            "distribute_cpus_across_cores": o.distribute_cpus_across_cores,
            "strict_cpu_reservation": o.strict_cpu_reservation,
            "prefer_align_cpus_by_uncorecache": o.prefer_align_by_uncore_cache,
        })
    });
    compare(case, got)
}

fn check_topology(case: &Value) -> Result<(), Mismatch> {
    let got = PolicyOptions::from_map(&options(case)?).map(|o| {
        json!({
            "prefer_closest_numa_nodes": o.prefer_closest_numa,
            "max_allowable_numa_nodes": o.max_allowable_numa_nodes,
        })
    });
    compare(case, got)
}
