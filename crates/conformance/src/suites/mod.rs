//! One module per vector `suite`; each exposes `run(doc, out)`, which records a pass or a
//! named failure (case, expected vs. actual) per case of one file.

mod bitmask;
mod checkpoint;
mod cpu_assignment;
mod cpu_hints;
mod cpuset;
mod device_hints;
mod topology_merge;

use serde_json::Value;

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
        _ => None,
    }
}

/// The list `doc[key]`, empty when absent (a file may leave a case list out).
pub(crate) fn array<'a>(doc: &'a Value, key: &str) -> &'a [Value] {
    doc[key].as_array().map(Vec::as_slice).unwrap_or_default()
}
