//! Crash consistency of the store: a writer process rewriting one checkpoint in a loop is
//! killed with SIGKILL at random points, more than 200 times; after every kill the file must
//! decode, verify and equal one of the versions the writer wrote.
//!
//! The writer is this test binary itself, re-executed to run only
//! [`crash_writer_child`] with the writer environment variables set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use corral_checkpoint::{CPU_MANAGER_FILE, CheckpointStore, CpuManagerCheckpoint};

const WRITER_DIR: &str = "CORRAL_CRASH_WRITER_DIR";
const WRITER_READY_DIR: &str = "CORRAL_CRASH_WRITER_READY_DIR";
const WRITER_START: &str = "CORRAL_CRASH_WRITER_START";

/// Kills per run (the brief asks for at least 200).
const ROUNDS: u64 = 210;
/// Versions each writer may use: writer `r` writes `r * SPAN + 1 ..`.
const SPAN: u64 = 1_000_000;

/// Version `n` of the checkpoint: distinct content per `n`, a few KiB so a write is not a
/// single page-sized store.
fn version(n: u64) -> CpuManagerCheckpoint {
    let mut entries = BTreeMap::new();
    entries.insert(
        "version".to_owned(),
        Some(BTreeMap::from([("n".to_owned(), n.to_string())])),
    );
    for pod in 0..40 {
        let containers = (0..3)
            .map(|c| {
                (
                    format!("container-{c}"),
                    format!("{}-{}", (n + pod + c) % 64, (n + pod + c) % 64 + 3),
                )
            })
            .collect();
        entries.insert(
            format!("pod-{pod:03}-{:08x}", n.wrapping_mul(2_654_435_761) ^ pod),
            Some(containers),
        );
    }
    CpuManagerCheckpoint {
        policy_name: "static".to_owned(),
        default_cpu_set: format!("0-{}", n % 128 + 1),
        entries: Some(entries),
    }
}

fn version_number(cp: &CpuManagerCheckpoint) -> Option<u64> {
    cp.entries
        .as_ref()?
        .get("version")?
        .as_ref()?
        .get("n")?
        .parse()
        .ok()
}

/// The writer: only does something when re-executed by the crash test with its environment
/// set; in a normal test run it returns at once.
#[test]
fn crash_writer_child() {
    let (Ok(dir), Ok(ready), Ok(start)) = (
        std::env::var(WRITER_DIR),
        std::env::var(WRITER_READY_DIR),
        std::env::var(WRITER_START),
    ) else {
        return;
    };
    let start: u64 = start.parse().expect("writer start");
    let store = CheckpointStore::open(&dir).expect("open store");
    let mut n = start;
    loop {
        store.create(CPU_MANAGER_FILE, &version(n)).expect("write");
        if n == start {
            std::fs::write(Path::new(&ready).join(start.to_string()), b"").expect("ready marker");
        }
        n += 1;
        if n >= start + SPAN {
            // Never reached within a round; keeps versions distinct across writers.
            return;
        }
    }
}

/// A small xorshift generator seeded from the clock (no RNG dependency needed).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Kills the child on drop, so a failing assertion never leaves a writer running.
struct Writer(Child);

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_writer(dir: &Path, ready: &Path, start: u64) -> Writer {
    let exe = std::env::current_exe().expect("test binary path");
    let child = Command::new(exe)
        .args([
            "--exact",
            "crash_consistency::crash_writer_child",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(WRITER_DIR, dir)
        .env(WRITER_READY_DIR, ready)
        .env(WRITER_START, start.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn writer");
    Writer(child)
}

fn wait_for(path: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

#[test]
fn sigkill_at_random_points_leaves_a_written_version() {
    let root = tempfile::tempdir().expect("temp dir");
    let dir: PathBuf = root.path().join("state");
    let ready: PathBuf = root.path().join("ready");
    std::fs::create_dir_all(&ready).expect("ready dir");
    let store = CheckpointStore::open(&dir).expect("open store");
    store
        .create(CPU_MANAGER_FILE, &version(0))
        .expect("initial version");

    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut rng = XorShift(seed);
    let mut newest_seen = 0;
    for round in 1..=ROUNDS {
        let start = round * SPAN;
        let mut writer = spawn_writer(&dir, &ready, start);
        // Bounded wait (generous: a process start and an fsync on a busy machine) for the
        // writer's first completed write, then a random delay so the kill lands anywhere in
        // its write loop (create, write, fsync, rename, dir fsync).
        assert!(
            wait_for(&ready.join(start.to_string()), Duration::from_secs(60)),
            "round {round} (seed {seed}): writer never completed a write"
        );
        std::thread::sleep(Duration::from_micros(rng.next() % 3_000));
        writer.0.kill().expect("SIGKILL writer");
        writer.0.wait().expect("reap writer");

        let cp: CpuManagerCheckpoint = store.get(CPU_MANAGER_FILE).unwrap_or_else(|e| {
            panic!("round {round} (seed {seed}): checkpoint unreadable after kill: {e}")
        });
        let n =
            version_number(&cp).unwrap_or_else(|| panic!("round {round}: no version in {cp:?}"));
        assert_eq!(
            cp,
            version(n),
            "round {round} (seed {seed}): not a written version"
        );
        assert!(
            (start..start + SPAN).contains(&n),
            "round {round} (seed {seed}): version {n} is not from this round's writer"
        );
        assert!(
            n > newest_seen,
            "round {round}: went back from {newest_seen} to {n}"
        );
        newest_seen = n;
    }

    // Kills strand temporary files (`.cpu_manager_state.tmp.<pid>.<n>`); they never show up
    // as checkpoints, and reopening the store (as a restarted agent does) removes them all:
    // every writer is dead.
    assert_eq!(
        store.list().expect("list"),
        vec![CPU_MANAGER_FILE.to_owned()]
    );
    let reopened = CheckpointStore::open(&dir).expect("reopen store");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        leftovers,
        vec![std::ffi::OsString::from(CPU_MANAGER_FILE)],
        "temporary files left after reopening (it removed {:?})",
        reopened.removed_at_open()
    );
    let _: CpuManagerCheckpoint = reopened.get(CPU_MANAGER_FILE).expect("still readable");
}
