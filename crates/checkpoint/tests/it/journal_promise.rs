//! The journal's promise as a property: after any run of commits, a crash at any point of
//! the last commit, or any one piece of damage to the journal, its mark or the root's place,
//! opening gives the state of the last answered commit (or, after a crash, of the commit
//! before, which was never answered), or refuses with the journal and the offset named —
//! never an older state, silently.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_checkpoint::{
    CheckpointError, CheckpointStore, Journal, JournalError, JournalOptions, Managed,
};
use proptest::prelude::*;

type Files = BTreeMap<String, Vec<u8>>;

fn managed() -> Vec<Managed> {
    vec![
        Managed::File("cpu_manager_state".into()),
        Managed::Dir("corral/pods".into()),
    ]
}

fn options(compact_at: u64) -> JournalOptions {
    JournalOptions {
        compact_at,
        ..JournalOptions::default()
    }
}

const JOURNAL: &str = "corral/state.journal";
const MARK: &str = "corral/state.journal.mark";

/// Every managed file under `root`, by relative path.
fn files(root: &Path) -> Files {
    let mut out = Files::new();
    if let Ok(bytes) = fs::read(root.join("cpu_manager_state")) {
        out.insert("cpu_manager_state".to_owned(), bytes);
    }
    if let Ok(entries) = fs::read_dir(root.join("corral/pods")) {
        for entry in entries {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if !name.starts_with('.') {
                out.insert(
                    format!("corral/pods/{name}"),
                    fs::read(entry.path()).unwrap(),
                );
            }
        }
    }
    out
}

fn set_files(root: &Path, to: &Files) {
    for name in files(root).keys() {
        fs::remove_file(root.join(name)).unwrap();
    }
    for (name, data) in to {
        fs::write(root.join(name), data).unwrap();
    }
}

