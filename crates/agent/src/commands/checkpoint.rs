//! `corral checkpoint inspect|verify FILE`: detect a kubelet (or corral) checkpoint file's
//! format, verify its checksum as the kubelet would, and show what it holds.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use corral_checkpoint::{
    CheckpointValue, ChecksumVerification, Inspected, inspect as inspect_bytes,
};

use crate::cli::OutputFormat;
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

/// The decoded value as JSON, in the file's own field names.
fn contents(value: &CheckpointValue) -> Result<serde_json::Value> {
    Ok(match value {
        CheckpointValue::DeviceManager(v) => serde_json::to_value(v)?,
        CheckpointValue::DeviceManagerV1(v) => serde_json::to_value(v)?,
        CheckpointValue::CpuManager(v) => serde_json::to_value(v)?,
        CheckpointValue::CpuManagerV1(v) => serde_json::to_value(v)?,
        CheckpointValue::MemoryManager(v) => serde_json::to_value(v)?,
        CheckpointValue::Dra(v) => serde_json::to_value(v)?,
        CheckpointValue::DraV130(v) => serde_json::to_value(v)?,
        other => anyhow::bail!("a checkpoint format this corral cannot display: {other:?}"),
    })
}

pub(crate) fn inspect(file: &Path, output: OutputFormat) -> Result<ExitCode> {
    let found = read(file)?;
    let value = contents(&found.value)?;
    match output {
        OutputFormat::Json => {
            let doc = serde_json::json!({
                "file": file.display().to_string(),
                "format": found.format.as_str(),
                "checksum": found.recorded_checksum,
                "computedChecksum": found.checksum,
                "verified": !matches!(found.verification, ChecksumVerification::NotRecorded),
                "contents": value,
            });
            outln!("{}", serde_json::to_string_pretty(&doc)?);
        }
        OutputFormat::Table => {
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
            eprintln!("corral: {err:#}");
            Ok(ExitCode::FAILURE)
        }
    }
}
