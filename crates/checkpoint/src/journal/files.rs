//! The files a journal manages: which they are (relative to its root), reading them with a
//! bound, and writing them the durable way (replay) or the fast way (after a commit).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{CheckpointError, Result, io_error};
use crate::journal_error::JournalError;

/// Files a journal is the authority on, relative to its root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Managed {
    /// One file.
    File(PathBuf),
    /// Every regular file directly in this directory whose name does not start with `.`
    /// (temporary files).
    Dir(PathBuf),
}

/// The temporary file replaying and applying write through, one per directory.
pub(crate) const APPLY_TEMP: &str = ".journal-apply.tmp";

/// Whether `path` is a plain relative path: not empty, no root, no `.` or `..`.
pub(crate) fn is_plain_relative(path: &Path) -> bool {
    path.components().next().is_some()
        && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Whether `rel` is one of `managed`'s files.
pub(crate) fn is_managed(managed: &[Managed], rel: &Path) -> bool {
    if !is_plain_relative(rel) {
        return false;
    }
    managed.iter().any(|m| match m {
        Managed::File(file) => file == rel,
        Managed::Dir(dir) => {
            rel.parent() == Some(dir.as_path())
                && rel
                    .file_name()
                    .is_some_and(|n| !n.as_encoded_bytes().starts_with(b"."))
        }
    })
}

fn kind_of(meta: &fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// The bytes of the regular file at `path` (following symlinks), at most `max` of them;
/// `None` when it does not exist. Anything else (a FIFO, a device, a directory, a file
/// larger than `max`) is an error, never a hang or an unbounded read.
pub(crate) fn read_bounded(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        // A dangling symlink is not "no file": it names one that is gone.
        Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::symlink_metadata(path) {
            Ok(_) => {
                return Err(JournalError::NotRegularFile {
                    path: path.to_path_buf(),
                    kind: "dangling symbolic link",
                }
                .into());
            }
            Err(_) => return Ok(None),
        },
        Err(e) => return Err(io_error("stat", path)(e)),
    };
    let not_regular = |meta: &fs::Metadata| JournalError::NotRegularFile {
        path: path.to_path_buf(),
        kind: kind_of(meta),
    };
    if !meta.is_file() {
        return Err(not_regular(&meta).into());
    }
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("open", path)(e)),
    };
    // Swapped since the stat: check what was opened.
    let meta = file.metadata().map_err(io_error("stat", path))?;
    if !meta.is_file() {
        return Err(not_regular(&meta).into());
    }
    let too_large = |len| JournalError::TooLarge {
        path: path.to_path_buf(),
        len,
        max,
    };
    if meta.len() > max {
        return Err(too_large(meta.len()).into());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_error("read", path))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64).into());
    }
    Ok(Some(bytes))
}