/// Where each record of a journal starts, and where the last ends.
fn record_starts(bytes: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut starts = Vec::new();
    while at + 13 <= bytes.len() {
        starts.push(at);
        let len = u32::from_le_bytes(bytes[at + 5..at + 9].try_into().unwrap()) as usize;
        at += 13 + len;
    }
    assert_eq!(at, bytes.len(), "the test's own journal is whole");
    starts
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

/// What happens between the run and the next open.
#[derive(Debug, Clone)]
enum Event {
    /// A crash while appending the last commit's record: cut after this fraction of it.
    CrashDuringAppend(prop::sample::Index),
    /// A crash after the last record was durable, before all its files and its mark were
    /// written: these of its files were.
    CrashBeforeApply(Vec<bool>),
    FlipJournal(prop::sample::Index, u8),
    CutJournal(prop::sample::Index),
    HugeLength(prop::sample::Index),
    DuplicateRecord(prop::sample::Index),
    SwapRecords(prop::sample::Index),
    DropRecord(prop::sample::Index),
    FlipMark(prop::sample::Index, u8),
    DeleteMark,
    DeleteJournal,
    MoveRoot,
    CopyRoot,
    /// A power loss lost the mark's unsynced data: it reads empty or as zeros of its size
    /// (every answered record is durable in the journal).
    MarkDataLost(bool),
    /// The journal put back from the copy taken after an earlier answered commit, beside
    /// the current mark.
    OlderJournal(prop::sample::Index),
    /// The mark cut to this fraction of its size.
    CutMark(prop::sample::Index),
}

fn event() -> impl Strategy<Value = Event> {
    let index = any::<prop::sample::Index>;
    prop_oneof![
        index().prop_map(Event::CrashDuringAppend),
        prop::collection::vec(any::<bool>(), 8).prop_map(Event::CrashBeforeApply),
        (index(), 1..=255u8).prop_map(|(i, x)| Event::FlipJournal(i, x)),
        index().prop_map(Event::CutJournal),
        index().prop_map(Event::HugeLength),
        index().prop_map(Event::DuplicateRecord),
        index().prop_map(Event::SwapRecords),
        index().prop_map(Event::DropRecord),
        (index(), 1..=255u8).prop_map(|(i, x)| Event::FlipMark(i, x)),
        Just(Event::DeleteMark),
        Just(Event::DeleteJournal),
        Just(Event::MoveRoot),
        Just(Event::CopyRoot),
        any::<bool>().prop_map(Event::MarkDataLost),
        index().prop_map(Event::OlderJournal),
        index().prop_map(Event::CutMark),
    ]
}

/// One answered commit: the files, and the journal's and mark's bytes after it.
struct Answered {
    files: Files,
    journal: Vec<u8>,
    mark: Vec<u8>,
}

/// The outcome a run must have: the state of the last answered commit, or that of the
/// one before when the event was a crash during the last commit, or a refusal.
fn check(root: &Path, opened: Result<Files, CheckpointError>, ok: &[&Files], refusable: bool) {
    match opened {
        Ok(now) => assert!(
            ok.contains(&&now),
            "an accepted state that is not the last answered one: {now:?}"
        ),
        Err(err) => {
            assert!(refusable, "a crash's leftovers refused: {err}");
            let journal = root.join(JOURNAL);
            let named = err.to_string().contains(&journal.display().to_string());
            assert!(named, "the refusal names the journal: {err}");
            assert!(
                matches!(
                    err,
                    CheckpointError::Journal(
                        JournalError::Damaged { .. }
                            | JournalError::CommitsMissing { .. }
                            | JournalError::MarkUnusable { .. }
                    )
                ),
                "{err}"
            );
            assert!(err.to_string().contains("move the journal"), "{err}");
        }
    }
}

fn open_files(root: &Path, compact_at: u64) -> Result<Files, CheckpointError> {
    let (journal, _) = open_when_free(root, compact_at)?;
    journal.activate()?;
    Ok(files(root))
}

/// `Journal::open`, waiting (at most 30 s) while the journal's lock is held: a sibling
/// test that forks a child (a `mount`, a `mkfifo`) hands it every open descriptor, this
/// test's lock too, until the child execs.
fn open_when_free(
    root: &Path,
    compact_at: u64,
) -> Result<(Journal, corral_checkpoint::Recovery), CheckpointError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match Journal::open(root, JOURNAL, &managed(), options(compact_at)) {
            Err(CheckpointError::Journal(JournalError::InUse { .. }))
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            opened => return opened,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_last_answered_state_or_a_named_refusal(
        ops in prop::collection::vec(op(), 1..30),
        event in event(),
        compact_at in prop_oneof![Just(300u64), Just(1u64 << 20)],
    ) {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        let (journal, _) = open_when_free(&root, compact_at).unwrap();
        journal.activate().unwrap();
        let journal = Arc::new(journal);
        let state = CheckpointStore::open(&root).unwrap().with_journal(Arc::clone(&journal));
        let pods = CheckpointStore::open(root.join("corral/pods")).unwrap().with_journal(Arc::clone(&journal));
        let snap = |files: Files| Answered {
            files,
            journal: fs::read(root.join(JOURNAL)).unwrap(),
            mark: fs::read(root.join(MARK)).unwrap(),
        };
        let mut answered = vec![snap(files(&root))];
        for op in &ops {
            match op {
                Op::Write(0, v) => state.write_bytes("cpu_manager_state", &[*v; 5]).unwrap(),
                Op::Write(f, v) => pods.write_bytes(&format!("p{f}.json"), &[*v; 5]).unwrap(),
                Op::Remove(0) => state.remove("cpu_manager_state").unwrap(),
                Op::Remove(f) => pods.remove(&format!("p{f}.json")).unwrap(),
                Op::Commit => {
                    journal.commit().unwrap();
                    answered.push(snap(files(&root)));
                }
            }
        }
        // A kill: what is staged and not committed is lost with the process.
        drop((state, pods, journal));
        let n = answered.len();
        let last = &answered[n - 1];
        let before = if n >= 2 { &answered[n - 2] } else { last };
        // The last commit appended a record to the journal before it (no compaction).
        let appended = n >= 2 && last.journal.starts_with(&before.journal) && last.journal.len() > before.journal.len();
        let journal_path = root.join(JOURNAL);
        let mark_path = root.join(MARK);
        let write_journal = |bytes: &[u8]| fs::write(&journal_path, bytes).unwrap();
        let starts = record_starts(&last.journal);
        let mut open_at = root.clone();
        match &event {
            Event::CrashDuringAppend(cut) => {
                prop_assume!(appended);
                let keep = before.journal.len() + cut.index(last.journal.len() - before.journal.len());
                write_journal(&last.journal[..keep]);
                fs::write(&mark_path, &before.mark).unwrap();
                set_files(&root, &before.files);
                check(&root, open_files(&root, compact_at), &[&before.files], false);
                return Ok(());
            }
            Event::CrashBeforeApply(applied) => {
                prop_assume!(n >= 2);
                fs::write(&mark_path, &before.mark).unwrap();
                let mut mixed = before.files.clone();
                let names: Vec<&String> = before.files.keys().chain(last.files.keys()).collect();
                for (i, name) in names.into_iter().enumerate() {
                    if applied[i % applied.len()] {
                        match last.files.get(name) {
                            Some(data) => mixed.insert(name.clone(), data.clone()),
                            None => mixed.remove(name),
                        };
                    }
                }
                set_files(&root, &mixed);
                check(&root, open_files(&root, compact_at), &[&last.files], false);
                return Ok(());
            }
            Event::FlipJournal(at, x) => {
                let mut bytes = last.journal.clone();
                let at = at.index(bytes.len());
                bytes[at] ^= x;
                write_journal(&bytes);
            }
            Event::CutJournal(at) => write_journal(&last.journal[..at.index(last.journal.len())]),
            Event::HugeLength(which) => {
                let mut bytes = last.journal.clone();
                let at = starts[which.index(starts.len())];
                bytes[at + 5..at + 9].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
                write_journal(&bytes);
            }
            Event::DuplicateRecord(which) => {
                let i = which.index(starts.len());
                let end = starts.get(i + 1).copied().unwrap_or(last.journal.len());
                let mut bytes = last.journal[..end].to_vec();
                bytes.extend_from_slice(&last.journal[starts[i]..]);
                write_journal(&bytes);
            }
            Event::SwapRecords(which) => {
                prop_assume!(starts.len() >= 2);
                let i = which.index(starts.len() - 1);
                let end = |k: usize| starts.get(k + 1).copied().unwrap_or(last.journal.len());
                let mut bytes = last.journal[..starts[i]].to_vec();
                bytes.extend_from_slice(&last.journal[starts[i + 1]..end(i + 1)]);
                bytes.extend_from_slice(&last.journal[starts[i]..end(i)]);
                bytes.extend_from_slice(&last.journal[end(i + 1)..]);
                write_journal(&bytes);
            }
            Event::DropRecord(which) => {
                let i = which.index(starts.len());
                let end = starts.get(i + 1).copied().unwrap_or(last.journal.len());
                let mut bytes = last.journal[..starts[i]].to_vec();
                bytes.extend_from_slice(&last.journal[end..]);
                write_journal(&bytes);
            }
            Event::FlipMark(at, x) => {
                let mut bytes = last.mark.clone();
                if bytes.is_empty() {
                    // A new journal's mark, unwritten: damage is a byte where none is.
                    bytes.push(0);
                }
                let at = at.index(bytes.len());
                bytes[at] ^= x;
                fs::write(&mark_path, &bytes).unwrap();
            }
            Event::DeleteMark => fs::remove_file(&mark_path).unwrap(),
            Event::MarkDataLost(empty) => {
                let len = if *empty { 0 } else { last.mark.len() };
                fs::write(&mark_path, vec![0; len]).unwrap();
                check(&root, open_files(&root, compact_at), &[&last.files], false);
                return Ok(());
            }
            Event::OlderJournal(which) => {
                let older = &answered[which.index(n)];
                write_journal(&older.journal);
            }
            Event::CutMark(at) => {
                fs::write(&mark_path, &last.mark[..at.index(last.mark.len() + 1)]).unwrap();
            }
            // The files hold every answered commit (a kill, not a power loss): taking them
            // as they are loses nothing.
            Event::DeleteJournal => fs::remove_file(&journal_path).unwrap(),
            Event::MoveRoot => {
                open_at = base.path().join("moved");
                fs::rename(&root, &open_at).unwrap();
            }
            Event::CopyRoot => {
                open_at = base.path().join("copy");
                copy_dir(&root, &open_at);
                // The original is changed afterwards: the copy must not care.
                fs::write(root.join("cpu_manager_state"), b"changed").unwrap();
            }
        }
        check(&open_at, open_files(&open_at, compact_at), &[&last.files], true);
        if matches!(event, Event::MoveRoot | Event::CopyRoot | Event::DeleteJournal) {
            prop_assert_eq!(files(&open_at), last.files.clone());
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target: PathBuf = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A journal or state file that is a FIFO or a device is refused at once: never a hang,
/// never an unbounded read.
#[test]
fn a_fifo_or_a_device_in_place_of_the_journal_or_a_file_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path();
    fs::create_dir_all(root.join("corral")).unwrap();
    let fifo = root.join(JOURNAL);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let err = Journal::open(root, JOURNAL, &managed(), JournalOptions::default()).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        fs::remove_file(&fifo).unwrap();
    }
    std::os::unix::fs::symlink("/dev/zero", root.join(JOURNAL)).unwrap();
    let err = Journal::open(root, JOURNAL, &managed(), JournalOptions::default()).unwrap_err();
    assert!(err.to_string().contains("character device"), "{err}");
    fs::remove_file(root.join(JOURNAL)).unwrap();
    std::os::unix::fs::symlink("/dev/zero", root.join("cpu_manager_state")).unwrap();
    let (journal, _) = Journal::open(root, JOURNAL, &managed(), JournalOptions::default()).unwrap();
    let err = journal.activate().unwrap_err();
    assert!(err.to_string().contains("character device"), "{err}");
}

/// A journal larger than the bound is refused before it is read.
#[test]
fn an_oversized_journal_is_refused_unread() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path();
    fs::create_dir_all(root.join("corral")).unwrap();
    let file = fs::File::create(root.join(JOURNAL)).unwrap();
    file.set_len(1 << 40).unwrap();
    let err = Journal::open(root, JOURNAL, &managed(), JournalOptions::default()).unwrap_err();
    assert!(
        matches!(err, CheckpointError::Journal(JournalError::TooLarge { len, .. }) if len == 1 << 40),
        "{err}"
    );
}

/// A journal of the first format (absolute paths, no mark), left by a crash of an earlier
/// corral, is refused with a remedy, not replayed into absolute paths.
#[test]
fn a_first_format_journal_is_refused_with_a_remedy() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path();
    fs::create_dir_all(root.join("corral")).unwrap();
    fs::write(
        root.join(JOURNAL),
        b"CRLJ\x01\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    )
    .unwrap();
    let err = Journal::open(root, JOURNAL, &managed(), JournalOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            CheckpointError::Journal(JournalError::OlderFormat { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("stop it cleanly"), "{err}");
}

/// A journal's bytes and its mark's.
type Seed = (Vec<u8>, Vec<u8>);

/// A real journal and mark: a snapshot and a few commits of two files.
fn seed_journal() -> &'static Seed {
    static SEED: std::sync::OnceLock<Seed> = std::sync::OnceLock::new();
    SEED.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) =
            Journal::open(dir.path(), JOURNAL, &managed(), JournalOptions::default()).unwrap();
        journal.activate().unwrap();
        let journal = Arc::new(journal);
        let state = CheckpointStore::open(dir.path())
            .unwrap()
            .with_journal(Arc::clone(&journal));
        let pods = CheckpointStore::open(dir.path().join("corral/pods"))
            .unwrap()
            .with_journal(Arc::clone(&journal));
        for i in 0..4u8 {
            state.write_bytes("cpu_manager_state", &[i; 7]).unwrap();
            pods.write_bytes(&format!("p{i}.json"), &[i; 3]).unwrap();
            journal.commit().unwrap();
        }
        pods.remove("p0.json").unwrap();
        journal.commit().unwrap();
        (
            fs::read(dir.path().join(JOURNAL)).unwrap(),
            fs::read(dir.path().join(MARK)).unwrap(),
        )
    })
}

