//! Ported tables of upstream `state/state_checkpoint_test.go` (v1.32) against real files:
//! `TestCheckpointStateRestore`, `TestCheckpointStateStore`, `TestCheckpointStateHelpers`,
//! `TestCheckpointStateClear`, `TestGetCPUSetOrDefault`; and `state_compatibility_test.go`'s
//! round trip (upstream's second format, `state_file.go`, no longer exists, so both of its
//! tests reduce to: what corral writes, a kubelet reads back as the same state).
//!
//! The checkpoint texts are upstream's, byte for byte, with the checksums upstream computed
//! (its `MockCheckpoint` writes them unchanged): corral must accept and refuse exactly them.

use corral_checkpoint::{CPU_MANAGER_FILE, CheckpointStore, StateFile};
use corral_cpumgr::{CpuState, RestoreError, restore};

use corral_testkit::conformance_topology::{load_testdata, text};

use crate::support::{error_chain, set, state};

/// A checkpoint store in a fresh temporary directory, holding `content` when not empty.
fn store_with(content: &str) -> (tempfile::TempDir, CheckpointStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    if !content.trim().is_empty() {
        store
            .write_bytes(CPU_MANAGER_FILE, content.as_bytes())
            .unwrap();
    }
    (dir, store)
}

/// `{default_cpu_set, assignments: [[pod, container, cpus]]}` as a state.
fn restored_state(v: &serde_json::Value) -> CpuState {
    let assignments: Vec<(&str, &str, &str)> = v["assignments"]
        .as_array()
        .expect("assignments")
        .iter()
        .map(|a| {
            (
                a[0].as_str().unwrap(),
                a[1].as_str().unwrap(),
                a[2].as_str().unwrap(),
            )
        })
        .collect();
    state(text(v, "default_cpu_set"), &assignments)
}

fn initial_containers(id: &str) -> Option<(String, String)> {
    match id {
        "containerID1" => Some(("pod".into(), "container1".into())),
        "containerID2" => Some(("pod".into(), "container2".into())),
        _ => None,
    }
}

/// Upstream `TestCheckpointStateRestore`, its rows as data in
/// `testdata/upstream/cpu_state_checkpoint_restore.json`: description, file content,
/// policy, and the restored state or the text the error must contain.
#[test]
fn checkpoint_state_restore() {
    let doc = load_testdata("testdata/upstream/cpu_state_checkpoint_restore.json");
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 10);
    for row in rows {
        let (description, content, policy) = (
            text(row, "description"),
            text(row, "file"),
            text(row, "policy"),
        );
        let want = match row.get("restored") {
            Some(restored) => Ok(restored_state(restored)),
            None => Err(text(row, "error_contains")),
        };
        let (dir, store) = store_with(content);
        let backend = StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap();
        let got = restore(&backend, policy, &initial_containers);
        match (got, want) {
            (Ok(restored), Ok(want)) => assert_eq!(restored.state, want, "{description}"),
            (Err(e), Err(text)) => {
                let msg = error_chain(&e);
                assert!(msg.contains(text), "{description}: {msg}");
                // Every refusal names the file and what to do.
                let file = dir.path().join(CPU_MANAGER_FILE).display().to_string();
                assert!(msg.contains(&file), "{description}: {msg}");
                assert!(msg.contains("restart"), "{description}: {msg}");
            }
            (got, want) => panic!("{description}: got {got:?}, want {want:?}"),
        }
    }
}

/// Upstream "Restore checkpoint with invalid checksum": the refusal is typed, not a
/// fallback to an empty state.
#[test]
fn checkpoint_state_restore_invalid_checksum_is_typed() {
    let (_dir, store) = store_with(
        r#"{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 1337}"#,
    );
    let err = restore(
        &StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap(),
        "none",
        &|_| None,
    )
    .unwrap_err();
    assert!(matches!(err, RestoreError::Read { .. }), "{err}");
}

