//! Facts from upstream's own test tables, ported (each test names the upstream test).

use std::collections::BTreeMap;

use corral_testkit::conformance_topology::load_testdata;

use corral_checkpoint::{
    Checkpoint, CheckpointError, CpuManagerCheckpoint, CpuManagerCheckpointV1, CpuManagerState,
    restore_cpu_manager_state,
};

/// The file of a `TestCheckpointStateRestore` row (upstream's text, as ported to
/// `testdata/upstream/cpu_state_checkpoint_restore.json`).
fn upstream_cpu_file(description: &str) -> Vec<u8> {
    let doc = load_testdata("testdata/upstream/cpu_state_checkpoint_restore.json");
    let rows = doc["rows"].as_array().expect("rows");
    let row = rows.iter().find(|r| r["description"] == description);
    let row = row.unwrap_or_else(|| panic!("no row {description:?}"));
    row["file"].as_str().expect("file").as_bytes().to_vec()
}

/// cpumanager/state `TestCheckpointStateRestore`, "Restore default cpu set" (keys spelled
/// `defaultCPUSet`, matched case-insensitively to `defaultCpuSet`).
#[test]
fn cpu_restore_default_cpu_set() {
    let file = upstream_cpu_file("Restore default cpu set");
    match restore_cpu_manager_state(&file).unwrap() {
        CpuManagerState::V2(cp) => {
            assert_eq!(cp.policy_name, "none");
            assert_eq!(cp.default_cpu_set, "4-6");
            assert_eq!(cp.entries, Some(BTreeMap::new()));
        }
        other => panic!("expected v2, got {other:?}"),
    }
}

/// cpumanager/state `TestCheckpointStateRestore`, "Restore valid checkpoint".
#[test]
fn cpu_restore_valid_checkpoint() {
    let file = upstream_cpu_file("Restore valid checkpoint");
    let expected = CpuManagerCheckpoint {
        policy_name: "none".into(),
        default_cpu_set: "1-3".into(),
        entries: Some(BTreeMap::from([(
            "pod".into(),
            Some(BTreeMap::from([
                ("container1".into(), "4-6".into()),
                ("container2".into(), "1-3".into()),
            ])),
        )])),
    };
    assert_eq!(
        restore_cpu_manager_state(&file).unwrap(),
        CpuManagerState::V2(expected)
    );
}

/// cpumanager/state `TestCheckpointStateRestore`, "Restore checkpoint with invalid checksum"
/// and "Restore checkpoint with invalid JSON".
#[test]
fn cpu_restore_refusals() {
    let bad_sum =
        br#"{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 1337}"#;
    assert!(matches!(
        CpuManagerCheckpoint::decode(bad_sum),
        Err(CheckpointError::ChecksumMismatch { expected: 1337, .. })
    ));
    assert!(restore_cpu_manager_state(bad_sum).is_err());
    match restore_cpu_manager_state(b"{") {
        Err(CheckpointError::Syntax { message, .. }) => {
            assert_eq!(message, "unexpected end of JSON input")
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

/// cpumanager/state `TestCheckpointStateRestore` (newer upstream), "Fail to restore
/// checkpoint from v1 (migration)" and "… from checkpoint with v1 checksum": files written
/// in v1 layout by older kubelets. v1.32 reads them as v1 (its v1 reader recomputes the old
/// checksum), and its v2 reader refuses them as upstream's newer test asserts.
#[test]
fn cpu_v1_files_from_older_kubelets() {
    let with_entries = br#"{
        "policyName": "static",
        "defaultCPUSet": "7-9",
        "entries": {"containerID1": "4-6", "containerID2": "1-3"},
        "checksum": 2026311253
    }"#;
    let v1 = CpuManagerCheckpointV1::decode(with_entries).unwrap();
    assert_eq!(v1.entries.as_ref().map(BTreeMap::len), Some(2));
    match CpuManagerCheckpoint::decode(with_entries) {
        Err(CheckpointError::Decode { message, .. }) => assert!(
            message.contains(
                "cannot unmarshal string into Go struct field CPUManagerCheckpoint.entries"
            ),
            "{message}"
        ),
        other => panic!("expected a decode error, got {other:?}"),
    }
    // Migration needs the runtime's containers; an empty list refuses, as upstream.
    assert!(matches!(
        v1.to_current(|_| None),
        Err(CheckpointError::UnknownContainer { .. })
    ));

    let without_entries =
        br#"{"policyName": "none", "defaultCPUSet": "1-3", "checksum": 1694838852}"#;
    assert!(matches!(
        restore_cpu_manager_state(without_entries).unwrap(),
        CpuManagerState::V1(_)
    ));
    assert!(
        CpuManagerCheckpoint::decode(without_entries)
            .unwrap_err()
            .is_checksum_mismatch()
    );
}
