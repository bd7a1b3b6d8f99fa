//! The journal against crashes at every point: uncommitted writes undone, torn tails,
//! a damaged head, group commit, compaction, and a property over random runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::error::CheckpointError;
use crate::store::CheckpointStore;

fn managed() -> Vec<Managed> {
    vec![
        Managed::File("cpu_manager_state".into()),
        Managed::Dir("pods".into()),
    ]
}

fn options(compact_at: u64) -> JournalOptions {
    JournalOptions {
        compact_at,
        ..JournalOptions::default()
    }
}

fn try_open(dir: &Path, compact_at: u64) -> Result<(Journal, Recovery)> {
    Journal::open(dir, "journal", &managed(), options(compact_at))
}

fn open(dir: &Path, compact_at: u64) -> (Arc<Journal>, Recovery) {
    let (journal, recovery) = try_open(dir, compact_at).unwrap();
    journal.activate().unwrap();
    (Arc::new(journal), recovery)
}

/// Every managed file's bytes, by path relative to `dir`.
/// A store of `dir` writing through `journal`.
fn journaled(dir: impl AsRef<Path>, journal: &Arc<Journal>) -> CheckpointStore {
    CheckpointStore::open(dir)
        .unwrap()
        .with_journal(Arc::clone(journal))
}

fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    read_managed(dir, &managed(), 1 << 20).unwrap()
}

#[test]
fn a_first_open_takes_the_files_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("cpu_manager_state"), b"old").unwrap();
    let (journal, recovery) = open(dir.path(), 1 << 20);
    assert!(!recovery.replayed);
    assert_eq!(journal.lock().view.len(), 1);
    // One open journal at a time: a second open (another agent on the root) is refused.
    assert!(matches!(
        try_open(dir.path(), 1 << 20),
        Err(CheckpointError::Journal(JournalError::InUse { .. }))
    ));
    drop(journal);
    let (unactivated, _) = try_open(dir.path(), 1 << 20).unwrap();
    // Not activated: nothing is journaled and the journal on disk is left as it was.
    unactivated
        .stage(&dir.path().join("cpu_manager_state"), Some(b"x"), || {
            Ok::<(), CheckpointError>(())
        })
        .unwrap();
    assert!(
        matches!(unactivated.commit(), Ok(())),
        "inactive: the write went through, nothing to commit"
    );
    drop(unactivated);
    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert!(recovery.replayed);
    assert_eq!(recovery.records, 1);
    assert!(recovery.restored.is_empty() && recovery.removed.is_empty());
}

#[test]
fn uncommitted_writes_are_undone_committed_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let store = journaled(dir.path(), &journal);
    let pods = journaled(dir.path().join("pods"), &journal);
    store.write_bytes("cpu_manager_state", b"v1").unwrap();
    pods.write_bytes("a.json", b"pod a").unwrap();
    assert!(journal.has_pending());
    journal.commit().unwrap();
    assert!(!journal.has_pending());
    let committed = files(dir.path());

    // Staged, never committed: the files do not change; a crash now.
    store.write_bytes("cpu_manager_state", b"v2").unwrap();
    pods.write_bytes("b.json", b"pod b").unwrap();
    pods.remove("a.json").unwrap();
    assert_eq!(files(dir.path()), committed);
    drop((store, pods, journal));
    // And files changed behind the journal's back are brought back to it.
    fs::write(dir.path().join("cpu_manager_state"), b"v3").unwrap();
    fs::remove_file(dir.path().join("pods/a.json")).unwrap();
    fs::write(dir.path().join("pods/c.json"), b"pod c").unwrap();

    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert_eq!(files(dir.path()), committed);
    assert_eq!(
        recovery.restored,
        [
            dir.path().join("cpu_manager_state"),
            dir.path().join("pods/a.json")
        ]
    );
    assert_eq!(recovery.removed, [dir.path().join("pods/c.json")]);
}

#[test]
fn a_retired_journal_leaves_the_files_as_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let store = journaled(dir.path(), &journal);
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

