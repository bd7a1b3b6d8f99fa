//! A journaled store writes at once while its journal is not active (before `activate`,
//! after `retire`), and such a write is durable on its own: its data is fsynced before it
//! is renamed into place. The agent renames pod records an older corral named its own way
//! before its journal starts, then removes the old file durably; an unsynced new file could
//! come back empty after a power loss, with the old one gone. Checked with strace (the test
//! says why it did not run where strace is missing).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use corral_checkpoint::{CheckpointStore, Journal, JournalOptions, Managed};

const CHILD_DIR: &str = "CORRAL_CHECKPOINT_WRITE_THROUGH_DIR";

/// The child: a write through a journal that is not active yet, and one after it retired.
/// Does nothing when run as an ordinary test.
#[test]
fn write_through_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let root = Path::new(&dir);
    let managed = [Managed::Dir("pods".into())];
    let (journal, _) =
        Journal::open(root, "state.journal", &managed, JournalOptions::default()).unwrap();
    let journal = Arc::new(journal);
    let store = CheckpointStore::open(root.join("pods"))
        .unwrap()
        .with_journal(Arc::clone(&journal));
    store
        .write_bytes("before.json", b"before activation")
        .unwrap();
    journal.activate().unwrap();
    journal.retire().unwrap();
    store.write_bytes("after.json", b"after retiring").unwrap();
}

#[test]
fn a_write_while_the_journal_is_not_active_is_fsynced_before_its_rename() {
    let probe = Command::new("strace").arg("-V").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("not run: needs strace");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let status = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=openat,fsync,fdatasync,rename,renameat,renameat2",
        ])
        .arg("-o")
        .arg(&trace)
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "write_through::write_through_child",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, &root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the child failed: {status}");
    let trace = std::fs::read_to_string(&trace).unwrap();
    for name in ["before.json", "after.json"] {
        // The temporary file's descriptor, then an fsync of it before the rename.
        let lines: Vec<&str> = trace.lines().collect();
        let opened = lines
            .iter()
            .position(|l| l.contains("openat(") && l.contains(&format!(".{name}.tmp.")))
            .unwrap_or_else(|| panic!("{name}: no temporary file in\n{trace}"));
        let fd = lines[opened]
            .rsplit("= ")
            .next()
            .and_then(|n| n.trim().parse::<u32>().ok())
            .unwrap_or_else(|| panic!("{name}: {}", lines[opened]));
        let renamed = lines[opened..]
            .iter()
            .position(|l| l.contains("rename") && l.contains(&format!("/pods/{name}\"")))
            .unwrap_or_else(|| panic!("{name}: never renamed into place\n{trace}"));
        let synced = lines[opened..opened + renamed].iter().any(|l| {
            l.contains(&format!("fsync({fd})")) || l.contains(&format!("fdatasync({fd})"))
        });
        assert!(
            synced,
            "{name}: renamed into place unsynced:\n{}",
            lines[opened..=opened + renamed].join("\n")
        );
    }
}
