//! What `inspect` and the errors tell a person: the checksum a file records next to the one
//! computed, the real reason a document is refused, and each cause printed once.

use std::collections::BTreeMap;
use std::error::Error as _;

use corral_checkpoint::{
    CPU_MANAGER_FILE, Checkpoint, CheckpointError, CheckpointStore, ChecksumVerification,
    CpuManagerCheckpoint, DRA_MANAGER_FILE, Format, inspect,
};

fn cpu() -> CpuManagerCheckpoint {
    CpuManagerCheckpoint {
        policy_name: "static".into(),
        default_cpu_set: "0-1,4-7".into(),
        entries: Some(BTreeMap::from([(
            "pod".into(),
            Some(BTreeMap::from([("c".into(), "2-3".into())])),
        )])),
    }
}

/// Replaces the file's `"checksum":N` with `"checksum":<with>`.
fn with_recorded_checksum(bytes: &[u8], with: &str) -> Vec<u8> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let at = text.rfind("\"checksum\":").unwrap() + "\"checksum\":".len();
    format!("{}{with}}}", &text[..at]).into_bytes()
}

/// A `cpu_manager_state` recording checksum 0 is accepted unverified, as upstream does; the
/// report says 0 is what the file records and that nothing was verified, and gives the
/// computed value as the content's, not the file's.
#[test]
fn a_recorded_zero_is_reported_as_recorded_and_unverified() {
    let cp = cpu();
    let computed = cp.checksum().unwrap();
    let file = with_recorded_checksum(&cp.encode().unwrap(), "0");
    for name in [Some(CPU_MANAGER_FILE), None] {
        let found = inspect(&file, name).unwrap();
        assert_eq!(found.recorded_checksum, 0);
        assert_eq!(found.checksum, computed);
        assert_eq!(found.verification, ChecksumVerification::NotRecorded);
        assert!(!found.verification.is_verified());
        let summary = found.checksum_summary();
        assert!(
            summary.starts_with("checksum 0 recorded: content not verified"),
            "{summary}"
        );
        assert!(
            summary.ends_with(&format!("the content hashes to {computed}")),
            "{summary}"
        );
    }
}

#[test]
fn a_verified_file_reports_the_recorded_checksum() {
    let cp = cpu();
    let computed = cp.checksum().unwrap();
    let found = inspect(&cp.encode().unwrap(), Some(CPU_MANAGER_FILE)).unwrap();
    assert_eq!(found.recorded_checksum, computed);
    assert_eq!(found.checksum, computed);
    assert_eq!(found.verification, ChecksumVerification::Verified);
    assert!(found.verification.is_verified());
    assert_eq!(
        found.checksum_summary(),
        format!("checksum {computed} (verified)")
    );
}

/// v1.30's test file written by k8s 1.27-1.28: it records the legacy checksum, which is not
/// the one the current rule computes; the report says which rule verified it.
#[test]
fn a_legacy_dra_checksum_is_reported_with_both_values() {
    let old = r#"{"version":"v1","entries":[{"DriverName":"test-driver.cdi.k8s.io","ClassName":"class-name","ClaimUID":"067798be-454e-4be4-9047-1aa06aea63f7","ClaimName":"example","Namespace":"default","PodUIDs":{"139cdb46-f989-4f17-9561-ca10cfb509a6":{}},"CDIDevices":{"test-driver.cdi.k8s.io":["example.com/example=cdi-example"]}}],"checksum":153446146}"#;
    let found = inspect(old.as_bytes(), Some(DRA_MANAGER_FILE)).unwrap();
    assert_eq!(found.format, Format::DraV130);
    assert_eq!(found.recorded_checksum, 153_446_146);
    assert_eq!(found.checksum, 453_625_682);
    assert_eq!(
        found.verification,
        ChecksumVerification::VerifiedByLegacyRule
    );
    let summary = found.checksum_summary();
    assert!(
        summary.starts_with("checksum 153446146 (verified by"),
        "{summary}"
    );
    assert!(
        summary.contains("the current rule gives 453625682"),
        "{summary}"
    );
}

