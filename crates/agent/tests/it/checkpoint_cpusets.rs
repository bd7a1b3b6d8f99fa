//! `corral checkpoint inspect` on `cpu_manager_state` files whose cpusets hold the extreme
//! ids of a Go `int`: `9223372036854775807` (`MaxInt64`), negative ids, ranges ending at
//! `MaxInt64`, in every field that holds a cpuset in every version (v1 `defaultCpuSet` and
//! container entries; v2 and v3 `defaultCpuSet` and pod/container entries; v3 and v4 pod
//! entries, v4 inside `data`). Each file gets Go's answer or a typed error, never a panic
//! (a pod entry holding `MaxInt64` used to abort the binary with "attempt to add with
//! overflow"). Where Go never answers (a range ending at `MaxInt64`, which its `Parse`
//! loops on forever), corral reads the ids the range names.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use corral_checkpoint::gotype::STRING;
use corral_checkpoint::{
    Checkpoint, CpuManagerCheckpoint, CpuManagerCheckpointV1, CpuManagerCheckpointV3,
    CpuManagerCheckpointV4, PodCpuEntry, kubelet_checksum,
};

use crate::support::{corral, stderr, stdout};

const MAX: &str = "9223372036854775807";

/// `corral checkpoint inspect FILE -o json` on `text` written as `cpu_manager_state`.
fn inspect(dir: &Path, text: &str) -> Output {
    let file = dir.join("cpu_manager_state");
    std::fs::write(&file, text).unwrap();
    corral()
        .args([
            "checkpoint",
            "inspect",
            file.to_str().unwrap(),
            "-o",
            "json",
        ])
        .output()
        .expect("run corral")
}

/// The inspected document of a file the kubelet accepts and verifies.
fn verified(dir: &Path, text: &str) -> serde_json::Value {
    let output = inspect(dir, text);
    assert!(output.status.success(), "{text}: {}", stderr(&output));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(doc["verified"], true, "{text}: {doc}");
    doc
}

/// A file refused with a typed error (exit status 1 and a message naming the file and, when
/// given, `why`), not a panic (status 101).
fn refused(dir: &Path, text: &str, why: Option<&str>) {
    let output = inspect(dir, text);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}: {err}");
    assert!(!err.contains("panicked"), "{text}: {err}");
    assert!(err.contains("cpu_manager_state"), "{text}: {err}");
    if let Some(why) = why {
        assert!(err.contains(why), "{text}: expected {why:?} in {err}");
    }
}

fn v3(default: &str, container: &str, pod: &str) -> CpuManagerCheckpointV3 {
    CpuManagerCheckpointV3 {
        policy_name: "static".into(),
        default_cpu_set: default.into(),
        entries: Some(BTreeMap::from([(
            "pod".into(),
            Some(BTreeMap::from([("c".into(), container.into())])),
        )])),
        pod_entries: Some(BTreeMap::from([(
            "pod".into(),
            PodCpuEntry {
                cpu_set: pod.into(),
            },
        )])),
    }
}

/// v1 and v2 keep every cpuset as the string it is: the kubelet's `GetCheckpoint` reads
/// and verifies them whatever ids they name (its `restoreState` parses them later), and so
/// does `inspect`, showing them as written.
#[test]
fn v1_and_v2_cpusets_are_strings_inspect_shows_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let texts = [
        MAX.to_owned(),
        format!("0,{MAX}"),
        format!("9223372036854775806-{MAX}"),
        format!("0-{MAX}"),
        "-1".to_owned(),
        "-9223372036854775808".to_owned(),
        "1--1".to_owned(),
        "-5--1".to_owned(),
    ];
    for text in &texts {
        let v1 = CpuManagerCheckpointV1 {
            policy_name: "static".into(),
            default_cpu_set: text.clone(),
            entries: Some(BTreeMap::from([("container-id".into(), text.clone())])),
        };
        let file = String::from_utf8(v1.encode().unwrap()).unwrap();
        let doc = verified(dir.path(), &file);
        assert_eq!(doc["format"], "cpumanager_v1");
        assert_eq!(doc["contents"]["defaultCpuSet"], text.as_str());
        assert_eq!(doc["contents"]["entries"]["container-id"], text.as_str());

        let v2 = CpuManagerCheckpoint {
            policy_name: "static".into(),
            default_cpu_set: text.clone(),
            entries: Some(BTreeMap::from([(
                "pod".into(),
                Some(BTreeMap::from([("c".into(), text.clone())])),
            )])),
        };
        let file = String::from_utf8(v2.encode().unwrap()).unwrap();
        let doc = verified(dir.path(), &file);
        assert_eq!(doc["format"], "cpumanager_v2");
        assert_eq!(doc["contents"]["defaultCpuSet"], text.as_str());
        assert_eq!(doc["contents"]["entries"]["pod"]["c"], text.as_str());
    }
}

