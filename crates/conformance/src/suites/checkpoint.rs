//! Suite `checkpoint`: kubelet checkpoint files against `corral_checkpoint`.
//!
//! Per vector: writing the logical `input` in `format` gives exactly `file`, with the same
//! checksum and the same hashed string; reading `file` back gives the input value; and every
//! reader named in `verdicts` accepts or refuses as upstream did (refusals classified as
//! decode vs. checksum errors, with both checksums where upstream reports them). Negatives
//! (mutated files) get the same reader checks.

use corral_checkpoint::{
    Checkpoint, CheckpointError, CpuManagerCheckpoint, CpuManagerCheckpointV1, CpuManagerState,
    DeviceManagerCheckpoint, DeviceManagerCheckpointV1, DraManagerCheckpoint,
    DraManagerCheckpointFile, DraManagerCheckpointV130, MemoryManagerCheckpoint, fnv32a,
    restore_cpu_manager_state,
};
use serde_json::Value;

use super::array;
use crate::report::SuiteOutcome;

/// Check every vector and negative of one `checkpoint_*.json` file.
pub(crate) fn run(doc: &Value, out: &mut SuiteOutcome) {
    for (i, vector) in array(doc, "vectors").iter().enumerate() {
        let name = label(vector, i);
        out.check(format!("{name} [write]"), check_write(vector));
        check_verdicts(vector, &name, out);
    }
    for (i, negative) in array(doc, "negatives").iter().enumerate() {
        let name = label(negative, i);
        check_verdicts(negative, &name, out);
    }
}

fn label(case: &Value, index: usize) -> String {
    case["name"]
        .as_str()
        .map_or_else(|| format!("#{index}"), str::to_owned)
}

fn text<'a>(case: &'a Value, key: &str) -> Result<&'a str, String> {
    case[key]
        .as_str()
        .ok_or_else(|| format!("vector has no string `{key}`"))
}

fn err(e: CheckpointError) -> String {
    e.to_string()
}

/// What writing the input produced.
struct Written {
    file: Vec<u8>,
    checksum: u64,
    hash_input: String,
    /// Reading `file` back with the format's own reader, compared with the input value:
    /// `None` when that reader refuses the file (upstream's verdict says whether it should).
    read_back_matches: Option<bool>,
}

fn same<T: PartialEq>(decoded: Result<T, CheckpointError>, input: &T) -> Option<bool> {
    decoded.ok().map(|d| &d == input)
}

fn write(format: &str, input: &[u8]) -> Result<Written, String> {
    Ok(match format {
        "devicemanager_v2" => {
            let v = DeviceManagerCheckpoint::from_go_json(input).map_err(err)?;
            let file = v.encode().map_err(err)?;
            Written {
                checksum: v.checksum().map_err(err)?,
                hash_input: v.hash_input().map_err(err)?,
                read_back_matches: same(DeviceManagerCheckpoint::decode(&file), &v),
                file,
            }
        }
        "devicemanager_v1" => {
            let v = DeviceManagerCheckpointV1::from_go_json(input).map_err(err)?;
            let file = v.encode().map_err(err)?;
            Written {
                checksum: v.checksum().map_err(err)?,
                hash_input: v.hash_input().map_err(err)?,
                read_back_matches: same(DeviceManagerCheckpointV1::decode(&file), &v),
                file,
            }
        }
        "cpumanager_v2" => {
            let v = CpuManagerCheckpoint::from_go_json(input).map_err(err)?;
            let file = v.encode().map_err(err)?;
            Written {
                checksum: v.checksum().map_err(err)?,
                hash_input: v.hash_input().map_err(err)?,
                read_back_matches: same(CpuManagerCheckpoint::decode(&file), &v),
                file,
            }
        }
        "cpumanager_v1_legacy" => {
            let v = CpuManagerCheckpointV1::from_go_json(input).map_err(err)?;
            let file = v.encode().map_err(err)?;
            Written {
                checksum: v.checksum().map_err(err)?,
                hash_input: v.hash_input().map_err(err)?,
                read_back_matches: same(CpuManagerCheckpointV1::decode(&file), &v),
                file,
            }
        }
        "cpumanager_v1_marshal" => {
            let v = CpuManagerCheckpointV1::from_go_json(input).map_err(err)?;
            let hash_input = v.v132_marshal_hash_input().map_err(err)?;
            let file = v.encode_as_v132_marshal().map_err(err)?;
            Written {
                checksum: fnv32a(hash_input.as_bytes()).into(),
                read_back_matches: same(CpuManagerCheckpointV1::decode(&file), &v),
                hash_input,
                file,
            }
        }
        "memorymanager" => {
            let v = MemoryManagerCheckpoint::from_go_json(input).map_err(err)?;
            let file = v.encode().map_err(err)?;
            Written {
                checksum: v.checksum().map_err(err)?,
                hash_input: v.hash_input().map_err(err)?,
                read_back_matches: same(MemoryManagerCheckpoint::decode(&file), &v),
                file,
            }
        }
        "dra_v130" => {
            let v = DraManagerCheckpointV130::from_go_json(input).map_err(err)?;
            let file = v.encode().map_err(err)?;
            Written {
                checksum: v.checksum().map_err(err)?,
                hash_input: v.hash_input().map_err(err)?,
                read_back_matches: same(DraManagerCheckpointV130::decode(&file), &v),
                file,
            }
        }
        "dra_v130_without_resource_handles" => {
            let v = DraManagerCheckpointV130::from_go_json(input).map_err(err)?;
            let hash_input = v.hash_input_without_resource_handles().map_err(err)?;
            let file = v.encode_without_resource_handles().map_err(err)?;
            Written {
                checksum: fnv32a(hash_input.as_bytes()).into(),
                read_back_matches: same(DraManagerCheckpointV130::decode(&file), &v),
                hash_input,
                file,
            }
        }
        "dra_v132" => {
            let v = DraManagerCheckpoint::from_go_json(input).map_err(err)?;
            let file = v.encode().map_err(err)?;
            Written {
                checksum: v.checksum().map_err(err)?.into(),
                hash_input: v.hash_input().map_err(err)?,
                read_back_matches: same(DraManagerCheckpoint::decode(&file), &v),
                file,
            }
        }
        other => return Err(format!("unknown checkpoint format {other:?}")),
    })
}

