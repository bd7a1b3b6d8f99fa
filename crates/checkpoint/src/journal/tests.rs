//! The journal against crashes at every point: uncommitted writes undone, torn tails,
//! a damaged head, group commit, compaction, and a property over random runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::store::CheckpointStore;

fn managed(dir: &Path) -> Vec<Managed> {
    vec![
        Managed::File(dir.join("cpu_manager_state")),
        Managed::Dir(dir.join("pods")),
    ]
}

fn open(dir: &Path, compact_at: u64) -> (Arc<Journal>, Recovery) {
    let (journal, recovery) = Journal::open(
        dir.join("journal"),
        &managed(dir),
        JournalOptions { compact_at },
    )
    .unwrap();
    journal.activate().unwrap();
    (Arc::new(journal), recovery)
}

/// Every managed file's bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    read_managed(&managed(dir)).unwrap()
}

#[test]
fn a_first_open_takes_the_files_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("cpu_manager_state"), b"old").unwrap();
    let (journal, recovery) = open(dir.path(), 1 << 20);
    assert!(!recovery.replayed);
    assert_eq!(journal.lock().view.len(), 1);
    let (unactivated, _) = Journal::open(
        dir.path().join("journal"),
        &managed(dir.path()),
        JournalOptions::default(),
    )
    .unwrap();
    // Not activated: a commit is refused and the journal on disk is left as it was.
    unactivated
        .stage(&dir.path().join("cpu_manager_state"), Some(b"x"), || Ok(()))
        .unwrap();
    assert!(matches!(
        unactivated.commit(),
        Err(CheckpointError::JournalFailed { .. })
    ));
    drop(unactivated);
    drop(journal);
    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert!(recovery.replayed);
    assert_eq!(recovery.records, 1);
    assert!(recovery.restored.is_empty() && recovery.removed.is_empty());
}

#[test]
fn uncommitted_writes_are_undone_committed_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let store = CheckpointStore::open(dir.path())
        .unwrap()
        .with_journal(Arc::clone(&journal));
    let pods = CheckpointStore::open(dir.path().join("pods"))
        .unwrap()
        .with_journal(Arc::clone(&journal));
    store.write_bytes("cpu_manager_state", b"v1").unwrap();
    pods.write_bytes("a.json", b"pod a").unwrap();
    assert!(journal.has_pending());
    journal.commit().unwrap();
    assert!(!journal.has_pending());
    let committed = files(dir.path());

    // Written and renamed into place, never committed: a crash now.
    store.write_bytes("cpu_manager_state", b"v2").unwrap();
    pods.write_bytes("b.json", b"pod b").unwrap();
    pods.remove("a.json").unwrap();
    assert_ne!(files(dir.path()), committed);
    drop((store, pods, journal));

    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert_eq!(files(dir.path()), committed);
    assert_eq!(
        recovery.restored,
        [
            dir.path().join("cpu_manager_state"),
            dir.path().join("pods/a.json")
        ]
    );
    assert_eq!(recovery.removed, [dir.path().join("pods/b.json")]);
}

#[test]
fn a_retired_journal_leaves_the_files_as_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let store = CheckpointStore::open(dir.path())
        .unwrap()
        .with_journal(Arc::clone(&journal));
    store.write_bytes("cpu_manager_state", b"mine").unwrap();
    journal.retire().unwrap();
    assert!(!journal.path().exists());
    assert!(journal.commit().is_ok(), "nothing staged: nothing to do");
    drop((store, journal));
    // Someone else (a kubelet taking over) rewrites the file: the next open keeps it.
    fs::write(dir.path().join("cpu_manager_state"), b"theirs").unwrap();
    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert!(!recovery.replayed);
    assert_eq!(
        fs::read(dir.path().join("cpu_manager_state")).unwrap(),
        b"theirs"
    );
}

#[test]
fn a_torn_tail_ends_the_replay_a_damaged_head_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let store = CheckpointStore::open(dir.path())
        .unwrap()
        .with_journal(Arc::clone(&journal));
    store.write_bytes("cpu_manager_state", b"v1").unwrap();
    journal.commit().unwrap();
    let len_after_v1 = place(journal.path()).0;
    store.write_bytes("cpu_manager_state", b"v2").unwrap();
    journal.commit().unwrap();
    let path = journal.path().to_path_buf();
    drop((store, journal));
    // Cut the last record short.
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert!(recovery.torn_tail.is_some(), "{recovery:?}");
    assert_eq!(
        fs::read(dir.path().join("cpu_manager_state")).unwrap(),
        b"v1"
    );
    assert!(len_after_v1 > 0);

    fs::write(&path, b"not a journal").unwrap();
    let err = Journal::open(&path, &managed(dir.path()), JournalOptions::default()).unwrap_err();
    assert!(
        matches!(err, CheckpointError::JournalDamaged { offset: 0, .. }),
        "{err}"
    );
}

