//! Format detection: given a checkpoint's bytes (and, when known, its file name), find which
//! kubelet format it is, verify it and return the typed value — the engine behind
//! `corral checkpoint inspect|verify`.

use std::path::Path;

use crate::error::{CheckpointError, Result};
use crate::format::{
    CPU_MANAGER_FILE, DEVICE_MANAGER_FILE, DRA_MANAGER_FILE, Format, MEMORY_MANAGER_FILE,
};
use crate::formats::ChecksumVerification;
use crate::formats::cpumanager::{CpuManagerCheckpoint, CpuManagerCheckpointV1};
use crate::formats::devicemanager::DeviceManagerCheckpoint;
use crate::formats::devicemanager_v1::DeviceManagerCheckpointV1;
use crate::formats::dra::DraManagerCheckpoint;
use crate::formats::dra_v130::DraManagerCheckpointV130;
use crate::formats::memorymanager::MemoryManagerCheckpoint;
use crate::gojson::{TopLevel, top_level};

/// A verified checkpoint of any known format.
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
    /// `memory_manager_state`.
    MemoryManager(MemoryManagerCheckpoint),
    /// `dra_manager_state`, v1.32 format.
    DraManager(DraManagerCheckpoint),
    /// `dra_manager_state`, v1.26–v1.30 format.
    DraManagerV130(DraManagerCheckpointV130),
}

/// What [`inspect`] found.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspected {
    /// The detected format.
    pub format: Format,
    /// The checksum **computed** over the content under the format's current rule. It is
    /// not necessarily what the file records: see `recorded_checksum` and `verification`.
    pub checksum: u64,
    /// The checksum the file records (0 in a `cpu_manager_state` that records none).
    pub recorded_checksum: u64,
    /// How the recorded checksum was accepted; for
    /// [`NotRecorded`](ChecksumVerification::NotRecorded) the content was not verified.
    pub verification: ChecksumVerification,
    /// The decoded value (verified unless `verification` says otherwise).
    pub value: CheckpointValue,
}

impl Inspected {
    /// One line on the checksum for people: what the file records, whether and how it was
    /// verified, and the computed value when it differs from the recorded one, e.g.
    /// `checksum 1234 (verified)` or `checksum 0 recorded: content not verified (the
    /// kubelet accepts 0 in cpu_manager_state); the content hashes to 1234`.
    pub fn checksum_summary(&self) -> String {
        let recorded = self.recorded_checksum;
        let computed = self.checksum;
        match self.verification {
            ChecksumVerification::Verified => format!("checksum {recorded} (verified)"),
            ChecksumVerification::VerifiedByLegacyRule => format!(
                "checksum {recorded} (verified by the k8s 1.27-1.28 rule, which hashes without \
                 resource handles; the current rule gives {computed})"
            ),
            ChecksumVerification::NotRecorded => format!(
                "checksum {recorded} recorded: content not verified (the kubelet accepts 0 in \
                 {}); the content hashes to {computed}",
                self.format.file_name()
            ),
        }
    }
}

/// Decodes `bytes` as `format` with that format's `decode_checked`: its value in its
/// [`CheckpointValue`] variant, and its checksum check.
macro_rules! decoded {
    ($format:expr, $bytes:expr; $($name:ident: $ty:ident => $variant:ident,)*) => {
        match $format {
            $(Format::$name => {
                let (value, check) = $ty::decode_checked($bytes)?;
                (CheckpointValue::$variant(value), check)
            })*
        }
    };
}

fn read_as(format: Format, bytes: &[u8]) -> Result<Inspected> {
    let (value, check) = decoded!(format, bytes;
        DeviceManagerV2: DeviceManagerCheckpoint => DeviceManager,
        DeviceManagerV1: DeviceManagerCheckpointV1 => DeviceManagerV1,
        CpuManagerV2: CpuManagerCheckpoint => CpuManager,
        CpuManagerV1: CpuManagerCheckpointV1 => CpuManagerV1,
        MemoryManager: MemoryManagerCheckpoint => MemoryManager,
        DraV132: DraManagerCheckpoint => DraManager,
        DraV130: DraManagerCheckpointV130 => DraManagerV130,
    );
    Ok(Inspected {
        format,
        checksum: check.computed,
        recorded_checksum: check.recorded,
        verification: check.verification,
        value,
    })
}

/// Candidate formats in the order the kubelet tries them, and which one is current (whose
/// error is reported when all fail).
fn candidates_for_file(name: &str) -> Option<(&'static [Format], Format)> {
    match name {
        DEVICE_MANAGER_FILE => Some((
            &[Format::DeviceManagerV2, Format::DeviceManagerV1],
            Format::DeviceManagerV2,
        )),
        CPU_MANAGER_FILE => Some((
            &[Format::CpuManagerV1, Format::CpuManagerV2],
            Format::CpuManagerV2,
        )),
        MEMORY_MANAGER_FILE => Some((&[Format::MemoryManager], Format::MemoryManager)),
        DRA_MANAGER_FILE => Some((&[Format::DraV132, Format::DraV130], Format::DraV132)),
        _ => None,
    }
}