/// `bytes` with up to four edits: a flipped byte, a cut, a splice of its own bytes, a
/// 32-bit field overwritten.
fn mutated_journal(pick: fn(&Seed) -> &Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let edit = (
        0..4u8,
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        any::<u32>(),
    );
    prop::collection::vec(edit, 0..4).prop_map(move |edits| {
        let mut bytes = pick(seed_journal()).clone();
        for (kind, a, b, value) in edits {
            if bytes.is_empty() {
                break;
            }
            let (a, b) = (a.index(bytes.len()), b.index(bytes.len()));
            match kind {
                0 => bytes[a] ^= value as u8 | 1,
                1 => bytes.truncate(a),
                2 => {
                    let (lo, hi) = (a.min(b), a.max(b));
                    let piece = bytes[lo..hi].to_vec();
                    bytes.splice(a..a, piece);
                }
                _ => {
                    let end = (a + 4).min(bytes.len());
                    bytes[a..end].copy_from_slice(&value.to_le_bytes()[..end - a]);
                }
            }
        }
        bytes
    })
}

/// Open a root holding `journal` and `mark` (and a state file the journal may restore):
/// never a panic; a refusal prints; an accepted journal activates.
fn open_crafted(journal: &[u8], mark: Option<&[u8]>) -> proptest::test_runner::TestCaseResult {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("corral/pods")).unwrap();
    fs::write(dir.path().join(JOURNAL), journal).unwrap();
    if let Some(mark) = mark {
        fs::write(dir.path().join(MARK), mark).unwrap();
    }
    fs::write(dir.path().join("cpu_manager_state"), b"on disk").unwrap();
    match Journal::open(dir.path(), JOURNAL, &managed(), JournalOptions::default()) {
        Ok((journal, _)) => journal
            .activate()
            .map_err(|e| TestCaseError::fail(e.to_string()))?,
        Err(err) => prop_assert!(!err.to_string().is_empty()),
    }
    // Nothing outside the root was written.
    let outside: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    prop_assert!(outside.len() <= 3, "{outside:?}");
    Ok(())
}

