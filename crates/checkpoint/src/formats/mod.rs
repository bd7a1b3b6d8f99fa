//! The kubelet's checkpoint formats, each a typed Rust value with the same JSON field names
//! as upstream, its Go type description, and upstream's checksum rule.
//!
//! Nil and empty are different in Go and change checksums, so every Go slice, map and
//! pointer is an `Option` here: `None` is nil, `Some(empty)` is empty.

pub mod cpumanager;
pub mod cpumanager_pod;
mod data_string;
pub mod devicemanager;
pub mod devicemanager_v1;
pub mod dra;
pub mod dra_health;
pub mod dra_v130;
pub(crate) mod go_cpuset;
pub mod go_time;
pub mod memorymanager;
pub mod memorymanager_pod;
pub mod restore;
pub(crate) mod string_set;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{CheckpointError, Result};
use crate::format::Format;
use crate::gojson::{self, value::GoValue};
use crate::gotype::GoType;

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

/// How a checkpoint's recorded checksum was accepted.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumVerification {
    /// The recorded checksum equals the one computed over the content under the format's
    /// current rule.
    Verified,
    /// The recorded checksum equals the one an older kubelet computed for this content (a
    /// `dra_manager_state` of k8s 1.27–1.28, hashed without resource handles), which
    /// upstream accepts too.
    VerifiedByLegacyRule,
    /// The file records 0, which upstream accepts in `cpu_manager_state` without checking
    /// anything ("compatibility with old file backend"): the content is not verified.
    NotRecorded,
    /// The format has no checksum (`dra_health_state`): the content is decoded, not
    /// verified.
    NoChecksum,
}

impl ChecksumVerification {
    /// True when the content was checked against the recorded checksum.
    pub fn is_verified(self) -> bool {
        !matches!(
            self,
            ChecksumVerification::NotRecorded | ChecksumVerification::NoChecksum
        )
    }
}

/// A checksum as the file records it and as computed over the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChecksumCheck {
    /// What the file records.
    pub(crate) recorded: u64,
    /// The content's checksum under the format's current rule.
    pub(crate) computed: u64,
    /// How `recorded` was accepted.
    pub(crate) verification: ChecksumVerification,
}

/// Upstream's `VerifyChecksum` comparison.
pub(crate) fn verify(format: Format, recorded: u64, computed: u64) -> Result<ChecksumCheck> {
    if recorded == computed {
        Ok(ChecksumCheck {
            recorded,
            computed,
            verification: ChecksumVerification::Verified,
        })
    } else {
        Err(CheckpointError::ChecksumMismatch {
            path: None,
            format,
            expected: recorded,
            actual: computed,
        })
    }
}

/// [`verify`], except that a recorded 0 is accepted unchecked (the CPU manager's rule).
pub(crate) fn verify_unless_zero(
    format: Format,
    recorded: u64,
    computed: u64,
) -> Result<ChecksumCheck> {
    if recorded == 0 {
        Ok(ChecksumCheck {
            recorded,
            computed,
            verification: ChecksumVerification::NotRecorded,
        })
    } else {
        verify(format, recorded, computed)
    }
}

/// The `uint64`/`uint32` checksum field of a decoded value.
pub(crate) fn checksum_field(value: &GoValue, index: usize) -> u64 {
    match value.field(index) {
        Some(GoValue::Uint(n)) => *n,
        _ => 0,
    }
}

/// Where a file keeps its checksum, beside the content it covers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ChecksumAt {
    /// In field `n` of the file's one struct, which is also the content (CPU and memory
    /// managers, DRA v1.30: the checksum field is zeroed while hashing).
    Field(usize),
    /// In field 1 of the file, the content being field 0 (device manager: `Data` and
    /// `Checksum`).
    BesideData,
}