/// A crash during a commit cuts its record short before its mark is written: the replay
/// drops it. The same cut of an answered commit (its mark written) is refused, as is a
/// damaged head.
#[test]
fn a_torn_tail_ends_the_replay_a_cut_answered_commit_or_a_damaged_head_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let store = journaled(dir.path(), &journal);
    store.write_bytes("cpu_manager_state", b"v1").unwrap();
    journal.commit().unwrap();
    let mark_after_v1 = fs::read(journal.mark_path()).unwrap();
    store.write_bytes("cpu_manager_state", b"v2").unwrap();
    journal.commit().unwrap();
    let (path, mark) = (
        journal.path().to_path_buf(),
        journal.mark_path().to_path_buf(),
    );
    drop((store, journal));
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();

    // Answered (the mark names commit 2): refused, the files left as they are.
    let err = try_open(dir.path(), 1 << 20).unwrap_err();
    assert!(
        matches!(
            err,
            CheckpointError::Journal(JournalError::CommitsMissing {
                ends_at: 1,
                answered: 2,
                ..
            })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("move the journal"), "{err}");
    assert_eq!(
        fs::read(dir.path().join("cpu_manager_state")).unwrap(),
        b"v2"
    );

    // A crash during commit 2: its record cut, its mark never written, its file never
    // renamed into place.
    fs::write(&mark, &mark_after_v1).unwrap();
    fs::write(dir.path().join("cpu_manager_state"), b"v1").unwrap();
    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert!(recovery.torn_tail.is_some(), "{recovery:?}");
    assert_eq!(recovery.last_commit, 1);
    assert_eq!(
        fs::read(dir.path().join("cpu_manager_state")).unwrap(),
        b"v1"
    );
    drop(_journal);

    fs::write(&path, b"not a journal").unwrap();
    let err = try_open(dir.path(), 1 << 20).unwrap_err();
    assert!(
        matches!(
            err,
            CheckpointError::Journal(JournalError::Damaged { offset: 0, .. })
        ),
        "{err}"
    );
}

#[test]
fn concurrent_committers_share_fsyncs_and_all_become_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let pods = journaled(dir.path().join("pods"), &journal);
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
    let store = journaled(dir.path(), &journal);
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
    /// next open are the state of the last commit. A crash during the last commit (its
    /// record cut anywhere, its mark and files not yet written) gives the commit before.
    #[test]
    fn after_a_crash_the_files_are_the_last_answered_state(
        ops in prop::collection::vec(op(), 1..40),
        cut in any::<prop::sample::Index>(),
        compact_at in prop_oneof![Just(256u64), Just(1u64 << 20)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) = open(dir.path(), compact_at);
        let state = journaled(dir.path(), &journal);
        let pods = journaled(dir.path().join("pods"), &journal);
        let store_of = |f: u8| if f == 0 { (&state, key(0)) } else { (&pods, format!("p{f}.json")) };
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        // Answered states, in order; the journal's place and the mark's bytes after each.
        let mut committed = vec![(model.clone(), place(journal.path()), fs::read(journal.mark_path()).unwrap())];
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
                    committed.push((model.clone(), place(journal.path()), fs::read(journal.mark_path()).unwrap()));
                }
            }
        }
        let (path, mark) = (journal.path().to_path_buf(), journal.mark_path().to_path_buf());
        drop((state, pods, journal));
        let bytes = fs::read(&path).unwrap();
        let n = committed.len();
        // The last commit appended a record (no compaction replaced the file): a crash
        // during it cuts that record and leaves the mark and files of the commit before.
        let torn = n >= 2
            && committed[n - 1].1.1 == committed[n - 2].1.1
            && committed[n - 1].1.0 > committed[n - 2].1.0;
        if torn {
            let start = committed[n - 2].1.0 as usize;
            let keep = start + cut.index(bytes.len() - start);
            fs::write(&path, &bytes[..keep]).unwrap();
            fs::write(&mark, &committed[n - 2].2).unwrap();
            for name in committed[n - 1].0.keys() {
                fs::remove_file(dir.path().join(name)).unwrap();
            }
            for (name, before) in &committed[n - 2].0 {
                fs::write(dir.path().join(name), before).unwrap();
            }
        }
        let (_journal, _) = open(dir.path(), compact_at);
        let now: BTreeMap<String, Vec<u8>> = files(dir.path())
            .into_iter()
            .map(|(p, d)| (p.to_string_lossy().into_owned(), d))
            .collect();
        if torn {
            prop_assert_eq!(&now, &committed[n - 2].0);
        } else {
            prop_assert_eq!(&now, &committed[n - 1].0);
        }
    }
}

/// A commit whose append fails (here: a handle that cannot write, as a full disk or an I/O
/// error would) answers an error and wedges nothing: the next commit rewrites the journal
/// and makes the failed commit's writes durable with its own; the files never held them
/// before that.
#[test]
fn a_failed_commit_is_retried_by_the_next_and_never_wedges() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let store = journaled(dir.path(), &journal);
    store.write_bytes("cpu_manager_state", b"v1").unwrap();
    journal.commit().unwrap();
    store.write_bytes("cpu_manager_state", b"v2").unwrap();
    // The append handle now refuses writes.
    journal.lock().file = Some(File::open(journal.path()).unwrap());
    let err = journal.commit().unwrap_err();
    assert!(
        matches!(
            err,
            CheckpointError::Journal(JournalError::CommitFailed { op: "append", .. })
        ),
        "{err}"
    );
    assert!(journal.trouble().is_some());
    assert!(journal.has_pending());
    assert_eq!(
        fs::read(dir.path().join("cpu_manager_state")).unwrap(),
        b"v1"
    );
    let pods = journaled(dir.path().join("pods"), &journal);
    pods.write_bytes("a.json", b"pod a").unwrap();
    journal.commit().unwrap();
    assert!(journal.trouble().is_none());
    assert_eq!(
        fs::read(dir.path().join("cpu_manager_state")).unwrap(),
        b"v2"
    );
    assert_eq!(fs::read(dir.path().join("pods/a.json")).unwrap(), b"pod a");
    let committed = files(dir.path());
    drop((store, pods, journal));
    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert!(recovery.torn_tail.is_none(), "{recovery:?}");
    assert_eq!(files(dir.path()), committed);
}

