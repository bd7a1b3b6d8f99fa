//! The DRA manager over a journaled store (as the agent runs it): a claim is in the journal
//! — what a replay after a crash restores — before a driver is asked to prepare it; it
//! stays there until the driver unprepared it; no operation answers before its change is
//! durable; a commit that fails (a full disk) fails the operation; driver calls never run
//! under the cache lock; and a write that fails on a plain store is never taken for a
//! durable record by a retry.
//!
//! Crashes are real: a child process (this test binary, re-run on one test) runs the
//! manager and is SIGKILLed while it sits inside a driver call or right after an operation
//! answered; the parent then replays the journal — with the state file itself removed, as
//! if its rename had not reached the disk — and reads what the manager would restore.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use corral_checkpoint::{
    CheckpointError, CheckpointStore, ClaimInfoState, DRA_MANAGER_FILE, DraManagerCheckpoint,
    Journal, JournalError, JournalOptions, Managed, StateFile,
};
use corral_dra::{DraManager, DraManagerConfig};

use crate::support::fake_driver::{Answer, FAKE_DRIVER, FakeDriver, Hook};
use crate::support::{allocated, claim_in, pod};

const JOURNAL: &str = "state.journal";
const CLAIM_UID: &str = "c1-uid";

fn claim(pods: &[&str]) -> corral_dra::ResourceClaim {
    claim_in(
        "default",
        "c1",
        allocated("req", FAKE_DRIVER, "pool", "dev"),
        pods,
    )
}

/// A fake driver (devices for every claim) and its hook.
fn probe() -> (FakeDriver, Arc<OnceLock<Hook>>) {
    let driver = FakeDriver::new(Answer::Devices);
    let hook = Arc::clone(&driver.hook);
    (driver, hook)
}

/// Open (replaying) `root`'s journal, waiting (at most 30 s) while its lock is held: a
/// sibling test that spawns a child (a `mount`, the killed child) hands it every open
/// descriptor, this test's lock too, until the child execs.
fn open_journal(root: &Path) -> Arc<Journal> {
    open_journal_of(root, &[Managed::File(DRA_MANAGER_FILE.into())])
}

fn open_journal_of(root: &Path, managed: &[Managed]) -> Arc<Journal> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Journal::open(root, JOURNAL, managed, JournalOptions::default()) {
            Ok((journal, _)) => return Arc::new(journal),
            Err(CheckpointError::Journal(JournalError::InUse { .. }))
                if Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("replaying {}: {e}", root.display()),
        }
    }
}

/// A manager over `root`'s journaled `dra_manager_state`, the journal active (the agent's
/// order: the manager restores, then the journal starts).
fn journaled(
    root: &Path,
) -> (
    Arc<DraManager<FakeDriver>>,
    Arc<OnceLock<Hook>>,
    Arc<Journal>,
) {
    let journal = open_journal(root);
    let store = CheckpointStore::open(root)
        .unwrap()
        .with_journal(Arc::clone(&journal));
    let file = StateFile::in_store(&store, DRA_MANAGER_FILE).unwrap();
    let (probe, hook) = probe();
    let manager = DraManager::new(file, probe, DraManagerConfig::default()).unwrap();
    journal.activate().unwrap();
    (Arc::new(manager), hook, journal)
}

/// What a restart would restore from `root`: the journal replayed onto the files — after
/// removing `dra_manager_state`, so only the journal can bring it back — and the claim
/// list read.
fn replayed(root: &Path) -> Vec<ClaimInfoState> {
    replayed_of(root, &[Managed::File(DRA_MANAGER_FILE.into())])
}

fn replayed_of(root: &Path, managed: &[Managed]) -> Vec<ClaimInfoState> {
    let _ = std::fs::remove_file(root.join(DRA_MANAGER_FILE));
    let _journal = open_journal_of(root, managed);
    let store = CheckpointStore::open(root).unwrap();
    StateFile::in_store(&store, DRA_MANAGER_FILE)
        .unwrap()
        .load_as::<DraManagerCheckpoint>()
        .unwrap()
        .expect("the journal restores dra_manager_state")
        .claim_info_state_list
        .unwrap_or_default()
}