/// The reader upstream's verdict for the format's own file is about.
fn own_reader(format: &str) -> &'static str {
    match format {
        "devicemanager_v2" | "cpumanager_v2" => "as_v2",
        "devicemanager_v1" | "cpumanager_v1_legacy" | "cpumanager_v1_marshal" => "as_v1",
        "memorymanager" => "as_memory_manager",
        "dra_v132" => "as_dra_v132",
        _ => "as_dra_v130",
    }
}

fn check_write(vector: &Value) -> Result<(), String> {
    let format = text(vector, "format")?;
    let input = serde_json::to_vec(&vector["input"]).map_err(|e| e.to_string())?;
    let written = write(format, &input)?;
    let want_file = text(vector, "file")?;
    if written.file != want_file.as_bytes() {
        return Err(format!(
            "file: expected {want_file}, got {}",
            String::from_utf8_lossy(&written.file)
        ));
    }
    let want_hash = text(vector, "hash_input")?;
    if written.hash_input != want_hash {
        return Err(format!(
            "hash_input: expected {want_hash}, got {}",
            written.hash_input
        ));
    }
    let want_checksum = vector["checksum"]
        .as_u64()
        .ok_or("vector has no checksum")?;
    if written.checksum != want_checksum {
        return Err(format!(
            "checksum: expected {want_checksum}, got {}",
            written.checksum
        ));
    }
    let own_accepts = vector["verdicts"][own_reader(format)]["accepted"].as_bool();
    match (own_accepts, written.read_back_matches) {
        (Some(true), Some(true)) | (Some(false), None) | (None, _) => Ok(()),
        (Some(true), Some(false)) => {
            Err("read back: decoded value differs from the input".to_owned())
        }
        (Some(true), None) => Err("read back: own reader refused the written file".to_owned()),
        (Some(false), Some(_)) => {
            Err("read back: own reader accepted a file upstream refuses".to_owned())
        }
    }
}

/// How a reader refused a file, in upstream's terms.
struct Refusal {
    /// Upstream's `unmarshal_error` (true) vs `verify_error` (false).
    at_unmarshal: bool,
    /// Upstream's `CorruptCheckpointError{ActualCS, ExpectedCS}`, when there was one.
    corrupt: Option<(u64, u64)>,
}

fn refusal(reader: &str, e: &CheckpointError) -> Refusal {
    match e {
        CheckpointError::ChecksumMismatch {
            expected, actual, ..
        } => {
            if reader == "as_dra_v132" {
                // Verified inside UnmarshalCheckpoint; upstream names the stored CRC
                // "actual" and the computed one "expected".
                Refusal {
                    at_unmarshal: true,
                    corrupt: Some((*expected, *actual)),
                }
            } else {
                Refusal {
                    at_unmarshal: false,
                    corrupt: Some((*actual, *expected)),
                }
            }
        }
        _ => Refusal {
            at_unmarshal: true,
            corrupt: None,
        },
    }
}