/// A file whose rename fails after its commit was durable lags behind the journal; the
/// journal says so (`trouble`) and the next commit, even one with nothing staged, writes it.
/// `pods/a.json` committed but lagging: a directory stands where its temporary file must
/// go, so its rename cannot happen until [`unblock`] removes it.
fn lagging_pod(dir: &Path) -> (Arc<Journal>, CheckpointStore) {
    let (journal, _) = open(dir, 1 << 20);
    let pods = journaled(dir.join("pods"), &journal);
    fs::create_dir(dir.join("pods").join(files::APPLY_TEMP)).unwrap();
    pods.write_bytes("a.json", b"pod a").unwrap();
    journal.commit().unwrap();
    (journal, pods)
}

fn unblock(dir: &Path) {
    fs::remove_dir(dir.join("pods").join(files::APPLY_TEMP)).unwrap();
}

#[test]
fn a_file_lagging_behind_the_journal_is_written_by_the_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _pods) = lagging_pod(dir.path());
    assert!(!dir.path().join("pods/a.json").exists());
    assert!(journal.trouble().is_some_and(|t| t.contains("lag")));
    assert!(journal.has_pending());
    unblock(dir.path());
    journal.commit().unwrap();
    assert!(journal.trouble().is_none());
    assert!(!journal.has_pending());
    assert_eq!(fs::read(dir.path().join("pods/a.json")).unwrap(), b"pod a");
}

/// A clean stop while a file lags behind the journal keeps the journal: the files are not
/// the state yet, and the next open brings them up to it.
#[test]
fn retiring_with_a_lagging_file_keeps_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, pods) = lagging_pod(dir.path());
    assert!(journal.retire().is_err());
    assert!(journal.path().exists());
    drop((pods, journal));
    unblock(dir.path());
    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert_eq!(recovery.restored, [dir.path().join("pods/a.json")]);
    assert_eq!(fs::read(dir.path().join("pods/a.json")).unwrap(), b"pod a");
}

/// A new journal costs two syncs (its snapshot and their directory; the mark's bytes get
/// no fsync of their own), a commit one. A mark whose bytes a power loss took (empty) still
/// stands for the lone snapshot, and a lone first snapshot whose mark is gone (a first
/// activation cut short on a file system that kept the rename but not the mark made before
/// it) is taken; a mark gone after commits were answered, or a mark of damaged bytes, is
/// refused.
#[test]
fn a_new_journal_costs_two_syncs_and_its_mark_holds_until_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("journal.mark");
    let (journal, _) = open(dir.path(), 1 << 20);
    assert_eq!(journal.syncs(), 2);
    assert_eq!(
        fs::read(&mark).unwrap().len(),
        mark::LEN,
        "both slots name the journal"
    );
    drop(journal);
    // Its bytes lost with a power loss: unwritten, the lone snapshot is the state.
    fs::write(&mark, b"").unwrap();
    let (journal, recovery) = open(dir.path(), 1 << 20);
    assert!(recovery.replayed);
    assert_eq!(journal.syncs(), 2, "an unchanged replay writes no file");
    drop(journal);
    // The mark gone with only the first snapshot: a first activation cut short.
    fs::remove_file(&mark).unwrap();
    let (journal, recovery) = open(dir.path(), 1 << 20);
    assert!(recovery.replayed);
    let store = journaled(dir.path(), &journal);
    store.write_bytes("cpu_manager_state", b"one").unwrap();
    let before = journal.syncs();
    journal.commit().unwrap();
    assert_eq!(journal.syncs(), before + 1, "one fdatasync per commit");
    assert!(
        !fs::read(&mark).unwrap().is_empty(),
        "the commit wrote a slot"
    );
    drop((store, journal));
    // Commits answered, then the mark is gone: refused, as before.
    let saved = fs::read(&mark).unwrap();
    fs::remove_file(&mark).unwrap();
    assert!(matches!(
        try_open(dir.path(), 1 << 20),
        Err(CheckpointError::Journal(JournalError::MarkUnusable { .. }))
    ));
    // Zeros where the slot was (its data lost with a power loss): the commits the journal
    // holds stand, as a lower bound allows.
    fs::write(&mark, vec![0; saved.len()]).unwrap();
    let (_journal, recovery) = open(dir.path(), 1 << 20);
    assert_eq!(recovery.records, 2);
    assert_eq!(files(dir.path())[Path::new("cpu_manager_state")], b"one");
}

