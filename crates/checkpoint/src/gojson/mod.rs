//! Go's `encoding/json`, as far as kubelet checkpoints exercise it: byte-exact `Marshal`,
//! and `Unmarshal` with Go's matching, merging, null and error rules.
//!
//! Decoding goes bytes → [`parse::Json`] (syntax, checked in full first, as Go does) →
//! [`value::GoValue`] (Go's assignment rules, starting from a constructor's value) → a typed
//! Rust value (serde). Encoding is a serde serializer straight to bytes.

pub(crate) mod base64;
mod decode;
mod encode;
mod escape;
mod from_value;
mod parse;
pub(crate) mod value;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{CheckpointError, Result};
use crate::format::Format;
use crate::gotype::GoType;
use value::GoValue;

/// `json.Marshal(value)` for a value described by `ty`.
pub(crate) fn marshal<T: Serialize + ?Sized>(value: &T, ty: &'static GoType) -> Result<String> {
    Ok(encode::to_string(value, ty)?)
}

/// `json.Unmarshal(bytes, &target)` with `target` starting as `initial`.
pub(crate) fn unmarshal(
    bytes: &[u8],
    ty: &'static GoType,
    mut initial: GoValue,
    format: Format,
) -> Result<GoValue> {
    let json = parse::parse(bytes).map_err(|err| syntax_error(bytes, err))?;
    decode::decode_into(&json, ty, &mut initial).map_err(|err| CheckpointError::Decode {
        path: None,
        format,
        message: err.message,
    })?;
    Ok(initial)
}

/// The typed Rust value of a decoded Go value.
pub(crate) fn typed<T: DeserializeOwned>(value: GoValue, ty: &'static GoType) -> Result<T> {
    Ok(from_value::from_value(value, ty)?)
}

/// The error for a document the parser refused.
fn syntax_error(bytes: &[u8], err: parse::SyntaxError) -> CheckpointError {
    let (line, column) = line_column(bytes, err.offset);
    if err.too_deep {
        CheckpointError::TooDeep {
            path: None,
            limit: parse::MAX_DEPTH,
            offset: err.offset,
            line,
            column,
        }
    } else {
        CheckpointError::Syntax {
            path: None,
            offset: err.offset,
            line,
            column,
            message: err.message,
        }
    }
}

/// The shape of a JSON document's top level.
pub(crate) enum TopLevel {
    /// An object: each key and the JSON kind of its value, in file order.
    Object(Vec<(String, &'static str)>),
    /// Another kind of value (`array`, `string`, …).
    Other(&'static str),
}

/// The top level of `bytes`; a document that does not parse is its syntax (or nesting)
/// error.
pub(crate) fn top_level(bytes: &[u8]) -> Result<TopLevel> {
    match parse::parse(bytes).map_err(|err| syntax_error(bytes, err))? {
        parse::Json::Object(members) => Ok(TopLevel::Object(
            members.iter().map(|(k, v)| (k.clone(), v.kind())).collect(),
        )),
        other => Ok(TopLevel::Other(other.kind())),
    }
}

/// 1-based line and byte column of `offset`.
fn line_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        assert_eq!(line_column(b"ab\ncd", 4), (2, 2));
        assert_eq!(line_column(b"x", 0), (1, 1));
        assert_eq!(line_column(b"x", 9), (1, 2));
    }
}
