//! Where the claim cache is checkpointed: [`StateStore`], with the kubelet's file
//! ([`FileStateStore`], `dra_manager_state` in the state directory through
//! [`corral_checkpoint::CheckpointStore`]: atomic, durable, byte-compatible) and an
//! in-memory one for tests ([`MemoryStateStore`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use corral_checkpoint::{
    Checkpoint, CheckpointError, CheckpointStore, DRA_MANAGER_FILE, DraManagerCheckpoint,
};

use crate::error::DraManagerError;

/// Storage for the DRA manager's claim list.
pub trait StateStore: Send + 'static {
    /// The stored claim list; an empty one, written out, when there is none yet
    /// (upstream `GetOrCreate`). A corrupt file is an error, never an empty list.
    fn get_or_create(&self) -> Result<DraManagerCheckpoint, DraManagerError>;

    /// Replace the stored claim list.
    fn store(&self, checkpoint: &DraManagerCheckpoint) -> Result<(), DraManagerError>;
}

/// `dra_manager_state` in a state directory.
#[derive(Debug, Clone)]
pub struct FileStateStore {
    store: CheckpointStore,
    name: String,
}

impl FileStateStore {
    /// The kubelet's `dra_manager_state` in `state_dir` (created when missing).
    pub fn open(state_dir: impl AsRef<Path>) -> Result<Self, DraManagerError> {
        Self::with_name(state_dir, DRA_MANAGER_FILE)
    }

    /// A checkpoint file of another name in `state_dir`.
    pub fn with_name(state_dir: impl AsRef<Path>, name: &str) -> Result<Self, DraManagerError> {
        let dir = state_dir.as_ref();
        let store = CheckpointStore::open(dir).map_err(|source| DraManagerError::Checkpoint {
            path: dir.join(name),
            source,
        })?;
        Ok(FileStateStore {
            store,
            name: name.to_owned(),
        })
    }

    /// `dra_manager_state` in `store`'s directory, written through `store` (for instance
    /// a store whose writes a [`Journal`](corral_checkpoint::Journal) makes durable).
    pub fn with_store(store: CheckpointStore) -> Self {
        FileStateStore {
            store,
            name: DRA_MANAGER_FILE.to_owned(),
        }
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.store.dir().join(&self.name)
    }

    fn error(&self, source: CheckpointError) -> DraManagerError {
        DraManagerError::Checkpoint {
            path: self.path(),
            source,
        }
    }
}

impl StateStore for FileStateStore {
    fn get_or_create(&self) -> Result<DraManagerCheckpoint, DraManagerError> {
        match self.store.get::<DraManagerCheckpoint>(&self.name) {
            Ok(checkpoint) => Ok(checkpoint),
            Err(CheckpointError::NotFound { .. }) => {
                let empty = DraManagerCheckpoint {
                    claim_info_state_list: Some(Vec::new()),
                };
                self.store(&empty)?;
                Ok(empty)
            }
            Err(err) => Err(self.error(err)),
        }
    }

    /// Writes the file; through a journaled store, also commits the journal (when it is
    /// active), because the manager's crash consistency needs each write durable before it
    /// goes on: a claim is recorded before a driver prepares it, so a crash during the call
    /// leaves a record to unprepare from.
    fn store(&self, checkpoint: &DraManagerCheckpoint) -> Result<(), DraManagerError> {
        self.store
            .create(&self.name, checkpoint)
            .map_err(|err| self.error(err))?;
        match self.store.journal() {
            Some(journal) if journal.is_active() => journal.commit().map_err(|err| self.error(err)),
            _ => Ok(()),
        }
    }
}

/// An in-memory store holding the encoded file bytes; clones share them, so a test can
/// "restart" a manager on the same state.
#[derive(Debug, Clone, Default)]
pub struct MemoryStateStore {
    bytes: Arc<Mutex<Option<Vec<u8>>>>,
}

impl MemoryStateStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stored file bytes.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        self.bytes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn error(source: CheckpointError) -> DraManagerError {
        DraManagerError::Checkpoint {
            path: PathBuf::from("<memory>"),
            source,
        }
    }
}

impl StateStore for MemoryStateStore {
    fn get_or_create(&self) -> Result<DraManagerCheckpoint, DraManagerError> {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        match bytes.as_ref() {
            Some(b) => DraManagerCheckpoint::decode(b).map_err(Self::error),
            None => {
                let empty = DraManagerCheckpoint {
                    claim_info_state_list: Some(Vec::new()),
                };
                *bytes = Some(empty.encode().map_err(Self::error)?);
                Ok(empty)
            }
        }
    }

    fn store(&self, checkpoint: &DraManagerCheckpoint) -> Result<(), DraManagerError> {
        let encoded = checkpoint.encode().map_err(Self::error)?;
        *self.bytes.lock().unwrap_or_else(|e| e.into_inner()) = Some(encoded);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Through a journaled store every write is committed before `store` returns (the
    // manager's write-ahead record of a claim must be durable before a driver call), and
    // before the journal is active nothing is committed.
    #[test]
    fn a_journaled_store_commits_each_write() {
        use corral_checkpoint::{Journal, JournalOptions, Managed};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(DRA_MANAGER_FILE);
        let (journal, _) = Journal::open(
            dir.path(),
            "journal",
            &[Managed::File(DRA_MANAGER_FILE.into())],
            JournalOptions::default(),
        )
        .unwrap();
        let journal = Arc::new(journal);
        let store = FileStateStore::with_store(
            CheckpointStore::open(dir.path())
                .unwrap()
                .with_journal(Arc::clone(&journal)),
        );
        store.get_or_create().unwrap();
        journal.activate().unwrap();
        let claim = DraManagerCheckpoint {
            claim_info_state_list: Some(vec![Default::default()]),
        };
        store.store(&claim).unwrap();
        assert!(!journal.has_pending());
        let written = std::fs::read(&file).unwrap();
        drop((store, journal));
        std::fs::remove_file(&file).unwrap();
        let (_journal, recovery) = Journal::open(
            dir.path(),
            "journal",
            &[Managed::File(DRA_MANAGER_FILE.into())],
            JournalOptions::default(),
        )
        .unwrap();
        assert_eq!(recovery.restored, std::slice::from_ref(&file));
        assert_eq!(std::fs::read(&file).unwrap(), written);
    }

    // Upstream TestCheckpointGetOrCreate: a missing file is created empty; a corrupt one is
    // an error.
    #[test]
    fn get_or_create_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStateStore::open(dir.path()).unwrap();
        let empty = store.get_or_create().unwrap();
        assert_eq!(empty.claim_info_state_list, Some(vec![]));
        let bytes = std::fs::read(store.path()).unwrap();
        assert!(bytes.starts_with(br#"{"Data":"{\"kind\":\"DRACheckpoint\""#));
        let mut corrupt = bytes.clone();
        let at = corrupt.len() - 2;
        corrupt[at] = if corrupt[at] == b'1' { b'2' } else { b'1' };
        std::fs::write(store.path(), corrupt).unwrap();
        let err = store.get_or_create().unwrap_err();
        assert!(
            matches!(err, DraManagerError::Checkpoint { ref source, .. } if source.is_checksum_mismatch())
        );
    }

    #[test]
    fn memory_store_shares_bytes() {
        let a = MemoryStateStore::new();
        let b = a.clone();
        a.get_or_create().unwrap();
        assert_eq!(a.bytes(), b.bytes());
    }
}
