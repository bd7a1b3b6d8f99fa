//! Suite `checkpoint`: kubelet checkpoint files against `corral_checkpoint`.
//!
//! Per vector: writing the logical `input` in `format` gives exactly `file`, with the same
//! checksum and the same hashed string; reading `file` back gives the input value; and every
//! reader named in `verdicts` accepts or refuses as upstream did (refusals classified as
//! decode vs. checksum errors, with both checksums where upstream reports them). Negatives
//! (mutated files) get the same reader checks.

use corral_checkpoint::{
    Checkpoint, CheckpointError, CpuManagerCheckpoint, CpuManagerCheckpointV1,
    CpuManagerCheckpointV3, CpuManagerCheckpointV4, DeviceManagerCheckpoint,
    DeviceManagerCheckpointV1, DraHealthState, DraManagerCheckpoint, DraManagerCheckpointFile,
    DraManagerCheckpointV130, MemoryManagerCheckpoint, MemoryManagerCheckpointV2,
    MemoryManagerCheckpointV3, RestoreOrder, crc32_ieee, fnv32a, restore_cpu_manager_state,
    restore_cpu_manager_state_as, restore_memory_manager_state,
};
use serde_json::Value;

use super::array;
use crate::mismatch::{Mismatch, bad_case, differs};
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

fn text<'a>(case: &'a Value, key: &str) -> Result<&'a str, Mismatch> {
    case[key]
        .as_str()
        .ok_or_else(|| bad_case!("vector has no string `{key}`"))
}

fn err(e: CheckpointError) -> Mismatch {
    bad_case!("{e}")
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

/// Whether reading `file` back gives `input` (the same value).
fn same<T: PartialEq>(decoded: Result<T, CheckpointError>, input: &T) -> Option<bool> {
    decoded.ok().map(|d| &d == input)
}

/// Writes `input` as the format type `$ty` (its `from_go_json`, `encode`, `checksum`,
/// `hash_input` and `decode`).
macro_rules! written {
    ($ty:ty, $input:expr) => {{
        let v = <$ty>::from_go_json($input).map_err(err)?;
        let file = v.encode().map_err(err)?;
        Written {
            checksum: u64::from(v.checksum().map_err(err)?),
            hash_input: v.hash_input().map_err(err)?,
            // The same value, or one that hashes the same: Go's reader turns an omitted nil
            // map into its constructor's empty one, which a `data` checksum does not see.
            read_back_matches: <$ty>::decode(&file)
                .ok()
                .map(|back| back == v || back.hash_input().ok() == v.hash_input().ok()),
            file,
        }
    }};
}

fn write(format: &str, input: &[u8]) -> Result<Written, Mismatch> {
    Ok(match format {
        "devicemanager_v2" => written!(DeviceManagerCheckpoint, input),
        "devicemanager_v1" => written!(DeviceManagerCheckpointV1, input),
        "cpumanager_v2" => written!(CpuManagerCheckpoint, input),
        "cpumanager_v3" => written!(CpuManagerCheckpointV3, input),
        "cpumanager_v4" => written!(CpuManagerCheckpointV4, input),
        "cpumanager_v1_legacy" => written!(CpuManagerCheckpointV1, input),
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
        "memorymanager" => written!(MemoryManagerCheckpoint, input),
        "memorymanager_v2" => written!(MemoryManagerCheckpointV2, input),
        "memorymanager_v3" => written!(MemoryManagerCheckpointV3, input),
        "dra_v130" => written!(DraManagerCheckpointV130, input),
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
            // v1.32's `state.Device` has no `ShareID`: its own writer.
            let v = DraManagerCheckpoint::from_go_json(input).map_err(err)?;
            let hash_input = v.hash_input_v132().map_err(err)?;
            let file = v.encode_v132().map_err(err)?;
            Written {
                checksum: crc32_ieee(hash_input.as_bytes()).into(),
                read_back_matches: same(DraManagerCheckpoint::decode(&file), &v),
                hash_input,
                file,
            }
        }
        "dra_v136" => written!(DraManagerCheckpoint, input),
        other => return Err(bad_case!("unknown checkpoint format {other:?}")),
    })
}

/// The reader upstream's verdict for the format's own file is about.
fn own_reader(format: &str) -> &'static str {
    match format {
        "devicemanager_v2" | "cpumanager_v2" => "as_v2",
        "devicemanager_v1" | "cpumanager_v1_legacy" | "cpumanager_v1_marshal" => "as_v1",
        "cpumanager_v3" => "as_v3",
        "cpumanager_v4" => "as_v4",
        "memorymanager" => "as_memory_manager",
        "memorymanager_v2" => "as_memory_manager_v2",
        "memorymanager_v3" => "as_memory_manager_v3",
        "dra_v132" => "as_dra_v132",
        "dra_v136" => "as_dra_v136",
        _ => "as_dra_v130",
    }
}

