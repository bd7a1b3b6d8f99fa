//! Pod records under attack: names an older corral wrote that are the new names of other
//! pods, a crash at every step of the rename of older names (through the node's journal,
//! as the agent opens it: replayed, not yet active), uids crafted to collide, and damage
//! at every byte of a record.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use corral_checkpoint::{CheckpointStore, Journal, JournalOptions, Managed};
use corral_topology::Pod;

use super::pod_record::{Affinity, Holding, PodRecord};
use super::pods::PodBook;

/// A record of pod `uid`, with something in every field.
fn record(uid: &str) -> PodRecord {
    PodRecord {
        pod: serde_json::json!({"metadata": {"uid": uid, "name": "web", "namespace": "default"}}),
        claims: vec![],
        container_ids: BTreeMap::from([("app".to_owned(), "c0ffee".to_owned())]),
        affinities: BTreeMap::from([(
            "app".to_owned(),
            Affinity {
                numa: Some(vec![0]),
                preferred: true,
            },
        )]),
        holdings: Some(BTreeMap::from([(
            "app".to_owned(),
            Holding {
                exclusive_cpus: Some("2-3".to_owned()),
                ..Holding::default()
            },
        )])),
        removed_containers: BTreeSet::from(["init".to_owned()]),
        approximate: true,
    }
}

