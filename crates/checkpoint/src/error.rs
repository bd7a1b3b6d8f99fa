//! The crate's error type: every way reading, verifying or writing a checkpoint can fail.

use std::path::{Path, PathBuf};

use crate::format::Format;

/// Why a checkpoint could not be read, verified, encoded or stored.
///
/// Reading never falls back to a default: a missing file, unparsable JSON, a value of the
/// wrong shape and a checksum mismatch are each their own variant.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{Checkpoint, CheckpointError, CpuManagerCheckpoint};
///
/// // A v1.32 kubelet's file (`cpumanager_v2/static_default_only`) with one CPU more.
/// let edited = br#"{"policyName":"static","defaultCpuSet":"0-8","checksum":14413152}"#;
/// match CpuManagerCheckpoint::decode(edited) {
///     Err(CheckpointError::ChecksumMismatch { expected, actual, .. }) => {
///         assert_eq!(expected, 14413152, "what the file records");
///         assert_ne!(actual, expected, "what its content hashes to");
///     }
///     other => panic!("not a checksum mismatch: {other:?}"),
/// }
/// assert!(CpuManagerCheckpoint::decode(b"[]").unwrap_err().is_decode_error());
/// ```
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The store has no checkpoint under this key (upstream: `ErrCheckpointNotFound`).
    #[error("checkpoint {key:?} not found at {}", path.display())]
    NotFound {
        /// The key asked for.
        key: String,
        /// Where the file would be.
        path: PathBuf,
    },
    /// The checksum recorded in the file does not match its content (upstream:
    /// `CorruptCheckpointError`, whose "is corrupted" the message keeps). When the same
    /// bytes verify as another version of the same file (a `cpu_manager_state` v1 read as
    /// v2), `verifies_as` names it, and the message says the file is corrupted for this
    /// version only: it is a valid file of the version `inspect` reports.
    #[error("checkpoint {} ({format}) {}", shown(path), mismatch(*format, *expected, *actual, *verifies_as))]
    ChecksumMismatch {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// The format whose checksum rule was applied.
        format: Format,
        /// The checksum written in the file.
        expected: u64,
        /// The checksum computed over the content.
        actual: u64,
        /// Another version of the same file that these bytes verify as, if any.
        verifies_as: Option<Format>,
    },
    /// The bytes are not valid JSON (upstream: `json.SyntaxError`).
    #[error(
        "checkpoint {}: invalid JSON at line {line}, column {column} (byte offset {offset}): {message}",
        shown(path)
    )]
    Syntax {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// Byte offset of the error (Go's `SyntaxError.Offset`).
        offset: usize,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in bytes) of the error.
        column: usize,
        /// What was wrong, in Go's words (`unexpected end of JSON input`, …).
        message: String,
    },
    /// The JSON nests objects and arrays deeper than this crate reads (Go's `exceeded max
    /// depth`, at 10000 levels there; no kubelet checkpoint nests beyond a handful).
    #[error(
        "checkpoint {}: JSON nesting deeper than {limit} levels at line {line}, column {column} (byte offset {offset})",
        shown(path)
    )]
    TooDeep {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// How many levels are read.
        limit: usize,
        /// Byte offset of the bracket that opens one level too many.
        offset: usize,
        /// 1-based line of that bracket.
        line: usize,
        /// 1-based column (in bytes) of that bracket.
        column: usize,
    },
    /// Valid JSON that does not decode into the format's Go types (upstream:
    /// `json.UnmarshalTypeError`, base64 errors, integer overflow, …).
    #[error("checkpoint {} ({format}): {message}", shown(path))]
    Decode {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// The format being decoded.
        format: Format,
        /// What did not fit, in Go's words (`json: cannot unmarshal string into Go struct field …`).
        message: String,
    },
    /// The content decodes but uses a feature this crate does not model (for example a
    /// v1.30 DRA `ResourceHandle.StructuredData`).
    #[error("checkpoint {} ({format}): unsupported content: {what}", shown(path))]
    Unsupported {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// The format being decoded.
        format: Format,
        /// What is not supported.
        what: String,
    },
    /// The bytes match none of the known checkpoint formats.
    #[error(
        "checkpoint {}: not a known kubelet checkpoint format: {why}",
        shown(path)
    )]
    UnknownFormat {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// What the detection saw.
        why: String,
    },
    /// A v1 CPU manager entry names a container the caller could not resolve (upstream:
    /// `containerID '…' not found in initial containers list`).
    #[error("containerID {container_id:?} not found in initial containers list")]
    UnknownContainer {
        /// The unresolved container id.
        container_id: String,
    },
    /// A checkpoint key the kubelet's file store would refuse.
    #[error(
        "invalid checkpoint key {key:?}: keys are 1-250 characters of [-A-Za-z0-9_.], starting and ending with a letter or digit"
    )]
    InvalidKey {
        /// The refused key.
        key: String,
    },
    /// A file-system operation failed.
    #[error("checkpoint I/O failed: {op} {}", path.display())]
    Io {
        /// What was being done (`write`, `rename`, `fsync directory`, …).
        op: &'static str,
        /// The path operated on.
        path: PathBuf,
        /// The underlying error (not repeated in this error's message: print the chain).
        #[source]
        source: std::io::Error,
    },
    /// The state journal refused to open, or a commit failed.
    #[error(transparent)]
    Journal(#[from] crate::journal_error::JournalError),
    /// A Rust value does not fit the Go type description it is encoded with (a bug in a
    /// format definition, never caused by input bytes).
    #[error("value does not fit its Go type description: {message}")]
    Schema {
        /// What did not fit.
        message: String,
    },
}

