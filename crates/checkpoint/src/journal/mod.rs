//! A write-ahead journal that makes a set of checkpoint files durable with one fsync per
//! commit ([`Journal`]), however many files a change rewrote.
//!
//! The files keep their exact kubelet bytes and are still replaced atomically (temporary
//! file, rename), but without their own fsyncs. A write is *staged* ([`Journal::stage`]);
//! [`Journal::commit`] appends everything staged since the last commit as one record,
//! fsyncs the journal once, and only then renames the new contents into place and notes
//! the commit in the journal's *mark* (see `mark.rs`). Concurrent committers share that
//! fsync (group commit): whoever commits first writes every record staged so far, the
//! others wait for it. Files therefore never hold a change the journal does not.
//!
//! # The contract
//!
//! - **A commit that returned is durable**: its record is fsynced, its files hold it, its
//!   mark names it. A commit that failed (a full disk, an I/O error) answered nothing; what
//!   it held stays staged and the next commit retries it, after rewriting the journal as a
//!   snapshot if its tail cannot be trusted. A failure never wedges later commits.
//! - **A crash** (a kill or a power loss, at any instant) leaves: a journal whose last
//!   record may be cut short (a commit nobody was told about), files that may lag behind
//!   the journal (renames not yet done or not yet durable), a mark that may lag behind it.
//! - **Opening replays** ([`Journal::open`]): the files are brought to the journal's last
//!   whole record (rewritten durably; managed files it does not have are removed). A cut or
//!   damaged *last* record that the mark does not name is what a crash leaves: dropped.
//!   Everything else is **refused**, naming the journal, the byte offset and the remedy,
//!   and the files are left as they are: a damaged first record, damage followed by a valid
//!   record, a record of another journal, out of sequence or naming a file the journal
//!   does not manage, a journal that ends before the commit its mark names (answered
//!   commits cut away), a missing or foreign mark, a journal or file that is not a regular
//!   file or is larger than [`JournalOptions::max_bytes`]. No older state is ever taken
//!   silently.
//! - **The root is relocatable**: records name files relative to the root the journal
//!   manages, so a moved or copied root (journal and mark included) replays in its new
//!   place, and a record can name nothing outside it.
//! - [`Journal::activate`], once the caller found the files acceptable, starts a fresh
//!   journal with a snapshot of them; until then the old journal stays as it was, so a
//!   start that refuses the state (and an operator who then repairs a file by hand) is never
//!   overruled by a snapshot of the refused state. Without a journal file (a first start,
//!   a clean stop, or the journal moved aside on purpose) the files on disk are taken as
//!   they are.
//! - **One process per journal**: opening takes an exclusive lock on `<journal>.lock`
//!   before replaying (`JournalError::InUse` otherwise), so a second process on a root
//!   never rolls the running one's files back.
//! - **Retiring** (`Journal::retire`, a clean stop) fsyncs every file and removes the
//!   journal and its mark, so the files alone are the state again: a kubelet taking over
//!   is never overruled.
//! - **Limit**: a journal and its mark put back together from an older copy (of this root
//!   or another) are taken as the truth, as a database restored from a backup is; either
//!   alone is refused.

mod commit;
mod files;
mod mark;
mod record;
mod replay;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

pub use crate::journal_error::JournalError;
pub use files::Managed;

use crate::error::{Result, io_error};
use files::{Syncs, parent, put, read_bounded, read_managed, relative, replace, sync_dir};
use mark::MarkFile;
use record::{Entry, Kind, Stamp};

/// Journal settings.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{Journal, JournalOptions, Managed};
///
/// let root = tempfile::tempdir()?;
/// let options = JournalOptions { compact_at: 64 << 10, ..JournalOptions::default() };
/// assert_eq!(options.max_bytes, 256 << 20);
/// let managed = [Managed::Dir("pods".into())];
/// let (journal, recovery) = Journal::open(root.path(), "pods.journal", &managed, options)?;
/// assert!(!recovery.replayed && recovery.restored.is_empty());
/// journal.activate()?;
/// assert!(journal.is_active() && !journal.has_pending());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalOptions {
    /// Once the journal is larger than this many bytes, the next commit replaces it with a
    /// snapshot (default 4 MiB).
    pub compact_at: u64,
    /// The most bytes a journal, or one file it manages, may hold (default 256 MiB): a
    /// larger one is refused at open, never read whole.
    pub max_bytes: u64,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            compact_at: 4 << 20,
            max_bytes: 256 << 20,
        }
    }
}

