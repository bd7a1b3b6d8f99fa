//! Suite `device_hints`: upstream device manager `generateDeviceTopologyHints`,
//! `filterByAffinity` and `devicesToAllocate` against `corral_devicemgr::DeviceState`.
//!
//! Each scenario is rebuilt as a fresh state: the plugin's devices, whether the resource is
//! registered, the devices in use, and what the container already holds. Where upstream's
//! pick is random (`deterministic: false`), corral's pick must contain `must_include` and
//! exactly `choose_count` devices of `choose_from`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use corral_devicemgr::{
    AllocationRequest, ContainerAllocation, Device, DeviceState, PluginOptions, ToAllocate,
};
use corral_topology::{NumaMask, TopologyHint};
use serde_json::Value;

use crate::mismatch::{Mismatch, bad_case, differs};
use crate::report::SuiteOutcome;

/// The pod and container upstream's oracle allocates for.
const POD: &str = "pod-uid-1";
const CONTAINER: &str = "ctr-1";

/// Check every case of one `device_hints` vector file.
pub(crate) fn run(doc: &Value, out: &mut SuiteOutcome) {
    let mut scenarios = BTreeMap::new();
    for (i, s) in list(&doc["scenarios"]).iter().enumerate() {
        let name = s["name"].as_str().unwrap_or("?").to_owned();
        match Scenario::parse(s) {
            Ok(scenario) => {
                scenarios.insert(name, scenario);
            }
            Err(why) => out.check(format!("scenarios[{i}] {name}"), Err(why)),
        }
    }
    let groups = [
        (
            "hint_cases",
            check_hints as fn(&Scenario, &Value) -> Result<(), Mismatch>,
        ),
        ("filter_by_affinity_cases", check_filter),
        ("allocate_cases", check_allocate),
    ];
    for (group, check) in groups {
        for (i, case) in list(&doc[group]).iter().enumerate() {
            let name = case["scenario"].as_str().unwrap_or("?");
            let label = format!("{group}[{i}] ({name})");
            let result = scenarios
                .get(name)
                .ok_or_else(|| bad_case!("unknown scenario {name:?}"))
                .and_then(|scenario| check(scenario, case));
            out.check(label, result);
        }
    }
}

fn list(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn strings(value: &Value) -> Result<Option<BTreeSet<String>>, Mismatch> {
    match value {
        Value::Null => Ok(None),
        Value::Array(items) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad_case!("not a string: {v}"))
            })
            .collect::<Result<BTreeSet<_>, _>>()
            .map(Some),
        other => Err(bad_case!("not a list of strings: {other}")),
    }
}

fn set(value: &Value) -> Result<BTreeSet<String>, Mismatch> {
    Ok(strings(value)?.unwrap_or_default())
}

