//! What the registry knows of the registration directory: each socket file found
//! ([`Tracked`], identified by [`FileId`] so a re-created socket is a new plugin), the probes
//! due ([`Job`]) and the scan itself ([`scan`]).

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// Identity of a socket file: a re-created socket is a new plugin instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileId {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) ctime: i64,
    pub(super) ctime_nsec: i64,
}

/// What the registry knows of one socket file.
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) id: FileId,
    /// Order of discovery: among sockets never probed, the oldest goes first.
    pub(super) found: u64,
    /// The driver registered from this socket.
    pub(super) driver: Option<String>,
    /// The number of the probe running for this socket.
    pub(super) probe: Option<u64>,
    /// Failed probes in a row.
    pub(super) failures: u32,
    /// The last wait before a retry.
    pub(super) backoff: Duration,
    /// When a failed socket may be probed again.
    pub(super) retry_at: Instant,
}

impl Tracked {
    pub(super) fn due(&self, now: Instant) -> bool {
        self.probe.is_none()
            && self.driver.is_none()
            && (self.failures == 0 || self.retry_at <= now)
    }
}

#[derive(Debug, Default)]
pub(super) struct Sockets {
    pub(super) tracked: BTreeMap<PathBuf, Tracked>,
    /// Numbers sockets and probes, both unique for the registry's life.
    pub(super) next: u64,
}

impl Sockets {
    pub(super) fn next(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

/// A probe to run: one socket instance, holding its concurrency slots.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) socket: PathBuf,
    pub(super) probe: u64,
    pub(super) _slot: OwnedSemaphorePermit,
    pub(super) _retry_slot: Option<OwnedSemaphorePermit>,
}

/// Sockets under `dir` (recursively, not following symlinks, skipping names that start
/// with `.`, as upstream's plugin watcher).
pub(super) fn scan(dir: &Path) -> BTreeMap<PathBuf, FileId> {
    let mut out = BTreeMap::new();
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_socket() {
                out.insert(
                    path,
                    FileId {
                        dev: meta.dev(),
                        ino: meta.ino(),
                        ctime: meta.ctime(),
                        ctime_nsec: meta.ctime_nsec(),
                    },
                );
            } else if meta.is_dir() && depth < 8 {
                pending.push((path, depth + 1));
            }
        }
    }
    out
}
