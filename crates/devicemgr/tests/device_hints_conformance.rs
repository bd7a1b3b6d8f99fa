//! The `device_hints` conformance vectors (testdata/conformance/device_hints.json), checked
//! under plain `cargo test` with the same code `cargo xtask conformance` runs.

use std::path::Path;

/// The xtask's outcome type, as the shared suite file expects it.
#[derive(Debug, Default)]
struct SuiteOutcome {
    passed: usize,
    failures: Vec<String>,
}

impl SuiteOutcome {
    fn check(&mut self, case: impl std::fmt::Display, result: Result<(), String>) {
        match result {
            Ok(()) => self.passed += 1,
            Err(why) => self.failures.push(format!("case {case}: {why}")),
        }
    }
}

#[path = "../../../xtask/src/conformance/device_hints.rs"]
mod device_hints;

#[test]
fn device_hints_vectors_all_pass() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance/device_hints.json");
    let text = std::fs::read_to_string(&path).expect("vector file");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let mut out = SuiteOutcome::default();
    device_hints::run(&doc, &mut out);
    let total = doc["hint_cases"].as_array().map_or(0, Vec::len)
        + doc["filter_by_affinity_cases"]
            .as_array()
            .map_or(0, Vec::len)
        + doc["allocate_cases"].as_array().map_or(0, Vec::len);
    assert!(
        out.failures.is_empty(),
        "{} failures:\n{}",
        out.failures.len(),
        out.failures.join("\n")
    );
    assert_eq!(out.passed, total);
}
