//! [`StateFile`]: the one way a resource manager persists its state.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{CheckpointError, Result};
use crate::formats::Checkpoint;
use crate::store::{CheckpointStore, validate_key};

/// The one file a resource manager keeps its state in, and the one way every manager reads
/// it at start and writes it afterwards.
///
/// A state file is a key of a [`CheckpointStore`] (the kubelet's `cpu_manager_state`,
/// `memory_manager_state`, `kubelet_internal_checkpoint`, `dra_manager_state`, …) or, for
/// tests and embedders that persist nothing, bytes in memory. A manager
/// [`load`](StateFile::load)s it once when it starts and [`stage`](StateFile::stage)s each
/// change; what makes a staged change durable is the store's:
///
/// - a store with a [`Journal`](crate::Journal) (the agent's): staging only records the
///   change; the journal's next commit — one fdatasync shared by every change staged since,
///   whoever asks for it — makes it durable and then writes the file (before the journal
///   is activated, and after it retired, staging writes durably at once, as without one);
/// - a store without one: staging writes the file atomically and durably at once;
/// - memory: staging replaces the bytes.
///
/// [`commit`](StateFile::commit) asks for that durability now (it does nothing where
/// staging was already durable), for a manager that must not go on before its change is
/// safe — the DRA manager records a claim before a driver prepares it.
///
/// Clones are the same file: a test keeps a clone of an in-memory one to look at what the
/// manager wrote, or to start a second manager on it as a restart would.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_checkpoint::{CheckpointStore, CpuManagerCheckpoint, StateFile, CPU_MANAGER_FILE};
///
/// # fn main() -> Result<(), corral_checkpoint::CheckpointError> {
/// let dir = tempfile::tempdir().expect("temp dir");
/// let file = StateFile::in_store(&CheckpointStore::open(dir.path())?, CPU_MANAGER_FILE)?;
/// assert_eq!(file.load()?, None, "nothing written yet");
///
/// let state = CpuManagerCheckpoint {
///     policy_name: "none".into(),
///     default_cpu_set: String::new(),
///     entries: Some(BTreeMap::new()),
/// };
/// file.stage_checkpoint(&state)?; // no journal: written durably at once
/// assert_eq!(file.load_as::<CpuManagerCheckpoint>()?, Some(state.clone()));
/// assert_eq!(file.path(), Some(dir.path().join(CPU_MANAGER_FILE)));
///
/// // In memory: clones share the bytes.
/// let memory = StateFile::in_memory();
/// memory.clone().stage_checkpoint(&state)?;
/// assert_eq!(memory.load_as::<CpuManagerCheckpoint>()?, Some(state));
/// assert_eq!(memory.to_string(), "<memory>");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct StateFile {
    backing: Backing,
}

#[derive(Debug, Clone)]
enum Backing {
    Store { store: CheckpointStore, key: String },
    Memory(Arc<Mutex<Option<Vec<u8>>>>),
}

impl StateFile {
    /// The file `key` of `store` (written through the store's journal, if it has one).
    pub fn in_store(store: &CheckpointStore, key: &str) -> Result<StateFile> {
        validate_key(key)?;
        Ok(StateFile {
            backing: Backing::Store {
                store: store.clone(),
                key: key.to_owned(),
            },
        })
    }

    /// A file held in memory, empty.
    pub fn in_memory() -> StateFile {
        StateFile {
            backing: Backing::Memory(Arc::default()),
        }
    }

    /// A file held in memory with these bytes in it (as if a kubelet had written them).
    pub fn in_memory_holding(bytes: Vec<u8>) -> StateFile {
        StateFile {
            backing: Backing::Memory(Arc::new(Mutex::new(Some(bytes)))),
        }
    }