/// `dra_health_state` has no checksum and no hashed string: writing the input gives the
/// file, and reading the file gives the input.
fn check_dra_health_write(vector: &Value) -> Result<(), Mismatch> {
    let input = serde_json::to_vec(&vector["input"]).map_err(|e| bad_case!("{e}"))?;
    let value = DraHealthState::decode(&input).map_err(err)?;
    let file = value.encode().map_err(err)?;
    let want = text(vector, "file")?;
    if file != want.as_bytes() {
        return Err(differs!(
            "file: expected {want}, got {}",
            String::from_utf8_lossy(&file)
        ));
    }
    match DraHealthState::decode(want.as_bytes()) {
        Ok(back) if back == value => Ok(()),
        Ok(back) => Err(differs!("read back: {back:?} differs from {value:?}")),
        Err(e) => Err(differs!("read back refused: {e}")),
    }
}

/// What Go writes back for a file it accepted (`remarshaled`, or `remarshal_error` when
/// its `Marshal` fails): corral's encoding of what it decoded must be the same.
fn check_dra_health_remarshal(bytes: &[u8], verdict: &Value) -> Result<(), Mismatch> {
    let Ok(value) = DraHealthState::decode(bytes) else {
        return Ok(()); // check_reader reports the refusal
    };
    let written = value.encode();
    match (verdict["remarshaled"].as_str(), &written) {
        // A deliberate difference: Go leaves the map nil for `null` (and the kubelet's
        // first health update then panics on it); corral reads an empty map.
        (Some("null"), Ok(file)) if file == b"{}" => Ok(()),
        (Some(want), Ok(file)) if file == want.as_bytes() => Ok(()),
        (Some(want), Ok(file)) => Err(differs!(
            "remarshaled: expected {want}, got {}",
            String::from_utf8_lossy(file)
        )),
        (Some(want), Err(e)) => Err(differs!("remarshaled: expected {want}, got error {e}")),
        (None, Err(_)) if !verdict["remarshal_error"].is_null() => Ok(()),
        (None, _) => Err(differs!(
            "expected Go's Marshal to fail ({}), corral wrote the file",
            verdict["remarshal_error"]
        )),
    }
}