#[test]
fn concurrent_committers_share_fsyncs_and_all_become_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let pods = CheckpointStore::open(dir.path().join("pods"))
        .unwrap()
        .with_journal(Arc::clone(&journal));
    std::thread::scope(|s| {
        for t in 0..8 {
            let pods = pods.clone();
            let journal = Arc::clone(&journal);
            s.spawn(move || {
                for i in 0..25 {
                    pods.write_bytes(&format!("p{t}-{i}.json"), b"x").unwrap();
                    journal.commit().unwrap();
                }
            });
        }
    });
    let path = journal.path().to_path_buf();
    let records = {
        let bytes = fs::read(&path).unwrap();
        let mut at = 0;
        let mut n = 0;
        while at < bytes.len() {
            at = record::decode(&bytes, at).unwrap().next;
            n += 1;
        }
        n
    };
    assert!(records <= 201, "{records}");
    drop((pods, journal));
    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert!(recovery.restored.is_empty() && recovery.removed.is_empty());
    assert_eq!(files(dir.path()).len(), 200);
}

#[test]
fn compaction_keeps_the_journal_small_and_the_state_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 4096);
    let store = CheckpointStore::open(dir.path())
        .unwrap()
        .with_journal(Arc::clone(&journal));
    for i in 0..500u32 {
        store
            .write_bytes("cpu_manager_state", format!("v{i}").repeat(20).as_bytes())
            .unwrap();
        journal.commit().unwrap();
    }
    assert!(place(journal.path()).0 < 8192);
    let before = files(dir.path());
    drop((store, journal));
    let (_journal, recovery) = open(dir.path(), 4096);
    assert!(recovery.restored.is_empty());
    assert_eq!(files(dir.path()), before);
}

/// The journal's length and inode (a compaction replaces the file).
fn place(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(path).unwrap();
    (meta.len(), meta.ino())
}

#[derive(Debug, Clone)]
enum Op {
    Write(u8, u8),
    Remove(u8),
    Commit,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..4u8, any::<u8>()).prop_map(|(f, v)| Op::Write(f, v)),
        1 => (0..4u8).prop_map(Op::Remove),
        2 => Just(Op::Commit),
    ]
}

fn key(f: u8) -> String {
    if f == 0 {
        "cpu_manager_state".to_owned()
    } else {
        format!("pods/p{f}.json")
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any run of writes, removals and commits, killed at any point: the files after the
    /// next open are the state of the last commit. With the last commit's record cut
    /// anywhere (a power loss during that commit, which therefore never returned), they
    /// are the state of that commit or of the one before.
    #[test]
    fn after_a_crash_the_files_are_a_committed_state(
        ops in prop::collection::vec(op(), 1..40),
        cut in any::<prop::sample::Index>(),
        compact_at in prop_oneof![Just(256u64), Just(1u64 << 20)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) = open(dir.path(), compact_at);
        let state = CheckpointStore::open(dir.path()).unwrap().with_journal(Arc::clone(&journal));
        let pods = CheckpointStore::open(dir.path().join("pods")).unwrap().with_journal(Arc::clone(&journal));
        let store_of = |f: u8| if f == 0 { (&state, key(0)) } else { (&pods, format!("p{f}.json")) };
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        // Committed states, in order; the journal's length after each commit.
        let mut committed = vec![(model.clone(), place(journal.path()))];
        for op in &ops {
            match op {
                Op::Write(f, v) => {
                    let (store, name) = store_of(*f);
                    store.write_bytes(&name, &[*v; 3]).unwrap();
                    model.insert(key(*f), vec![*v; 3]);
                }
                Op::Remove(f) => {
                    let (store, name) = store_of(*f);
                    store.remove(&name).unwrap();
                    model.remove(&key(*f));
                }
                Op::Commit => {
                    journal.commit().unwrap();
                    committed.push((model.clone(), place(journal.path())));
                }
            }
        }
        let path = journal.path().to_path_buf();
        drop((state, pods, journal));
        let bytes = fs::read(&path).unwrap();
        let n = committed.len();
        // The last commit appended a record (no compaction replaced the file): cut it.
        let torn = n >= 2
            && committed[n - 1].1.1 == committed[n - 2].1.1
            && committed[n - 1].1.0 > committed[n - 2].1.0;
        if torn {
            let start = committed[n - 2].1.0 as usize;
            let keep = start + cut.index(bytes.len() - start + 1);
            fs::write(&path, &bytes[..keep]).unwrap();
        }
        let (_journal, _) = open(dir.path(), compact_at);
        let now: BTreeMap<String, Vec<u8>> = files(dir.path())
            .into_iter()
            .map(|(p, d)| (p.strip_prefix(dir.path()).unwrap().to_string_lossy().into_owned(), d))
            .collect();
        if torn {
            prop_assert!(now == committed[n - 1].0 || now == committed[n - 2].0, "{now:?}");
        } else {
            prop_assert_eq!(&now, &committed[n - 1].0);
        }
    }
}