/// The present files of `managed` under `root`, as on disk now, by relative path.
pub(crate) fn read_managed(
    root: &Path,
    managed: &[Managed],
    max: u64,
) -> Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for m in managed {
        match m {
            Managed::File(rel) => {
                if let Some(bytes) = read_bounded(&root.join(rel), max)? {
                    out.insert(rel.clone(), bytes);
                }
            }
            Managed::Dir(rel) => {
                let dir = root.join(rel);
                let entries = match fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_error("list", &dir)(e)),
                };
                for entry in entries {
                    let entry = entry.map_err(io_error("list", &dir))?;
                    let hidden = entry.file_name().as_encoded_bytes().starts_with(b".");
                    let regular = entry.file_type().is_ok_and(|t| t.is_file());
                    if !hidden && regular {
                        let name = rel.join(entry.file_name());
                        if let Some(bytes) = read_bounded(&entry.path(), max)? {
                            out.insert(name, bytes);
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The directory of `path` (`.` for a bare name).
pub(crate) fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The fsync and fdatasync calls a journal makes, counted (see [`Journal::syncs`]).
///
/// [`Journal::syncs`]: super::Journal::syncs
#[derive(Debug, Default)]
pub(crate) struct Syncs(AtomicU64);

impl Syncs {
    /// `fsync(file)`.
    pub(crate) fn all(&self, file: &File) -> io::Result<()> {
        self.0.fetch_add(1, Ordering::Relaxed);
        file.sync_all()
    }

    /// `fdatasync(file)`.
    pub(crate) fn data(&self, file: &File) -> io::Result<()> {
        self.0.fetch_add(1, Ordering::Relaxed);
        file.sync_data()
    }

    /// How many calls were made.
    pub(crate) fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

pub(crate) fn sync_dir(dir: &Path, syncs: &Syncs) -> Result<()> {
    File::open(dir)
        .and_then(|d| syncs.all(&d))
        .map_err(io_error("fsync directory", dir))
}

/// Write `data` to `temp` and rename it onto `path`; `durable` (the journal's counter),
/// fsync the file before and its directory after the rename.
pub(crate) fn replace(
    path: &Path,
    temp: &Path,
    data: &[u8],
    durable: Option<&Syncs>,
) -> Result<()> {
    let write = || -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(temp)?;
        file.write_all(data)?;
        if let Some(syncs) = durable {
            syncs.all(&file)?;
        }
        Ok(())
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(temp);
        return Err(io_error("write", temp)(e));
    }
    fs::rename(temp, path).map_err(io_error("rename into place", path))?;
    if let Some(syncs) = durable {
        sync_dir(parent(path), syncs)?;
    }
    Ok(())
}

/// Make the file at `path` hold `data` (`None`: absent), through the directory's
/// [`APPLY_TEMP`]; `durable` (the journal's counter), so that it survives a power loss.
pub(crate) fn put(path: &Path, data: Option<&[u8]>, durable: Option<&Syncs>) -> Result<()> {
    let dir = parent(path);
    match data {
        Some(data) => {
            fs::create_dir_all(dir).map_err(io_error("create directory", dir))?;
            replace(path, &dir.join(APPLY_TEMP), data, durable)
        }
        None => {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(io_error("remove", path)(e)),
            }
            if let Some(syncs) = durable {
                sync_dir(dir, syncs)?;
            }
            Ok(())
        }
    }
}

/// Remove what a journal killed while replaying, applying or compacting left: the
/// temporary file in every managed directory and the snapshot's next to the journal.
pub(crate) fn remove_leftovers(root: &Path, journal: &Path, managed: &[Managed]) -> Result<()> {
    let mut temps = vec![snapshot_temp(journal), beside(journal, MARK_TEMP)];
    for m in managed {
        let dir = match m {
            Managed::File(file) => root.join(parent(file)),
            Managed::Dir(dir) => root.join(dir),
        };
        temps.push(dir.join(APPLY_TEMP));
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

/// The suffix of the temporary file a new mark is written through.
pub(crate) const MARK_TEMP: &str = ".mark-tmp";

/// The file `<journal><suffix>` beside the journal (its `.mark`, its `.lock`).
pub(crate) fn beside(journal: &Path, suffix: &str) -> PathBuf {
    let mut name = journal.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    journal.with_file_name(name)
}

/// The temporary file a snapshot is written through.
pub(crate) fn snapshot_temp(journal: &Path) -> PathBuf {
    journal.with_extension("snapshot-tmp")
}

/// A path given to the journal as relative to its root, checked.
pub(crate) fn relative(path: &Path) -> std::result::Result<PathBuf, CheckpointError> {
    if is_plain_relative(path) {
        Ok(path.to_path_buf())
    } else {
        Err(JournalError::NotManaged {
            path: path.to_path_buf(),
        }
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_paths_are_plain_and_inside() {
        let managed = [
            Managed::File("cpu_manager_state".into()),
            Managed::Dir("corral/pods".into()),
        ];
        assert!(is_managed(&managed, Path::new("cpu_manager_state")));
        assert!(is_managed(&managed, Path::new("corral/pods/a.json")));
        for bad in [
            "/cpu_manager_state",
            "corral/pods/.tmp",
            "corral/pods/../../etc/passwd",
            "corral/pods/a/b.json",
            "./cpu_manager_state",
            "",
            "other",
        ] {
            assert!(!is_managed(&managed, Path::new(bad)), "{bad}");
        }
    }

    #[test]
    fn reads_refuse_what_is_not_a_bounded_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_bounded(&dir.path().join("none"), 10)
                .unwrap()
                .is_none()
        );
        let err = read_bounded(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let err = read_bounded(dir.path(), 10).unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
        let big = dir.path().join("big");
        fs::write(&big, [0u8; 11]).unwrap();
        assert!(matches!(
            read_bounded(&big, 10),
            Err(CheckpointError::Journal(JournalError::TooLarge {
                len: 11,
                max: 10,
                ..
            }))
        ));
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(read_bounded(&link, 10).is_err());
    }
}