/// `root`'s journal and mark copied to a fresh directory (the state file left behind) and
/// replayed there: what a crash right now would leave.
fn replayed_copy(root: &Path) -> Vec<ClaimInfoState> {
    let copy = tempfile::tempdir().unwrap();
    for name in [JOURNAL.to_owned(), format!("{JOURNAL}.mark")] {
        std::fs::copy(root.join(&name), copy.path().join(&name)).unwrap();
    }
    replayed(copy.path())
}

fn the_claim(list: &[ClaimInfoState]) -> Option<&ClaimInfoState> {
    list.iter().find(|c| c.claim_uid == CLAIM_UID)
}

fn has_devices(state: &ClaimInfoState) -> bool {
    state
        .driver_state
        .as_ref()
        .and_then(|d| d.get(FAKE_DRIVER))
        .and_then(|d| d.devices.as_ref())
        .is_some_and(|d| !d.is_empty())
}

/// Whether the manager's cache lock is free: read from another thread, bounded (a lock held
/// by the caller's own thread would never come free).
fn cache_lock_is_free(manager: &Weak<DraManager<FakeDriver>>) -> bool {
    let manager = manager
        .upgrade()
        .expect("the manager is alive during its call");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(manager.claim_infos().len());
    });
    rx.recv_timeout(Duration::from_secs(30)).is_ok()
}

#[tokio::test]
async fn when_a_driver_is_called_the_journal_has_the_claim_and_the_cache_lock_is_free() {
    let root = tempfile::tempdir().unwrap();
    let (manager, hook, _journal) = journaled(root.path());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let weak = Arc::downgrade(&manager);
    let (path, log) = (root.path().to_path_buf(), Arc::clone(&seen));
    let _ = hook.set(Box::new(move |call, _claims| {
        let list = replayed_copy(&path);
        let state = the_claim(&list);
        let refs = state
            .and_then(|s| s.pod_uids.clone())
            .unwrap_or_default()
            .into_iter()
            .collect::<Vec<_>>()
            .join(",");
        let devices = state.is_some_and(has_devices);
        let free = cache_lock_is_free(&weak);
        log.lock().unwrap().push(format!(
            "{call}: recorded={} pods={refs} devices={devices} lock-free={free}",
            state.is_some()
        ));
    }));

    manager
        .prepare_resources(&pod("pod-1", &["c1"]), &[claim(&["pod-1"])])
        .await
        .unwrap();
    // Answered: a crash now restores it prepared, with its devices.
    let after = replayed_copy(root.path());
    assert!(
        the_claim(&after).is_some_and(has_devices),
        "prepare answered but the journal lacks the prepared claim: {after:?}"
    );
    manager.unprepare_resources("pod-1").await.unwrap();
    assert!(
        the_claim(&replayed_copy(root.path())).is_none(),
        "unprepare answered but a replay brings the claim back"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "prepare: recorded=true pods=pod-1 devices=false lock-free=true",
            "unprepare: recorded=true pods=pod-1 devices=true lock-free=true",
        ]
    );
}

// ---- SIGKILL inside a driver call and right after an answer --------------------------

const CHILD_DIR: &str = "CORRAL_DRA_JOURNALED_CHILD_DIR";
const CHILD_MODE: &str = "CORRAL_DRA_JOURNALED_CHILD_MODE";
const MARKER: &str = "reached";

