//! `decode` and `inspect` agree on every committed checkpoint file: a file `inspect` calls
//! verified as a format decodes as that format to the same value, a file a format's
//! `decode` refuses is never reported verified as that format, and another version's
//! `decode` refusing a verified file by checksum names the version it verifies as.

use std::path::{Path, PathBuf};

use corral_checkpoint::{
    Checkpoint, CheckpointError, CheckpointValue, ChecksumVerification, CpuManagerCheckpoint,
    CpuManagerCheckpointV1, CpuManagerCheckpointV3, CpuManagerCheckpointV4,
    DeviceManagerCheckpoint, DeviceManagerCheckpointV1, DraHealthState, DraManagerCheckpoint,
    DraManagerCheckpointV130, Format, MemoryManagerCheckpoint, MemoryManagerCheckpointV2,
    MemoryManagerCheckpointV3, fnv32a, inspect,
};
use serde_json::Value;

/// Every format `inspect` can report.
const FORMATS: [Format; 12] = [
    Format::DeviceManagerV2,
    Format::DeviceManagerV1,
    Format::CpuManagerV2,
    Format::CpuManagerV1,
    Format::CpuManagerV3,
    Format::CpuManagerV4,
    Format::MemoryManager,
    Format::MemoryManagerV2,
    Format::MemoryManagerV3,
    Format::DraV132,
    Format::DraV130,
    Format::DraHealth,
];

/// `format`'s type's `Checkpoint::decode`, as the value `inspect` would hold.
fn decode_as(format: Format, bytes: &[u8]) -> Result<CheckpointValue, String> {
    fn go<T: Checkpoint>(
        bytes: &[u8],
        wrap: fn(T) -> CheckpointValue,
    ) -> Result<CheckpointValue, String> {
        T::decode(bytes).map(wrap).map_err(|e| e.to_string())
    }
    match format {
        Format::DeviceManagerV2 => go(bytes, CheckpointValue::DeviceManager),
        Format::DeviceManagerV1 => go(bytes, CheckpointValue::DeviceManagerV1),
        Format::CpuManagerV2 => go(bytes, CheckpointValue::CpuManager),
        Format::CpuManagerV1 => go(bytes, CheckpointValue::CpuManagerV1),
        Format::CpuManagerV3 => go(bytes, CheckpointValue::CpuManagerV3),
        Format::CpuManagerV4 => go(bytes, CheckpointValue::CpuManagerV4),
        Format::MemoryManager => go(bytes, CheckpointValue::MemoryManager),
        Format::MemoryManagerV2 => go(bytes, CheckpointValue::MemoryManagerV2),
        Format::MemoryManagerV3 => go(bytes, CheckpointValue::MemoryManagerV3),
        Format::DraV132 => go(bytes, CheckpointValue::DraManager),
        Format::DraV130 => go(bytes, CheckpointValue::DraManagerV130),
        Format::DraHealth => DraHealthState::decode(bytes)
            .map(CheckpointValue::DraHealth)
            .map_err(|e| e.to_string()),
        other => panic!("no decoder for {other}"),
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every string under a `file` or `start_file` key, anywhere in `value`.
fn files_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("file" | "start_file", Value::String(s)) => out.push(s.clone()),
                    _ => files_in(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| files_in(v, out)),
        _ => {}
    }
}

/// `(where, bytes)` of every committed checkpoint file: the conformance vectors and their
/// negatives, the upstream tables, and the shared conformance copies when present.
fn committed_files() -> Vec<(String, Vec<u8>)> {
    let root = workspace_root();
    let mut dirs = vec![
        (root.join("testdata/conformance"), "checkpoint_"),
        (root.join("testdata/upstream"), ""),
        (root.join("../shared/conformance"), "checkpoint_"),
    ];
    dirs.retain(|(dir, _)| dir.is_dir());
    let mut out = Vec::new();
    for (dir, prefix) in dirs {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_str().unwrap();
                name.starts_with(prefix) && name.ends_with(".json")
            })
            .collect();
        paths.sort();
        for path in paths {
            let doc: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let mut files = Vec::new();
            files_in(&doc, &mut files);
            for (i, file) in files.into_iter().enumerate() {
                out.push((format!("{}#{i}", path.display()), file.into_bytes()));
            }
        }
    }
    out
}

