//! Format detection: given a checkpoint's bytes (and, when known, its file name), find which
//! kubelet format it is, verify it and return the typed value — the engine behind
//! `corral checkpoint inspect|verify`.

use std::path::Path;

use crate::error::{CheckpointError, Result};
use crate::format::{
    CPU_MANAGER_FILE, DEVICE_MANAGER_FILE, DRA_HEALTH_FILE, DRA_MANAGER_FILE, Format,
    MEMORY_MANAGER_FILE,
};
use crate::formats::{CheckpointValue, ChecksumVerification, read_checked};
use crate::gojson::{TopLevel, top_level};

/// What [`inspect`] found.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{ChecksumVerification, Format, inspect};
///
/// // A `cpu_manager_state` recording 0: the kubelet accepts it without checking anything.
/// let unchecked = br#"{"policyName":"none","defaultCpuSet":"","checksum":0}"#;
/// let found = inspect(unchecked, Some("cpu_manager_state"))?;
/// assert_eq!(found.format, Format::CpuManagerV2);
/// assert_eq!(found.verification, ChecksumVerification::NotRecorded);
/// assert_eq!((found.recorded_checksum, found.checksum), (0, 1353318690));
/// assert!(found.checksum_summary().contains("content not verified"), "{}", found.checksum_summary());
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
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
            ChecksumVerification::NoChecksum => format!(
                "no checksum: the kubelet writes {} as plain JSON",
                self.format.file_name()
            ),
        }
    }
}

