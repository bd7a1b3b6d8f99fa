//! The kubelet's checkpoint formats, each a typed Rust value with the same JSON field names
//! as upstream, its Go type description, and upstream's checksum rule.
//!
//! Nil and empty are different in Go and change checksums, so every Go slice, map and
//! pointer is an `Option` here: `None` is nil, `Some(empty)` is empty.

pub mod cpumanager;
pub mod devicemanager;
pub mod devicemanager_v1;
pub mod dra;
pub mod dra_v130;
pub mod memorymanager;
pub(crate) mod string_set;

use crate::error::{CheckpointError, Result};
use crate::format::Format;

/// A checkpoint format's typed content, as the kubelet writes and reads it.
pub trait Checkpoint: Sized {
    /// The format this type reads and writes.
    const FORMAT: Format;

    /// The file bytes the kubelet would write for this value (checksum included, no
    /// trailing newline).
    fn encode(&self) -> Result<Vec<u8>>;

    /// Reads file bytes as the kubelet's `GetCheckpoint` does for this format: decode with
    /// Go's JSON rules into the kubelet's freshly constructed value, then verify the
    /// checksum.
    fn decode(bytes: &[u8]) -> Result<Self>;
}

/// Upstream's `VerifyChecksum` comparison.
pub(crate) fn verify(format: Format, expected: u64, actual: u64) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(CheckpointError::ChecksumMismatch {
            path: None,
            format,
            expected,
            actual,
        })
    }
}

/// The `uint64`/`uint32` checksum field of a decoded value.
pub(crate) fn checksum_field(value: &crate::gojson::value::GoValue, index: usize) -> u64 {
    match value.field(index) {
        Some(crate::gojson::value::GoValue::Uint(n)) => *n,
        _ => 0,
    }
}

/// `strings.Replace(s, old, new, n)` with `n` = 1 (first only) or all when `None`.
pub(crate) fn go_replace(s: &str, old: &str, new: &str, first_only: bool) -> String {
    if first_only {
        s.replacen(old, new, 1)
    } else {
        s.replace(old, new)
    }
}
