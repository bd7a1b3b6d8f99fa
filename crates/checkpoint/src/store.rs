//! The checkpoint store: upstream's `CheckpointManager` over a directory
//! (`pkg/kubelet/checkpointmanager` + `pkg/kubelet/util/store/filestore.go`), with writes
//! that survive crashes and power loss.
//!
//! A write goes to a fresh temporary file in the same directory (a name starting with `.`,
//! which no valid key can, so [`CheckpointStore::list`] skips it as upstream does), is
//! written, fsynced and closed, renamed over the target, and then the directory is fsynced
//! so the rename itself is durable. Upstream stops before the directory fsync; a crash at
//! any point here leaves either the old file or the new one, never a torn one.
//!
//! # Temporary files left by crashes
//!
//! A writer killed between creating its temporary file and renaming it leaves the file
//! behind. Its name is `.<key>.tmp.<pid>.<n>`: a valid key, the writer's process id and a
//! per-process counter, all decimal. Opening a store removes such leftovers
//! ([`CheckpointStore::removed_at_open`] tells which); so does
//! [`CheckpointStore::remove_stale_temp_files`]. The rule, which never touches another
//! name (the kubelet's own temporary files are `.<random>` and never match) nor anything
//! but a regular file:
//!
//! - a file of **this process** (its pid) is removed unless one of this process's writes is
//!   using it right now — an earlier process with the same pid (a container's agent is
//!   often pid 1 on every start) left it;
//! - a file of **another pid** is removed only when `/proc/<pid>` does not exist, i.e. no
//!   such process is alive; a live pid's file may be a write in progress and stays (if the
//!   pid was reused by an unrelated process, the file stays until a later open). Without
//!   `/proc` nothing of other pids is removed.
//!
//! Writers in another pid namespace sharing the directory cannot be seen: their in-progress
//! temporary file can be removed, and that write then fails (its rename finds no file); the
//! checkpoint itself is never damaged.

use std::collections::HashSet;
use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{CheckpointError, Result, io_error};
use crate::formats::Checkpoint;
use crate::journal::Journal;

/// Upstream's `keyMaxLength`.
const KEY_MAX_LENGTH: usize = 250;

/// Marker inside temporary file names: `.<key>.tmp.<pid>.<n>`.
const TEMP_MARKER: &str = ".tmp.";

/// How the store creates files and directories.
///
/// # Example
///
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// use corral_checkpoint::{CheckpointStore, StoreOptions};
///
/// # fn main() -> Result<(), corral_checkpoint::CheckpointError> {
/// let dir = tempfile::tempdir().expect("temp dir");
/// let options = StoreOptions { file_mode: 0o640, ..StoreOptions::default() };
/// assert!(options.sync_directory, "durable by default");
/// let store = CheckpointStore::with_options(dir.path().join("state"), options)?;
/// store.write_bytes("key", b"{}")?;
/// let mode = std::fs::metadata(dir.path().join("state/key")).unwrap().permissions().mode();
/// assert_eq!(mode & 0o777, 0o640, "applied exactly, whatever the umask");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Permission bits of checkpoint files, applied exactly (not masked by the umask).
    /// Default `0o600`, what upstream's `os.CreateTemp` gives its files.
    pub file_mode: u32,
    /// Permission bits for directories the store creates (upstream: `0755`, before umask).
    pub dir_mode: u32,
    /// Fsync the directory after each rename so the new file survives power loss
    /// (default `true`; upstream does not).
    pub sync_directory: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            file_mode: 0o600,
            dir_mode: 0o755,
            sync_directory: true,
        }
    }
}