/// v3 and v4 pod entries are `cpuset.CPUSet`s: parsed on reading and printed back by Go's
/// `String`. `MaxInt64` is an id like any other there (Go's `end+1` wraps only past the
/// last id); the other fields stay strings.
#[test]
fn v3_and_v4_pod_entries_holding_max_int64_read_as_go_prints_them() {
    let dir = tempfile::tempdir().unwrap();
    for (pod, canonical) in [
        (MAX.to_owned(), MAX.to_owned()),
        (format!("{MAX},0"), format!("0,{MAX}")),
        (
            format!("{MAX},9223372036854775806"),
            format!("9223372036854775806-{MAX}"),
        ),
        (
            format!("9223372036854775804-9223372036854775805,{MAX},9223372036854775806"),
            format!("9223372036854775804-{MAX}"),
        ),
        // Ranges ending at MaxInt64, which Go's `String` writes and its `Parse` never
        // finishes reading (its loop variable wraps): read as the ids they name.
        (format!("{MAX}-{MAX}"), MAX.to_owned()),
        (
            format!("9223372036854775806-{MAX}"),
            format!("9223372036854775806-{MAX}"),
        ),
        (
            format!("0,9223372036854775800-+{MAX}"),
            format!("0,9223372036854775800-{MAX}"),
        ),
    ] {
        let value = v3(MAX, &format!("-1,{MAX}"), &pod);
        // The file as the kubelet writes it, with the pod's cpuset as given (not canonical):
        // the checksum covers the parsed set, whatever its spelling.
        let file = format!(
            r#"{{"policyName":"static","defaultCpuSet":"{MAX}","entries":{{"pod":{{"c":"-1,{MAX}"}}}},"podEntries":{{"pod":{{"cpuSet":"{pod}"}}}},"checksum":{}}}"#,
            value.checksum().unwrap()
        );
        let doc = verified(dir.path(), &file);
        assert_eq!(doc["format"], "cpumanager_v3");
        let contents = &doc["contents"];
        assert_eq!(contents["podEntries"]["pod"]["cpuSet"], canonical.as_str());
        assert_eq!(contents["defaultCpuSet"], MAX);
        assert_eq!(
            contents["entries"]["pod"]["c"],
            format!("-1,{MAX}").as_str()
        );

        let file = String::from_utf8(CpuManagerCheckpointV4(value).encode().unwrap()).unwrap();
        let doc = verified(dir.path(), &file);
        assert_eq!(doc["format"], "cpumanager_v4");
        assert_eq!(
            doc["contents"]["podEntries"]["pod"]["cpuSet"],
            canonical.as_str()
        );
    }
}

/// Pod entries Go cannot read: negative ids have no text (`-1` is the range `""-"1"`, whose
/// start is no number; a range starting at 1 cannot end at -1), ids beyond `MaxInt64` are
/// out of `strconv.Atoi`'s range, and `0-MaxInt64` is more than any machine's CPUs (Go runs
/// out of memory on it). Each is a typed error, in v3 and in v4's `data` (whose checksum is
/// right, so the cpuset is what is refused, and named).
#[test]
fn v3_and_v4_pod_entries_go_cannot_read_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (pod, why) in [
        ("-1".to_owned(), "invalid syntax"),
        ("-9223372036854775808".to_owned(), "invalid syntax"),
        ("1--1".to_owned(), "invalid range"),
        ("0--9223372036854775808".to_owned(), "invalid range"),
        ("9223372036854775808".to_owned(), "out of range"),
        (format!("0-{MAX}"), "larger than"),
    ] {
        // v3: the kubelet's v2 reader also tries the file and gets as far as a checksum
        // mismatch, which is the error reported (as `restoreState` reports it).
        let v3_file = format!(
            r#"{{"policyName":"static","defaultCpuSet":"0","podEntries":{{"pod":{{"cpuSet":"{pod}"}}}},"checksum":1}}"#
        );
        refused(dir.path(), &v3_file, None);
        let data = format!(
            r#"{{"policyName":"static","defaultCpuSet":"0","podEntries":{{"pod":{{"cpuSet":"{pod}"}}}}}}"#
        );
        let v4_file = serde_json::json!({
            "policyName": "static",
            "defaultCpuSet": "0",
            "checksum": 0,
            "data": data,
            "dataChecksum": kubelet_checksum(data.as_str(), &STRING).unwrap(),
        })
        .to_string();
        refused(dir.path(), &v4_file, Some(why));
    }
}