/// A mark of bytes no mark ever holds is refused, even short ones.
#[test]
fn a_mark_of_foreign_bytes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), 1 << 20));
    for bytes in [&b"x"[..], &[0, 0, 1], &[7; 24]] {
        fs::write(dir.path().join("journal.mark"), bytes).unwrap();
        assert!(
            matches!(
                try_open(dir.path(), 1 << 20),
                Err(CheckpointError::Journal(JournalError::MarkUnusable { .. }))
            ),
            "{bytes:?}"
        );
    }
}

/// A write of what a file holds as of the last commit stages nothing: the commit after it
/// costs no sync. A write back to it after another write is staged (the later one wins).
#[test]
fn a_write_that_changes_nothing_stages_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (journal, _) = open(dir.path(), 1 << 20);
    let store = journaled(dir.path(), &journal);
    store.write_bytes("cpu_manager_state", b"one").unwrap();
    journal.commit().unwrap();
    let synced = journal.syncs();
    store.write_bytes("cpu_manager_state", b"one").unwrap();
    assert!(!journal.has_pending());
    journal.commit().unwrap();
    assert_eq!(journal.syncs(), synced);
    // Changed, then back: both staged, the last wins.
    store.write_bytes("cpu_manager_state", b"two").unwrap();
    store.write_bytes("cpu_manager_state", b"one").unwrap();
    assert!(journal.has_pending());
    journal.commit().unwrap();
    assert_eq!(journal.syncs(), synced + 1);
    assert_eq!(files(dir.path())[Path::new("cpu_manager_state")], b"one");
}

/// `Journal::syncs` counts every fsync and fdatasync of a journal's life: a replay that
/// restores and removes files, its activation, commits, compactions and its retiring. The
/// number asserted was checked against the system calls the test makes
/// (`strace -f -e trace=fsync,fdatasync`, see the commit message).
#[test]
fn syncs_counts_every_fsync_of_a_replay_commits_compactions_and_retiring() {
    let dir = tempfile::tempdir().unwrap();
    // A run that left files behind its journal: a kill after two commits, files rolled
    // back (one changed, one gone, one extra).
    let (journal, _) = open(dir.path(), 1 << 20);
    let store = journaled(dir.path(), &journal);
    store.write_bytes("cpu_manager_state", b"one").unwrap();
    journal.commit().unwrap();
    let pods = journaled(dir.path().join("pods"), &journal);
    pods.write_bytes("a.json", b"pod a").unwrap();
    journal.commit().unwrap();
    drop((store, pods, journal));
    fs::write(dir.path().join("cpu_manager_state"), b"stale").unwrap();
    fs::remove_file(dir.path().join("pods/a.json")).unwrap();
    fs::write(dir.path().join("pods/extra.json"), b"extra").unwrap();
    let (journal, recovery) = try_open(dir.path(), 300).unwrap();
    assert_eq!(recovery.restored.len(), 2, "{recovery:?}");
    assert_eq!(recovery.removed.len(), 1, "{recovery:?}");
    // Restoring a file: its fsync and its directory's; removing one: its directory's.
    let replayed = journal.syncs();
    assert_eq!(replayed, 2 + 2 + 1, "the replay's");
    journal.activate().unwrap();
    assert_eq!(journal.syncs(), replayed + 2, "the activation's");
    let journal = Arc::new(journal);
    let store = journaled(dir.path(), &journal);
    let mut sizes = Vec::new();
    for i in 0..20u8 {
        store.write_bytes("cpu_manager_state", &[i; 40]).unwrap();
        let before = journal.syncs();
        journal.commit().unwrap();
        sizes.push(fs::metadata(journal.path()).unwrap().len());
        let cost = journal.syncs() - before;
        // A commit: its fdatasync; one that compacted: its snapshot's two more.
        let compacted = i > 0 && sizes[i as usize] < sizes[i as usize - 1];
        assert_eq!(cost, if compacted { 3 } else { 1 }, "commit {i}: {sizes:?}");
    }
    assert!(
        sizes.windows(2).any(|w| w[1] < w[0]),
        "compacted at least once: {sizes:?}"
    );
    let before = journal.syncs();
    journal.retire().unwrap();
    // Every file (2) and its directory (root, pods), then the journal's directory twice.
    assert_eq!(journal.syncs() - before, 2 + 2 + 2, "the retiring's");
    println!("syncs: {}", journal.syncs());
}
