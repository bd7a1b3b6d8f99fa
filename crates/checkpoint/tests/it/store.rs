//! The store on a real directory: create/get/remove/list as upstream's checkpoint manager,
//! typed errors, key validation and file modes.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use corral_checkpoint::{
    CPU_MANAGER_FILE, Checkpoint, CheckpointError, CheckpointStore, CpuManagerCheckpoint,
    CpuManagerCheckpointV1, DeviceManagerCheckpoint, StoreOptions,
};

fn cpu(policy: &str, default: &str) -> CpuManagerCheckpoint {
    CpuManagerCheckpoint {
        policy_name: policy.to_owned(),
        default_cpu_set: default.to_owned(),
        entries: Some(BTreeMap::from([(
            "pod".to_owned(),
            Some(BTreeMap::from([("c".to_owned(), "4-5".to_owned())])),
        )])),
    }
}

/// Port of upstream `checkpointmanager.TestCheckpointManager`: create and get under two
/// keys, reading into a different structure fails as corrupted, a corrupt checksum is
/// detected, list, remove (twice), and get of a removed key fails.
#[test]
fn checkpoint_manager_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    let first = cpu("static", "0-3");
    let second = cpu("none", "");
    store.create("key1", &first).unwrap();
    store.create("key2", &second).unwrap();
    assert_eq!(store.get::<CpuManagerCheckpoint>("key1").unwrap(), first);
    assert_eq!(store.get::<CpuManagerCheckpoint>("key2").unwrap(), second);

    // A different structure (v1) refuses the v2 file.
    assert!(store.get::<CpuManagerCheckpointV1>("key1").is_err());

    // Corrupt checksum: another value's file under key1 with key1's checksum.
    let good = first.encode().unwrap();
    let checksum = first.checksum().unwrap().to_string();
    let other = String::from_utf8(cpu("static", "0-7").encode().unwrap()).unwrap();
    let other_checksum = cpu("static", "0-7").checksum().unwrap().to_string();
    let forged = other.replace(&other_checksum, &checksum);
    assert_ne!(forged.as_bytes(), good.as_slice());
    store.write_bytes("key1", forged.as_bytes()).unwrap();
    match store.get::<CpuManagerCheckpoint>("key1") {
        Err(CheckpointError::ChecksumMismatch {
            path,
            expected,
            actual,
            ..
        }) => {
            assert_eq!(path.as_deref(), Some(dir.path().join("key1").as_path()));
            assert_eq!(expected.to_string(), checksum);
            assert_eq!(actual.to_string(), other_checksum);
        }
        other => panic!("expected a checksum mismatch, got {other:?}"),
    }

    assert_eq!(store.list().unwrap(), vec!["key1", "key2"]);
    store.remove("key1").unwrap();
    store.remove("key1").unwrap();
    assert_eq!(store.list().unwrap(), vec!["key2"]);
    assert!(matches!(
        store.get::<CpuManagerCheckpoint>("key1"),
        Err(CheckpointError::NotFound { key, .. }) if key == "key1"
    ));
}

#[test]
fn invalid_keys_are_refused_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    for key in ["", "../escape", "a/b", ".hidden", "x-"] {
        assert!(matches!(
            store.write_bytes(key, b"{}"),
            Err(CheckpointError::InvalidKey { .. })
        ));
        assert!(matches!(
            store.read_bytes(key),
            Err(CheckpointError::InvalidKey { .. })
        ));
        assert!(matches!(
            store.remove(key),
            Err(CheckpointError::InvalidKey { .. })
        ));
    }
    assert!(store.list().unwrap().is_empty());
}

/// The permission bits of the file stored under `key`.
fn file_mode(store: &CheckpointStore, key: &str) -> u32 {
    std::fs::metadata(store.path_of(key).unwrap())
        .unwrap()
        .permissions()
        .mode()
}

#[test]
fn file_mode_defaults_to_upstreams_and_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path().join("a")).unwrap();
    store.create(CPU_MANAGER_FILE, &cpu("none", "")).unwrap();
    let mode = file_mode(&store, CPU_MANAGER_FILE);
    assert_eq!(mode & 0o777, 0o600);

    let options = StoreOptions {
        file_mode: 0o644,
        ..StoreOptions::default()
    };
    let store = CheckpointStore::with_options(dir.path().join("b"), options).unwrap();
    store.create(CPU_MANAGER_FILE, &cpu("none", "")).unwrap();
    let mode = file_mode(&store, CPU_MANAGER_FILE);
    assert_eq!(mode & 0o777, 0o644);
}

