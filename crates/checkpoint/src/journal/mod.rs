//! A write-ahead journal that makes a set of checkpoint files durable with one fsync per
//! commit ([`Journal`]), however many files a change rewrote.
//!
//! The files keep their exact kubelet bytes and are still replaced atomically (temporary
//! file, rename), but without their own fsyncs: each new content is also *staged* in the
//! journal, and [`Journal::commit`] appends everything staged since the last commit as one
//! record and fsyncs the journal once. Concurrent committers share that fsync (group
//! commit): whoever commits first writes every record staged so far, the others wait for it.
//!
//! The journal is the authority on what the files hold. Opening it ([`Journal::open`])
//! replays it: every managed file is rewritten (durably, the classic way) to its content
//! as of the last complete record, and managed files the journal does not know are
//! removed. [`Journal::activate`], once the caller found the files acceptable, starts a
//! fresh journal with a snapshot of them; until then the old journal stays as it was, so a
//! start that refuses the state (and an operator who then repairs a file by hand) is never
//! overruled by a snapshot of the refused state. So after a crash at
//! any instant — a process kill or a power loss, during a file write, a rename or a
//! commit — the files equal the state of some prefix of the commits, and every commit that
//! returned is in it. A write that was staged but not committed is undone at the next open.
//! Without a journal file (a first start, or the journal removed on purpose) the files on
//! disk are taken as they are.
//!
//! A torn or damaged tail (a commit cut short) ends the replay there; a damaged first record
//! (the snapshot, which is written before it replaces the old journal) is an error:
//! nothing is guessed.

mod record;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::{CheckpointError, Result, io_error};
use record::{Entry, Kind};

/// Files a journal is the authority on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Managed {
    /// One file.
    File(PathBuf),
    /// Every regular file directly in this directory whose name does not start with `.`
    /// (temporary files).
    Dir(PathBuf),
}

/// Journal settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalOptions {
    /// Once the journal is larger than this many bytes, the next commit replaces it with a
    /// snapshot (default 4 MiB).
    pub compact_at: u64,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            compact_at: 4 << 20,
        }
    }
}

/// What opening a journal did to the files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Whether a journal was found (else the files were taken as they were).
    pub replayed: bool,
    /// Complete records read.
    pub records: usize,
    /// Why the replay stopped before the end of the file (a commit cut short), if it did.
    pub torn_tail: Option<String>,
    /// Files rewritten to the journal's content (their bytes on disk differed).
    pub restored: Vec<PathBuf>,
    /// Files removed because the journal does not have them.
    pub removed: Vec<PathBuf>,
}

#[derive(Debug)]
struct State {
    /// The journal, open for appending once [`Journal::activate`] wrote its snapshot.
    file: Option<File>,
    size: u64,
    /// Every present file as of the last durable commit.
    view: BTreeMap<PathBuf, Vec<u8>>,
    /// Written but not yet committed, in order.
    pending: Vec<Entry>,
    staged: u64,
    durable: u64,
    committing: bool,
    failed: Option<String>,
}

/// A write-ahead journal over a set of files (see the module documentation).
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    managed: Vec<Managed>,
    options: JournalOptions,
    state: Mutex<State>,
    done: Condvar,
}

/// The present files of `managed`, as on disk now.
fn read_managed(managed: &[Managed]) -> Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut read = |path: PathBuf| -> Result<()> {
        match fs::read(&path) {
            Ok(bytes) => {
                out.insert(path, bytes);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("read", &path)(e)),
        }
    };
    for m in managed {
        match m {
            Managed::File(path) => read(path.clone())?,
            Managed::Dir(dir) => {
                let entries = match fs::read_dir(dir) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_error("list", dir)(e)),
                };
                for entry in entries {
                    let entry = entry.map_err(io_error("list", dir))?;
                    let hidden = entry.file_name().as_encoded_bytes().starts_with(b".");
                    let regular = entry.file_type().is_ok_and(|t| t.is_file());
                    if !hidden && regular {
                        read(entry.path())?;
                    }
                }
            }
        }
    }
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error("fsync directory", dir))
}

fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The temporary file replaying writes through, one per directory.
const REPLAY_TEMP: &str = ".journal-replay.tmp";

/// Remove what a journal killed while replaying or compacting left: the replay's temporary
/// file in every managed directory and the snapshot's next to the journal.
fn remove_leftovers(path: &Path, managed: &[Managed]) -> Result<()> {
    let mut temps = vec![snapshot_temp(path)];
    for m in managed {
        let dir = match m {
            Managed::File(file) => parent(file),
            Managed::Dir(dir) => dir.as_path(),
        };
        temps.push(dir.join(REPLAY_TEMP));
    }
    for temp in temps {
        match fs::remove_file(&temp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io_error("remove leftover", &temp)(e));
            }
            _ => {}
        }
    }
    Ok(())
}

fn snapshot_temp(path: &Path) -> PathBuf {
    path.with_extension("snapshot-tmp")
}

