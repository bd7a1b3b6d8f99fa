//! [`StateBackend`]: where the state is persisted — the edge the core does not know.
//! [`CheckpointBackend`] writes `cpu_manager_state` through `corral-checkpoint` (atomic,
//! durable, byte-compatible with a kubelet); [`MemoryBackend`] keeps it in memory.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use corral_checkpoint::{
    CPU_MANAGER_FILE, Checkpoint, CheckpointError, CheckpointStore, CpuManagerCheckpoint,
    CpuManagerCheckpointV3,
};

/// A `cpu_manager_state` to write, in the version the configuration asks for: v2 while
/// `PodLevelResourceManagers` is off (what every kubelet up to 1.36 reads), v3 while it is
/// on (as a v1.36 kubelet with the gate on writes).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CpuStateFile {
    /// v2.
    V2(CpuManagerCheckpoint),
    /// v3 (pod entries).
    V3(CpuManagerCheckpointV3),
}

impl CpuStateFile {
    /// The file's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, CheckpointError> {
        match self {
            CpuStateFile::V2(v2) => v2.encode(),
            CpuStateFile::V3(v3) => v3.encode(),
        }
    }
}

impl From<CpuManagerCheckpoint> for CpuStateFile {
    fn from(v2: CpuManagerCheckpoint) -> Self {
        CpuStateFile::V2(v2)
    }
}

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("CPU manager state {location}")]
pub struct StateIoError {
    /// The file (or other location) involved.
    pub location: String,
    /// What failed.
    #[source]
    pub source: CheckpointError,
}

/// Where the CPU manager's state lives.
pub trait StateBackend: Send {
    /// The stored checkpoint bytes, `None` when nothing is stored yet.
    fn load(&mut self) -> Result<Option<Vec<u8>>, StateIoError>;
    /// Replace the stored checkpoint.
    fn store(&mut self, checkpoint: &CpuStateFile) -> Result<(), StateIoError>;
    /// Where the state lives, for messages (a file path).
    fn location(&self) -> String;
}

/// `cpu_manager_state` in a kubelet state directory.
#[derive(Debug, Clone)]
pub struct CheckpointBackend {
    store: CheckpointStore,
    key: String,
}

impl CheckpointBackend {
    /// The backend for `cpu_manager_state` in `store`'s directory.
    pub fn new(store: CheckpointStore) -> CheckpointBackend {
        CheckpointBackend::with_key(store, CPU_MANAGER_FILE)
    }

    /// A backend for another checkpoint name.
    pub fn with_key(store: CheckpointStore, key: &str) -> CheckpointBackend {
        CheckpointBackend {
            store,
            key: key.to_owned(),
        }
    }

    /// The checkpoint file's path.
    pub fn path(&self) -> PathBuf {
        self.store.dir().join(&self.key)
    }
}

impl StateBackend for CheckpointBackend {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StateIoError> {
        match self.store.read_bytes(&self.key) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(CheckpointError::NotFound { .. }) => Ok(None),
            Err(source) => Err(StateIoError {
                location: self.location(),
                source,
            }),
        }
    }

    fn store(&mut self, checkpoint: &CpuStateFile) -> Result<(), StateIoError> {
        let written = match checkpoint {
            CpuStateFile::V2(v2) => self.store.create(&self.key, v2),
            CpuStateFile::V3(v3) => self.store.create(&self.key, v3),
        };
        written.map_err(|source| StateIoError {
            location: self.location(),
            source,
        })
    }

    fn location(&self) -> String {
        self.path().display().to_string()
    }
}

/// State kept in memory (upstream `NewMemoryState`), shared with its clones so tests can
/// look at what was stored.
#[derive(Debug, Clone, Default)]
pub struct MemoryBackend {
    bytes: Arc<Mutex<Option<Vec<u8>>>>,
}

impl MemoryBackend {
    /// An empty backend.
    pub fn new() -> MemoryBackend {
        MemoryBackend::default()
    }

    /// A backend holding these checkpoint bytes (as if a kubelet had written them).
    pub fn with_bytes(bytes: Vec<u8>) -> MemoryBackend {
        MemoryBackend {
            bytes: Arc::new(Mutex::new(Some(bytes))),
        }
    }

    /// The bytes stored last.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        self.bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl StateBackend for MemoryBackend {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StateIoError> {
        Ok(self.bytes())
    }

    fn store(&mut self, checkpoint: &CpuStateFile) -> Result<(), StateIoError> {
        let bytes = checkpoint.encode().map_err(|source| StateIoError {
            location: self.location(),
            source,
        })?;
        *self.bytes.lock().unwrap_or_else(PoisonError::into_inner) = Some(bytes);
        Ok(())
    }

    fn location(&self) -> String {
        "<memory>".to_owned()
    }
}