#[test]
fn a_mismatch_names_the_recorded_and_the_computed_checksum() {
    let cp = cpu();
    let computed = cp.checksum().unwrap();
    let file = with_recorded_checksum(&cp.encode().unwrap(), "7");
    let err = inspect(&file, Some("/state/cpu_manager_state")).unwrap_err();
    assert!(
        matches!(err, CheckpointError::ChecksumMismatch { expected: 7, actual, .. } if actual == computed),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "checkpoint /state/cpu_manager_state (cpumanager_v2) is corrupted: it records checksum 7 but its content hashes to {computed}"
        )
    );
}

/// Documents nested beyond the reader's limit are refused for that reason, with the limit
/// and where it was crossed — with or without a file name to pick the format.
#[test]
fn deep_nesting_reports_the_nesting_not_the_shape() {
    let arrays = "[".repeat(5_000);
    let objects = r#"{"a":"#.repeat(5_000);
    let in_object = format!(r#"{{"policyName":{}"#, "[".repeat(5_000));
    for (doc, offset) in [
        (arrays.as_str(), 1_000),
        (objects.as_str(), 5_000),
        (in_object.as_str(), 14 + 999),
    ] {
        for name in [None, Some(CPU_MANAGER_FILE), Some(DRA_MANAGER_FILE)] {
            let err = inspect(doc.as_bytes(), name).unwrap_err();
            match &err {
                CheckpointError::TooDeep {
                    limit,
                    offset: at,
                    line,
                    column,
                    ..
                } => {
                    assert_eq!(*limit, 1_000);
                    assert_eq!((*at, *line, *column), (offset, 1, offset + 1), "{err}");
                }
                other => panic!("{name:?}: expected TooDeep, got {other}"),
            }
            let text = err.to_string();
            assert!(
                text.contains(&format!(
                    "JSON nesting deeper than 1000 levels at line 1, column {} (byte offset {offset})",
                    offset + 1
                )),
                "{text}"
            );
            assert!(!text.contains("not a JSON object"), "{text}");
            assert!(err.is_decode_error());
        }
    }
    // The limit itself is fine: 1000 nested arrays are a document of the wrong shape.
    let ok_depth = format!("{}{}", "[".repeat(1_000), "]".repeat(1_000));
    let err = inspect(ok_depth.as_bytes(), None).unwrap_err();
    assert!(
        matches!(err, CheckpointError::UnknownFormat { ref why, .. } if why == "the document is a JSON array, not an object"),
        "{err}"
    );
}

/// Without a file name, bytes that are not JSON report the syntax error itself.
#[test]
fn invalid_json_without_a_name_reports_the_syntax_error() {
    let err = inspect(b"{\n \"policyName\": nope}", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "checkpoint <bytes>: invalid JSON at line 2, column 17 (byte offset 18): invalid character 'o' in literal null (expecting 'u')"
    );
    let err = inspect(b"", None).unwrap_err();
    assert!(matches!(err, CheckpointError::Syntax { .. }), "{err}");
    let err = inspect(b"\"text\"", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "checkpoint <bytes>: not a known kubelet checkpoint format: the document is a JSON string, not an object"
    );
}

/// Each cause is printed once: an error with a source does not repeat its message.
#[test]
fn displays_do_not_repeat_their_source() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"").unwrap();
    // A store under a regular file cannot be created.
    let err = CheckpointStore::open(blocker.join("state")).unwrap_err();
    let source = err.source().expect("an I/O error has its cause as source");
    let own = err.to_string();
    assert!(
        !own.contains(&source.to_string()),
        "{own:?} repeats its source {source}"
    );
    assert!(
        own.contains(&blocker.join("state").display().to_string()),
        "{own}"
    );
    // Every error of this crate, walked as a chain, names each cause once.
    let mut chain = vec![own];
    let mut next = err.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        assert!(
            chain.iter().all(|earlier| !earlier.contains(&text)),
            "{text:?} already printed in {chain:?}"
        );
        chain.push(text);
        next = cause.source();
    }
}