/// Replace `path` with `data` through `temp`: write, fsync, rename, fsync the directory.
fn replace_durably(path: &Path, temp: &Path, data: &[u8]) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(temp)
        .map_err(io_error("create temporary file", temp))?;
    file.write_all(data).map_err(io_error("write", temp))?;
    file.sync_all().map_err(io_error("fsync", temp))?;
    drop(file);
    fs::rename(temp, path).map_err(io_error("rename into place", path))?;
    sync_dir(parent(path))
}

/// Replace `path` with `data` durably (used when replaying).
fn write_durably(path: &Path, data: &[u8]) -> Result<()> {
    let dir = parent(path);
    fs::create_dir_all(dir).map_err(io_error("create directory", dir))?;
    replace_durably(path, &dir.join(REPLAY_TEMP), data)
}

impl Journal {
    /// Open the journal at `path` for the files `managed` and replay it onto them (see the
    /// module documentation). Nothing is written to the journal until
    /// [`activate`](Self::activate).
    pub fn open(
        path: impl Into<PathBuf>,
        managed: &[Managed],
        options: JournalOptions,
    ) -> Result<(Journal, Recovery)> {
        let path = path.into();
        let dir = parent(&path).to_path_buf();
        fs::create_dir_all(&dir).map_err(io_error("create directory", &dir))?;
        remove_leftovers(&path, managed)?;
        let mut recovery = Recovery::default();
        match fs::read(&path) {
            Ok(bytes) => {
                recovery.replayed = true;
                let view = Self::replay(&path, &bytes, &mut recovery)?;
                Self::apply(&view, managed, &mut recovery)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("read", &path)(e)),
        }
        let journal = Journal {
            path,
            managed: managed.to_vec(),
            options,
            state: Mutex::new(State {
                file: None,
                size: 0,
                view: BTreeMap::new(),
                pending: Vec::new(),
                staged: 0,
                durable: 0,
                committing: false,
                failed: None,
            }),
            done: Condvar::new(),
        };
        Ok((journal, recovery))
    }

    /// The state the records of `bytes` describe.
    fn replay(
        path: &Path,
        bytes: &[u8],
        recovery: &mut Recovery,
    ) -> Result<BTreeMap<PathBuf, Vec<u8>>> {
        let first = record::decode(bytes, 0).map_err(|why| CheckpointError::JournalDamaged {
            path: path.to_path_buf(),
            offset: 0,
            why: why.to_owned(),
        })?;
        if first.kind != Kind::Snapshot {
            return Err(CheckpointError::JournalDamaged {
                path: path.to_path_buf(),
                offset: 0,
                why: "the first record is not a snapshot".to_owned(),
            });
        }
        let mut view = BTreeMap::new();
        let mut at = 0;
        let mut next = Ok(first);
        loop {
            let record = match next {
                Ok(record) => record,
                Err(why) => {
                    recovery.torn_tail = Some(format!("{why} at byte {at}"));
                    break;
                }
            };
            if record.kind == Kind::Snapshot && at != 0 {
                recovery.torn_tail = Some(format!("a second snapshot at byte {at}"));
                break;
            }
            recovery.records += 1;
            for (file, data) in record.entries {
                match data {
                    Some(data) => view.insert(file, data),
                    None => view.remove(&file),
                };
            }
            at = record.next;
            if at == bytes.len() {
                break;
            }
            next = record::decode(bytes, at);
        }
        Ok(view)
    }