/// Upstream `TestCheckpointStateStore`: what one state instance stores, a second restores.
#[test]
fn checkpoint_state_store() {
    let rows = [
        ("Store default cpu set", state("1-3", &[])),
        (
            "Store assignments",
            state("", &[("pod", "container1", "1,5,8")]),
        ),
    ];
    for (description, want) in rows {
        let (_dir, store) = store_with("");
        let cs1 = StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap();
        restore(&cs1, "none", &|_| None).unwrap();
        cs1.stage_checkpoint(&want.to_checkpoint("none")).unwrap();
        let cs2 = StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap();
        let restored = restore(&cs2, "none", &|_| None).unwrap();
        assert_eq!(restored.state, want, "{description}");
    }
}

/// The rows `TestCheckpointStateHelpers` and `TestGetCPUSetOrDefault` share.
fn helper_rows() -> [(&'static str, &'static [(&'static str, &'static str)]); 3] {
    [
        ("One container", &[("c1", "0-1")]),
        ("Two containers", &[("c1", "0-1"), ("c2", "2-5")]),
        ("Container without assigned cpus", &[("c1", "")]),
    ]
}

/// Upstream `TestCheckpointStateHelpers`: set, get and delete one container at a time, each
/// change persisted and read back.
#[test]
fn checkpoint_state_helpers() {
    for (description, containers) in helper_rows() {
        let (_dir, store) = store_with("");
        let backend = StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap();
        let mut st = restore(&backend, "none", &|_| None).unwrap().state;
        st.set_default_cpu_set(set("0-8"));
        for (container, cpus) in containers {
            st.set_cpu_set("pod", container, set(cpus));
            backend.stage_checkpoint(&st.to_checkpoint("none")).unwrap();
            let back = restore(&backend, "none", &|_| None).unwrap().state;
            assert_eq!(
                back.cpu_set("pod", container),
                Some(&set(cpus)),
                "{description}"
            );
            st.delete("pod", container);
            backend.stage_checkpoint(&st.to_checkpoint("none")).unwrap();
            let back = restore(&backend, "none", &|_| None).unwrap().state;
            assert_eq!(back.cpu_set("pod", container), None, "{description}");
        }
    }
}

/// Upstream `TestCheckpointStateClear`.
#[test]
fn checkpoint_state_clear() {
    let (_dir, store) = store_with("");
    let backend = StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap();
    let mut st = restore(&backend, "none", &|_| None).unwrap().state;
    st.set_default_cpu_set(set("1,5,10"));
    st.set_assignments(
        state("", &[("pod", "container1", "1,4")])
            .assignments()
            .clone(),
    );
    st.clear();
    backend.stage_checkpoint(&st.to_checkpoint("none")).unwrap();
    let back = restore(&backend, "none", &|_| None).unwrap().state;
    assert!(back.default_cpu_set().is_empty());
    assert_eq!(back.cpu_set("pod", "container1"), None);
}

/// Upstream `TestGetCPUSetOrDefault`.
#[test]
fn get_cpu_set_or_default() {
    for (description, containers) in helper_rows() {
        let mut st = state("0-8", &[]);
        for (container, cpus) in containers {
            st.set_cpu_set("pod", container, set(cpus));
            assert_eq!(
                st.cpu_set_or_default("pod", container),
                &set(cpus),
                "{description}"
            );
            st.delete("pod", container);
            assert_eq!(
                st.cpu_set_or_default("pod", container),
                &set("0-8"),
                "{description}"
            );
        }
    }
}

/// Upstream `state_compatibility_test.go` (`TestFileToCheckpointCompatibility`,
/// `TestCheckpointToFileCompatibility`) on its state: written by corral, restored as the
/// same state, and the file is a kubelet checkpoint (its checksum verifies on restore).
#[test]
fn state_compatibility_round_trip() {
    let want = state(
        "1-3",
        &[("pod", "container1", "4-6"), ("pod", "container2", "1-3")],
    );
    let (_dir, store) = store_with("");
    let backend = StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap();
    backend
        .stage_checkpoint(&want.to_checkpoint("none"))
        .unwrap();
    let bytes = store.read_bytes(CPU_MANAGER_FILE).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("\"defaultCpuSet\":\"1-3\""), "{text}");
    let restored = restore(
        &StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap(),
        "none",
        &|_| None,
    )
    .unwrap();
    assert_eq!(restored.state, want);
}