/// Checkpoints stored as files in one directory, one file per key.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_checkpoint::{CheckpointStore, MemoryManagerCheckpoint, MEMORY_MANAGER_FILE};
///
/// # fn main() -> Result<(), corral_checkpoint::CheckpointError> {
/// let dir = tempfile::tempdir().expect("temp dir");
/// // A writer that died mid-write left its temporary file: opening removes it.
/// let leftover = format!(".memory_manager_state.tmp.{}.0", std::process::id());
/// std::fs::write(dir.path().join(&leftover), b"{").unwrap();
/// let store = CheckpointStore::open(dir.path())?;
/// assert_eq!(store.removed_at_open(), [dir.path().join(&leftover)]);
///
/// // Maps empty, never nil, as the kubelet's constructor makes them.
/// let state = MemoryManagerCheckpoint {
///     policy_name: "None".into(),
///     machine_state: Some(BTreeMap::new()),
///     entries: Some(BTreeMap::new()),
/// };
/// store.create(MEMORY_MANAGER_FILE, &state)?;
/// assert_eq!(store.list()?, [MEMORY_MANAGER_FILE]);
/// assert_eq!(store.get::<MemoryManagerCheckpoint>(MEMORY_MANAGER_FILE)?, state);
///
/// store.remove(MEMORY_MANAGER_FILE)?;
/// let missing = store.get::<MemoryManagerCheckpoint>(MEMORY_MANAGER_FILE).unwrap_err();
/// assert!(missing.to_string().contains(MEMORY_MANAGER_FILE), "{missing}");
/// assert!(store.get::<MemoryManagerCheckpoint>("../escape").is_err(), "keys are validated");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    dir: PathBuf,
    options: StoreOptions,
    removed_at_open: Vec<PathBuf>,
    journal: Option<Arc<Journal>>,
}

