//! The `device_hints` conformance vectors (`testdata/conformance/device_hints.json`): every
//! hint, affinity-filter and allocation case is checked, and none fails.

use crate::support::vectors_dir;

#[test]
fn device_hints_vectors_all_pass() {
    let path = vectors_dir().join("device_hints.json");
    let text = std::fs::read_to_string(&path).expect("vector file");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let report = corral_conformance::run_file(&path).expect("a device_hints file");
    let out = report
        .suite("device_hints")
        .expect("the device_hints suite ran");
    let total = doc["hint_cases"].as_array().map_or(0, Vec::len)
        + doc["filter_by_affinity_cases"]
            .as_array()
            .map_or(0, Vec::len)
        + doc["allocate_cases"].as_array().map_or(0, Vec::len);
    assert!(
        out.failures().is_empty(),
        "{} failures:\n{}",
        out.failures().len(),
        out.failures().join("\n")
    );
    assert_eq!(out.passed(), total);
}