/// Tell the parent where we are, then wait to be killed (never returns).
fn reached_and_wait(dir: &Path, what: &str) -> ! {
    std::fs::write(dir.join(MARKER), what).unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The child: a journaled manager in `$CHILD_DIR` doing what `$CHILD_MODE` says until the
/// point to be killed at. Does nothing when run as an ordinary test.
#[tokio::test]
async fn journaled_child() {
    let (Ok(dir), Ok(mode)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_MODE)) else {
        return;
    };
    let root = PathBuf::from(dir);
    let (manager, hook, _journal) = journaled(&root);
    let (at, marker_dir) = (mode.clone(), root.clone());
    let _ = hook.set(Box::new(move |call, _| {
        log_event(&marker_dir, call);
        if at == format!("in-{call}") {
            reached_and_wait(&marker_dir, call);
        }
    }));
    let p = pod("pod-1", &["c1"]);
    manager
        .prepare_resources(&p, &[claim(&["pod-1"])])
        .await
        .unwrap();
    log_event(&root, "prepared");
    if mode == "after-prepare" {
        reached_and_wait(&root, "prepared");
    }
    manager.unprepare_resources("pod-1").await.unwrap();
    log_event(&root, "unprepared");
    if mode == "after-unprepare" {
        reached_and_wait(&root, "unprepared");
    }
}

/// Note in `dir`'s event log that the child got to `event` (a driver call entered, an
/// operation answered).
fn log_event(dir: &Path, event: &str) {
    use std::io::Write as _;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(EVENTS))
        .unwrap();
    log.write_all(format!("{event}\n").as_bytes()).unwrap();
}

const EVENTS: &str = "events";