corral_testkit::fuzz! {
    /// Arbitrary bytes as a journal, with the real mark.
    fn fuzz_journal_arbitrary(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        open_crafted(&bytes, Some(&seed_journal().1))?;
    }

    /// A real journal mutated (flips, cuts, splices, overwritten fields), with its mark,
    /// a mutated mark, or none.
    fn fuzz_journal_mutated(
        journal in mutated_journal(|s| &s.0),
        mark in prop_oneof![
            Just(None),
            Just(Some(seed_journal().1.clone())),
            mutated_journal(|s| &s.1).prop_map(Some),
        ],
    ) {
        open_crafted(&journal, mark.as_deref())?;
    }
}

/// A first activation and two commits, every artefact kept: the files and the journal's
/// and mark's bytes at each point (before activation the journal and mark are absent).
struct FirstRun {
    /// The files before activation (`F0`), after commit 1 and after commit 2.
    files: [Files; 3],
    /// The journal after activation, commit 1 and commit 2.
    journal: [Vec<u8>; 3],
    /// The mark after activation, commit 1 and commit 2.
    mark: [Vec<u8>; 3],
}

fn first_run(root: &Path) -> FirstRun {
    fs::create_dir_all(root.join("corral/pods")).unwrap();
    fs::write(root.join("cpu_manager_state"), b"f0").unwrap();
    let (journal, _) = open_when_free(root, 1 << 20).unwrap();
    journal.activate().unwrap();
    let journal = Arc::new(journal);
    let state = CheckpointStore::open(root)
        .unwrap()
        .with_journal(Arc::clone(&journal));
    let pods = CheckpointStore::open(root.join("corral/pods"))
        .unwrap()
        .with_journal(Arc::clone(&journal));
    let take = || {
        (
            files(root),
            fs::read(root.join(JOURNAL)).unwrap(),
            fs::read(root.join(MARK)).unwrap(),
        )
    };
    let a = take();
    state.write_bytes("cpu_manager_state", b"f1").unwrap();
    pods.write_bytes("p1.json", b"pod one").unwrap();
    journal.commit().unwrap();
    let b = take();
    state.write_bytes("cpu_manager_state", b"f2").unwrap();
    pods.remove("p1.json").unwrap();
    journal.commit().unwrap();
    let c = take();
    drop((state, pods, journal));
    FirstRun {
        files: [a.0, b.0, c.0],
        journal: [a.1, b.1, c.1],
        mark: [a.2, b.2, c.2],
    }
}