/// What opening a journal did to the files.
///
/// # Example
///
/// A file changed behind the journal's back is put back to what the journal committed:
///
/// ```
/// use std::sync::Arc;
/// use corral_checkpoint::{CheckpointStore, Journal, JournalOptions, Managed};
///
/// let root = tempfile::tempdir()?;
/// let managed = [Managed::File("memory_manager_state".into())];
/// let open = || Journal::open(root.path(), "state.journal", &managed, JournalOptions::default());
/// {
///     let (journal, _) = open()?;
///     journal.activate()?;
///     let journal = Arc::new(journal);
///     let store = CheckpointStore::open(root.path())?.with_journal(Arc::clone(&journal));
///     store.write_bytes("memory_manager_state", b"committed")?;
///     journal.commit()?;
/// }
/// std::fs::write(root.path().join("memory_manager_state"), b"edited by hand")?;
/// let (_journal, recovery) = open()?;
/// assert!(recovery.replayed);
/// assert_eq!(recovery.restored, [root.path().join("memory_manager_state")]);
/// assert_eq!(std::fs::read(root.path().join("memory_manager_state"))?, b"committed");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Whether a journal was found (else the files were taken as they were).
    pub replayed: bool,
    /// Whole records read.
    pub records: usize,
    /// The last commit the journal holds.
    pub last_commit: u64,
    /// Why the replay stopped before the end of the file (a commit a crash cut short,
    /// never answered), if it did.
    pub torn_tail: Option<String>,
    /// Files rewritten to the journal's content (their bytes on disk differed).
    pub restored: Vec<PathBuf>,
    /// Files removed because the journal does not have them.
    pub removed: Vec<PathBuf>,
    /// No journal, but a mark: the journal was removed (a clean stop cut short, or on
    /// purpose), so the files were taken as they are.
    pub mark_without_journal: bool,
}

#[derive(Debug)]
struct State {
    /// The journal, open for appending once [`Journal::activate`] wrote its snapshot.
    file: Option<File>,
    mark: Option<MarkFile>,
    /// No journal was found: [`Journal::activate`] makes a new mark first.
    new_mark: bool,
    size: u64,
    /// Which journal, and its last durable commit.
    stamp: Stamp,
    /// Every present file as of the last durable commit, by relative path.
    view: BTreeMap<PathBuf, Vec<u8>>,
    /// Written but not yet committed, in order.
    pending: Vec<Entry>,
    staged: u64,
    durable: u64,
    committing: bool,
    /// The journal's tail cannot be trusted (a failed append or compaction): the next
    /// commit first rewrites it as a snapshot of `view`.
    needs_rewrite: bool,
    /// Files whose content on disk lags `view` (their rename failed): the next commit
    /// writes them again.
    lagging: BTreeSet<PathBuf>,
    /// Why the journal cannot commit, or the files or mark lag behind it, while that lasts.
    trouble: Option<String>,
}

/// A write-ahead journal over a set of files (see the module documentation).
///
/// # Example
///
/// A commit is durable, a write not committed when the process dies is not: opening the
/// journal again puts the files back as of the last commit.
///
/// ```
/// use std::sync::Arc;
/// use corral_checkpoint::{CheckpointStore, Journal, JournalOptions, Managed};
///
/// let root = tempfile::tempdir()?;
/// let managed = [Managed::File("cpu_manager_state".into())];
/// let open = || Journal::open(root.path(), "state.journal", &managed, JournalOptions::default());
/// {
///     let (journal, recovery) = open()?;
///     assert!(!recovery.replayed, "a new journal");
///     journal.activate()?;
///     let journal = Arc::new(journal);
///     let store = CheckpointStore::open(root.path())?.with_journal(Arc::clone(&journal));
///     store.write_bytes("cpu_manager_state", b"committed")?;
///     journal.commit()?;
///     store.write_bytes("cpu_manager_state", b"never committed")?;
///     // The process dies here.
/// }
/// let (_journal, recovery) = open()?;
/// assert!(recovery.replayed);
/// assert_eq!(std::fs::read(root.path().join("cpu_manager_state"))?, b"committed");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Journal {
    /// `<journal>.lock`, locked (`flock`, exclusive) for as long as the journal is open.
    _lock: File,
    root: PathBuf,
    path: PathBuf,
    mark_path: PathBuf,
    managed: Vec<Managed>,
    options: JournalOptions,
    state: Mutex<State>,
    done: Condvar,
    syncs: Syncs,
}