/// Kills the child on drop, so a failing assertion never leaves it running.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run the child in `mode` on `root` and SIGKILL it once it reached its point.
fn kill_child_at(root: &Path, mode: &str) {
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args([
            "--exact",
            "journaled::journaled_child",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD_DIR, root)
        .env(CHILD_MODE, mode)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !root.join(MARKER).exists() {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("{mode}: the child ended ({status}) before its point");
        }
        assert!(
            Instant::now() < deadline,
            "{mode}: the child never got there"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(child); // SIGKILL, reaped
}

#[test]
fn killed_inside_node_prepare_the_journal_restores_the_claim_unprepared() {
    let root = tempfile::tempdir().unwrap();
    kill_child_at(root.path(), "in-prepare");
    let list = replayed(root.path());
    let state = the_claim(&list).expect("recorded before the driver was called");
    assert_eq!(
        state.pod_uids.as_ref().map(|p| p.contains("pod-1")),
        Some(true)
    );
    assert!(!has_devices(state), "{state:?}");
}

#[test]
fn killed_right_after_prepare_answered_the_journal_restores_it_prepared() {
    let root = tempfile::tempdir().unwrap();
    kill_child_at(root.path(), "after-prepare");
    let list = replayed(root.path());
    assert!(the_claim(&list).is_some_and(has_devices), "{list:?}");
}

#[test]
fn killed_inside_node_unprepare_the_journal_still_has_the_claim() {
    let root = tempfile::tempdir().unwrap();
    kill_child_at(root.path(), "in-unprepare");
    let list = replayed(root.path());
    assert!(the_claim(&list).is_some(), "forgotten before unprepared");
}

#[test]
fn killed_right_after_unprepare_answered_the_claim_stays_gone() {
    let root = tempfile::tempdir().unwrap();
    kill_child_at(root.path(), "after-unprepare");
    assert!(the_claim(&replayed(root.path())).is_none());
}

// ---- A journal that cannot commit (a full disk) ---------------------------------------

#[tokio::test]
async fn a_full_disk_fails_prepare_before_any_driver_call_and_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let disk = match corral_testkit::Tmpfs::mount(&dir.path().join("disk"), 256 << 10) {
        Ok(disk) => Arc::new(disk),
        Err(why) => {
            eprintln!("not run: needs a tmpfs ({why})");
            return;
        }
    };
    let root = disk.path().to_path_buf();
    let (manager, hook, journal) = journaled(&root);
    // Claims enough that every write of the claim list needs more room than the journal's
    // last page has spare (a tmpfs append that fits in it succeeds on a full disk).
    let names: Vec<String> = (0..24)
        .map(|i| format!("big-{i:02}-{}", "x".repeat(180)))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let big: Vec<_> = names
        .iter()
        .map(|n| {
            claim_in(
                "default",
                n,
                allocated("req", FAKE_DRIVER, "pool", "dev"),
                &["pod-0"],
            )
        })
        .collect();
    manager
        .prepare_resources(&pod("pod-0", &names), &big)
        .await
        .unwrap();
    let calls = || manager.drivers().prepare_calls.load(Ordering::SeqCst) - 1;
    let filler = disk.fill("filler");

    // The record cannot be made durable: no driver call, an error.
    let p = pod("pod-1", &["c1"]);
    let err = manager
        .prepare_resources(&p, &[claim(&["pod-1"])])
        .await
        .expect_err("prepare answered success while its record could not be committed");
    assert!(err.to_string().contains(DRA_MANAGER_FILE), "{err}");
    assert_eq!(calls(), 0);
    // Retried while still full: still nothing.
    manager
        .prepare_resources(&p, &[claim(&["pod-1"])])
        .await
        .expect_err("a retry answered success on a full disk");
    assert_eq!(calls(), 0);

    // Space back; the disk fills up again while the driver prepares: the outcome cannot be
    // made durable, so the operation fails (the record, durable, keeps the claim).
    std::fs::remove_file(&filler).unwrap();
    let filled_in_call = Arc::clone(&disk);
    let once = std::sync::atomic::AtomicBool::new(false);
    let _ = hook.set(Box::new(move |call, _| {
        if call == "prepare" && !once.swap(true, Ordering::SeqCst) {
            filled_in_call.fill("filler");
        }
    }));
    manager
        .prepare_resources(&p, &[claim(&["pod-1"])])
        .await
        .expect_err("prepare answered success while its outcome could not be committed");
    assert_eq!(calls(), 1);
    let list = replayed_copy(&root);
    assert!(
        the_claim(&list).is_some_and(|s| !has_devices(s)),
        "{list:?}"
    );

    // Space back: the retry succeeds and is durable.
    std::fs::remove_file(root.join("filler")).unwrap();
    manager
        .prepare_resources(&p, &[claim(&["pod-1"])])
        .await
        .unwrap();
    assert_eq!(calls(), 1);
    assert!(journal.trouble().is_none());
    drop((manager, journal));
    assert!(the_claim(&replayed(&root)).is_some_and(has_devices));
}

// ---- A plain store whose write fails -------------------------------------------------

/// Without a journal, staging writes the file durably at once; when that write fails the
/// operation fails — and a retry must not take the claim, still only in memory, for
/// recorded: the driver may be called only once the record is on disk.
#[tokio::test]
async fn a_failed_record_write_is_retried_before_any_driver_call() {
    let root = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(root.path()).unwrap();
    let file = StateFile::in_store(&store, DRA_MANAGER_FILE).unwrap();
    let (probe, _hook) = probe();
    let manager = DraManager::new(file.clone(), probe, DraManagerConfig::default()).unwrap();
    // The file's place is taken by a directory: every write of it fails.
    let path = root.path().join(DRA_MANAGER_FILE);
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir_all(path.join("blocker")).unwrap();

    let p = pod("pod-1", &["c1"]);
    manager
        .prepare_resources(&p, &[claim(&["pod-1"])])
        .await
        .expect_err("the record could not be written");
    let retried = manager.prepare_resources(&p, &[claim(&["pod-1"])]).await;
    assert_eq!(
        manager.drivers().prepare_calls.load(Ordering::SeqCst),
        0,
        "the driver prepared a claim that is recorded nowhere on disk (retry answered {retried:?})"
    );
    assert!(retried.is_err());

    // The disk is repaired: the retry records, then prepares.
    std::fs::remove_dir_all(&path).unwrap();
    manager
        .prepare_resources(&p, &[claim(&["pod-1"])])
        .await
        .unwrap();
    assert_eq!(manager.drivers().prepare_calls.load(Ordering::SeqCst), 1);
    let list = file
        .load_as::<DraManagerCheckpoint>()
        .unwrap()
        .unwrap()
        .claim_info_state_list
        .unwrap();
    assert!(the_claim(&list).is_some_and(has_devices), "{list:?}");
}

/// The same for unprepare: once its driver unprepared a claim, the claim leaves the cache;
/// if the write saying so fails, a retry must not answer success while the file still
/// holds the claim.
#[tokio::test]
async fn a_failed_forget_write_fails_the_retry_too() {
    let root = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(root.path()).unwrap();
    let file = StateFile::in_store(&store, DRA_MANAGER_FILE).unwrap();
    let (probe, _hook) = probe();
    let manager = DraManager::new(file.clone(), probe, DraManagerConfig::default()).unwrap();
    manager
        .prepare_resources(&pod("pod-1", &["c1"]), &[claim(&["pod-1"])])
        .await
        .unwrap();
    let path = root.path().join(DRA_MANAGER_FILE);
    let recorded = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir_all(path.join("blocker")).unwrap();

    manager
        .unprepare_resources("pod-1")
        .await
        .expect_err("forgetting the claim could not be written");
    let retried = manager.unprepare_resources("pod-1").await;
    assert!(
        retried.is_err(),
        "the retry answered success while the file cannot say the claim is gone"
    );

    std::fs::remove_dir_all(&path).unwrap();
    std::fs::write(&path, recorded).unwrap();
    manager.unprepare_resources("pod-1").await.unwrap();
    let list = file
        .load_as::<DraManagerCheckpoint>()
        .unwrap()
        .unwrap()
        .claim_info_state_list
        .unwrap();
    assert!(the_claim(&list).is_none(), "{list:?}");
}

// ---- Concurrent operations and a concurrent committer ---------------------------------

/// Pods preparing and unpreparing at once on a multi-threaded runtime, while another
/// writer of the same journal stages and commits its own file all along (the agent's
/// flusher and other managers): when each driver call is entered its claim is in the
/// journal, and once every operation answered the journal holds exactly what the answers
/// said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_operations_beside_a_concurrent_committer_are_each_durable_first() {
    const PODS: usize = 8;
    let root = tempfile::tempdir().unwrap();
    let managed = [
        Managed::File(DRA_MANAGER_FILE.into()),
        Managed::File("other".into()),
    ];
    let (journal, _) =
        Journal::open(root.path(), JOURNAL, &managed, JournalOptions::default()).unwrap();
    let journal = Arc::new(journal);
    let store = CheckpointStore::open(root.path())
        .unwrap()
        .with_journal(Arc::clone(&journal));
    let file = StateFile::in_store(&store, DRA_MANAGER_FILE).unwrap();
    let (probe, hook) = probe();
    let manager = Arc::new(DraManager::new(file, probe, DraManagerConfig::default()).unwrap());
    journal.activate().unwrap();

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = {
        let (store, journal, stop) = (store.clone(), Arc::clone(&journal), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                store.write_bytes("other", &n.to_le_bytes()).unwrap();
                journal.commit().unwrap();
            }
        })
    };

    let missing: Arc<Mutex<Vec<String>>> = Arc::default();
    let (path, log) = (root.path().to_path_buf(), Arc::clone(&missing));
    let _ = hook.set(Box::new(move |call, claims| {
        // The mark first: a journal copied after it holds at least what it names.
        let copy = tempfile::tempdir().unwrap();
        let mark = format!("{JOURNAL}.mark");
        std::fs::copy(path.join(&mark), copy.path().join(&mark)).unwrap();
        std::fs::copy(path.join(JOURNAL), copy.path().join(JOURNAL)).unwrap();
        let managed = [
            Managed::File(DRA_MANAGER_FILE.into()),
            Managed::File("other".into()),
        ];
        let (_j, _) =
            Journal::open(copy.path(), JOURNAL, &managed, JournalOptions::default()).unwrap();
        let list = StateFile::in_store(
            &CheckpointStore::open(copy.path()).unwrap(),
            DRA_MANAGER_FILE,
        )
        .unwrap()
        .load_as::<DraManagerCheckpoint>()
        .unwrap()
        .and_then(|c| c.claim_info_state_list)
        .unwrap_or_default();
        for claim in claims {
            if !list.iter().any(|s| s.claim_uid == claim.uid) {
                log.lock().unwrap().push(format!("{call} {}", claim.uid));
            }
        }
    }));

    let mut tasks = Vec::new();
    for i in 0..PODS {
        let manager = Arc::clone(&manager);
        tasks.push(tokio::spawn(async move {
            let (uid, name) = (format!("pod-{i}"), format!("claim-{i}"));
            let c = claim_in(
                "default",
                &name,
                allocated("req", FAKE_DRIVER, "pool", "dev"),
                &[&uid],
            );
            manager
                .prepare_resources(&pod(&uid, &[&name]), &[c])
                .await
                .unwrap();
            if i % 2 == 0 {
                manager.unprepare_resources(&uid).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    other.join().unwrap();
    assert!(
        missing.lock().unwrap().is_empty(),
        "{:?}",
        missing.lock().unwrap()
    );
    drop((manager, store, journal));
    let mut left: Vec<String> = replayed_of(root.path(), &managed)
        .into_iter()
        .filter(has_devices)
        .map(|s| s.claim_name)
        .collect();
    left.sort();
    let expected: Vec<String> = (0..PODS)
        .filter(|i| i % 2 == 1)
        .map(|i| format!("claim-{i}"))
        .collect();
    assert_eq!(left, expected);
}

// ---- A kill at every write ------------------------------------------------------------

/// The child's whole run (prepare, unprepare, answered) killed at the n-th call of one of
/// write, rename, unlink or sync (strace's fault injection counts per syscall and per
/// thread: the first thread to make its n-th such call dies with the process), for every n
/// until the run completes; the test says why it did not run where strace is missing.
/// Which thread gets there first may vary, never the verdict. After each
/// kill the replayed journal agrees with what the child got to: a claim whose driver was
/// asked to prepare it and not yet to unprepare it is there; one whose prepare answered is
/// there with its devices; one whose unprepare answered is gone.
#[test]
fn a_kill_at_every_write_of_a_prepare_and_an_unprepare_leaves_what_was_answered() {
    let probe = Command::new("strace").arg("-V").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("not run: needs strace");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut reached = std::collections::BTreeSet::new();
    for n in 1..=5000 {
        let root = tempfile::tempdir().unwrap();
        let inject = format!(
            "inject=write,pwrite64,fdatasync,fsync,rename,renameat,renameat2,unlink,unlinkat:signal=KILL:when={n}"
        );
        let child = Command::new("strace")
            .args(["-f", "-qq", "-o", "/dev/null", "-e", &inject])
            .arg(&exe)
            .args(["--exact", "journaled::journaled_child", "--test-threads=1"])
            .env(CHILD_DIR, root.path())
            .env(CHILD_MODE, "run")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = Killed(child);
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = child.0.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "n={n}: the child hangs");
            std::thread::sleep(Duration::from_millis(5));
        };
        let events = std::fs::read_to_string(root.path().join(EVENTS)).unwrap_or_default();
        let has = |e: &str| events.lines().any(|l| l == e);
        if status.success() {
            assert!(has("unprepared"), "n={n}: ran through without answering");
            let killed = n - 1;
            assert!(
                killed >= 3,
                "only {killed} kills: the injection did not work"
            );
            eprintln!("killed at {killed} points, having reached {reached:?}");
            return;
        }
        reached.insert(events.replace('\n', " "));
        let list = if root.path().join(JOURNAL).exists() {
            replayed(root.path())
        } else {
            // Killed before the journal started: the files as they are.
            let store = CheckpointStore::open(root.path()).unwrap();
            StateFile::in_store(&store, DRA_MANAGER_FILE)
                .unwrap()
                .load_as::<DraManagerCheckpoint>()
                .unwrap_or_else(|e| panic!("n={n}: {e}"))
                .and_then(|c| c.claim_info_state_list)
                .unwrap_or_default()
        };
        let state = the_claim(&list);
        let context = format!("n={n}, events {events:?}, claim {state:?}");
        if has("unprepared") {
            assert!(state.is_none(), "{context}");
        } else if has("unprepare") {
            // Unprepared by the driver, maybe forgotten already: either is fine.
        } else if has("prepared") {
            assert!(state.is_some_and(has_devices), "{context}");
        } else if has("prepare") {
            assert!(state.is_some(), "{context}");
        }
    }
    panic!("the child never ran through");
}
