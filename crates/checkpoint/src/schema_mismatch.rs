//! The internal error the serde-driven codecs raise when a Rust value and its Go type
//! description disagree (a bug in a format definition, not bad input).

use crate::error::CheckpointError;

/// A Rust value did not fit the Go type it was encoded or decoded as.
#[derive(Debug)]
pub(crate) struct SchemaMismatch(pub(crate) String);

impl std::fmt::Display for SchemaMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SchemaMismatch {}

impl serde::ser::Error for SchemaMismatch {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        SchemaMismatch(msg.to_string())
    }
}

impl serde::de::Error for SchemaMismatch {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        SchemaMismatch(msg.to_string())
    }
}

impl From<SchemaMismatch> for CheckpointError {
    fn from(err: SchemaMismatch) -> Self {
        CheckpointError::schema(err.0)
    }
}

/// Shorthand for a mismatch with a formatted message.
pub(crate) fn mismatch<T>(msg: impl std::fmt::Display) -> Result<T, SchemaMismatch> {
    Err(SchemaMismatch(msg.to_string()))
}