/// What disagrees between `decode` and `inspect` on `bytes` (read under `name`).
fn disagreements(place: &str, bytes: &[u8], name: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(found) = inspect(bytes, name) else {
        // Refused: nothing reported to compare with. (One version's `decode` may still read
        // it where the kubelet's order never tries that version: v2 on a v4 file whose
        // `data` is damaged.)
        return out;
    };
    let verified = found.verification.is_verified();
    match decode_as(found.format, bytes) {
        Ok(value) if value == found.value => {}
        Ok(_) => out.push(format!(
            "{place} ({name:?}): inspect read {} but decode gives another value",
            found.format
        )),
        Err(e) if verified => out.push(format!(
            "{place} ({name:?}): inspect verified {} but decode refuses: {e}",
            found.format
        )),
        // Decode may refuse what inspect reports as not verified (a memory v1 file with
        // checksum 0: v1.32's reader, which `decode` is, has no zero bypass).
        Err(_) => {}
    }
    if !verified {
        return out;
    }
    // Every other version of the file refusing it by checksum names a version it verifies
    // as, never calling the file corrupted.
    for other in FORMATS {
        if other == found.format || other.file_name() != found.format.file_name() {
            continue;
        }
        let Err(err) = decode_as_error(other, bytes) else {
            continue;
        };
        if let CheckpointError::ChecksumMismatch { verifies_as, .. } = &err {
            match verifies_as {
                Some(v) if decode_as(*v, bytes).is_ok() => {}
                _ => out.push(format!(
                    "{place} ({name:?}): verified as {} but {other}'s decode says: {err}",
                    found.format
                )),
            }
        }
    }
    out
}

/// [`decode_as`] keeping the typed error.
fn decode_as_error(format: Format, bytes: &[u8]) -> Result<(), CheckpointError> {
    fn go<T: Checkpoint>(bytes: &[u8]) -> Result<(), CheckpointError> {
        T::decode(bytes).map(drop)
    }
    match format {
        Format::DeviceManagerV2 => go::<DeviceManagerCheckpoint>(bytes),
        Format::DeviceManagerV1 => go::<DeviceManagerCheckpointV1>(bytes),
        Format::CpuManagerV2 => go::<CpuManagerCheckpoint>(bytes),
        Format::CpuManagerV1 => go::<CpuManagerCheckpointV1>(bytes),
        Format::CpuManagerV3 => go::<CpuManagerCheckpointV3>(bytes),
        Format::CpuManagerV4 => go::<CpuManagerCheckpointV4>(bytes),
        Format::MemoryManager => go::<MemoryManagerCheckpoint>(bytes),
        Format::MemoryManagerV2 => go::<MemoryManagerCheckpointV2>(bytes),
        Format::MemoryManagerV3 => go::<MemoryManagerCheckpointV3>(bytes),
        Format::DraV132 => go::<DraManagerCheckpoint>(bytes),
        Format::DraV130 => go::<DraManagerCheckpointV130>(bytes),
        Format::DraHealth => DraHealthState::decode(bytes).map(drop),
        other => panic!("no decoder for {other}"),
    }
}