/// `bytes` read as `format`, with the decision [`Checkpoint::decode`] follows too
/// ([`read_checked`]): a file reported verified here decodes as `format`.
///
/// [`Checkpoint::decode`]: crate::Checkpoint::decode
fn read_as(format: Format, bytes: &[u8]) -> Result<Inspected> {
    let (value, check) = read_checked(format, bytes)?;
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
type Candidates = (&'static [Format], Format);

/// The top-level keys of `bytes` and the JSON kind of each value.
fn object_keys(bytes: &[u8]) -> Result<Vec<(String, &'static str)>> {
    match top_level(bytes)? {
        TopLevel::Object(keys) => Ok(keys),
        TopLevel::Other(kind) => Err(CheckpointError::UnknownFormat {
            path: None,
            why: format!("the document is a JSON {kind}, not an object"),
        }),
    }
}

/// The JSON kind of key `name` (matched as Go does, ignoring case), if present.
fn kind_of(keys: &[(String, &'static str)], name: &str) -> Option<&'static str> {
    keys.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, kind)| *kind)
}

/// `cpu_manager_state`, in the order a 1.37 kubelet tries them (v1.36's with
/// `PodLevelResourceManagers` is the same minus v4, plus v1 last): a file with `data` is
/// v4 and nothing else.
fn cpu_candidates(keys: &[(String, &'static str)]) -> Candidates {
    const ORDER: &[Format] = &[
        Format::CpuManagerV3,
        Format::CpuManagerV2,
        Format::CpuManagerV1,
    ];
    if kind_of(keys, "data").is_some() || kind_of(keys, "dataChecksum").is_some() {
        (&[Format::CpuManagerV4], Format::CpuManagerV4)
    } else if kind_of(keys, "podEntries").is_some() {
        (ORDER, Format::CpuManagerV3)
    } else {
        (ORDER, Format::CpuManagerV2)
    }
}

/// `memory_manager_state`, in the order a 1.37 kubelet tries them: v3 (a file with `data`
/// is v3 and nothing else), v2, v1.
fn memory_candidates(keys: &[(String, &'static str)]) -> Candidates {
    const ORDER: &[Format] = &[Format::MemoryManagerV2, Format::MemoryManager];
    if kind_of(keys, "data").is_some() || kind_of(keys, "dataChecksum").is_some() {
        (&[Format::MemoryManagerV3], Format::MemoryManagerV3)
    } else if kind_of(keys, "podEntries").is_some() {
        (ORDER, Format::MemoryManagerV2)
    } else {
        (ORDER, Format::MemoryManager)
    }
}

fn candidates_for_file(name: &str, bytes: &[u8]) -> Result<Option<Candidates>> {
    Ok(match name {
        DEVICE_MANAGER_FILE => Some((
            &[Format::DeviceManagerV2, Format::DeviceManagerV1],
            Format::DeviceManagerV2,
        )),
        CPU_MANAGER_FILE => Some(cpu_candidates(&object_keys(bytes)?)),
        MEMORY_MANAGER_FILE => Some(memory_candidates(&object_keys(bytes)?)),
        DRA_MANAGER_FILE => Some((&[Format::DraV132, Format::DraV130], Format::DraV132)),
        DRA_HEALTH_FILE => Some((&[Format::DraHealth], Format::DraHealth)),
        _ => None,
    })
}

fn candidates_from_content(bytes: &[u8]) -> Result<Candidates> {
    let keys = object_keys(bytes)?;
    let has = |name: &str| kind_of(&keys, name);
    if has("machineState").is_some() {
        return Ok(memory_candidates(&keys));
    }
    if has("policyName").is_some() || has("defaultCpuSet").is_some() {
        return Ok(cpu_candidates(&keys));
    }
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
/// formats, tried in the kubelet's order (`cpu_manager_state`: v4 alone when the file has
/// `data`, else v3, v2, v1; `memory_manager_state`: v3 alone when the file has `data`, else
/// v2, v1 — as a v1.37 kubelet, or a v1.36 one with `PodLevelResourceManagers`, restores
/// them; `kubelet_internal_checkpoint`: current then pre-1.20;
/// `dra_manager_state`: v1.32 then v1.30). Without one, the top-level keys decide (bytes
/// that do not parse report why, as [`CheckpointError::Syntax`] or
/// [`CheckpointError::TooDeep`]). When no
/// candidate verifies, the current format's error is returned, unless only an older
/// format got as far as a checksum mismatch.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{CheckpointValue, ChecksumVerification, Format, inspect};
///
/// // Conformance vector `cpumanager_v1_legacy/static_two_containers`: a pre-1.20 file, which
/// // the v2 reader cannot take and the v1 reader verifies.
/// let old = br#"{"policyName":"static","defaultCpuSet":"0-1,6-7","entries":{"containerID1":"2-3","containerID2":"4-5"},"checksum":736149614}"#;
/// let found = inspect(old, Some("/var/lib/kubelet/cpu_manager_state"))?;
/// assert_eq!(found.format, Format::CpuManagerV1);
/// assert_eq!(found.verification, ChecksumVerification::Verified);
/// assert_eq!(found.checksum_summary(), "checksum 736149614 (verified)");
/// let CheckpointValue::CpuManagerV1(state) = found.value else { panic!("{:?}", found.value) };
/// assert_eq!(state.entries.unwrap()["containerID2"], "4-5");
///
/// // Without a file name the keys decide; a health file has no checksum to verify.
/// let health = br#"{"gpu.example.com":{"Devices":{}}}"#;
/// let found = inspect(health, Some("dra_health_state"))?;
/// assert_eq!(found.format, Format::DraHealth);
/// assert!(!found.verification.is_verified());
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
pub fn inspect(bytes: &[u8], file_name: Option<&str>) -> Result<Inspected> {
    let by_name = match file_name.and_then(|name| Path::new(name).file_name()?.to_str()) {
        Some(name) => candidates_for_file(name, bytes).map_err(|err| with_name(err, file_name))?,
        None => None,
    };
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
    Err(with_name(errors.swap_remove(index).1, file_name))
}

fn with_name(err: CheckpointError, file_name: Option<&str>) -> CheckpointError {
    match file_name {
        Some(name) => err.with_path(Path::new(name)),
        None => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::Checkpoint;
    use crate::formats::memorymanager::MemoryManagerCheckpoint;

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