fn uid_of(r: &PodRecord) -> Result<Pod> {
    let uid = r.pod["metadata"]["uid"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no uid"))?;
    Ok(Pod {
        uid: uid.to_owned(),
        ..Pod::default()
    })
}

/// The pods directory under `root`, loaded as the agent does: its journal opened
/// (replayed) first, not yet active, the store written through it.
fn load(root: &Path) -> Result<(PodBook, Arc<Journal>)> {
    let managed = [Managed::Dir("pods".into())];
    let (journal, _) = Journal::open(root, "state.journal", &managed, JournalOptions::default())?;
    let journal = Arc::new(journal);
    let store = CheckpointStore::open(root.join("pods"))?.with_journal(Arc::clone(&journal));
    Ok((PodBook::load(store, uid_of)?, journal))
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// Pod `uid`'s record as corral up to 0.1.x wrote it (bare JSON, no checksum).
fn bytes_of(uid: &str) -> Vec<u8> {
    serde_json::to_vec(&record(uid)).unwrap()
}

/// Pod `uid`'s record as corral writes it now (with its checksum).
fn checked_bytes_of(uid: &str) -> Vec<u8> {
    super::pod_record::encode(&record(uid)).unwrap()
}

/// Every pod of `uids` loaded with its exact record, and nothing else.
fn assert_all_there(book: &PodBook, uids: &[&str]) {
    assert_eq!(
        book.uids(),
        uids.iter()
            .map(|u| (*u).to_owned())
            .collect::<BTreeSet<_>>()
    );
    for uid in uids {
        assert_eq!(book.get(uid).unwrap().record, record(uid), "{uid}");
    }
}

/// corral 0.1.x named pod `a_b`'s record `a_b.json` and pod `u_YV9i`'s `u_YV9i.json` —
/// which is the name pod `a_b`'s record has now. Both are legitimate records an older
/// corral wrote; the rename must bring both to their names, not refuse the node's start
/// (whose remedy, "keep the right one", would have an operator delete one pod's record).
#[test]
fn a_legacy_name_that_is_another_pods_new_name_is_renamed_not_refused() {
    let root = tempfile::tempdir().unwrap();
    let pods = root.path().join("pods");
    std::fs::create_dir_all(&pods).unwrap();
    std::fs::write(pods.join("a_b.json"), bytes_of("a_b")).unwrap();
    std::fs::write(pods.join("u_YV9i.json"), bytes_of("u_YV9i")).unwrap();
    let (book, journal) = match load(root.path()) {
        Ok(loaded) => loaded,
        Err(err) => panic!("refused: {err:#}"),
    };
    assert_all_there(&book, &["a_b", "u_YV9i"]);
    journal.activate().unwrap();
    drop((book, journal));
    assert_eq!(names(&pods), ["u_YV9i.json", "u_dV9ZVjlp.json"]);
    let (book, _journal) = load(root.path()).unwrap();
    assert_all_there(&book, &["a_b", "u_YV9i"]);
}

/// The rename of older names, crashed after each of its steps (a stray temporary file of
/// the dead writer, the new name written, the old one removed), for each record in turn:
/// the next start has every pod with its record, and under its own name only. The files
/// are what a kill leaves (the rename happens before the journal starts, so its writes go
/// to the files at once).
#[test]
fn a_crash_at_every_step_of_renaming_older_records_loses_none() {
    // (uid, older name, new name)
    let olds = [
        ("a_b", "a_b.json", "u_YV9i.json"),
        ("../x", "%2E%2E%2Fx.json", "u_Li4veA.json"),
        ("é", "%C3%A9.json", "u_w6k.json"),
        ("0b5a7a3e-4f4c", "0b5a7a3e-4f4c.json", "0b5a7a3e-4f4c.json"),
    ];
    let uids: Vec<&str> = olds.iter().map(|(u, _, _)| *u).collect();
    let final_names: Vec<String> = {
        let mut n: Vec<String> = olds.iter().map(|(_, _, new)| (*new).to_owned()).collect();
        n.sort();
        n
    };
    // Steps per record: 0 nothing, 1 a temporary file, 2 the new name written, 3 the old
    // one removed. Records before `done` are fully renamed, `at` is at `step`.
    for done in 0..olds.len() {
        for step in 0..=3 {
            let root = tempfile::tempdir().unwrap();
            let pods = root.path().join("pods");
            std::fs::create_dir_all(&pods).unwrap();
            for (i, (uid, old, new)) in olds.iter().enumerate() {
                let bytes = bytes_of(uid);
                let at = if i < done {
                    3
                } else if i == done {
                    step
                } else {
                    0
                };
                if at == 1 {
                    // A dead writer's temporary file (a pid above any pid_max; the name is
                    // what CheckpointStore makes).
                    std::fs::write(pods.join(format!(".{new}.tmp.999999999.0")), &bytes[..3])
                        .unwrap();
                }
                if at >= 2 {
                    std::fs::write(pods.join(new), &bytes).unwrap();
                }
                if at < 3 || old == new {
                    std::fs::write(pods.join(old), &bytes).unwrap();
                }
            }
            let (book, journal) = load(root.path())
                .unwrap_or_else(|e| panic!("done {done} step {step}: refused: {e:#}"));
            assert_all_there(&book, &uids);
            assert_eq!(names(&pods), final_names, "done {done} step {step}");
            // And the journal started from it keeps it.
            journal.activate().unwrap();
            drop((book, journal));
            let (book, _journal) = load(root.path()).unwrap();
            assert_all_there(&book, &uids);
        }
    }
}

/// Uids crafted to collide — case, `_` against `-`, a uid spelled like an encoded name,
/// unicode spelled two ways, the longest uids — each get a record of their own, written
/// through the journal, and all come back.
#[test]
fn crafted_uids_never_share_a_record() {
    let root = tempfile::tempdir().unwrap();
    let uids: Vec<String> = [
        "a",
        "A",
        "a-b",
        "a_b",
        "u_YV9i",
        "YV9i",
        "u_YV9i.json",
        "é",
        "e\u{301}",
        "-",
        "_",
        "",
        ".",
        "..",
        "%41",
        "A%",
        "x/y",
        "x\\y",
        "\0",
        "a\n",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([
        "a".repeat(128),
        "A".repeat(128),
        "_".repeat(128),
        "\u{7f}".repeat(128),
    ])
    .collect();
    let (book, journal) = load(root.path()).unwrap();
    journal.activate().unwrap();
    for uid in &uids {
        book.update(uid, |e| {
            *e = Some(super::pods::AdmittedPod {
                record: record(uid),
                pod: uid_of(&record(uid)).unwrap(),
            });
        })
        .unwrap_or_else(|e| panic!("{uid:?}: {e:#}"));
    }
    journal.commit().unwrap();
    assert_eq!(names(&root.path().join("pods")).len(), uids.len());
    drop((book, journal));
    let (book, _journal) = load(root.path()).unwrap();
    let refs: Vec<&str> = uids.iter().map(String::as_str).collect();
    assert_all_there(&book, &refs);
}

/// A byte of a record file changed: loading either refuses (naming the file) or gives the
/// record as written. Changes that would still parse to a different record — a damaged
/// field name dropping the field (for `holdings`, the restart's check of the managers'
/// state against what the pod was given), a changed digit — are caught by the record's
/// checksum and its checked field names.
#[test]
fn damage_at_every_byte_of_a_record_is_refused_or_harmless() {
    let uid = "0b5a7a3e-4f4c-4d7e-9a8e-1c2b3d4e5f60";
    let bytes = checked_bytes_of(uid);
    let mut silent = Vec::new();
    for at in 0..bytes.len() {
        for damage in [0x01u8, 0x20] {
            let root = tempfile::tempdir().unwrap();
            let pods = root.path().join("pods");
            std::fs::create_dir_all(&pods).unwrap();
            let mut damaged = bytes.clone();
            damaged[at] ^= damage;
            let path = pods.join(format!("{uid}.json"));
            std::fs::write(&path, &damaged).unwrap();
            match load(root.path()) {
                Err(err) => {
                    let err = format!("{err:#}");
                    assert!(err.contains("pods/"), "byte {at}: not named: {err}");
                }
                Ok((book, _)) => {
                    let loaded = book.all();
                    if loaded.len() != 1 || loaded[0].record != record(uid) {
                        silent.push(format!(
                            "byte {at} ({:?} -> {:?})",
                            bytes[at] as char, damaged[at] as char
                        ));
                    }
                }
            }
        }
    }
    assert!(
        silent.is_empty(),
        "{} damaged records read as different records, e.g. {:?}",
        silent.len(),
        &silent[..silent.len().min(8)]
    );
}

/// The narrowest case of the above, kept apart: the field name `holdings` damaged, also in
/// an older corral's record (no checksum to catch it: the field names are checked).
#[test]
fn a_damaged_holdings_field_name_is_refused() {
    let uid = "p1";
    let text = String::from_utf8(bytes_of(uid)).unwrap();
    assert!(text.contains("\"holdings\""));
    let root = tempfile::tempdir().unwrap();
    let pods = root.path().join("pods");
    std::fs::create_dir_all(&pods).unwrap();
    std::fs::write(
        pods.join("p1.json"),
        text.replace("\"holdings\"", "\"holdingr\""),
    )
    .unwrap();
    match load(root.path()) {
        Err(err) => assert!(format!("{err:#}").contains("p1.json"), "{err:#}"),
        Ok((book, _)) => panic!(
            "a damaged record was read, its holdings {:?}",
            book.get(uid).unwrap().record.holdings
        ),
    }
}

/// A record cut short at any length (a torn copy, a full disk under an older writer) is a
/// refusal naming the file, never an empty or partial pod.
#[test]
fn a_record_cut_at_every_length_is_refused_naming_the_file() {
    let uid = "0b5a7a3e-4f4c-4d7e-9a8e-1c2b3d4e5f60";
    let bytes = checked_bytes_of(uid);
    for len in 0..bytes.len() {
        let root = tempfile::tempdir().unwrap();
        let pods = root.path().join("pods");
        std::fs::create_dir_all(&pods).unwrap();
        std::fs::write(pods.join(format!("{uid}.json")), &bytes[..len]).unwrap();
        let err = match load(root.path()) {
            Err(err) => format!("{err:#}"),
            Ok(_) => panic!("a record cut at {len} bytes was read"),
        };
        assert!(err.contains(&format!("{uid}.json")), "{len}: {err}");
    }
}