/// Checks a key as upstream's `ValidateKey`: 1–250 characters of `[-A-Za-z0-9_.]`, the
/// first and last a letter or digit.
///
/// # Example
///
/// ```
/// use corral_checkpoint::validate_key;
///
/// assert!(validate_key("cpu_manager_state").is_ok());
/// assert!(validate_key("../etc/passwd").is_err());
/// assert!(validate_key("_leading").is_err());
/// ```
pub fn validate_key(key: &str) -> Result<()> {
    let bytes = key.as_bytes();
    let ext = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    let valid = !bytes.is_empty()
        && bytes.len() <= KEY_MAX_LENGTH
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(ext);
    if valid {
        Ok(())
    } else {
        Err(CheckpointError::InvalidKey {
            key: key.to_owned(),
        })
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// How many names a write tries when its temporary name is taken (by a leftover of an
/// earlier process that had the same pid).
const TEMP_NAME_ATTEMPTS: usize = 64;

/// Temporary files this process is writing right now (registered before the file is
/// created, released after it is renamed or removed), so a sweep never removes them.
static IN_FLIGHT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

fn in_flight() -> MutexGuard<'static, Option<HashSet<PathBuf>>> {
    // The set stays consistent even if a holder panicked: every critical section is one
    // insert, remove or lookup.
    IN_FLIGHT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A temporary file registered in [`IN_FLIGHT`] for as long as this value lives.
struct InFlight(PathBuf);

impl InFlight {
    /// Registers `path`, a name made with a fresh counter value (so never registered yet).
    fn register(path: PathBuf) -> Self {
        in_flight()
            .get_or_insert_with(HashSet::new)
            .insert(path.clone());
        InFlight(path)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(set) = in_flight().as_mut() {
            set.remove(&self.0);
        }
    }
}

/// The writer pid of a temporary file name of this store's making, `.<key>.tmp.<pid>.<n>`.
fn temp_file_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?;
    let (rest, counter) = rest.rsplit_once('.')?;
    let (rest, pid) = rest.rsplit_once('.')?;
    let key = rest.strip_suffix(TEMP_MARKER.trim_end_matches('.'))?;
    let decimal = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !decimal(counter) || !decimal(pid) || validate_key(key).is_err() {
        return None;
    }
    counter.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Whether a temporary file of `pid` at `path` may be a write in progress (see the module
/// documentation for the rule).
fn may_be_in_progress(pid: u32, path: &Path, in_flight: &Option<HashSet<PathBuf>>) -> bool {
    if pid == std::process::id() {
        return in_flight.as_ref().is_some_and(|set| set.contains(path));
    }
    let proc_root = Path::new("/proc");
    !proc_root.join("self").exists() || proc_root.join(pid.to_string()).exists()
}

impl CheckpointStore {
    /// Opens (creating if needed) a store in `dir` with default options, removing
    /// temporary files that crashed writers left (see the module documentation).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::with_options(dir, StoreOptions::default())
    }

    /// Opens (creating if needed) a store in `dir`, removing temporary files that crashed
    /// writers left (see the module documentation).
    pub fn with_options(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Self> {
        let mut store = CheckpointStore {
            dir: dir.as_ref().to_path_buf(),
            options,
            removed_at_open: Vec::new(),
            journal: None,
        };
        store.ensure_dir()?;
        store.removed_at_open = store.remove_stale_temp_files()?;
        Ok(store)
    }

    /// The same store, its writes made durable by `journal` instead of their own fsyncs:
    /// each write is staged in the journal and replaces its file (atomically: temporary
    /// file, rename) once the journal's next commit ([`Journal::commit`]) made it durable.
    /// Every file of the store must be one the journal manages.
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// The journal writes go through, if any.
    pub fn journal(&self) -> Option<&Arc<Journal>> {
        self.journal.as_ref()
    }

    /// The stale temporary files opening the store removed.
    pub fn removed_at_open(&self) -> &[PathBuf] {
        &self.removed_at_open
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The file a key is stored in.
    pub fn path_of(&self, key: &str) -> Result<PathBuf> {
        validate_key(key)?;
        Ok(self.dir.join(key))
    }

    fn ensure_dir(&self) -> Result<()> {
        DirBuilder::new()
            .recursive(true)
            .mode(self.options.dir_mode)
            .create(&self.dir)
            .map_err(io_error("create directory", &self.dir))
    }

    /// Encodes `checkpoint` and writes it under `key` (upstream: `CreateCheckpoint`).
    pub fn create<C: Checkpoint>(&self, key: &str, checkpoint: &C) -> Result<()> {
        let bytes = checkpoint.encode()?;
        self.write_bytes(key, &bytes)
    }

    /// Reads, decodes and verifies the checkpoint under `key` (upstream: `GetCheckpoint`).
    pub fn get<C: Checkpoint>(&self, key: &str) -> Result<C> {
        let path = self.path_of(key)?;
        let bytes = self.read_bytes(key)?;
        C::decode(&bytes).map_err(|err| err.with_path(&path))
    }

    /// The raw bytes under `key`; [`CheckpointError::NotFound`] when there are none.
    pub fn read_bytes(&self, key: &str) -> Result<Vec<u8>> {
        let path = self.path_of(key)?;
        fs::read(&path).map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                CheckpointError::NotFound {
                    key: key.to_owned(),
                    path: path.clone(),
                }
            } else {
                io_error("read", &path)(source)
            }
        })
    }

    /// Atomically and durably replaces the file under `key` with `data`. Through a
    /// journal ([`with_journal`](Self::with_journal)) the write is staged: the file holds
    /// `data` once the journal's next commit made it durable.
    pub fn write_bytes(&self, key: &str, data: &[u8]) -> Result<()> {
        let target = self.path_of(key)?;
        match &self.journal {
            Some(journal) => {
                journal.stage(&target, Some(data), || self.write_now(key, &target, data))
            }
            None => self.write_now(key, &target, data),
        }
    }

    /// Write `data` to a temporary file and rename it onto `target`, durably (fsyncs). A
    /// journaled store writes at once only while its journal is not active (before
    /// [`Journal::activate`], after [`Journal::retire`]): nothing makes such a write durable
    /// later in time for a caller that relies on it (a record renamed at start whose old
    /// name is then removed; a write after a clean stop), so it is durable on its own.
    fn write_now(&self, key: &str, target: &Path, data: &[u8]) -> Result<()> {
        self.ensure_dir()?;
        let (temp, file) = self.create_temp(key)?;
        let result = self.write_temp_then_rename(file, &temp.0, target, data);
        if result.is_err() {
            let _ = fs::remove_file(&temp.0);
        }
        result
    }

    /// Creates a fresh temporary file for `key`, registered as in flight. A name already
    /// taken (a leftover of an earlier process with this pid) is skipped.
    fn create_temp(&self, key: &str) -> Result<(InFlight, File)> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let path = self.dir.join(format!(
                ".{key}{TEMP_MARKER}{}.{}",
                std::process::id(),
                TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            // Registered before the file exists, so a sweep never sees it unregistered.
            let temp = InFlight::register(path);
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(self.options.file_mode)
                .open(&temp.0)
            {
                Ok(file) => return Ok((temp, file)),
                Err(err)
                    if err.kind() == io::ErrorKind::AlreadyExists
                        && attempt < TEMP_NAME_ATTEMPTS => {}
                Err(err) => return Err(io_error("create temporary file", &temp.0)(err)),
            }
        }
    }

    fn write_temp_then_rename(
        &self,
        mut file: File,
        temp: &Path,
        target: &Path,
        data: &[u8],
    ) -> Result<()> {
        file.set_permissions(Permissions::from_mode(self.options.file_mode))
            .map_err(io_error("chmod temporary file", temp))?;
        file.write_all(data).map_err(io_error("write", temp))?;
        file.sync_all().map_err(io_error("fsync", temp))?;
        drop(file);
        fs::rename(temp, target).map_err(io_error("rename into place", target))?;
        if self.options.sync_directory {
            File::open(&self.dir)
                .and_then(|dir| dir.sync_all())
                .map_err(io_error("fsync directory", &self.dir))?;
        }
        Ok(())
    }

    /// Removes the checkpoint under `key`; a missing one is not an error (upstream:
    /// `RemoveCheckpoint`).
    pub fn remove(&self, key: &str) -> Result<()> {
        let path = self.path_of(key)?;
        if let Some(journal) = &self.journal {
            return journal.stage(&path, None, || match fs::remove_file(&path) {
                Err(err) if err.kind() != io::ErrorKind::NotFound => {
                    Err(io_error("remove", &path)(err))
                }
                _ => Ok(()),
            });
        }
        match fs::remove_file(&path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => {
                Err(io_error("remove", &path)(err))
            }
            _ => Ok(()),
        }
    }

    /// Names in the directory that do not start with `.`, sorted (upstream:
    /// `ListCheckpoints`, which, like this, does not filter out non-files).
    pub fn list(&self) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_error("list", &self.dir))? {
            let entry = entry.map_err(io_error("list", &self.dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.') {
                keys.push(name);
            }
        }
        keys.sort();
        Ok(keys)
    }

    /// Removes temporary files of this store's naming that no live writer can be using
    /// (the rule is in the module documentation) and returns their paths. Opening a store
    /// does this; it is safe to call at any time, also while this or other processes write.
    pub fn remove_stale_temp_files(&self) -> Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_error("list", &self.dir))? {
            let entry = entry.map_err(io_error("list", &self.dir))?;
            let Some(pid) = entry.file_name().to_str().and_then(temp_file_pid) else {
                continue;
            };
            let path = entry.path();
            // Not `entry.file_type()` alone: a symlink or directory is never ours.
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_file() => {}
                _ => continue,
            }
            // Held across the removal: a write of this process cannot register this name
            // in between (its counter never repeats a name it already used).
            let in_flight = in_flight();
            if may_be_in_progress(pid, &path, &in_flight) {
                continue;
            }
            match fs::remove_file(&path) {
                Ok(()) => removed.push(path),
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(io_error("remove stale temporary file", &path)(err)),
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_file_names_of_our_making() {
        assert_eq!(temp_file_pid(".cpu_manager_state.tmp.42.7"), Some(42));
        assert_eq!(temp_file_pid(".a.tmp.b.tmp.1.0"), Some(1));
        for other in [
            "cpu_manager_state.tmp.42.7",
            ".cpu_manager_state.tmp.42",
            ".cpu_manager_state.tmp.42.",
            ".cpu_manager_state.tmp..7",
            ".cpu_manager_state.tmp.+42.7",
            ".cpu_manager_state.tmp.42.7x",
            ".cpu_manager_state.tmp.99999999999.7",
            ".cpu_manager_state.tmp.1.99999999999999999999",
            ".cpu_manager_state.tmp.",
            "..tmp.1.2",
            ".-x.tmp.1.2",
            ".cpu_manager_stateXtmp.1.2",
            ".tmp.1.2",
            ".",
            "",
        ] {
            assert_eq!(temp_file_pid(other), None, "{other}");
        }
    }

    /// An earlier process with this pid left temporary files under the names this process
    /// is about to use: the write takes the next free name instead of failing.
    #[test]
    fn a_taken_temp_name_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path()).unwrap();
        let next = TEMP_COUNTER.load(Ordering::Relaxed);
        for n in next..next + 8 {
            let name = format!(".key{TEMP_MARKER}{}.{n}", std::process::id());
            fs::write(dir.path().join(name), b"old").unwrap();
        }
        store.write_bytes("key", b"new").unwrap();
        assert_eq!(store.read_bytes("key").unwrap(), b"new");
    }

    #[test]
    fn keys_as_upstream_validate_key() {
        for ok in [
            "a",
            "cpu_manager_state",
            "kubelet_internal_checkpoint",
            "a.b-c_d9",
            &"k".repeat(250),
        ] {
            assert!(validate_key(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "a/b",
            "../x",
            "trailing-",
            "-lead",
            "sp ace",
            "é",
            &"k".repeat(251),
        ] {
            assert!(
                matches!(validate_key(bad), Err(CheckpointError::InvalidKey { .. })),
                "{bad}"
            );
        }
    }
}