/// What a power loss may leave of a mark written in place without an fsync: its bytes
/// as written, nothing of them (the file made at activation, its bytes lost), zeros of its size
/// (a size made durable before its data), or the bytes an earlier commit left.
fn lost_marks(written: &[u8], earlier: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut out = vec![written.to_vec(), Vec::new(), vec![0; written.len()]];
    out.extend(earlier.iter().map(|m| m.to_vec()));
    if written.len() == 48 {
        out.push(vec![0; 24]);
    }
    out
}

/// A crash at every point of a first activation and of the first two commits: the mark
/// made (or not yet, or its bytes lost), the snapshot renamed or not, each commit's
/// record cut at every offset, its mark slot written or lost (empty, zeros), its files
/// renamed or not. Opening gives the state of the last answered commit, or of the one
/// being made — never a refusal (a crash's leftovers) and never an older state.
#[test]
fn a_crash_at_every_point_of_a_first_activation_and_its_first_commits() {
    let base = tempfile::tempdir().unwrap();
    let run = first_run(&base.path().join("run"));
    let [f0, f1, f2] = &run.files;
    let case = |name: &str,
                journal: Option<&[u8]>,
                mark: Option<&[u8]>,
                on_disk: &Files,
                ok: &[&Files]| {
        let root = base.path().join("case");
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("corral/pods")).unwrap();
        set_files(&root, on_disk);
        if let Some(journal) = journal {
            fs::write(root.join(JOURNAL), journal).unwrap();
        }
        if let Some(mark) = mark {
            fs::write(root.join(MARK), mark).unwrap();
        }
        let opened = open_files(&root, 1 << 20);
        match opened {
            Ok(now) => assert!(
                ok.contains(&&now),
                "{name}: an older or unknown state {now:?}"
            ),
            Err(err) => panic!("{name}: a crash's leftovers refused: {err}"),
        }
        // And the state opened is kept by a second start.
        let again = open_files(&root, 1 << 20)
            .unwrap_or_else(|err| panic!("{name}: refused on the second start: {err}"));
        assert!(
            ok.contains(&&again),
            "{name}: the second start moved to {again:?}"
        );
    };
    // Activation: before the mark, after it, snapshot renamed with or without the mark.
    case("before activation", None, None, f0, &[f0]);
    case("mark made, no journal", None, Some(b""), f0, &[f0]);
    case(
        "snapshot renamed, mark lost",
        Some(&run.journal[0]),
        None,
        f0,
        &[f0],
    );
    case("activated", Some(&run.journal[0]), Some(b""), f0, &[f0]);
    // Commit 1: its record cut at every offset (nothing answered yet, the mark empty);
    // whole but its files or mark slot not (all) written.
    let (j0, j1, j2) = (&run.journal[0], &run.journal[1], &run.journal[2]);
    for keep in j0.len()..=j1.len() {
        let ok: &[&Files] = if keep == j1.len() { &[f0, f1] } else { &[f0] };
        for mark in [&b""[..], &[0; 24], &[0; 48]] {
            for on_disk in [f0, f1] {
                let name = format!("commit 1 cut at {keep}, mark {} bytes", mark.len());
                case(&name, Some(&j1[..keep]), Some(mark), on_disk, ok);
            }
        }
    }
    // Commit 1 answered (its mark written, or lost with a power loss); commit 2 cut at
    // every offset, with what its mark slot may be.
    for mark in lost_marks(&run.mark[1], &[]) {
        for on_disk in [f0, f1] {
            let name = format!("commit 1 answered, mark {mark:?}");
            case(&name, Some(j1), Some(&mark), on_disk, &[f1]);
        }
    }
    for keep in j1.len()..=j2.len() {
        let ok: &[&Files] = if keep == j2.len() { &[f1, f2] } else { &[f1] };
        let marks = if keep == j2.len() {
            lost_marks(&run.mark[2], &[&run.mark[1]])
        } else {
            lost_marks(&run.mark[1], &[])
        };
        for mark in marks {
            for on_disk in [f0, f1, f2] {
                let name = format!("commit 2 cut at {keep}, mark {mark:?}");
                case(&name, Some(&j2[..keep]), Some(&mark), on_disk, ok);
            }
        }
    }
}

