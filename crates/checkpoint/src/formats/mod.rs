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
use cpumanager::{CpuManagerCheckpoint, CpuManagerCheckpointV1};
use cpumanager_pod::{CpuManagerCheckpointV3, CpuManagerCheckpointV4};
use devicemanager::DeviceManagerCheckpoint;
use devicemanager_v1::DeviceManagerCheckpointV1;
use dra::DraManagerCheckpoint;
use dra_health::DraHealthState;
use dra_v130::DraManagerCheckpointV130;
use memorymanager::MemoryManagerCheckpoint;
use memorymanager_pod::{MemoryManagerCheckpointV2, MemoryManagerCheckpointV3};

/// A checkpoint format's typed content, as the kubelet writes and reads it.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_checkpoint::{Checkpoint, CpuManagerCheckpoint, Format};
///
/// // The kubelet's constructor makes `Entries` an empty map, never nil.
/// let state = CpuManagerCheckpoint {
///     policy_name: "none".into(),
///     default_cpu_set: String::new(),
///     entries: Some(BTreeMap::new()),
/// };
/// let bytes = state.encode()?;
/// // Conformance vector `cpumanager_v2/none_policy_empty`: a v1.32 kubelet's very bytes.
/// assert_eq!(bytes, br#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#);
/// assert_eq!(CpuManagerCheckpoint::decode(&bytes)?, state);
/// assert_eq!(CpuManagerCheckpoint::FORMAT, Format::CpuManagerV2);
/// assert!(CpuManagerCheckpoint::decode(b"{\"policyName\":").unwrap_err().is_decode_error());
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
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
///
/// # Example
///
/// ```
/// use corral_checkpoint::{ChecksumVerification, inspect};
///
/// let verified = br#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#;
/// assert_eq!(inspect(verified, None)?.verification, ChecksumVerification::Verified);
/// assert!(ChecksumVerification::Verified.is_verified());
/// assert!(!ChecksumVerification::NoChecksum.is_verified());
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
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
            verifies_as: None,
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

/// A verified checkpoint of any known format.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{CheckpointValue, inspect};
///
/// // Conformance vector `devicemanager_v2/empty_nil_nil`.
/// let bytes = br#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":null},"Checksum":1944006890}"#;
/// match inspect(bytes, Some("kubelet_internal_checkpoint"))?.value {
///     CheckpointValue::DeviceManager(state) => assert_eq!(state.pod_device_entries, None),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointValue {
    /// `kubelet_internal_checkpoint`, current format.
    DeviceManager(DeviceManagerCheckpoint),
    /// `kubelet_internal_checkpoint`, k8s ≤ 1.19 format.
    DeviceManagerV1(DeviceManagerCheckpointV1),
    /// `cpu_manager_state` v2.
    CpuManager(CpuManagerCheckpoint),
    /// `cpu_manager_state` v1.
    CpuManagerV1(CpuManagerCheckpointV1),
    /// `cpu_manager_state` v3 (k8s 1.36, pod entries).
    CpuManagerV3(CpuManagerCheckpointV3),
    /// `cpu_manager_state` v4 (k8s 1.37, `data` string).
    CpuManagerV4(CpuManagerCheckpointV4),
    /// `memory_manager_state` v1.
    MemoryManager(MemoryManagerCheckpoint),
    /// `memory_manager_state` v2 (k8s 1.36, pod entries).
    MemoryManagerV2(MemoryManagerCheckpointV2),
    /// `memory_manager_state` v3 (k8s 1.37, `data` string).
    MemoryManagerV3(MemoryManagerCheckpointV3),
    /// `dra_manager_state`, v1.32 format.
    DraManager(DraManagerCheckpoint),
    /// `dra_manager_state`, v1.26–v1.30 format.
    DraManagerV130(DraManagerCheckpointV130),
    /// `dra_health_state` (no checksum).
    DraHealth(DraHealthState),
}

