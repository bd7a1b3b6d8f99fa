//! What cannot be run is an error naming the directory or file, never a pass; a failed case
//! is a report line naming file, case, expected and actual.

use std::error::Error as _;
use std::path::Path;

use corral_conformance::{ConformanceError, run_dir, run_file};

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write vector file");
}

#[test]
fn unreadable_or_unknown_inputs_are_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing");
    let err = run_dir(&missing).expect_err("no such directory");
    assert!(matches!(err, ConformanceError::ReadDir { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("reading conformance directory {}", missing.display())
    );
    assert!(err.source().is_some());

    let err = run_dir(dir.path()).expect_err("no vector files");
    assert!(
        matches!(err, ConformanceError::NoVectorFiles { .. }),
        "{err:?}"
    );

    write(dir.path(), "a.json", "{not json");
    let err = run_dir(dir.path()).expect_err("not JSON");
    assert!(matches!(err, ConformanceError::Parse { .. }), "{err:?}");
    assert!(!err.to_string().contains(&err.source().unwrap().to_string()));

    write(dir.path(), "a.json", r#"{"about": {}}"#);
    let err = run_dir(dir.path()).expect_err("no suite");
    assert!(matches!(err, ConformanceError::NoSuite { .. }), "{err:?}");

    write(dir.path(), "a.json", r#"{"suite": "memory_manager"}"#);
    let err = run_dir(dir.path()).expect_err("unknown suite");
    assert!(
        err.to_string()
            .ends_with("a.json: unknown suite `memory_manager`"),
        "{err}"
    );

    let err = run_file(&dir.path().join("b.json")).expect_err("no such file");
    assert!(matches!(err, ConformanceError::Read { .. }), "{err:?}");
}

#[test]
fn a_failed_case_is_reported_with_file_case_and_values() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "cpuset.json",
        r#"{"suite": "cpuset", "parse_cases": [
            {"input": "0-2", "error": null, "list": [0, 1, 2], "string": "0-2"},
            {"input": "1,2", "error": null, "list": [1, 2], "string": "1,2"}]}"#,
    );
    let report = run_dir(dir.path()).expect("runs");
    assert!(!report.all_passed());
    assert_eq!((report.passed(), report.failed()), (1, 1));
    let failures: Vec<String> = report.failures().collect();
    assert_eq!(
        failures,
        [r#"[cpuset] cpuset.json: case parse_cases[1] "1,2": expected string "1,2", got 1-2"#]
    );
    assert_eq!(
        report.render(),
        format!(
            "FAIL {}\ncpuset: 1 passed, 1 failed\ntotal: 1 passed, 1 failed\n",
            failures[0]
        )
    );
}
