//! `corral checkpoint inspect|verify FILE`: detect a kubelet (or corral) checkpoint file's
//! format, verify its checksum as the kubelet would, and show what it holds.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use corral_checkpoint::{CheckpointValue, Inspected, inspect as inspect_bytes};

use crate::cli::DocumentFormat;
use crate::commands::print_document;
use crate::output::outln;

/// Read and verify; `Err` carries the typed checkpoint error with the path.
fn read(file: &Path) -> Result<Inspected> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let name = file.file_name().and_then(|n| n.to_str());
    inspect_bytes(&bytes, name)
        .map_err(|err| err.with_path(file))
        .with_context(|| {
            format!(
                "{} is not a checkpoint a kubelet would accept",
                file.display()
            )
        })
}

/// The decoded value as JSON, in the file's own field names and encodings.
fn contents(value: &CheckpointValue) -> Result<serde_json::Value> {
    Ok(match value {
        CheckpointValue::DeviceManager(v) => alloc_resp_as_stored(serde_json::to_value(v)?),
        CheckpointValue::DeviceManagerV1(v) => alloc_resp_as_stored(serde_json::to_value(v)?),
        CheckpointValue::CpuManager(v) => serde_json::to_value(v)?,
        CheckpointValue::CpuManagerV1(v) => serde_json::to_value(v)?,
        CheckpointValue::CpuManagerV3(v) => serde_json::to_value(v)?,
        // v4 and memory v3 carry their content as `data`: shown decoded.
        CheckpointValue::CpuManagerV4(v) => serde_json::to_value(&v.0)?,
        CheckpointValue::MemoryManager(v) => serde_json::to_value(v)?,
        CheckpointValue::MemoryManagerV2(v) => serde_json::to_value(v)?,
        CheckpointValue::MemoryManagerV3(v) => serde_json::to_value(&v.0)?,
        CheckpointValue::DraManager(v) => serde_json::to_value(v)?,
        CheckpointValue::DraManagerV130(v) => serde_json::to_value(v)?,
        CheckpointValue::DraHealth(v) => serde_json::to_value(v)?,
        other => anyhow::bail!("a checkpoint format this corral cannot display: {other:?}"),
    })
}

/// `PodDeviceEntries[].AllocResp` as `kubelet_internal_checkpoint` stores it: Go's
/// `encoding/json` writes `[]byte` as standard padded base64 (the decoded value holds the
/// bytes, which serde would show as an array of numbers).
fn alloc_resp_as_stored(mut value: serde_json::Value) -> serde_json::Value {
    use base64::Engine as _;
    let entries = value
        .get_mut("PodDeviceEntries")
        .and_then(serde_json::Value::as_array_mut);
    for entry in entries.into_iter().flatten() {
        let Some(field) = entry.get_mut("AllocResp") else {
            continue;
        };
        if let Some(bytes) = field.as_array() {
            let bytes: Option<Vec<u8>> = bytes
                .iter()
                .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect();
            if let Some(bytes) = bytes {
                *field = base64::engine::general_purpose::STANDARD
                    .encode(bytes)
                    .into();
            }
        }
    }
    value
}

pub(crate) fn inspect(file: &Path, output: DocumentFormat) -> Result<ExitCode> {
    let found = read(file)?;
    let value = contents(&found.value)?;
    match output {
        DocumentFormat::Json | DocumentFormat::Yaml => {
            let doc = serde_json::json!({
                "file": file.display().to_string(),
                "format": found.format.as_str(),
                "checksum": found.recorded_checksum,
                "computedChecksum": found.checksum,
                "verified": found.verification.is_verified(),
                "contents": value,
            });
            print_document(&doc, output == DocumentFormat::Yaml)?;
        }
        DocumentFormat::Table => {
            outln!("file:     {}", file.display());
            outln!(
                "format:   {} (kubelet file name {})",
                found.format.as_str(),
                found.format.file_name()
            );
            outln!("checksum: {}", found.checksum_summary());
            outln!("contents:\n{}", serde_json::to_string_pretty(&value)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn verify(file: &Path) -> Result<ExitCode> {
    match read(file) {
        Ok(found) => {
            outln!(
                "{}: OK ({}, {})",
                file.display(),
                found.format.as_str(),
                found.checksum_summary()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("corral: {}", crate::error_text::anyhow_chain(&err));
            Ok(ExitCode::FAILURE)
        }
    }
}