/// The one decision on a file read as `format`, which `inspect` reports and every
/// [`Checkpoint::decode`] follows: the decoded value and how its checksum was accepted, or
/// why it was not. Each format's `decode_checked` decides; nothing else does.
pub(crate) fn read_checked(
    format: Format,
    bytes: &[u8],
) -> Result<(CheckpointValue, ChecksumCheck)> {
    macro_rules! read {
        ($($name:ident: $ty:ident => $variant:ident,)*) => {
            match format {
                $(Format::$name => {
                    let (value, check) = $ty::decode_checked(bytes)?;
                    (CheckpointValue::$variant(value), check)
                })*
            }
        };
    }
    Ok(read!(
        DeviceManagerV2: DeviceManagerCheckpoint => DeviceManager,
        DeviceManagerV1: DeviceManagerCheckpointV1 => DeviceManagerV1,
        CpuManagerV2: CpuManagerCheckpoint => CpuManager,
        CpuManagerV1: CpuManagerCheckpointV1 => CpuManagerV1,
        CpuManagerV3: CpuManagerCheckpointV3 => CpuManagerV3,
        CpuManagerV4: CpuManagerCheckpointV4 => CpuManagerV4,
        MemoryManager: MemoryManagerCheckpoint => MemoryManager,
        MemoryManagerV2: MemoryManagerCheckpointV2 => MemoryManagerV2,
        MemoryManagerV3: MemoryManagerCheckpointV3 => MemoryManagerV3,
        DraV132: DraManagerCheckpoint => DraManager,
        DraV130: DraManagerCheckpointV130 => DraManagerV130,
        DraHealth: DraHealthState => DraHealth,
    ))
}

/// Every format, newest version of each file first (the order siblings are named in).
const FORMATS: [Format; 12] = [
    Format::DeviceManagerV2,
    Format::DeviceManagerV1,
    Format::CpuManagerV4,
    Format::CpuManagerV3,
    Format::CpuManagerV2,
    Format::CpuManagerV1,
    Format::MemoryManagerV3,
    Format::MemoryManagerV2,
    Format::MemoryManager,
    Format::DraV132,
    Format::DraV130,
    Format::DraHealth,
];

/// What [`Checkpoint::decode`] makes of [`read_checked`]'s answer for `format`: every
/// verified file is accepted, and so is a recorded checksum of 0 where the format's
/// reader takes it unchecked — every format but `memory_manager_state` v1, whose
/// `decode` is v1.32's reader, which has no zero bypass (v1.36's has:
/// `MemoryManagerCheckpoint::decode_v136`, and `inspect` reports such a file as not
/// verified). A checksum refusal names the sibling version the bytes verify as, if one
/// does, so a valid file of another version is never called corrupted.
pub(crate) fn decoded<T>(
    format: Format,
    bytes: &[u8],
    read: Result<(T, ChecksumCheck)>,
) -> Result<T> {
    let refusal = match read {
        Ok((value, check)) => {
            let zero_refused = format == Format::MemoryManager
                && check.verification == ChecksumVerification::NotRecorded;
            if !zero_refused {
                return Ok(value);
            }
            CheckpointError::ChecksumMismatch {
                path: None,
                format,
                expected: check.recorded,
                actual: check.computed,
                verifies_as: None,
            }
        }
        Err(err) => err,
    };
    Err(name_verified_sibling(refusal, format, bytes))
}

/// `err`, a refusal of `bytes` as `format`; a checksum mismatch learns which other version
/// of the same file the bytes verify as, if any.
fn name_verified_sibling(err: CheckpointError, format: Format, bytes: &[u8]) -> CheckpointError {
    let CheckpointError::ChecksumMismatch {
        path,
        format: refused_as,
        expected,
        actual,
        verifies_as: None,
    } = err
    else {
        return err;
    };
    let verifies_as = FORMATS
        .into_iter()
        .filter(|&f| f != format && f.file_name() == format.file_name())
        .find(|&f| read_checked(f, bytes).is_ok_and(|(_, check)| check.verification.is_verified()));
    CheckpointError::ChecksumMismatch {
        path,
        format: refused_as,
        expected,
        actual,
        verifies_as,
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
/// `this` being the value), and `decode` as the type's `decode_checked` taken by
/// [`decoded`] — every format reads the same way, and as `inspect` does; only the file's
/// layout differs.
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
                $crate::formats::decoded(Self::FORMAT, bytes, Self::decode_checked(bytes))
            }
        }
    };
}
pub(crate) use impl_checkpoint;