fn candidates_from_content(bytes: &[u8]) -> Result<(&'static [Format], Format)> {
    let keys = match top_level(bytes)? {
        TopLevel::Object(keys) => keys,
        TopLevel::Other(kind) => {
            return Err(CheckpointError::UnknownFormat {
                path: None,
                why: format!("the document is a JSON {kind}, not an object"),
            });
        }
    };
    let has = |name: &str| {
        keys.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, kind)| *kind)
    };
    if let Some(kind) = has("Data") {
        return Ok(if kind == "string" {
            (&[Format::DraV132], Format::DraV132)
        } else {
            (
                &[Format::DeviceManagerV2, Format::DeviceManagerV1],
                Format::DeviceManagerV2,
            )
        });
    }
    if has("machineState").is_some() {
        return Ok((&[Format::MemoryManager], Format::MemoryManager));
    }
    if has("policyName").is_some() || has("defaultCpuSet").is_some() {
        return Ok((
            &[Format::CpuManagerV1, Format::CpuManagerV2],
            Format::CpuManagerV2,
        ));
    }
    if has("version").is_some() || has("entries").is_some() {
        return Ok((&[Format::DraV130], Format::DraV130));
    }
    Err(CheckpointError::UnknownFormat {
        path: None,
        why: format!(
            "top-level keys {:?} match no checkpoint format",
            keys.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()
        ),
    })
}

/// Detects the format of `bytes`, verifies it and decodes it.
///
/// With `file_name` (a path or a bare name) the kubelet's file name decides the candidate
/// formats, tried in the kubelet's order (`cpu_manager_state`: v1 then v2, as
/// `restoreState`; `kubelet_internal_checkpoint`: current then pre-1.20;
/// `dra_manager_state`: v1.32 then v1.30). Without one, the top-level keys decide (bytes
/// that do not parse report why, as [`CheckpointError::Syntax`] or
/// [`CheckpointError::TooDeep`]). When no
/// candidate verifies, the current format's error is returned, unless only an older
/// format got as far as a checksum mismatch.
pub fn inspect(bytes: &[u8], file_name: Option<&str>) -> Result<Inspected> {
    let by_name = file_name
        .and_then(|name| Path::new(name).file_name().and_then(|n| n.to_str()))
        .and_then(candidates_for_file);
    let (candidates, current) = match by_name {
        Some(found) => found,
        None => candidates_from_content(bytes)?,
    };
    let mut errors = Vec::new();
    for &format in candidates {
        match read_as(format, bytes) {
            Ok(found) => return Ok(found),
            Err(err) => errors.push((format, err)),
        }
    }
    let current_is_mismatch = errors
        .iter()
        .any(|(f, e)| *f == current && e.is_checksum_mismatch());
    let pick = if current_is_mismatch {
        errors.iter().position(|(f, _)| *f == current)
    } else {
        errors
            .iter()
            .position(|(_, e)| e.is_checksum_mismatch())
            .or_else(|| errors.iter().position(|(f, _)| *f == current))
    };
    let index = pick.unwrap_or(0);
    let err = errors.swap_remove(index).1;
    Err(match file_name {
        Some(name) => err.with_path(Path::new(name)),
        None => err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::Checkpoint;

    #[test]
    fn detects_by_content() {
        let cp = MemoryManagerCheckpoint {
            policy_name: "None".into(),
            machine_state: Some(Default::default()),
            // Empty entries are omitted from the file and read back as the constructor's
            // empty map; `None` would read back differently and fail verification.
            entries: Some(Default::default()),
        };
        let found = inspect(&cp.encode().unwrap(), None).unwrap();
        assert_eq!(found.format, Format::MemoryManager);
        assert_eq!(found.value, CheckpointValue::MemoryManager(cp));
    }

    #[test]
    fn unknown_content_is_an_error() {
        assert!(matches!(
            inspect(br#"{"x":1}"#, None),
            Err(CheckpointError::UnknownFormat { .. })
        ));
        assert!(matches!(
            inspect(b"nope", None),
            Err(CheckpointError::Syntax { .. })
        ));
        assert!(matches!(
            inspect(b"[1]", None),
            Err(CheckpointError::UnknownFormat { .. })
        ));
        let err = inspect(b"nope", Some("/var/lib/kubelet/cpu_manager_state")).unwrap_err();
        assert!(matches!(err, CheckpointError::Syntax { .. }), "{err}");
    }
}
