//! One module per vector `suite`; each exposes `run(doc, out)`, which records a pass or a
//! named failure (case, expected vs. actual) per case of one file.

mod bitmask;
mod checkpoint;
mod cpu_assignment;
mod cpu_hints;
mod cpuset;
mod device_hints;
mod policy_options;
mod topology_merge;

use serde_json::Value;

use crate::mismatch::{Mismatch, bad_case};
use crate::report::SuiteOutcome;

/// A suite's runner: checks every case of one vector file.
pub(crate) type SuiteRunner = fn(&Value, &mut SuiteOutcome);

/// The runner for a `suite` value, or `None` for a suite corral does not know.
pub(crate) fn runner_for(suite: &str) -> Option<SuiteRunner> {
    match suite {
        // Suites register here as their crates implement them.
        "cpuset" => Some(cpuset::run),
        "device_hints" => Some(device_hints::run),
        "bitmask" => Some(bitmask::run),
        "checkpoint" => Some(checkpoint::run),
        "cpu_assignment" => Some(cpu_assignment::run),
        "cpu_hints" => Some(cpu_hints::run),
        "topology_merge" => Some(topology_merge::run),
        "policy_options" => Some(policy_options::run),
        _ => None,
    }
}

/// Checks every case of the list `doc[key]` with `check`, each labelled `key[i]`.
pub(crate) fn check_each(
    doc: &Value,
    key: &str,
    out: &mut SuiteOutcome,
    check: impl Fn(&Value) -> Result<(), Mismatch>,
) {
    for (i, case) in array(doc, key).iter().enumerate() {
        out.check(format!("{key}[{i}]"), check(case));
    }
}

/// The list `value`, each element read by `item`; an element it refuses is a bad `what`.
pub(crate) fn list_of<T>(
    value: &Value,
    what: &str,
    item: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<T>, Mismatch> {
    let list = value
        .as_array()
        .ok_or_else(|| bad_case!("expected a list, got {value}"))?;
    let read = |v: &Value| item(v).ok_or_else(|| bad_case!("bad {what} {v}"));
    list.iter().map(read).collect()
}

/// The list `doc[key]`, empty when absent (a file may leave a case list out).
pub(crate) fn array<'a>(doc: &'a Value, key: &str) -> &'a [Value] {
    doc[key].as_array().map(Vec::as_slice).unwrap_or_default()
}