/// One damage to a mark in each of its states — a new journal's (both slots name its
/// snapshot), after the first commit, after the second, and a lone 24-byte slot 0 — at
/// every byte and with every cut: opening gives the last answered state, or refuses naming
/// the journal.
#[test]
fn damage_at_every_byte_of_a_mark_in_each_of_its_states() {
    let base = tempfile::tempdir().unwrap();
    let run = first_run(&base.path().join("run"));
    let lone_slot_0 = run.mark[2][..24].to_vec();
    let states: [(&str, usize, Vec<u8>); 4] = [
        ("new", 0, run.mark[0].clone()),
        ("after commit 1", 1, run.mark[1].clone()),
        ("after commit 2", 2, run.mark[2].clone()),
        ("slot 0 alone", 2, lone_slot_0),
    ];
    assert_eq!(run.mark[0].len(), 48, "a new journal's mark names it");
    assert_eq!(run.mark[1].len(), 48);
    assert_eq!(
        &run.mark[1][..24],
        &run.mark[0][..24],
        "commit 1 wrote slot 1 only"
    );
    let case = |name: String, last: usize, mark: &[u8]| {
        let root = base.path().join("case");
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("corral/pods")).unwrap();
        set_files(&root, &run.files[last]);
        fs::write(root.join(JOURNAL), &run.journal[last]).unwrap();
        fs::write(root.join(MARK), mark).unwrap();
        let opened = open_files(&root, 1 << 20);
        if let Ok(now) = &opened {
            assert_eq!(now, &run.files[last], "{name}");
        }
        check(&root, opened, &[&run.files[last]], true);
    };
    for (state, last, mark) in &states {
        for at in 0..mark.len() {
            for x in [0x01, 0x10, 0x80, 0xff] {
                let mut bytes = mark.clone();
                bytes[at] ^= x;
                case(format!("{state}: byte {at} ^ {x:#x}"), *last, &bytes);
            }
        }
        for len in 0..mark.len() {
            case(format!("{state}: cut to {len}"), *last, &mark[..len]);
        }
        for x in [0u8, 1, 0xff] {
            let mut longer = mark.clone();
            longer.push(x);
            case(format!("{state}: a byte {x:#x} appended"), *last, &longer);
        }
    }
}