/// The rest of a [`CheckpointError::ChecksumMismatch`] message, after the file and format.
fn mismatch(format: Format, expected: u64, actual: u64, verifies_as: Option<Format>) -> String {
    match verifies_as {
        None => format!(
            "is corrupted: it records checksum {expected} but its content hashes to {actual}"
        ),
        Some(other) => format!(
            "is corrupted for this version only: it records checksum {expected} but its \
             content hashes to {actual} as {format}; the file verifies as {other}"
        ),
    }
}

fn shown(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => p.display().to_string(),
        None => "<bytes>".to_owned(),
    }
}

impl CheckpointError {
    /// Attaches the file the bytes came from (no effect on variants that already name one).
    #[must_use]
    pub fn with_path(mut self, file: &Path) -> Self {
        match &mut self {
            CheckpointError::ChecksumMismatch { path, .. }
            | CheckpointError::Syntax { path, .. }
            | CheckpointError::TooDeep { path, .. }
            | CheckpointError::Decode { path, .. }
            | CheckpointError::Unsupported { path, .. }
            | CheckpointError::UnknownFormat { path, .. } => *path = Some(file.to_path_buf()),
            _ => {}
        }
        self
    }

    /// True for a checksum mismatch.
    pub fn is_checksum_mismatch(&self) -> bool {
        matches!(self, CheckpointError::ChecksumMismatch { .. })
    }

    /// True when the bytes could not be decoded at all (syntax or type errors).
    pub fn is_decode_error(&self) -> bool {
        matches!(
            self,
            CheckpointError::Syntax { .. }
                | CheckpointError::TooDeep { .. }
                | CheckpointError::Decode { .. }
                | CheckpointError::Unsupported { .. }
                | CheckpointError::UnknownFormat { .. }
        )
    }

    pub(crate) fn schema(message: impl std::fmt::Display) -> Self {
        CheckpointError::Schema {
            message: message.to_string(),
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = CheckpointError> = std::result::Result<T, E>;

/// The `CheckpointError::Io` of `op` on `path`, as a `map_err` argument.
pub(crate) fn io_error<'a>(
    op: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> CheckpointError + 'a {
    move |source| CheckpointError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_file_and_both_checksums() {
        let err = CheckpointError::ChecksumMismatch {
            path: None,
            format: Format::CpuManagerV2,
            expected: 1,
            actual: 2,
            verifies_as: None,
        }
        .with_path(Path::new("/var/lib/kubelet/cpu_manager_state"));
        let text = err.to_string();
        assert!(
            text.contains("/var/lib/kubelet/cpu_manager_state"),
            "{text}"
        );
        assert!(text.contains("records checksum 1"), "{text}");
        assert!(text.contains("hashes to 2"), "{text}");
        assert!(err.is_checksum_mismatch());
        assert!(!err.is_decode_error());
        assert!(text.contains("is corrupted"), "{text}");
    }

    #[test]
    fn a_mismatch_of_another_valid_version_is_not_called_corrupted() {
        let err = CheckpointError::ChecksumMismatch {
            path: None,
            format: Format::CpuManagerV2,
            expected: 3_242_152_201,
            actual: 1_353_318_690,
            verifies_as: Some(Format::CpuManagerV1),
        };
        assert_eq!(
            err.to_string(),
            "checkpoint <bytes> (cpumanager_v2) is corrupted for this version only: it records \
             checksum 3242152201 but its content hashes to 1353318690 as cpumanager_v2; the \
             file verifies as cpumanager_v1"
        );
        assert!(err.is_checksum_mismatch());
    }
}
