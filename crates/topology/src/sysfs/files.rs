//! Reading sysfs/procfs files of a host root: NUL- and whitespace-tolerant, with errors that
//! name the file, and the two CPU set encodings (list "0-3,8" and hex mask
//! "00000000,0000000f").

use std::io;
use std::path::{Path, PathBuf};

use crate::CpuSet;

/// Why discovery failed.
///
/// Each variant names the file, and prints its cause once (the I/O error is the source).
///
/// # Example
///
/// ```
/// use std::error::Error;
/// use corral_topology::{DiscoveryError, discover};
///
/// let root = tempfile::tempdir()?;
/// std::fs::create_dir_all(root.path().join("sys/devices/system/cpu"))?;
/// std::fs::write(root.path().join("sys/devices/system/cpu/online"), "zero\n")?;
/// match discover(root.path()) {
///     Err(err @ DiscoveryError::Parse { .. }) => {
///         assert!(err.to_string().contains("sys/devices/system/cpu/online"), "{err}");
///         assert!(err.source().is_none());
///     }
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// A file or directory that exists (or must exist) could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A file whose content is malformed.
    #[error("cannot parse {}: {reason} (content {content:?})", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The content read (trimmed).
        content: String,
        /// What is wrong.
        reason: String,
    },
    /// Files that contradict each other.
    #[error("inconsistent topology at {}: {reason}", path.display())]
    Inconsistent {
        /// The file (or directory) where the contradiction shows.
        path: PathBuf,
        /// What contradicts what.
        reason: String,
    },
    /// No online CPU found.
    #[error("no online CPU found under {}", path.display())]
    NoCpus {
        /// The CPU directory.
        path: PathBuf,
    },
}

/// The content of `path` with surrounding whitespace and NUL bytes removed, or `None` when
/// the file does not exist.
pub(crate) fn read_trimmed(path: &Path) -> Result<Option<String>, DiscoveryError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            Ok(Some(
                text.trim_matches(|c: char| c.is_whitespace() || c == '\0')
                    .to_owned(),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(DiscoveryError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

fn parse_error(path: &Path, content: &str, reason: impl Into<String>) -> DiscoveryError {
    DiscoveryError::Parse {
        path: path.to_owned(),
        content: content.to_owned(),
        reason: reason.into(),
    }
}

/// A CPU list file ("0-3,8"), `None` when absent.
pub(crate) fn read_list(path: &Path) -> Result<Option<CpuSet>, DiscoveryError> {
    let Some(text) = read_trimmed(path)? else {
        return Ok(None);
    };
    CpuSet::parse(&text)
        .map(Some)
        .map_err(|e| parse_error(path, &text, e.to_string()))
}

/// A hex CPU mask file (32-bit words, most significant first, comma-separated), `None`
/// when absent.
pub(crate) fn read_mask(path: &Path) -> Result<Option<CpuSet>, DiscoveryError> {
    let Some(text) = read_trimmed(path)? else {
        return Ok(None);
    };
    parse_mask(&text)
        .map(Some)
        .map_err(|e| parse_error(path, &text, e.to_string()))
}

/// Why a hex CPU mask does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MaskError {
    /// A comma-separated word that is empty or longer than 8 digits.
    #[error("mask word {0:?} is not 1-8 hex digits")]
    WordLength(String),
    /// A word with a character that is no hex digit.
    #[error("mask word {0:?} is not hex")]
    NotHex(String),
    /// A bit for a CPU id at or beyond [`CpuSet::DENSE_LIMIT`].
    #[error("mask sets CPU {0}, beyond supported ids")]
    BeyondSupported(usize),
}

/// Parse a hex CPU mask.
pub(crate) fn parse_mask(text: &str) -> Result<CpuSet, MaskError> {
    let mut set = CpuSet::new();
    if text.is_empty() {
        return Ok(set);
    }
    for (index, word) in text.rsplit(',').enumerate() {
        if word.is_empty() || word.len() > 8 {
            return Err(MaskError::WordLength(word.to_owned()));
        }
        let mut bits =
            u32::from_str_radix(word, 16).map_err(|_| MaskError::NotHex(word.to_owned()))?;
        while bits != 0 {
            let bit = bits.trailing_zeros() as usize;
            let cpu = index * 32 + bit;
            if cpu >= CpuSet::DENSE_LIMIT {
                return Err(MaskError::BeyondSupported(cpu));
            }
            set.insert(cpu);
            bits &= bits - 1;
        }
    }
    Ok(set)
}

/// A CPU set from `dir/list_name` if present, else `dir/mask_name`, else `None`.
pub(crate) fn read_list_or_mask(
    dir: &Path,
    list_name: &str,
    mask_name: &str,
) -> Result<Option<CpuSet>, DiscoveryError> {
    match read_list(&dir.join(list_name))? {
        Some(set) => Ok(Some(set)),
        None => read_mask(&dir.join(mask_name)),
    }
}

/// A decimal integer file (may be negative), `None` when absent.
pub(crate) fn read_int(path: &Path) -> Result<Option<i64>, DiscoveryError> {
    let Some(text) = read_trimmed(path)? else {
        return Ok(None);
    };
    text.parse()
        .map(Some)
        .map_err(|_| parse_error(path, &text, "not a decimal integer"))
}

/// A whitespace-separated list of unsigned integers, `None` when absent.
pub(crate) fn read_u64s(path: &Path) -> Result<Option<Vec<u64>>, DiscoveryError> {
    let Some(text) = read_trimmed(path)? else {
        return Ok(None);
    };
    text.split_whitespace()
        .map(|w| {
            w.parse()
                .map_err(|_| parse_error(path, &text, format!("{w:?} is not an unsigned integer")))
        })
        .collect::<Result<Vec<u64>, _>>()
        .map(Some)
}

/// The entries of `dir` as (file name, path); none when `dir` does not exist.
pub(crate) fn dir_entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, DiscoveryError> {
    let io_error = |source| DiscoveryError::Io {
        path: dir.to_owned(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(io_error(source)),
    };
    entries
        .map(|entry| {
            let entry = entry.map_err(io_error)?;
            Ok((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            ))
        })
        .collect()
}

/// The ids N of the entries `<prefix>N` of `dir`, ascending; empty when `dir` is absent.
pub(crate) fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<usize>, DiscoveryError> {
    let mut ids = Vec::new();
    for (name, _) in dir_entries(dir)? {
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        if !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_digit())
            && let Ok(id) = rest.parse()
        {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(parse_mask("00000000,0000000f").unwrap().to_string(), "0-3");
        assert_eq!(parse_mask("0000,00000fff").unwrap().to_string(), "0-11");
        assert_eq!(parse_mask("1,00000000").unwrap().to_string(), "32");
        assert_eq!(parse_mask("00000000").unwrap().to_string(), "");
        assert!(parse_mask("xyz").is_err());
        assert!(parse_mask("0,,1").is_err());
    }
}