/// Reads a checkpoint file as upstream's `GetCheckpoint` does: unmarshals `bytes` (a `file`)
/// into the kubelet's `initial` value, then returns the content (of Go type `content`) and
/// the checksum the file records. Nothing is verified here.
pub(crate) fn read_file<T: DeserializeOwned>(
    bytes: &[u8],
    file: &'static GoType,
    initial: GoValue,
    format: Format,
    content: &'static GoType,
    at: ChecksumAt,
) -> Result<(T, u64)> {
    let mut value = gojson::unmarshal(bytes, file, initial, format)?;
    let (value, recorded) = match at {
        ChecksumAt::Field(n) => {
            let recorded = checksum_field(&value, n);
            (value, recorded)
        }
        ChecksumAt::BesideData => {
            let recorded = checksum_field(&value, 1);
            (value.take_field(0), recorded)
        }
    };
    Ok((gojson::typed(value, content)?, recorded))
}

/// Reads the logical value of Go type `ty` from Go-convention JSON, starting from Go's zero
/// value, without any checksum (every format's `from_go_json`).
pub(crate) fn from_go_json<T: DeserializeOwned>(
    bytes: &[u8],
    ty: &'static GoType,
    format: Format,
) -> Result<T> {
    let value = gojson::unmarshal(bytes, ty, GoValue::zero(ty), format)?;
    gojson::typed(value, ty)
}

/// `json.Marshal(value)` of a file described by `ty`, as bytes.
pub(crate) fn marshal_file<T: Serialize + ?Sized>(
    value: &T,
    ty: &'static GoType,
) -> Result<Vec<u8>> {
    Ok(gojson::marshal(value, ty)?.into_bytes())
}

/// Declares a Rust struct and the static [`GoType`] of the Go struct it is, from one field
/// list, so the serde fields are the Go fields in Go's order under their JSON names (which
/// the codecs require).
///
/// A field is `vis name: RustType => [omitempty] "json" [as "GoName"] = &GO_TYPE`: without
/// `as`, the Go name is the JSON name (a field without a JSON tag); `omitempty` is the tag
/// option.
macro_rules! go_struct {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident in $go_vis:vis static $go_static:ident = $go_name:literal {
            $(
                $(#[$field_attr:meta])*
                $field_vis:vis $field:ident: $field_ty:ty =>
                    $($omit:ident)? $json:literal $(as $go_field:literal)? = $go_ty:expr
            ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        $vis struct $name {
            $(
                $(#[$field_attr])*
                #[serde(rename = $json)]
                $field_vis $field: $field_ty,
            )*
        }

        #[doc = concat!("`", $go_name, "`.")]
        $go_vis static $go_static: $crate::gotype::GoType =
            $crate::gotype::GoType::Struct(&$crate::gotype::GoStruct {
                name: $go_name,
                fields: &[$($crate::gotype::GoField {
                    name: $crate::formats::go_struct!(@go_name $($go_field)? $json),
                    json: $json,
                    omitempty: $crate::formats::go_struct!(@omitempty $($omit)?),
                    ty: $go_ty,
                }),*],
            });
    };
    (@go_name $go_field:literal $json:literal) => { $go_field };
    (@go_name $json:literal) => { $json };
    (@omitempty omitempty) => { true };
    (@omitempty) => { false };
}
pub(crate) use go_struct;

/// `impl Checkpoint` for a format type: its [`Format`], how it encodes (`encode(this) {…}`,
/// `this` being the value), and `decode` as the type's `decode_checked` without the
/// checksum report — every format reads the same way, only the file's layout differs.
macro_rules! impl_checkpoint {
    (
        $ty:ty, $format:expr,
        $(#[$encode_doc:meta])* encode($this:ident) $encode:block
        $(, $(#[$decode_doc:meta])* decode)?
    ) => {
        impl $crate::formats::Checkpoint for $ty {
            const FORMAT: $crate::format::Format = $format;

            $(#[$encode_doc])*
            fn encode(&self) -> $crate::error::Result<Vec<u8>> {
                let $this = self;
                $encode
            }

            $($(#[$decode_doc])*)?
            fn decode(bytes: &[u8]) -> $crate::error::Result<Self> {
                Self::decode_checked(bytes).map(|(value, _)| value)
            }
        }
    };
}
pub(crate) use impl_checkpoint;