    /// Make the managed files (and any file the journal names) equal `view`, durably.
    fn apply(
        view: &BTreeMap<PathBuf, Vec<u8>>,
        managed: &[Managed],
        recovery: &mut Recovery,
    ) -> Result<()> {
        let on_disk = read_managed(managed)?;
        for (path, data) in view {
            let current = match on_disk.get(path) {
                Some(bytes) => Some(bytes.clone()),
                None => match fs::read(path) {
                    Ok(bytes) => Some(bytes),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                    Err(e) => return Err(io_error("read", path)(e)),
                },
            };
            if current.as_deref() != Some(data.as_slice()) {
                write_durably(path, data)?;
                recovery.restored.push(path.clone());
            }
        }
        for path in on_disk.keys().filter(|p| !view.contains_key(*p)) {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error("remove", path)(e)),
            }
            sync_dir(parent(path))?;
            recovery.removed.push(path.clone());
        }
        Ok(())
    }

    /// Replace the journal with a snapshot of `view` (temporary file, fsync, rename, fsync
    /// of the directory) and open it for appending.
    fn write_snapshot(path: &Path, view: &BTreeMap<PathBuf, Vec<u8>>) -> Result<(File, u64)> {
        let bytes = record::encode(
            Kind::Snapshot,
            view.iter().map(|(p, d)| (p, Some(d.as_slice()))),
        );
        replace_durably(path, &snapshot_temp(path), &bytes)?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io_error("open for appending", path))?;
        Ok((file, bytes.len() as u64))
    }

    /// Start journaling: replace the journal with a snapshot of the managed files as they
    /// are now (what was written since [`open`](Self::open) included, durably), and append
    /// every later commit to it. Until this, [`commit`](Self::commit) fails.
    pub fn activate(&self) -> Result<()> {
        let mut state = self.lock();
        let view = read_managed(&self.managed)?;
        let (file, size) = Self::write_snapshot(&self.path, &view)?;
        state.file = Some(file);
        state.size = size;
        state.view = view;
        state.pending.clear();
        state.durable = state.staged;
        Ok(())
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `write` (a rename of a fully written temporary file onto `target`, or a
    /// removal of `target`) and stage `target`'s new content (`None`: removed) in the same
    /// critical section, so the journal sees writes of one file in the order they happened.
    /// Not durable until [`commit`](Self::commit).
    pub fn stage(
        &self,
        target: &Path,
        data: Option<&[u8]>,
        write: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let mut state = self.lock();
        write()?;
        state
            .pending
            .push((target.to_path_buf(), data.map(<[u8]>::to_vec)));
        state.staged += 1;
        Ok(())
    }

    /// End journaling cleanly: commit what is staged, make every file durable on its own
    /// (fsync of each file and its directory), then remove the journal. The files alone are
    /// the state again, so whoever uses them next — a kubelet taking over, an operator —
    /// is not overruled by a replay at the next [`open`](Self::open). Commits fail after
    /// this.
    pub fn retire(&self) -> Result<()> {
        self.commit()?;
        let mut state = self.lock();
        if state.file.is_none() {
            return Ok(());
        }
        let mut dirs = std::collections::BTreeSet::new();
        for path in state.view.keys() {
            match File::open(path) {
                Ok(file) => file.sync_all().map_err(io_error("fsync", path))?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("open", path)(e)),
            }
            dirs.insert(parent(path).to_path_buf());
        }
        for m in &self.managed {
            if let Managed::Dir(dir) = m {
                dirs.insert(dir.clone());
            }
        }
        for dir in dirs {
            if dir.exists() {
                sync_dir(&dir)?;
            }
        }
        state.file = None;
        fs::remove_file(&self.path).map_err(io_error("remove", &self.path))?;
        sync_dir(parent(&self.path))
    }

    /// Whether [`activate`](Self::activate) ran (commits are possible).
    pub fn is_active(&self) -> bool {
        self.lock().file.is_some()
    }

    /// Whether the journal is active and something is staged but not yet committed.
    pub fn has_pending(&self) -> bool {
        let state = self.lock();
        state.file.is_some() && state.durable < state.staged
    }

    /// Make everything staged before this call durable: one append and one fsync of the
    /// journal, shared with concurrent committers. After a failure every later commit fails
    /// too ([`CheckpointError::JournalFailed`]): the journal's tail cannot be trusted until
    /// it is replayed at the next open.
    pub fn commit(&self) -> Result<()> {
        let mut state = self.lock();
        let target = state.staged;
        loop {
            if let Some(why) = &state.failed {
                return Err(CheckpointError::JournalFailed {
                    path: self.path.clone(),
                    why: why.clone(),
                });
            }
            if state.durable >= target {
                return Ok(());
            }
            if state.committing {
                state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            let Some(file) = &state.file else {
                return Err(CheckpointError::JournalFailed {
                    path: self.path.clone(),
                    why: "not activated: the state it would record was not accepted".to_owned(),
                });
            };
            let file = file.try_clone();
            state.committing = true;
            let batch = std::mem::take(&mut state.pending);
            let upto = state.staged;
            let bytes = record::encode(Kind::Delta, batch.iter().map(|(p, d)| (p, d.as_deref())));
            drop(state);
            let written = file.and_then(|mut f| {
                f.write_all(&bytes)?;
                f.sync_data()
            });
            state = self.lock();
            state.committing = false;
            match written {
                Ok(()) => {
                    for (path, data) in batch {
                        match data {
                            Some(data) => state.view.insert(path, data),
                            None => state.view.remove(&path),
                        };
                    }
                    state.durable = upto;
                    state.size += bytes.len() as u64;
                    if state.size > self.options.compact_at {
                        self.compact(&mut state);
                    }
                }
                Err(e) => state.failed = Some(e.to_string()),
            }
            self.done.notify_all();
        }
    }

    /// Replace the journal by a snapshot of the durable view (writes staged meanwhile are
    /// committed on top of it later). A failure may leave the append handle on a replaced
    /// file, so it fails the journal like a failed commit.
    fn compact(&self, state: &mut State) {
        match Self::write_snapshot(&self.path, &state.view) {
            Ok((file, size)) => {
                state.file = Some(file);
                state.size = size;
            }
            Err(e) => state.failed = Some(format!("compacting: {e}")),
        }
    }
}

#[cfg(test)]
mod tests;