fn check_write(vector: &Value) -> Result<(), Mismatch> {
    let format = text(vector, "format")?;
    if format == "dra_health" {
        return check_dra_health_write(vector);
    }
    let input = serde_json::to_vec(&vector["input"]).map_err(|e| bad_case!("{e}"))?;
    let written = write(format, &input)?;
    let want_file = text(vector, "file")?;
    if written.file != want_file.as_bytes() {
        return Err(differs!(
            "file: expected {want_file}, got {}",
            String::from_utf8_lossy(&written.file)
        ));
    }
    let want_hash = text(vector, "hash_input")?;
    if written.hash_input != want_hash {
        return Err(differs!(
            "hash_input: expected {want_hash}, got {}",
            written.hash_input
        ));
    }
    let want_checksum = vector["checksum"]
        .as_u64()
        .ok_or("vector has no checksum")?;
    if written.checksum != want_checksum {
        return Err(differs!(
            "checksum: expected {want_checksum}, got {}",
            written.checksum
        ));
    }
    let own_accepts = vector["verdicts"][own_reader(format)]["accepted"].as_bool();
    match (own_accepts, written.read_back_matches) {
        (Some(true), Some(true)) | (Some(false), None) | (None, _) => Ok(()),
        (Some(true), Some(false)) => {
            Err(differs!("read back: decoded value differs from the input"))
        }
        (Some(true), None) => Err(differs!("read back: own reader refused the written file")),
        (Some(false), Some(_)) => Err(differs!(
            "read back: own reader accepted a file upstream refuses"
        )),
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
            if reader == "as_dra_v132" || reader == "as_dra_v136" {
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

fn read(reader: &str, family: &str, bytes: &[u8]) -> Result<Result<(), CheckpointError>, Mismatch> {
    Ok(match (reader, family) {
        ("as_v1", "devicemanager") => DeviceManagerCheckpointV1::decode(bytes).map(drop),
        ("as_v2", "devicemanager") => DeviceManagerCheckpoint::decode(bytes).map(drop),
        ("as_v1", "cpumanager") => CpuManagerCheckpointV1::decode(bytes).map(drop),
        ("as_v2", "cpumanager") => CpuManagerCheckpoint::decode(bytes).map(drop),
        ("as_v3", "cpumanager") => CpuManagerCheckpointV3::decode(bytes).map(drop),
        ("as_v4", "cpumanager") => CpuManagerCheckpointV4::decode(bytes).map(drop),
        ("as_memory_manager", _) => MemoryManagerCheckpoint::decode(bytes).map(drop),
        ("as_memory_manager_v1", _) => MemoryManagerCheckpoint::decode_v136(bytes).map(drop),
        ("as_memory_manager_v2", _) => MemoryManagerCheckpointV2::decode(bytes).map(drop),
        ("as_memory_manager_v3", _) => MemoryManagerCheckpointV3::decode(bytes).map(drop),
        ("as_dra_v130", _) => DraManagerCheckpointV130::decode(bytes).map(drop),
        ("as_dra_health", _) => DraHealthState::decode(bytes).map(drop),
        // v1.36 reads the file with v1.32's code; only `Data`'s device gained `ShareID`.
        ("as_dra_v132" | "as_dra_v136", _) => DraManagerCheckpointFile::decode(bytes).map(drop),
        _ => return Err(bad_case!("unknown reader {reader} for {family}")),
    })
}

fn check_reader(reader: &str, family: &str, bytes: &[u8], verdict: &Value) -> Result<(), Mismatch> {
    let want_accepted = verdict["accepted"]
        .as_bool()
        .ok_or("verdict has no `accepted`")?;
    match (want_accepted, read(reader, family, bytes)?) {
        (true, Ok(())) => Ok(()),
        (true, Err(e)) => Err(differs!("expected accepted, got refused: {e}")),
        (false, Ok(())) => Err(differs!("expected refused ({verdict}), got accepted")),
        (false, Err(e)) => {
            let got = refusal(reader, &e);
            let want_unmarshal = !verdict["unmarshal_error"].is_null();
            if want_unmarshal != got.at_unmarshal {
                return Err(differs!(
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
                        return Err(differs!(
                            "expected corrupt checksums actual={actual} expected={expected}, got {other:?}: {e}"
                        ));
                    }
                }
            }
            Ok(())
        }
    }
}

/// `restore_state_accepts_as` (k8s 1.32), `restore_v136`, `restore_v136_pod_level` and
/// `restore_v137`: the version a kubelet's `restoreState` ends up reading the file as.
fn check_restore(family: &str, reader: &str, bytes: &[u8], want: &str) -> Result<(), Mismatch> {
    let order = match reader {
        "restore_state_accepts_as" => RestoreOrder::V132,
        "restore_v136" => RestoreOrder::V136,
        "restore_v136_pod_level" => RestoreOrder::V136PodLevel,
        _ => RestoreOrder::V137,
    };
    let got = if family == "cpumanager" {
        let restored = if order == RestoreOrder::V132 {
            restore_cpu_manager_state(bytes)
        } else {
            restore_cpu_manager_state_as(bytes, order)
        };
        restored.map(|state| state.version())
    } else {
        restore_memory_manager_state(bytes, order).map(|state| state.version())
    };
    let got = got.unwrap_or("error");
    if got == want {
        Ok(())
    } else {
        Err(differs!("{reader}: expected {want}, got {got}"))
    }
}

fn check_claim_list(bytes: &[u8], verdicts: &Value) -> Result<(), Mismatch> {
    let file =
        DraManagerCheckpointFile::decode(bytes).map_err(|e| bad_case!("file refused: {e}"))?;
    let decoded = file.claim_info_state_list();
    match (&verdicts["get_claim_info_state_list_error"], decoded) {
        (Value::Null, Ok(list)) => {
            let Some(want) = verdicts.get("decoded_claim_info_state_list") else {
                return Ok(());
            };
            let want_json = serde_json::json!({ "ClaimInfoStateList": want });
            let want_bytes = serde_json::to_vec(&want_json).map_err(|e| bad_case!("{e}"))?;
            let want = DraManagerCheckpoint::from_go_json(&want_bytes).map_err(err)?;
            if want == list {
                Ok(())
            } else {
                Err(differs!(
                    "decoded claim list: expected {want:?}, got {list:?}"
                ))
            }
        }
        (Value::Null, Err(e)) => Err(differs!("expected the claim list to decode, got {e}")),
        (want, Ok(_)) => Err(differs!(
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
    } else if format.starts_with("memorymanager") {
        "memorymanager"
    } else {
        format
    };
    let Some(file) = case["file"].as_str() else {
        out.check(name, Err(bad_case!("case has no `file`")));
        return;
    };
    let bytes = file.as_bytes();
    let Some(verdicts) = case["verdicts"].as_object() else {
        out.check(name, Err(bad_case!("case has no `verdicts`")));
        return;
    };
    for (reader, verdict) in verdicts {
        let result = match reader.as_str() {
            "restore_state_accepts_as"
            | "restore_v136"
            | "restore_v136_pod_level"
            | "restore_v137" => {
                check_restore(family, reader, bytes, verdict.as_str().unwrap_or_default())
            }
            "decoded_claim_info_state_list" => continue,
            "get_claim_info_state_list_error" => {
                let accepted = |reader: &str| {
                    verdicts.get(reader).and_then(|v| v["accepted"].as_bool()) == Some(true)
                };
                if accepted("as_dra_v132") || accepted("as_dra_v136") {
                    check_claim_list(bytes, &case["verdicts"])
                } else {
                    continue;
                }
            }
            "as_dra_health" => check_reader(reader, family, bytes, verdict)
                .and_then(|()| check_dra_health_remarshal(bytes, verdict)),
            _ => check_reader(reader, family, bytes, verdict),
        };
        out.check(format!("{name} [{reader}]"), result);
    }
}
