//! A small tmpfs mounted for one test (a disk that fills up), unmounted when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// Why a tmpfs cannot be mounted here (each cause is part of the message: a test that skips
/// prints the message alone).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// The mount point cannot be created.
    #[error("creating {}: {error}", dir.display())]
    CreateDir {
        /// The mount point.
        dir: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// `mount` cannot be run.
    #[error("running mount: {0}")]
    Spawn(std::io::Error),
    /// `mount` failed (not root, no tmpfs).
    #[error("mount -t tmpfs failed ({status}): {stderr}")]
    Failed {
        /// Its exit status.
        status: ExitStatus,
        /// What it said, trimmed.
        stderr: String,
    },
}

/// A tmpfs of a fixed size mounted on a directory, unmounted (lazily, so a process still
/// holding a file in it cannot keep it) when dropped. Needs root (`CAP_SYS_ADMIN`).
#[derive(Debug)]
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mount a tmpfs of `bytes` on `dir` (created if missing). `Err` says why it cannot be
    /// mounted here (not root, no `mount`), for a test to print when it skips.
    ///
    /// ```no_run
    /// let dir = tempfile::tempdir().unwrap();
    /// let disk = corral_testkit::Tmpfs::mount(&dir.path().join("disk"), 1 << 20).unwrap();
    /// std::fs::write(disk.path().join("f"), vec![0u8; 2 << 20]).unwrap_err(); // full
    /// ```
    pub fn mount(dir: &Path, bytes: u64) -> Result<Tmpfs, MountError> {
        std::fs::create_dir_all(dir).map_err(|error| MountError::CreateDir {
            dir: dir.to_path_buf(),
            error,
        })?;
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={bytes},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .map_err(MountError::Spawn)?;
        if !out.status.success() {
            return Err(MountError::Failed {
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Fill it: write zeros to `name` until the disk is full; returns the file.
    pub fn fill(&self, name: &str) -> PathBuf {
        use std::io::Write as _;
        let path = self.dir.join(name);
        let mut file = std::fs::File::create(&path).expect("create the filler file");
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        // Partial pages: fill byte by byte what a page no longer takes.
        while file.write_all(&[0]).is_ok() {}
        let _ = file.sync_all();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}