#[test]
fn unparsable_file_is_a_syntax_error_with_position() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    store
        .write_bytes("kubelet_internal_checkpoint", b"{\n  \"Data\": garbage}")
        .unwrap();
    match store.get::<DeviceManagerCheckpoint>("kubelet_internal_checkpoint") {
        Err(CheckpointError::Syntax {
            path,
            line,
            column,
            offset,
            ..
        }) => {
            assert!(path.is_some());
            assert_eq!((line, column, offset), (2, 11, 12));
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn rewrite_replaces_and_leaves_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(dir.path()).unwrap();
    for n in 0..20 {
        store
            .create(CPU_MANAGER_FILE, &cpu("static", &format!("0-{n}")))
            .unwrap();
    }
    assert_eq!(
        store.get::<CpuManagerCheckpoint>(CPU_MANAGER_FILE).unwrap(),
        cpu("static", "0-19")
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from(CPU_MANAGER_FILE)]);
    assert!(store.remove_stale_temp_files().unwrap().is_empty());
}

/// The pid of a process that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let pid = child.id();
    child.wait().expect("reap true");
    pid
}

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Interrupted writes leave `.<key>.tmp.<pid>.<n>`; opening the store removes those of
/// writers that are gone (and this process's own leftovers, e.g. from an earlier process
/// that had the same pid), and nothing else.
#[test]
fn open_removes_stale_temp_files_of_our_naming_only() {
    let dir = tempfile::tempdir().unwrap();
    let dead = dead_pid();
    let own = std::process::id();
    let stale = [
        format!(".{CPU_MANAGER_FILE}.tmp.{dead}.0"),
        format!(".{CPU_MANAGER_FILE}.tmp.{dead}.17"),
        format!(".kubelet_internal_checkpoint.tmp.{dead}.3"),
        format!(".a.tmp.b.tmp.{dead}.1"),
        // This process cannot be writing these: it never used such counters in this dir.
        format!(".{CPU_MANAGER_FILE}.tmp.{own}.18446744073709551615"),
    ];
    let kept = [
        CPU_MANAGER_FILE.to_owned(),
        "notes.tmp.1.2".to_owned(),
        ".hidden".to_owned(),
        format!(".{CPU_MANAGER_FILE}.tmp.x.1"),
        format!(".{CPU_MANAGER_FILE}.tmp.{dead}"),
        format!(".{CPU_MANAGER_FILE}.tmp.{dead}.1.bak"),
        format!(".{CPU_MANAGER_FILE}.tmp.{dead}.-1"),
        format!(".{CPU_MANAGER_FILE}.tmp.+{dead}.1"),
        format!("..tmp.{dead}.1"),
        format!(".bad key.tmp.{dead}.1"),
        // Pid 1 is alive: its temp file may be a write in progress.
        format!(".{CPU_MANAGER_FILE}.tmp.1.0"),
    ];
    for name in stale.iter().chain(&kept) {
        std::fs::write(dir.path().join(name), b"x").unwrap();
    }
    // A directory with a temp file's name is not ours to delete either.
    let dir_like = format!(
        ".{DEVICE}.tmp.{dead}.9",
        DEVICE = "kubelet_internal_checkpoint"
    );
    std::fs::create_dir(dir.path().join(&dir_like)).unwrap();

    let store = CheckpointStore::open(dir.path()).unwrap();

    let mut expected: Vec<String> = kept.to_vec();
    expected.push(dir_like);
    expected.sort();
    assert_eq!(names_in(dir.path()), expected);
    let mut removed: Vec<String> = store
        .removed_at_open()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    removed.sort();
    let mut stale_sorted = stale.to_vec();
    stale_sorted.sort();
    assert_eq!(removed, stale_sorted);
    assert_eq!(
        store.list().unwrap(),
        vec![CPU_MANAGER_FILE, "notes.tmp.1.2"]
    );
}

/// Opening stores on a directory while this process writes to it never removes a write in
/// progress: every write succeeds and the file is always a complete version.
#[test]
fn open_never_removes_a_write_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let writer_store = CheckpointStore::open(dir.path()).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let opener = s.spawn(|| {
            let mut opens = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let store = CheckpointStore::open(dir.path()).expect("open");
                assert!(
                    store.removed_at_open().is_empty(),
                    "removed a live write: {:?}",
                    store.removed_at_open()
                );
                opens += 1;
            }
            opens
        });
        for n in 0..300 {
            let version = cpu("static", &format!("0-{n}"));
            writer_store
                .create(CPU_MANAGER_FILE, &version)
                .unwrap_or_else(|e| panic!("write {n} failed: {e}"));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(opener.join().expect("opener") > 0);
    });
    assert_eq!(names_in(dir.path()), vec![CPU_MANAGER_FILE.to_owned()]);
}
