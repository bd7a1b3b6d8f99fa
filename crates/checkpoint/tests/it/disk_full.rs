//! A full disk during commits (a small tmpfs; mounting one needs root, elsewhere the test
//! says why it did not run): commits fail with a typed error and answer nothing, nothing
//! answered before is lost, and once space is freed the next commit succeeds on its own and
//! makes the failed commits' writes durable too.

use std::fs;
use std::sync::Arc;

use corral_checkpoint::{
    CheckpointError, CheckpointStore, Journal, JournalError, JournalOptions, Managed,
};
use corral_testkit::Tmpfs;

#[test]
fn a_full_disk_fails_commits_cleanly_and_they_succeed_once_space_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let disk = match Tmpfs::mount(&dir.path().join("disk"), 256 << 10) {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("not run: needs a tmpfs ({why})");
            return;
        }
    };
    let root = disk.path();
    let managed = [Managed::Dir("pods".into())];
    let options = JournalOptions {
        compact_at: 64 << 10,
        ..JournalOptions::default()
    };
    let (journal, _) = Journal::open(root, "state.journal", &managed, options.clone()).unwrap();
    journal.activate().unwrap();
    let journal = Arc::new(journal);
    let pods = CheckpointStore::open(root.join("pods"))
        .unwrap()
        .with_journal(Arc::clone(&journal));
    let record = |i: usize| format!("pod {i} ").repeat(40).into_bytes();
    for i in 0..20 {
        pods.write_bytes(&format!("p{i}.json"), &record(i)).unwrap();
        journal.commit().unwrap();
    }
    let filler = disk.fill("filler");

    // Full: every commit fails, typed, and nothing wedges or lies.
    let mut failed = 0;
    for i in 20..40 {
        pods.write_bytes(&format!("p{i}.json"), &record(i)).unwrap();
        match journal.commit() {
            Ok(()) => {}
            Err(CheckpointError::Journal(JournalError::CommitFailed { .. })) => failed += 1,
            Err(other) => panic!("an untyped failure: {other}"),
        }
    }
    assert!(
        failed >= 10,
        "the disk was not full: {failed} commits failed"
    );
    assert!(journal.trouble().is_some());

    // Space back: the next commit succeeds by itself and carries every staged write.
    fs::remove_file(&filler).unwrap();
    pods.write_bytes("p40.json", &record(40)).unwrap();
    journal.commit().unwrap();
    assert!(journal.trouble().is_none(), "{:?}", journal.trouble());
    drop((pods, journal));

    let (journal, recovery) = Journal::open(root, "state.journal", &managed, options).unwrap();
    journal.activate().unwrap();
    assert!(recovery.torn_tail.is_none(), "{recovery:?}");
    for i in 0..=40 {
        let path = root.join(format!("pods/p{i}.json"));
        assert_eq!(fs::read(&path).unwrap(), record(i), "{}", path.display());
    }
}