/// A journal id no other journal is likely to have.
fn fresh_journal_id() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

impl Journal {
    /// Open the journal at `journal` for the files `managed`, both relative to `root`, and
    /// replay it onto them (see the module documentation). Nothing is written to the
    /// journal until [`activate`](Self::activate).
    ///
    /// ```
    /// use corral_checkpoint::{CheckpointStore, Journal, JournalOptions, Managed};
    /// use std::sync::Arc;
    ///
    /// let root = tempfile::tempdir()?;
    /// let managed = [Managed::File("cpu_manager_state".into())];
    /// let (journal, _) =
    ///     Journal::open(root.path(), "state.journal", &managed, JournalOptions::default())?;
    /// journal.activate()?;
    /// let journal = Arc::new(journal);
    /// let store = CheckpointStore::open(root.path())?.with_journal(Arc::clone(&journal));
    /// store.write_bytes("cpu_manager_state", b"{}")?;
    /// journal.commit()?; // one fsync; the file holds the new bytes from here on
    /// assert_eq!(std::fs::read(root.path().join("cpu_manager_state"))?, b"{}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(
        root: impl Into<PathBuf>,
        journal: impl AsRef<Path>,
        managed: &[Managed],
        options: JournalOptions,
    ) -> Result<(Journal, Recovery)> {
        let root = root.into();
        let managed = managed
            .iter()
            .map(|m| match m {
                Managed::File(p) => relative(p).map(Managed::File),
                Managed::Dir(p) => relative(p).map(Managed::Dir),
            })
            .collect::<Result<Vec<_>>>()?;
        let path = root.join(relative(journal.as_ref())?);
        let mark_path = mark::path_for(&path);
        let dir = parent(&path);
        fs::create_dir_all(dir).map_err(io_error("create directory", dir))?;
        // One process at a time: a second one replaying would roll the first one's files
        // back to what the journal held when it read it.
        let lock = files::beside(&path, ".lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock)
            .map_err(io_error("open", &lock))?;
        match lock_file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(JournalError::InUse { path: path.clone() }.into());
            }
            Err(fs::TryLockError::Error(e)) => return Err(io_error("lock", &lock)(e)),
        }
        files::remove_leftovers(&root, &path, &managed)?;
        let mut recovery = Recovery::default();
        let syncs = Syncs::default();
        let journal_bytes = read_bounded(&path, options.max_bytes)?;
        let mark_bytes = read_bounded(&mark_path, 4096)?;
        let mut stamp = Stamp {
            journal_id: fresh_journal_id(),
            seq: 0,
        };
        if let Some(bytes) = &journal_bytes {
            let mark = match &mark_bytes {
                None => mark::Found::Missing,
                Some(b) => mark::decode(b).map_err(|why| JournalError::MarkUnusable {
                    path: path.clone(),
                    mark: mark_path.clone(),
                    why: why.to_owned(),
                })?,
            };
            let replayed = replay::replay(&path, &mark_path, bytes, mark, &managed)?;
            recovery.replayed = true;
            recovery.records = replayed.records;
            recovery.last_commit = replayed.stamp.seq;
            recovery.torn_tail = replayed.torn_tail;
            stamp = replayed.stamp;
            let replay = (managed.as_slice(), &options, &syncs);
            Self::apply_replayed(&root, &replayed.view, replay, &mut recovery)?;
        } else {
            recovery.mark_without_journal = mark_bytes.is_some();
        }
        let journal = Journal {
            _lock: lock_file,
            root,
            path,
            mark_path,
            managed,
            options,
            state: Mutex::new(State {
                file: None,
                mark: None,
                new_mark: journal_bytes.is_none() || mark_bytes.is_none(),
                size: 0,
                stamp,
                view: BTreeMap::new(),
                pending: Vec::new(),
                staged: 0,
                durable: 0,
                committing: false,
                needs_rewrite: false,
                lagging: BTreeSet::new(),
                trouble: None,
            }),
            done: Condvar::new(),
            syncs,
        };
        Ok((journal, recovery))
    }

    /// Make the managed files equal `view`, durably.
    fn apply_replayed(
        root: &Path,
        view: &BTreeMap<PathBuf, Vec<u8>>,
        (managed, options, syncs): (&[Managed], &JournalOptions, &Syncs),
        recovery: &mut Recovery,
    ) -> Result<()> {
        let on_disk = read_managed(root, managed, options.max_bytes)?;
        for (rel, data) in view {
            if on_disk.get(rel) != Some(data) {
                let path = root.join(rel);
                put(&path, Some(data), Some(syncs))?;
                recovery.restored.push(path);
            }
        }
        for rel in on_disk.keys().filter(|p| !view.contains_key(*p)) {
            let path = root.join(rel);
            put(&path, None, Some(syncs))?;
            recovery.removed.push(path);
        }
        Ok(())
    }

    /// Replace the journal with a snapshot of `view` (temporary file, fsync, rename, fsync
    /// of the directory) and open it for appending.
    fn write_snapshot(
        path: &Path,
        stamp: Stamp,
        view: &BTreeMap<PathBuf, Vec<u8>>,
        syncs: &Syncs,
    ) -> Result<(File, u64)> {
        let bytes = record::encode(
            Kind::Snapshot,
            stamp,
            view.iter().map(|(p, d)| (p, Some(d.as_slice()))),
        );
        replace(path, &files::snapshot_temp(path), &bytes, Some(syncs))?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io_error("open for appending", path))?;
        Ok((file, bytes.len() as u64))
    }

    /// Start journaling: replace the journal with a snapshot of the managed files as they
    /// are now (what was written since [`open`](Self::open) included, durably), and append
    /// every later commit to it. Until this, [`commit`](Self::commit) fails and
    /// [`stage`](Self::stage) writes through.
    pub fn activate(&self) -> Result<()> {
        let mut state = self.lock();
        let view = read_managed(&self.root, &self.managed, self.options.max_bytes)?;
        if state.new_mark {
            // The mark exists before any journal that needs it, in the journal's directory,
            // whose fsync after the snapshot's rename makes both durable (its bytes need no
            // fsync: lost, they read as unwritten).
            let initial = mark::Mark {
                journal_id: state.stamp.journal_id,
                seq: state.stamp.seq,
            };
            mark::create(&self.mark_path, initial).map_err(io_error("create", &self.mark_path))?;
            state.new_mark = false;
        }
        let (file, size) = Self::write_snapshot(&self.path, state.stamp, &view, &self.syncs)?;
        state.mark =
            Some(MarkFile::open(&self.mark_path).map_err(io_error("open", &self.mark_path))?);
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

    /// The journal's mark file (`<journal>.mark`).
    pub fn mark_path(&self) -> &Path {
        &self.mark_path
    }

    /// The root the managed files are relative to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stage `target`'s new content (`None`: removed), to be written when the next
    /// [`commit`](Self::commit) has made it durable; a write of the content it has as of
    /// the last commit, with nothing staged for it since, is no change and stages nothing.
    /// Before [`activate`](Self::activate) (and after [`retire`](Self::retire)) nothing is
    /// journaled: `write_through` writes the file at once. `target` must be one of the managed files under the root.
    pub fn stage<E: From<JournalError>>(
        &self,
        target: &Path,
        data: Option<&[u8]>,
        write_through: impl FnOnce() -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let rel = target
            .strip_prefix(&self.root)
            .ok()
            .filter(|rel| files::is_managed(&self.managed, rel))
            .ok_or_else(|| JournalError::NotManaged {
                path: target.to_path_buf(),
            })?;
        let mut state = self.lock();
        if state.file.is_none() {
            return write_through();
        }
        // A write of what the file already holds, durably, with nothing staged for it
        // since (nor a commit under way, whose batch is out of `pending`): nothing to
        // journal, and a commit then costs no fsync.
        let unchanged = !state.committing
            && state.view.get(rel).map(Vec::as_slice) == data
            && !state.pending.iter().any(|(p, _)| p == rel);
        if unchanged {
            return Ok(());
        }
        state
            .pending
            .push((rel.to_path_buf(), data.map(<[u8]>::to_vec)));
        state.staged += 1;
        Ok(())
    }

    /// End journaling cleanly: commit what is staged, make every file durable on its own
    /// (fsync of each file and its directory), then remove the journal and its mark. While
    /// files lag behind the journal (a rename that keeps failing) it fails and keeps the
    /// journal, which the next start replays. The
    /// files alone are the state again, so whoever uses them next — a kubelet taking over,
    /// an operator — is not overruled by a replay at the next [`open`](Self::open).
    pub fn retire(&self) -> Result<()> {
        self.commit()?;
        let mut state = self.lock();
        if state.file.is_none() {
            return Ok(());
        }
        if let Some(trouble) = state.trouble.clone().filter(|_| !state.lagging.is_empty()) {
            // The files are not the state yet: the journal stays for the next start.
            return Err(JournalError::CommitFailed {
                path: self.path.clone(),
                op: "retire while state files lag behind the journal",
                source: trouble.into(),
            }
            .into());
        }
        let mut dirs = BTreeSet::new();
        for rel in state.view.keys() {
            let path = self.root.join(rel);
            match File::open(&path) {
                Ok(file) => self.syncs.all(&file).map_err(io_error("fsync", &path))?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("open", &path)(e)),
            }
            dirs.insert(parent(&path).to_path_buf());
        }
        for m in &self.managed {
            if let Managed::Dir(dir) = m {
                dirs.insert(self.root.join(dir));
            }
        }
        for dir in dirs {
            if dir.exists() {
                sync_dir(&dir, &self.syncs)?;
            }
        }
        state.file = None;
        state.mark = None;
        // The journal goes first: a mark without a journal is a clean stop cut short.
        fs::remove_file(&self.path).map_err(io_error("remove", &self.path))?;
        sync_dir(parent(&self.path), &self.syncs)?;
        match fs::remove_file(&self.mark_path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io_error("remove", &self.mark_path)(e));
            }
            _ => {}
        }
        sync_dir(parent(&self.mark_path), &self.syncs)
    }

    /// How many fsync and fdatasync calls this journal made since it was opened (replay,
    /// snapshots, commits and retiring): one per commit, two for a snapshot.
    ///
    /// ```
    /// use corral_checkpoint::{Journal, JournalOptions, Managed};
    ///
    /// let root = tempfile::tempdir()?;
    /// let managed = [Managed::File("cpu_manager_state".into())];
    /// let (journal, _) =
    ///     Journal::open(root.path(), "state.journal", &managed, JournalOptions::default())?;
    /// journal.activate()?; // the snapshot and its directory
    /// assert_eq!(journal.syncs(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn syncs(&self) -> u64 {
        self.syncs.count()
    }

    /// Whether [`activate`](Self::activate) ran (commits are possible).
    pub fn is_active(&self) -> bool {
        self.lock().file.is_some()
    }

    /// Whether the journal is active and a [`commit`](Self::commit) has work: something
    /// staged but not yet committed, or files lagging behind the journal, or a journal to
    /// rewrite after a failure.
    pub fn has_pending(&self) -> bool {
        let state = self.lock();
        state.file.is_some()
            && (state.durable < state.staged || !state.lagging.is_empty() || state.needs_rewrite)
    }

    /// Why the journal cannot commit, or why files or the mark lag behind it (a failed
    /// rename or mark write), while that lasts; `None` once a commit fully succeeded.
    pub fn trouble(&self) -> Option<String> {
        self.lock().trouble.clone()
    }
}

#[cfg(test)]
mod tests;
