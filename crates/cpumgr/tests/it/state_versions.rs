//! `cpu_manager_state` versions through restore: v3 written when configured (as a v1.36
//! kubelet with `PodLevelResourceManagers` writes), v1.37's v4 restored, and a file with
//! pod-level assignments (which corral does not make) refused with the pods named.

use std::collections::BTreeMap;

use corral_checkpoint::{
    Checkpoint, CpuManagerCheckpoint, CpuManagerCheckpointV3, CpuManagerCheckpointV4, PodCpuEntry,
    StateFile,
};
use corral_cpumgr::{CpuState, CpuStateFileVersion, RestoreError, restore, restore_writing};

fn no_v1(_: &str) -> Option<(String, String)> {
    None
}

fn state() -> CpuState {
    let mut state = CpuState::default();
    state.set_default_cpu_set("0-1,4-7".parse().unwrap());
    state.set_cpu_set("pod", "app", "2-3".parse().unwrap());
    state
}

fn v3_of(state: &CpuState) -> CpuManagerCheckpointV3 {
    let v2 = state.to_checkpoint("static");
    CpuManagerCheckpointV3 {
        policy_name: v2.policy_name,
        default_cpu_set: v2.default_cpu_set,
        entries: v2.entries,
        pod_entries: Some(BTreeMap::new()),
    }
}

#[test]
fn a_fresh_file_is_written_in_the_configured_version() {
    let backend = StateFile::in_memory();
    let writer = backend.clone();
    restore_writing(&writer, "static", &no_v1, CpuStateFileVersion::V3).unwrap();
    let bytes = backend.load().unwrap().unwrap();
    assert!(CpuManagerCheckpointV3::decode(&bytes).is_ok());
    // A v1.36 kubelet with the gate off (v2 reader) refuses it, as upstream's does.
    assert!(CpuManagerCheckpoint::decode(&bytes).is_err());

    let backend = StateFile::in_memory();
    let writer = backend.clone();
    restore_writing(&writer, "static", &no_v1, CpuStateFileVersion::V2).unwrap();
    assert!(CpuManagerCheckpoint::decode(&backend.load().unwrap().unwrap()).is_ok());
}

#[test]
fn v3_and_v4_files_restore_to_the_same_state() {
    let want = state();
    for bytes in [
        v3_of(&want).encode().unwrap(),
        CpuManagerCheckpointV4(v3_of(&want)).encode().unwrap(),
    ] {
        let backend = StateFile::in_memory_holding(bytes);
        let restored = restore(&backend, "static", &no_v1).unwrap();
        assert_eq!(restored.state, want);
        assert!(!restored.fresh);
    }
}

#[test]
fn pod_level_assignments_stop_the_restore_naming_the_pods() {
    let mut v3 = v3_of(&state());
    v3.pod_entries = Some(BTreeMap::from([(
        "pod".to_owned(),
        PodCpuEntry {
            cpu_set: "2-3".into(),
        },
    )]));
    for bytes in [
        v3.encode().unwrap(),
        CpuManagerCheckpointV4(v3.clone()).encode().unwrap(),
    ] {
        let backend = StateFile::in_memory_holding(bytes);
        let err = restore(&backend, "static", &no_v1).unwrap_err();
        assert!(
            matches!(&err, RestoreError::PodLevelAssignments { pods, .. } if pods == &["pod"]),
            "{err}"
        );
    }
}