/// Every committed checkpoint file (conformance vectors and negatives, upstream tables),
/// under no name and under every kubelet file name.
#[test]
fn decode_and_inspect_agree_on_every_committed_file() {
    let files = committed_files();
    assert!(files.len() > 300, "only {} files found", files.len());
    let mut failures = Vec::new();
    for (place, bytes) in &files {
        let names = [None]
            .into_iter()
            .chain(FORMATS.iter().map(|f| Some(f.file_name())));
        for name in names {
            failures.extend(disagreements(place, bytes, name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The issue's file: a legacy v1 `cpu_manager_state` (vector `cpumanager_v1_legacy/empty`).
/// `inspect` verifies it as v1, `CpuManagerCheckpointV1::decode` reads it, and the v2
/// reader's refusal (upstream's too: `CorruptCheckpointError`, "is corrupted") says the
/// file is corrupted for v2 only and verifies as v1, as `inspect` reports it.
#[test]
fn a_legacy_v1_cpu_file_is_v1_for_both() {
    let file = br#"{"policyName":"none","defaultCpuSet":"","checksum":3242152201}"#;
    let found = inspect(file, Some("cpu_manager_state")).unwrap();
    assert_eq!(found.format, Format::CpuManagerV1);
    assert!(found.verification.is_verified());
    assert_eq!(
        CheckpointValue::CpuManagerV1(CpuManagerCheckpointV1::decode(file).unwrap()),
        found.value
    );
    let err = CpuManagerCheckpoint::decode(file).unwrap_err();
    match &err {
        CheckpointError::ChecksumMismatch {
            expected: 3_242_152_201,
            actual: 1_353_318_690,
            verifies_as: Some(Format::CpuManagerV1),
            ..
        } => {}
        other => panic!("expected a mismatch naming v1, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("corrupted for this version only"), "{text}");
    assert!(
        text.contains("the file verifies as cpumanager_v1"),
        "{text}"
    );
    // A damaged v1 file is still corrupted for both.
    let damaged = br#"{"policyName":"none","defaultCpuSet":"","checksum":3242152202}"#;
    assert!(inspect(damaged, Some("cpu_manager_state")).is_err());
    let err = CpuManagerCheckpoint::decode(damaged).unwrap_err();
    assert!(err.to_string().contains("is corrupted"), "{err}");
}

/// `memory_manager_state` v1 whose checksum hashes the dump under the type name
/// `MemoryManagerCheckpointV1` (v1.36 builds before PR #137751): `inspect` called it
/// verified while `MemoryManagerCheckpoint::decode` refused it. Both now accept it; a
/// recorded 0 is accepted unchecked by `inspect` (not verified) and refused by `decode`
/// (v1.32's reader).
#[test]
fn memory_v1_files_are_read_alike() {
    let cp = MemoryManagerCheckpoint {
        policy_name: "None".into(),
        machine_state: Some(Default::default()),
        entries: Some(Default::default()),
    };
    let file = String::from_utf8(cp.encode().unwrap()).unwrap();
    let current = cp.checksum().unwrap().to_string();
    let hash_input = cp.hash_input().unwrap().replacen(
        "MemoryManagerCheckpoint",
        "MemoryManagerCheckpointV1",
        1,
    );
    let v1_named = u64::from(fnv32a(hash_input.as_bytes())).to_string();
    let renamed = file.replace(&current, &v1_named);
    let found = inspect(renamed.as_bytes(), Some("memory_manager_state")).unwrap();
    assert_eq!(found.format, Format::MemoryManager);
    assert!(found.verification.is_verified());
    assert_eq!(found.recorded_checksum.to_string(), v1_named);
    assert_eq!(
        MemoryManagerCheckpoint::decode(renamed.as_bytes()).unwrap(),
        cp
    );

    let zero = file.replace(&current, "0");
    let found = inspect(zero.as_bytes(), Some("memory_manager_state")).unwrap();
    assert_eq!(found.verification, ChecksumVerification::NotRecorded);
    assert_eq!(found.recorded_checksum, 0);
    assert_eq!(found.checksum.to_string(), current);
    assert!(
        MemoryManagerCheckpoint::decode(zero.as_bytes())
            .unwrap_err()
            .is_checksum_mismatch()
    );
    assert!(disagreements("zero", zero.as_bytes(), Some("memory_manager_state")).is_empty());
    assert!(disagreements("renamed", renamed.as_bytes(), None).is_empty());
}
