//! Every vector file passes, as `cargo xtask conformance` checks them.

use crate::support::vectors_dir;

/// The suites `testdata/conformance` holds files of; each must have run.
const SUITES: [&str; 7] = [
    "bitmask",
    "checkpoint",
    "cpu_assignment",
    "cpu_hints",
    "cpuset",
    "device_hints",
    "topology_merge",
];

#[test]
fn every_vector_file_passes() {
    let dir = vectors_dir();
    let report = corral_conformance::run_dir(&dir)
        .unwrap_or_else(|err| panic!("running {}: {err}", dir.display()));
    let failures: Vec<String> = report.failures().collect();
    assert!(
        failures.is_empty(),
        "{} failed cases:\n{}\n{}",
        failures.len(),
        failures.join("\n"),
        report.render()
    );
    for suite in SUITES {
        let outcome = report
            .suite(suite)
            .unwrap_or_else(|| panic!("no {suite} vector file in {}", dir.display()));
        assert!(outcome.passed() > 0, "suite {suite} checked no case");
    }
    assert!(report.all_passed(), "{}", report.render());
}