/// A journal put back from an older copy beside the current mark is refused, whatever
/// state that mark is in — the module's "either alone is refused". A new journal's mark
/// names it, so an older journal (of an earlier journal of this root, before a clean stop)
/// beside it is not taken as the truth.
#[test]
fn an_older_journal_beside_the_current_mark_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("root");
    let run = first_run(&root);
    // Same journal: the older copies beside the mark of commit 2.
    for older in [&run.journal[0], &run.journal[1]] {
        fs::write(root.join(JOURNAL), older).unwrap();
        fs::write(root.join(MARK), &run.mark[2]).unwrap();
        set_files(&root, &run.files[2]);
        check(&root, open_files(&root, 1 << 20), &[&run.files[2]], true);
    }
    // A clean stop, a new start: a new journal and its mark, state f2.
    fs::write(root.join(JOURNAL), &run.journal[2]).unwrap();
    fs::write(root.join(MARK), &run.mark[2]).unwrap();
    set_files(&root, &run.files[2]);
    let (journal, _) = open_when_free(&root, 1 << 20).unwrap();
    journal.activate().unwrap();
    journal.retire().unwrap();
    drop(journal);
    let (journal, _) = open_when_free(&root, 1 << 20).unwrap();
    journal.activate().unwrap();
    drop(journal);
    assert_eq!(
        fs::read(root.join(MARK)).unwrap().len(),
        48,
        "the new journal's mark names it"
    );
    assert_eq!(files(&root), run.files[2]);
    // The older journal (of the journal before the clean stop, state f1) put back.
    fs::write(root.join(JOURNAL), &run.journal[1]).unwrap();
    let opened = open_files(&root, 1 << 20);
    if let Ok(now) = &opened {
        assert_eq!(
            now, &run.files[2],
            "an older journal beside a new journal's mark was taken: state f1 silently"
        );
    }
    check(&root, opened, &[&run.files[2]], true);
}