    /// The file's bytes; `None` when there is no file. Through a journal these are the
    /// file's bytes on disk (what the last commit wrote), not what is staged since.
    pub fn load(&self) -> Result<Option<Vec<u8>>> {
        match &self.backing {
            Backing::Store { store, key } => match store.read_bytes(key) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(CheckpointError::NotFound { .. }) => Ok(None),
                Err(err) => Err(err),
            },
            Backing::Memory(bytes) => Ok(lock(bytes).clone()),
        }
    }

    /// The file decoded and verified as `C`; `None` when there is no file. A file that does
    /// not decode is an error naming the file, never `None`.
    pub fn load_as<C: Checkpoint>(&self) -> Result<Option<C>> {
        let Some(bytes) = self.load()? else {
            return Ok(None);
        };
        let decoded = C::decode(&bytes);
        match self.path() {
            Some(path) => decoded.map(Some).map_err(|err| err.with_path(&path)),
            None => decoded.map(Some),
        }
    }

    /// Replace the file's content with `bytes`: durable when this returns, or, through a
    /// journal, at its next commit (see [`StateFile`]).
    pub fn stage(&self, bytes: &[u8]) -> Result<()> {
        match &self.backing {
            Backing::Store { store, key } => store.write_bytes(key, bytes),
            Backing::Memory(held) => {
                *lock(held) = Some(bytes.to_vec());
                Ok(())
            }
        }
    }

    /// [`stage`](Self::stage) `checkpoint`'s encoding.
    pub fn stage_checkpoint<C: Checkpoint>(&self, checkpoint: &C) -> Result<()> {
        self.stage(&checkpoint.encode()?)
    }

    /// Remove the file (a missing one is no error), staged like a write.
    pub fn remove(&self) -> Result<()> {
        match &self.backing {
            Backing::Store { store, key } => store.remove(key),
            Backing::Memory(held) => {
                *lock(held) = None;
                Ok(())
            }
        }
    }

    /// Make what was staged durable now: the journal's commit (shared with every change
    /// staged since the last one, and free when nothing is pending) for a journaled store
    /// that journals; nothing otherwise, where staging was durable already. It blocks on
    /// the disk: async callers run it where blocking is allowed.
    pub fn commit(&self) -> Result<()> {
        match &self.backing {
            Backing::Store { store, .. } => match store.journal() {
                Some(journal) if journal.is_active() && journal.has_pending() => journal.commit(),
                _ => Ok(()),
            },
            Backing::Memory(_) => Ok(()),
        }
    }

    /// The file's path; `None` in memory.
    pub fn path(&self) -> Option<PathBuf> {
        match &self.backing {
            Backing::Store { store, key } => Some(store.dir().join(key)),
            Backing::Memory(_) => None,
        }
    }
}

/// The path, or `<memory>`.
impl std::fmt::Display for StateFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.path() {
            Some(path) => write!(f, "{}", path.display()),
            None => f.write_str("<memory>"),
        }
    }
}

fn lock(bytes: &Mutex<Option<Vec<u8>>>) -> std::sync::MutexGuard<'_, Option<Vec<u8>>> {
    bytes.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::journal::{Journal, JournalOptions, Managed};
    use crate::{CPU_MANAGER_FILE, CpuManagerCheckpoint};

    fn checkpoint(policy: &str) -> CpuManagerCheckpoint {
        CpuManagerCheckpoint {
            policy_name: policy.into(),
            default_cpu_set: String::new(),
            entries: Some(Default::default()),
        }
    }

    #[test]
    fn an_invalid_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path()).unwrap();
        assert!(matches!(
            StateFile::in_store(&store, "a/b"),
            Err(CheckpointError::InvalidKey { .. })
        ));
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it_never_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path()).unwrap();
        let file = StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap();
        file.stage(b"{not json").unwrap();
        let err = file.load_as::<CpuManagerCheckpoint>().unwrap_err();
        assert!(
            err.to_string()
                .contains(&dir.path().join(CPU_MANAGER_FILE).display().to_string()),
            "{err}"
        );
        file.remove().unwrap();
        assert_eq!(file.load().unwrap(), None);
        file.remove().unwrap();
    }

    #[test]
    fn through_a_journal_a_stage_reaches_the_file_at_commit_with_one_sync() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(
            Journal::open(
                dir.path(),
                "journal",
                &[Managed::File(CPU_MANAGER_FILE.into())],
                JournalOptions::default(),
            )
            .unwrap()
            .0,
        );
        journal.activate().unwrap();
        let store = CheckpointStore::open(dir.path())
            .unwrap()
            .with_journal(Arc::clone(&journal));
        let file = StateFile::in_store(&store, CPU_MANAGER_FILE).unwrap();
        let before = journal.syncs();
        file.stage_checkpoint(&checkpoint("static")).unwrap();
        assert_eq!(file.load().unwrap(), None, "staged, not written");
        file.commit().unwrap();
        assert_eq!(journal.syncs(), before + 1);
        assert_eq!(
            file.load_as::<CpuManagerCheckpoint>().unwrap(),
            Some(checkpoint("static"))
        );
        file.commit().unwrap();
        assert_eq!(journal.syncs(), before + 1, "nothing pending: no sync");
    }

    #[test]
    fn in_memory_clones_share_the_file() {
        let file = StateFile::in_memory_holding(b"x".to_vec());
        let clone = file.clone();
        assert_eq!(clone.load().unwrap(), Some(b"x".to_vec()));
        clone.remove().unwrap();
        assert_eq!(file.load().unwrap(), None);
        file.commit().unwrap();
        assert_eq!(file.path(), None);
    }
}