fn mask(value: &Value) -> Result<Option<NumaMask>, Mismatch> {
    match value {
        Value::Null => Ok(None),
        Value::Array(ids) => {
            let ids = ids
                .iter()
                .map(|id| {
                    id.as_u64()
                        .map(|n| n as usize)
                        .ok_or_else(|| bad_case!("bad NUMA id {id}"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            NumaMask::new(ids).map(Some).map_err(|e| bad_case!("{e}"))
        }
        other => Err(bad_case!("bad affinity {other}")),
    }
}

/// One scenario's inputs.
struct Scenario {
    resource: String,
    numa_nodes: Vec<usize>,
    devices: Vec<Device>,
    registered: bool,
    in_use: Option<Vec<String>>,
    pre_allocated: Option<BTreeSet<String>>,
    available: BTreeSet<String>,
    aligned: bool,
}

impl Scenario {
    fn parse(s: &Value) -> Result<Scenario, Mismatch> {
        let devices = list(&s["devices"])
            .iter()
            .map(|d| {
                let numa_nodes = match &d["numa"] {
                    Value::Null => None,
                    Value::Array(ids) => Some(
                        ids.iter()
                            .map(|id| id.as_i64().ok_or_else(|| bad_case!("bad NUMA id {id}")))
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                    other => return Err(bad_case!("bad numa {other}")),
                };
                Ok(Device {
                    id: d["id"].as_str().ok_or("device without id")?.to_owned(),
                    healthy: d["healthy"].as_bool().unwrap_or(false),
                    numa_nodes,
                })
            })
            .collect::<Result<Vec<_>, Mismatch>>()?;
        Ok(Scenario {
            resource: s["resource"].as_str().ok_or("no resource")?.to_owned(),
            numa_nodes: list(&s["numa_nodes"])
                .iter()
                .map(|n| n.as_u64().map(|n| n as usize).ok_or("bad NUMA node"))
                .collect::<Result<_, _>>()?,
            devices,
            registered: s["registered"].as_bool().unwrap_or(true),
            in_use: strings(&s["in_use"])?.map(|s| s.into_iter().collect()),
            pre_allocated: strings(&s["pre_allocated"])?,
            available: set(&s["available"])?,
            aligned: s["device_has_topology_alignment"]
                .as_bool()
                .unwrap_or(false),
        })
    }

    /// A fresh manager state as the oracle built it.
    fn state(&self) -> Result<DeviceState, Mismatch> {
        let mut state = DeviceState::new(self.numa_nodes.clone());
        state.update_devices(&self.resource, &self.devices);
        if self.registered {
            state.plugin_connected(&self.resource, PluginOptions::default());
        } else {
            // No endpoint: the next capacity report drops the healthy entry, leaving the
            // devices known but the resource unregistered.
            state.capacity(Instant::now(), Duration::ZERO);
        }
        if let Some(in_use) = &self.in_use {
            state.reserve(&self.resource, in_use);
        }
        if let Some(held) = &self.pre_allocated {
            let allocation = ContainerAllocation {
                devices: BTreeMap::from([(0, held.iter().cloned().collect())]),
                response: None,
            };
            state.record_allocation(POD, CONTAINER, &self.resource, allocation);
        }
        if state.available_devices(&self.resource) != self.available {
            return Err(differs!(
                "scenario state differs: available {:?}, expected {:?}",
                state.available_devices(&self.resource),
                self.available
            ));
        }
        if state.device_has_topology_alignment(&self.resource) != self.aligned {
            return Err(differs!("device_has_topology_alignment differs"));
        }
        Ok(state)
    }
}

fn hint_json(hint: &TopologyHint) -> String {
    format!(
        "{{affinity: {:?}, preferred: {}}}",
        hint.numa_affinity.map(NumaMask::get_bits),
        hint.preferred
    )
}

fn check_hints(scenario: &Scenario, case: &Value) -> Result<(), Mismatch> {
    let state = scenario.state()?;
    let available = set(&case["available"])?;
    let reusable = set(&case["reusable"])?;
    let request = case["request"].as_u64().ok_or("bad request")? as usize;
    let want: Vec<String> = list(&case["hints"])
        .iter()
        .map(|h| {
            Ok(hint_json(&TopologyHint::new(
                mask(&h["affinity"])?,
                h["preferred"].as_bool().unwrap_or(false),
            )))
        })
        .collect::<Result<_, Mismatch>>()?;
    let got: Vec<String> = state
        .generate_device_topology_hints(&scenario.resource, &available, &reusable, request)
        .iter()
        .map(hint_json)
        .collect();
    if got != want {
        return Err(differs!("hints: expected {want:?}, got {got:?}"));
    }
    let mut pool = state.available_devices(&scenario.resource);
    pool.extend(reusable);
    let calls = state.device_has_topology_alignment(&scenario.resource) && pool.len() >= request;
    let want_calls = case["get_topology_hints_calls_generate"]
        .as_bool()
        .unwrap_or(false);
    if calls != want_calls {
        return Err(differs!(
            "get_topology_hints_calls_generate: expected {want_calls}, got {calls}"
        ));
    }
    Ok(())
}

fn check_filter(scenario: &Scenario, case: &Value) -> Result<(), Mismatch> {
    let state = scenario.state()?;
    let split = state.filter_by_affinity(
        &scenario.resource,
        &set(&case["available"])?,
        mask(&case["affinity"])?,
    );
    for (name, got) in [
        ("aligned", &split.aligned),
        ("unaligned", &split.unaligned),
        ("no_affinity", &split.no_affinity),
    ] {
        let want = set(&case[name])?;
        if *got != want {
            return Err(differs!("{name}: expected {want:?}, got {got:?}"));
        }
    }
    Ok(())
}

fn check_allocate(scenario: &Scenario, case: &Value) -> Result<(), Mismatch> {
    let mut state = scenario.state()?;
    let reusable = strings(&case["reusable"])?;
    let request = AllocationRequest {
        reusable: reusable.as_ref(),
        affinity: mask(&case["affinity"])?,
        ..AllocationRequest::new(
            POD,
            CONTAINER,
            &scenario.resource,
            case["request"].as_u64().ok_or("bad request")? as usize,
        )
    };
    let outcome = state.devices_to_allocate(&request, None);
    if let Some(error) = case["error"].as_str() {
        return match outcome {
            Err(err) if err.to_string() == error => Ok(()),
            other => Err(differs!("expected error {error:?}, got {other:?}")),
        };
    }
    let picked = match outcome {
        Err(err) => return Err(differs!("unexpected error: {err}")),
        Ok(ToAllocate::AskPlugin(ask)) => {
            return Err(differs!("unexpected plugin question {ask:?}"));
        }
        Ok(ToAllocate::Nothing) => {
            return if case["result_is_nil"].as_bool() == Some(true) {
                Ok(())
            } else {
                Err(differs!("expected devices, got nothing to allocate"))
            };
        }
        Ok(ToAllocate::Devices(reservation)) => {
            if case["result_is_nil"].as_bool() == Some(true) {
                return Err(differs!("expected nothing, got {:?}", reservation.devices));
            }
            reservation.devices.into_iter().collect::<BTreeSet<_>>()
        }
    };
    if case["deterministic"].as_bool() == Some(true) {
        let want = set(&case["picked"])?;
        if picked != want {
            return Err(differs!("picked: expected {want:?}, got {picked:?}"));
        }
        let after = state.allocated_devices(&scenario.resource);
        match strings(&case["in_use_after"])? {
            Some(want) if want != after => {
                return Err(differs!("in_use_after: expected {want:?}, got {after:?}"));
            }
            None if state.has_allocated_entry(&scenario.resource) => {
                return Err(differs!("in_use_after: expected no entry"));
            }
            _ => {}
        }
        return Ok(());
    }
    let must = set(&case["must_include"])?;
    let from = set(&case["choose_from"])?;
    let count = case["choose_count"].as_u64().ok_or("bad choose_count")? as usize;
    if !must.is_subset(&picked) {
        return Err(differs!("picked {picked:?} lacks must_include {must:?}"));
    }
    let chosen: BTreeSet<_> = picked.difference(&must).cloned().collect();
    if chosen.len() != count || !chosen.is_subset(&from) {
        return Err(differs!(
            "picked {picked:?}: expected {must:?} plus {count} of {from:?}"
        ));
    }
    Ok(())
}
