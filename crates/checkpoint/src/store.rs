//! The checkpoint store: upstream's `CheckpointManager` over a directory
//! (`pkg/kubelet/checkpointmanager` + `pkg/kubelet/util/store/filestore.go`), with writes
//! that survive crashes and power loss.
//!
//! A write goes to a fresh temporary file in the same directory (a name starting with `.`,
//! which no valid key can, so [`CheckpointStore::list`] skips it as upstream does), is
//! written, fsynced and closed, renamed over the target, and then the directory is fsynced
//! so the rename itself is durable. Upstream stops before the directory fsync; a crash at
//! any point here leaves either the old file or the new one, never a torn one (a stray
//! temporary file at worst, see [`CheckpointStore::remove_stale_temp_files`]).

use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{CheckpointError, Result};
use crate::formats::Checkpoint;

/// Upstream's `keyMaxLength`.
const KEY_MAX_LENGTH: usize = 250;

/// Marker inside temporary file names: `.<key>.tmp.<pid>.<n>`.
const TEMP_MARKER: &str = ".tmp.";

/// How the store creates files and directories.
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
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    dir: PathBuf,
    options: StoreOptions,
}

/// Checks a key as upstream's `ValidateKey`: 1–250 characters of `[-A-Za-z0-9_.]`, the
/// first and last a letter or digit.
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

fn io_error<'a>(
    op: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> CheckpointError + 'a {
    move |source| CheckpointError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl CheckpointStore {
    /// Opens (creating if needed) a store in `dir` with default options.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::with_options(dir, StoreOptions::default())
    }

    /// Opens (creating if needed) a store in `dir`.
    pub fn with_options(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Self> {
        let store = CheckpointStore {
            dir: dir.as_ref().to_path_buf(),
            options,
        };
        store.ensure_dir()?;
        Ok(store)
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

    /// Atomically and durably replaces the file under `key` with `data`.
    pub fn write_bytes(&self, key: &str, data: &[u8]) -> Result<()> {
        let target = self.path_of(key)?;
        self.ensure_dir()?;
        let temp = self.dir.join(format!(
            ".{key}{TEMP_MARKER}{}.{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let result = self.write_temp_then_rename(&temp, &target, data);
        if result.is_err() {
            let _ = fs::remove_file(&temp);
        }
        result
    }

    fn write_temp_then_rename(&self, temp: &Path, target: &Path, data: &[u8]) -> Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(self.options.file_mode)
            .open(temp)
            .map_err(io_error("create temporary file", temp))?;
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

    /// Deletes temporary files left by writers that crashed mid-write; returns how many.
    /// Call it only while no other process writes to this store (for example at start-up).
    pub fn remove_stale_temp_files(&self) -> Result<usize> {
        let mut removed = 0;
        for entry in fs::read_dir(&self.dir).map_err(io_error("list", &self.dir))? {
            let entry = entry.map_err(io_error("list", &self.dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.contains(TEMP_MARKER) {
                let path = entry.path();
                fs::remove_file(&path).map_err(io_error("remove temporary file", &path))?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
