//! A kubelet-written `dra_manager_state` (the v1.32 and v1.36 conformance vectors) restores
//! into the claim cache, share ids included; a file the kubelet would refuse is refused;
//! what corral writes for the restored cache is what a v1.36 kubelet wrote when the list was
//! already in key order.

use std::collections::BTreeMap;
use std::path::PathBuf;

use corral_checkpoint::StateFile;
use corral_checkpoint::{Checkpoint, ClaimInfoState, DraManagerCheckpoint};
use corral_dra::DraManager;
use serde_json::Value;

use crate::support::fake_driver::FakeDriver;

fn vectors_of(file: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/conformance")
        .join(file);
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn vectors() -> Value {
    vectors_of("checkpoint_dra_v132.json")
}

/// Both documents.
fn all_vectors() -> [Value; 2] {
    [vectors(), vectors_of("checkpoint_dra_v136.json")]
}

/// Whether the file reader accepts the case's file (v1.32's and v1.36's are the same code).
fn file_accepted(case: &Value) -> bool {
    ["as_dra_v132", "as_dra_v136"]
        .iter()
        .any(|reader| case["verdicts"][reader]["accepted"].as_bool() == Some(true))
}

/// The entries of the document's list `list`, each with its name.
fn cases<'a>(doc: &'a Value, list: &str) -> impl Iterator<Item = (&'a str, &'a Value)> {
    doc[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| (case["name"].as_str().unwrap(), case))
}

/// A temp state dir whose `dra_manager_state` holds `file`.
fn state_dir_with(file: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dra_manager_state"), file).unwrap();
    dir
}

#[test]
fn kubelet_files_restore() {
    let docs = all_vectors();
    let mut restored = 0;
    let mut shared = 0;
    for (name, vector) in docs.iter().flat_map(|doc| cases(doc, "vectors")) {
        let file = vector["file"].as_str().unwrap();
        let dir = state_dir_with(file);
        let accepted = file_accepted(vector);
        let manager = DraManager::open(dir.path(), FakeDriver::unregistered());
        assert_eq!(manager.is_ok(), accepted, "{name}");
        let Ok(manager) = manager else { continue };
        // Expected cache: the decoded list, keyed namespace/name, later entries winning.
        let list: Vec<ClaimInfoState> =
            serde_json::from_value(vector["verdicts"]["decoded_claim_info_state_list"].clone())
                .unwrap_or_default();
        let expected: BTreeMap<String, ClaimInfoState> = list
            .into_iter()
            .map(|s| (format!("{}/{}", s.namespace, s.claim_name), s))
            .collect();
        let got: BTreeMap<String, ClaimInfoState> = manager
            .claim_infos()
            .into_iter()
            .map(|c| (c.key(), c.state().clone()))
            .collect();
        assert_eq!(got, expected, "{name}");
        shared += got
            .values()
            .flat_map(|s| s.driver_state.iter().flatten())
            .flat_map(|(_, d)| d.devices.iter().flatten())
            .filter(|d| d.share_id.is_some())
            .count();
        assert!(
            manager.claim_infos().iter().all(|c| !c.is_prepared()),
            "{name}"
        );
        restored += 1;

        // Written back in key order: identical bytes when the kubelet's list was sorted and
        // free of duplicates.
        let store = StateFile::in_memory();
        store
            .stage_checkpoint(&DraManagerCheckpoint {
                claim_info_state_list: Some(got.into_values().collect()),
            })
            .unwrap();
        let sorted_input = {
            let keys: Vec<String> = vector["input"]["ClaimInfoStateList"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .map(|s| {
                            format!(
                                "{}/{}",
                                s["Namespace"].as_str().unwrap_or(""),
                                s["ClaimName"].as_str().unwrap_or("")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            keys.windows(2).all(|w| w[0] < w[1]) && vector["input"]["ClaimInfoStateList"].is_array()
        };
        // corral writes v1.36's layout; a v1.32 file comes back with `"ShareID":null`.
        if sorted_input && vector["format"] == "dra_v136" {
            assert_eq!(
                String::from_utf8(store.load().unwrap().unwrap()).unwrap(),
                file,
                "{name}"
            );
        }
    }
    assert!(restored >= 40, "only {restored} vectors restored");
    assert!(
        shared >= 10,
        "only {shared} devices with share ids restored"
    );
}

#[test]
fn refused_files_are_errors_not_empty_state() {
    let docs = all_vectors();
    let doc = &docs[0];
    let mut refused = 0;
    for (name, negative) in docs.iter().flat_map(|doc| cases(doc, "negatives")) {
        let accepted = file_accepted(negative)
            && negative["verdicts"]["get_claim_info_state_list_error"].is_null();
        let dir = state_dir_with(negative["file"].as_str().unwrap());
        let result = DraManager::open(dir.path(), FakeDriver::unregistered()).map(|_| ());
        assert_eq!(result.is_ok(), accepted, "{name}: {result:?}");
        if !accepted {
            refused += 1;
            // The file is left alone for an operator to inspect.
            assert_eq!(
                std::fs::read_to_string(dir.path().join("dra_manager_state")).unwrap(),
                negative["file"].as_str().unwrap()
            );
        }
    }
    assert!(refused > 0);
    // The same bytes decode directly too.
    let first = doc["vectors"][1]["file"].as_str().unwrap();
    assert!(DraManagerCheckpoint::decode(first.as_bytes()).is_ok());
}
