//! Suite `topology_merge`: upstream topology manager `Policy.Merge` against corral's policies.

use serde_json::Value;

use super::SuiteOutcome;

/// Check every case of one `topology_merge` vector file.
pub(crate) fn run(_doc: &Value, out: &mut SuiteOutcome) {
    out.check("topology_merge", Err("not implemented yet".to_owned()));
}