fn read(reader: &str, family: &str, bytes: &[u8]) -> Result<Result<(), CheckpointError>, String> {
    Ok(match (reader, family) {
        ("as_v1", "devicemanager") => DeviceManagerCheckpointV1::decode(bytes).map(drop),
        ("as_v2", "devicemanager") => DeviceManagerCheckpoint::decode(bytes).map(drop),
        ("as_v1", "cpumanager") => CpuManagerCheckpointV1::decode(bytes).map(drop),
        ("as_v2", "cpumanager") => CpuManagerCheckpoint::decode(bytes).map(drop),
        ("as_memory_manager", _) => MemoryManagerCheckpoint::decode(bytes).map(drop),
        ("as_dra_v130", _) => DraManagerCheckpointV130::decode(bytes).map(drop),
        ("as_dra_v132", _) => DraManagerCheckpointFile::decode(bytes).map(drop),
        _ => return Err(format!("unknown reader {reader} for {family}")),
    })
}

fn check_reader(reader: &str, family: &str, bytes: &[u8], verdict: &Value) -> Result<(), String> {
    let want_accepted = verdict["accepted"]
        .as_bool()
        .ok_or("verdict has no `accepted`")?;
    match (want_accepted, read(reader, family, bytes)?) {
        (true, Ok(())) => Ok(()),
        (true, Err(e)) => Err(format!("expected accepted, got refused: {e}")),
        (false, Ok(())) => Err(format!("expected refused ({verdict}), got accepted")),
        (false, Err(e)) => {
            let got = refusal(reader, &e);
            let want_unmarshal = !verdict["unmarshal_error"].is_null();
            if want_unmarshal != got.at_unmarshal {
                return Err(format!(
                    "expected {} error ({verdict}), got: {e}",
                    if want_unmarshal {
                        "unmarshal"
                    } else {
                        "verify"
                    }
                ));
            }
            if let (Some(actual), Some(expected)) = (
                verdict["corrupt_actual_cs"].as_u64(),
                verdict["corrupt_expected_cs"].as_u64(),
            ) {
                match got.corrupt {
                    Some(pair) if pair == (actual, expected) => {}
                    other => {
                        return Err(format!(
                            "expected corrupt checksums actual={actual} expected={expected}, got {other:?}: {e}"
                        ));
                    }
                }
            }
            Ok(())
        }
    }
}

fn check_restore(bytes: &[u8], want: &str) -> Result<(), String> {
    let got = match restore_cpu_manager_state(bytes) {
        Ok(CpuManagerState::V1(_)) => "v1",
        Ok(CpuManagerState::V2(_)) => "v2",
        Err(_) => "error",
    };
    if got == want {
        Ok(())
    } else {
        Err(format!("restoreState: expected {want}, got {got}"))
    }
}

fn check_claim_list(bytes: &[u8], verdicts: &Value) -> Result<(), String> {
    let file = DraManagerCheckpointFile::decode(bytes).map_err(|e| format!("file refused: {e}"))?;
    let decoded = file.claim_info_state_list();
    match (&verdicts["get_claim_info_state_list_error"], decoded) {
        (Value::Null, Ok(list)) => {
            let Some(want) = verdicts.get("decoded_claim_info_state_list") else {
                return Ok(());
            };
            let want_json = serde_json::json!({ "ClaimInfoStateList": want });
            let want_bytes = serde_json::to_vec(&want_json).map_err(|e| e.to_string())?;
            let want = DraManagerCheckpoint::from_go_json(&want_bytes).map_err(err)?;
            if want == list {
                Ok(())
            } else {
                Err(format!(
                    "decoded claim list: expected {want:?}, got {list:?}"
                ))
            }
        }
        (Value::Null, Err(e)) => Err(format!("expected the claim list to decode, got {e}")),
        (want, Ok(_)) => Err(format!(
            "expected GetClaimInfoStateList error {want}, got a list"
        )),
        (_, Err(_)) => Ok(()),
    }
}

fn check_verdicts(case: &Value, name: &str, out: &mut SuiteOutcome) {
    let format = case["format"].as_str().unwrap_or_default();
    let family = if format.starts_with("devicemanager") {
        "devicemanager"
    } else if format.starts_with("cpumanager") {
        "cpumanager"
    } else {
        format
    };
    let Some(file) = case["file"].as_str() else {
        out.check(name, Err("case has no `file`".to_owned()));
        return;
    };
    let bytes = file.as_bytes();
    let Some(verdicts) = case["verdicts"].as_object() else {
        out.check(name, Err("case has no `verdicts`".to_owned()));
        return;
    };
    for (reader, verdict) in verdicts {
        let result = match reader.as_str() {
            "restore_state_accepts_as" => {
                check_restore(bytes, verdict.as_str().unwrap_or_default())
            }
            "decoded_claim_info_state_list" => continue,
            "get_claim_info_state_list_error" => {
                if verdicts
                    .get("as_dra_v132")
                    .and_then(|v| v["accepted"].as_bool())
                    == Some(true)
                {
                    check_claim_list(bytes, &case["verdicts"])
                } else {
                    continue;
                }
            }
            _ => check_reader(reader, family, bytes, verdict),
        };
        out.check(format!("{name} [{reader}]"), result);
    }
}
