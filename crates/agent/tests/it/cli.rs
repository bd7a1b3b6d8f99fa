//! The `corral` binary's offline commands, run as a user would: `topology` on real-machine
//! sysfs dumps, `checkpoint inspect|verify` on kubelet-written files, `config check`.

use std::collections::BTreeMap;
use std::process::Output;

use crate::support;

use crate::support::{Reaped, corral_run, log_file, stderr, stdout, wait_exit, workspace};

fn corral(args: &[&str]) -> Output {
    support::corral().args(args).output().expect("run corral")
}

#[test]
fn topology_json_has_the_documented_shape() {
    let root = workspace().join("testdata/sysfs/48amd64-4pa2n6c-sparse");
    let output = corral(&[
        "topology",
        "--host-root",
        root.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let cpus = doc["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 48);
    for key in ["cpu", "core", "socket", "numa", "uncore"] {
        assert!(cpus[0].get(key).is_some(), "missing {key}");
    }
    assert_eq!(
        doc["numaNodes"],
        serde_json::json!([0, 1, 2, 33, 34, 45, 72, 73])
    );
    assert_eq!(
        doc["numaDistances"]["33"][3], 10,
        "row of node 33, its own column"
    );
    assert_eq!(doc["counts"]["sockets"], 4);
    assert_eq!(doc["counts"]["numaNodes"], 8);
    assert!(
        doc["counts"]["uncoreCaches"]
            .as_u64()
            .is_some_and(|n| n > 0)
    );
    assert_camel_case(&doc, "topology -o json");
}

/// Keys whose values are maps keyed by data (resource names, environment variables, NUMA
/// node ids), not by field names.
const DATA_MAPS: &[&str] = &["devices", "envs", "extended", "numaDistances"];

/// Every field name of `doc` (at any depth) is camelCase, as Kubernetes writes its
/// documents.
fn assert_camel_case(doc: &serde_json::Value, what: &str) {
    match doc {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                let camel = key.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && key.chars().all(|c| c.is_ascii_alphanumeric());
                assert!(camel, "{what}: key {key:?} is not camelCase");
                if !(DATA_MAPS.contains(&key.as_str()) && value.is_object()) {
                    assert_camel_case(value, what);
                }
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                assert_camel_case(item, what);
            }
        }
        _ => {}
    }
}

/// The document of `-o yaml`, read back as JSON values.
fn yaml_doc(output: &Output) -> serde_json::Value {
    serde_saphyr::from_str(&stdout(output))
        .unwrap_or_else(|err| panic!("not YAML ({err}): {}", stdout(output)))
}

#[test]
fn topology_yaml_is_the_json_document_and_wide_lists_every_cpu() {
    let root = workspace().join("testdata/sysfs/48amd64-4pa2n6c-sparse");
    let root = root.to_str().unwrap();
    let json = corral(&["topology", "--host-root", root, "-o", "json"]);
    let yaml = corral(&["topology", "--host-root", root, "-o", "yaml"]);
    assert!(yaml.status.success(), "{}", stderr(&yaml));
    let json: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(yaml_doc(&yaml), json);
    let table = corral(&["topology", "--host-root", root]);
    let wide = corral(&["topology", "--host-root", root, "-o", "wide"]);
    assert!(wide.status.success(), "{}", stderr(&wide));
    let (table, wide) = (stdout(&table), stdout(&wide));
    assert!(wide.starts_with(&table), "wide extends the table:\n{wide}");
    let cpu_lines: Vec<&str> = wide
        .lines()
        .skip_while(|l| !l.starts_with("CPU "))
        .skip(1)
        .collect();
    assert_eq!(cpu_lines.len(), 48, "{wide}");
    // CPU 47's NUMA node is a real id (73 on this sparse machine), not a mask bit.
    let last: Vec<&str> = cpu_lines[47].split_whitespace().collect();
    assert_eq!((last[0], last[3]), ("47", "73"), "{}", cpu_lines[47]);
}

/// Memory and huge pages per NUMA node, memory-only nodes included.
#[test]
fn topology_shows_memory_per_numa_node() {
    let root = workspace().join("testdata/sysfs/fakeheteromemtiers");
    let root = root.to_str().unwrap();
    let json = corral(&["topology", "--host-root", root, "-o", "json"]);
    assert!(json.status.success(), "{}", stderr(&json));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    let memory = doc["memory"].as_array().unwrap();
    let nodes: Vec<u64> = memory
        .iter()
        .map(|n| n["numaNode"].as_u64().unwrap())
        .collect();
    assert_eq!(nodes, [0, 1, 2, 4, 6, 8, 9]);
    assert!(
        memory
            .iter()
            .all(|n| n["memoryBytes"].as_u64().unwrap() > 0)
    );
    let table = stdout(&corral(&["topology", "--host-root", root]));
    let memory_only = table.lines().find(|l| l.starts_with("9 ")).unwrap();
    assert!(memory_only.contains("384Mi"), "{table}");
    let pages = workspace().join("testdata/sysfs/2pa-pcidomain32bits");
    let pages = pages.to_str().unwrap();
    let json = corral(&["topology", "--host-root", pages, "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    let sizes: Vec<&str> = doc["memory"][0]["hugePages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["resource"].as_str().unwrap())
        .collect();
    assert_eq!(sizes, ["hugepages-2Mi", "hugepages-1Gi"]);
}

#[test]
fn topology_table_and_this_machine() {
    let output = corral(&["topology"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("CPUs"), "{}", stdout(&output));
    let missing = corral(&["topology", "--host-root", "/nonexistent-host-root"]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("/nonexistent-host-root"),
        "{}",
        stderr(&missing)
    );
}

/// The `file` of the first vector of a shared checkpoint conformance file.
fn kubelet_file(vectors: &str) -> String {
    let path = workspace().join("testdata/conformance").join(vectors);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"][0]["file"].as_str().unwrap().to_owned()
}

#[test]
fn checkpoint_inspect_and_verify_kubelet_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cpu_manager_state");
    std::fs::write(&file, kubelet_file("checkpoint_cpumanager.json")).unwrap();
    let path = file.to_str().unwrap();

    let output = corral(&["checkpoint", "inspect", path, "-o", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(doc["format"], "cpumanager_v2");
    assert_eq!(doc["verified"], true);
    assert_eq!(doc["contents"]["policyName"], "none");

    let output = corral(&["checkpoint", "verify", path]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("OK"));

    // One flipped byte: verification fails loudly, naming the file and both checksums.
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("\"none\"", "\"nonf\"");
    std::fs::write(&file, text).unwrap();
    let output = corral(&["checkpoint", "verify", path]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("cpu_manager_state") && err.contains("corrupted"),
        "{err}"
    );
}

/// The `file` of the first vector of `format` in a checkpoint conformance file.
fn kubelet_file_of(vectors: &str, format: &str) -> String {
    let path = workspace().join("testdata/conformance").join(vectors);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let vectors = doc["vectors"].as_array().unwrap();
    let vector = vectors.iter().find(|v| v["format"] == format).unwrap();
    vector["file"].as_str().unwrap().to_owned()
}

/// Files of k8s 1.36 (pod-level resource managers on) and 1.37: inspect names the version
/// and shows the content (from `data` where the file has one).
#[test]
fn checkpoint_inspect_names_the_v136_and_v137_versions() {
    let dir = tempfile::tempdir().unwrap();
    for (vectors, format, name) in [
        (
            "checkpoint_cpumanager_v136.json",
            "cpumanager_v3",
            "cpu_manager_state",
        ),
        (
            "checkpoint_cpumanager_v136.json",
            "cpumanager_v4",
            "cpu_manager_state",
        ),
        (
            "checkpoint_memorymanager_v136.json",
            "memorymanager_v2",
            "memory_manager_state",
        ),
        (
            "checkpoint_memorymanager_v136.json",
            "memorymanager_v3",
            "memory_manager_state",
        ),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, kubelet_file_of(vectors, format)).unwrap();
        let output = corral(&[
            "checkpoint",
            "inspect",
            file.to_str().unwrap(),
            "-o",
            "json",
        ]);
        assert!(output.status.success(), "{format}: {}", stderr(&output));
        let doc: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        assert_eq!(doc["format"], format);
        assert_eq!(doc["verified"], true, "{format}");
        assert!(doc["contents"]["policyName"].is_string(), "{format}: {doc}");
        let output = corral(&["checkpoint", "verify", file.to_str().unwrap()]);
        assert!(output.status.success(), "{format}: {}", stderr(&output));
    }
}

#[test]
fn config_check_reports_every_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(
        &file,
        "cpuManagerPolicy: dynamic\ntopologyManagerScope: node\n",
    )
    .unwrap();
    let output = corral(&["config", "check", "-c", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("cpuManagerPolicy") && err.contains("\"dynamic\""),
        "{err}"
    );
    assert!(
        err.contains("topologyManagerScope") || err.contains("node"),
        "{err}"
    );

    std::fs::write(
        &file,
        "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n",
    )
    .unwrap();
    let output = corral(&[
        "config",
        "check",
        "-c",
        file.to_str().unwrap(),
        "--kubelet-layout",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("/var/lib/kubelet/device-plugins"));
}

/// `corral … | head -1`: the reader is gone before corral writes. Every printing command
/// exits quietly with status 0 instead of panicking on EPIPE (exit 101).
#[test]
fn a_closed_stdout_ends_every_printing_command_quietly() {
    let fixture = workspace().join("testdata/sysfs/48amd64-4pa2n6c-sparse");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), kubelet_file("checkpoint_cpumanager.json")).unwrap();
    let commands: [Vec<&str>; 4] = [
        vec!["topology", "--host-root", fixture.to_str().unwrap()],
        vec![
            "topology",
            "--host-root",
            fixture.to_str().unwrap(),
            "-o",
            "json",
        ],
        vec!["checkpoint", "inspect", file.path().to_str().unwrap()],
        vec!["checkpoint", "verify", file.path().to_str().unwrap()],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = support::corral()
            .args(&args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run corral");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(stderr(&output), "", "{args:?}");
    }
}

/// A `cpu_manager_state` recording checksum 0 (which the kubelet accepts unverified): verify
/// says so, with the recorded 0 and the computed value, never the computed one as the file's.
#[test]
fn checkpoint_verify_reports_a_recorded_zero_checksum_as_unverified() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cpu_manager_state");
    let text = kubelet_file("checkpoint_cpumanager.json");
    let original: serde_json::Value = serde_json::from_str(&text).unwrap();
    let recorded = original["checksum"].as_u64().unwrap();
    let zeroed = text.replace(&format!("\"checksum\":{recorded}"), "\"checksum\":0");
    assert_ne!(zeroed, text);
    std::fs::write(&file, zeroed).unwrap();
    let path = file.to_str().unwrap();
    let output = corral(&["checkpoint", "verify", path]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.contains("checksum 0 recorded: content not verified") && out.contains("hashes to "),
        "{out}"
    );
    let output = corral(&["checkpoint", "inspect", path, "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(doc["checksum"], 0);
    assert!(doc["computedChecksum"].as_u64().unwrap() > 0);
    assert_eq!(doc["verified"], false);
}

/// An agent socket that accepts and never answers (a hung agent, or one whose connections
/// are exhausted): every client command gives up at its deadline instead of hanging.
#[test]
fn a_silent_agent_never_makes_a_client_command_hang() {
    use std::io::Read as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("corral")).unwrap();
    let listener =
        std::os::unix::net::UnixListener::bind(dir.path().join("corral/agent.sock")).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut stream in listener.incoming().flatten() {
            let mut sink = [0u8; 1024];
            let _ = stream.set_nonblocking(true);
            let _ = stream.read(&mut sink);
            held.push(stream); // read, never answer, never close
        }
    });
    let root = dir.path().to_str().unwrap();
    for args in [
        vec!["status", "--root", root, "--request-timeout", "1s"],
        vec![
            "release",
            "some-uid",
            "--root",
            root,
            "--request-timeout",
            "1s",
        ],
    ] {
        let mut child = support::corral()
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The deadline is the feature: the command gives up once it passes. The test waits
        // for that (at most `WAIT`, 60 times the deadline), never for how soon.
        let Some(status) = wait_exit(&mut child, support::WAIT) else {
            panic!("corral {args:?} hung on a silent agent");
        };
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("did not answer within") || err.contains("cannot reach the agent"),
            "{args:?}: {err}"
        );
    }
}

/// The top-level keys of a JSON object line, in the order written.
fn json_keys(line: &str) -> Vec<String> {
    corral_testkit::object_keys_in_order(line)
}

/// The kubelet's `--logging-format=json` and `-v=N`: log lines are the Kubernetes
/// components' JSON (`ts` in epoch milliseconds, `caller`, `msg`, `v`, then key/values).
#[test]
fn kubelet_logging_flags_write_kubernetes_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubelet-config.yaml");
    std::fs::write(
        &config,
        "cpuManagerPolicy: none\nimageGCHighThresholdPercent: 85\n",
    )
    .unwrap();
    let root = dir.path().join("root");
    let run_without_sysfs = |logging: &[&str]| {
        let run = [
            "run",
            "-c",
            config.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
            "--host-root",
            "/nonexistent-host-root",
        ];
        corral(&[logging, &run].concat())
    };
    let output = run_without_sysfs(&["--logging-format=json", "-v=2"]);
    assert!(!output.status.success(), "no sysfs: the agent cannot start");
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with('{')).collect();
    let warn = lines
        .iter()
        .find(|l| l.contains("configuration key not read by corral"))
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(json_keys(warn), ["ts", "caller", "msg", "v", "key"]);
    let doc: serde_json::Value = serde_json::from_str(warn).unwrap();
    assert_eq!(doc["v"], 0);
    assert_eq!(doc["key"], "imageGCHighThresholdPercent");
    assert!(doc["ts"].as_f64().unwrap() > 1.6e12, "epoch milliseconds");
    // -v=2 shows debug messages, with their verbosity.
    let debug = lines
        .iter()
        .find(|l| l.contains("open-file limit"))
        .unwrap_or_else(|| panic!("-v=2 shows debug lines: {err}"));
    assert_eq!(json_keys(debug), ["ts", "caller", "msg", "v", "limit"]);
    assert!(debug.contains(r#""v":2"#), "{debug}");
    // Without -v, no debug line.
    let quiet = run_without_sysfs(&["--logging-format", "json"]);
    assert!(
        !stderr(&quiet).contains("open-file limit"),
        "{}",
        stderr(&quiet)
    );
}

/// A vector file of a shared checkpoint conformance file, by name.
fn kubelet_file_named(vectors: &str, name: &str) -> String {
    corral_testkit::conformance_topology::vector_file(
        &format!("testdata/conformance/{vectors}"),
        name,
    )
}

/// `checkpoint inspect` shows `AllocResp` as the file stores it (base64, as Go's
/// encoding/json writes []byte), in every output; JSON and YAML are one document.
#[test]
fn checkpoint_inspect_shows_alloc_resp_as_stored() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kubelet_internal_checkpoint");
    let text = kubelet_file_named(
        "checkpoint_devicemanager_v2.json",
        "devicemanager_v2/alloc_resp_nil_vs_empty",
    );
    std::fs::write(&file, &text).unwrap();
    let stored: serde_json::Value = serde_json::from_str(&text).unwrap();
    let path = file.to_str().unwrap();
    let json = corral(&["checkpoint", "inspect", path, "-o", "json"]);
    assert!(json.status.success(), "{}", stderr(&json));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(
        doc["contents"]["PodDeviceEntries"], stored["Data"]["PodDeviceEntries"],
        "AllocResp null, \"\" and \"AP8KIlw=\" as on disk"
    );
    let wrapper: serde_json::Map<_, _> = doc
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "contents")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_camel_case(&wrapper.into(), "checkpoint inspect -o json");
    let yaml = corral(&["checkpoint", "inspect", path, "-o", "yaml"]);
    assert!(yaml.status.success(), "{}", stderr(&yaml));
    assert_eq!(yaml_doc(&yaml), doc);
    let table = corral(&["checkpoint", "inspect", path]);
    assert!(
        stdout(&table).contains("\"AP8KIlw=\""),
        "{}",
        stdout(&table)
    );
    // No wider table for one document.
    assert!(
        !corral(&["checkpoint", "inspect", path, "-o", "wide"])
            .status
            .success()
    );
}

const POD_WITHOUT_UID: &str = "apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: gpu-claim}]
  containers:
  - name: app
    resources:
      limits: {cpu: \"2\", memory: 64Mi}
      claims: [{name: gpu}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default, uid: c1}
spec: {}
status:
  allocation:
    devices:
      results: [{request: r, driver: gpu.example.com, pool: node-a, device: gpu-3}]
";

/// `explain` of a manifest without a uid gives the same, documented uid on every run (a
/// UUID v5 of the namespace and name); JSON keys are camelCase; YAML is the same document;
/// wide resolves the container's claim to its allocated device.
#[test]
fn explain_uid_is_stable_and_outputs_agree() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.yaml");
    std::fs::write(&file, POD_WITHOUT_UID).unwrap();
    let path = file.to_str().unwrap();
    let first = corral(&["explain", "-f", path, "-o", "json"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let second = corral(&["explain", "-f", path, "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&first)).unwrap();
    assert_eq!(stdout(&first), stdout(&second), "the same uid every run");
    // uuid.uuid5(uuid.NAMESPACE_URL, "urn:corral:pod:default/web")
    assert_eq!(
        doc["pods"][0]["uid"],
        "37343419-00bc-5c20-a7dd-98d73126c4a2"
    );
    assert_eq!(doc["pods"][0]["qosClass"], "Guaranteed");
    assert_eq!(doc["pods"][0]["containers"][0]["limits"]["cpuMillis"], 2000);
    assert_camel_case(&doc, "explain -o json");
    let yaml = corral(&["explain", "-f", path, "-o", "yaml"]);
    assert!(yaml.status.success(), "{}", stderr(&yaml));
    assert_eq!(yaml_doc(&yaml), doc);
    let wide = stdout(&corral(&["explain", "-f", path, "-o", "wide"]));
    assert!(
        wide.contains("resourceClaims gpu=gpu-claim")
            && wide.contains("devices gpu.example.com/node-a/gpu-3"),
        "{wide}"
    );
    let table = stdout(&corral(&["explain", "-f", path]));
    assert!(
        table.contains("uid 37343419-00bc-5c20-a7dd-98d73126c4a2 qos Guaranteed"),
        "{table}"
    );
}

/// Every file under the agent's root but its log, with its bytes: checkpoints, pod
/// records, the state journal and its mark.
fn state_bytes(root: &std::path::Path) -> BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.is_file() && !path.ends_with("agent.log") {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// A rejection explains itself — in `-o json` each NUMA node's free CPUs and each hint
/// provider's hints with the best hint, in the table the same, in the agent's log line a
/// summary — and `--dry-run` answers as the admission does without changing a byte, a
/// pod or a CPU. `status` shows the NUMA nodes.
#[test]
fn a_rejection_names_each_numa_nodes_free_resources_and_the_hints() {
    let agent = Agent::start();
    let root = agent.root.path();
    let numa = |agent: &Agent| {
        let out = agent.cli(&["status", "--numa", "-o", "json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap()
    };
    let pods = |agent: &Agent| stdout(&agent.cli(&["status", "-o", "json"]));
    let (files, nodes, held) = (state_bytes(root), numa(&agent), pods(&agent));
    let ids: Vec<i64> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [0, 1], "{nodes}");
    assert_eq!(nodes[0]["cpus"]["reserved"], 1, "{nodes}");
    assert_eq!(nodes[0]["cpus"]["free"], 7, "{nodes}");
    assert_eq!(nodes[1]["devices"]["example.com/gpu"]["free"], 2, "{nodes}");

    // A dry run of a pod that fits, then of one that does not: nothing changes.
    let fits = agent.cli(&[
        "admit",
        "--dry-run",
        "-f",
        "examples/pods/gpu.yaml",
        "-o",
        "json",
    ]);
    assert!(fits.status.success(), "{}", stderr(&fits));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&fits)).unwrap();
    assert_eq!(
        (doc[0]["admitted"].clone(), doc[0]["dryRun"].clone()),
        (true.into(), true.into())
    );
    let devices = &doc[0]["allocation"]["containers"][0]["devices"]["example.com/gpu"];
    assert_eq!(devices.as_array().map(Vec::len), Some(2), "{doc}");
    let dry = agent.cli(&[
        "admit",
        "--dry-run",
        "-f",
        "examples/pods/unalignable.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(dry.status.code(), Some(1), "{}", stderr(&dry));
    let dry: serde_json::Value = serde_json::from_str(&stdout(&dry)).unwrap();
    assert_eq!(state_bytes(root), files, "a dry run wrote");
    assert_eq!((numa(&agent), pods(&agent)), (nodes.clone(), held));

    let rejected = agent.cli(&[
        "admit",
        "-f",
        "examples/pods/unalignable.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(rejected.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&rejected)).unwrap();
    assert_camel_case(&doc, "admit -o json (rejected)");
    let why = &doc[0]["explanation"];
    assert_eq!(why, &dry[0]["explanation"], "the dry run explains the same");
    assert_eq!(doc[0]["reason"], "TopologyAffinityError");
    assert_eq!(why["container"], "huge", "{why}");
    // As the decision saw them: `small`'s 2 CPUs (and GPU) were held then.
    let free: Vec<i64> = why["numaNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["cpus"]["free"].as_i64().unwrap())
        .collect();
    assert_eq!(free.len(), 2, "{why}");
    assert_eq!(free.iter().sum::<i64>(), 7 + 8 - 2, "{why}");
    for (at, node) in why["numaNodes"].as_array().unwrap().iter().enumerate() {
        let cpus: corral_topology::CpuSet =
            node["cpus"]["freeCpus"].as_str().unwrap().parse().unwrap();
        // Node by node, what `status --numa` showed before less what `small` then held.
        let before: corral_topology::CpuSet = nodes[at]["cpus"]["freeCpus"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(node["id"], nodes[at]["id"], "{why}");
        assert!(
            cpus.is_subset_of(&before),
            "{before} before, {cpus} seen: {why}"
        );
        assert_eq!(node["cpus"]["total"], nodes[at]["cpus"]["total"], "{why}");
        assert_eq!(
            node["cpus"]["reserved"], nodes[at]["cpus"]["reserved"],
            "{why}"
        );
        assert_eq!(
            cpus.len() as i64,
            node["cpus"]["free"].as_i64().unwrap(),
            "{why}"
        );
    }
    let providers: Vec<&str> = why["hints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["provider"].as_str().unwrap())
        .collect();
    assert_eq!(
        providers,
        ["cpu manager", "device manager", "dra", "memory manager"],
        "{why}"
    );
    // 20 CPUs fit no set of NUMA nodes: the CPU manager's hints for cpu are none.
    assert_eq!(
        why["hints"][0]["resources"]["cpu"],
        serde_json::json!([]),
        "{why}"
    );
    assert_eq!(why["policyAdmitted"], false, "{why}");
    assert_eq!(why["bestHint"]["preferred"], false, "{why}");

    let table = agent.cli(&["admit", "-f", "examples/pods/unalignable.yaml"]);
    let text = stderr(&table);
    for part in [
        "container huge:",
        "NUMA  CPUS",
        "cpu manager",
        "none: cannot be satisfied",
        "best hint:",
    ] {
        assert!(text.contains(part), "{part:?} not in\n{text}");
    }
    let lines = agent.log_lines();
    let logged = lines
        .iter()
        .find(|l| l["msg"] == "pod rejected")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    let summary = logged["explanation"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with("container huge: NUMA 0 free cpu="),
        "{logged}"
    );
    assert!(summary.contains("cpu manager cpu=[]"), "{logged}");

    let status = stdout(&agent.cli(&["status"]));
    assert!(
        status.contains("NUMA  CPUS  RESERVED  EXCLUSIVE  FREE"),
        "{status}"
    );
}

/// A running `corral run` on a two-NUMA-node fixture, killed and reaped on drop.
/// A running `corral run` (killed and reaped on drop; field order drops it before its root).
struct Agent {
    child: Reaped,
    root: tempfile::TempDir,
}

impl Agent {
    fn start() -> Agent {
        let root = tempfile::tempdir().unwrap();
        let log = log_file(&root.path().join("agent.log"));
        let child = corral_run(
            root.path(),
            &[
                "--logging-format=json",
                "--cpu-manager-policy=static",
                "--reserved-cpus=0",
                "--topology-manager-policy=single-numa-node",
                "--demo-devices=4",
            ],
            log,
        );
        let mut agent = Agent {
            child: Reaped(child),
            root,
        };
        let deadline = std::time::Instant::now() + support::WAIT;
        while !agent.cli(&["status"]).status.success() {
            if let Some(status) = agent.child.0.try_wait().unwrap() {
                panic!("corral run exited with {status}");
            }
            assert!(std::time::Instant::now() < deadline, "agent not ready");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        agent
    }

    /// The agent's log lines so far (JSON, one object each).
    fn log_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.root.path().join("agent.log"))
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line:?}: {err}")))
            .collect()
    }

    fn cli(&self, args: &[&str]) -> Output {
        let root = self.root.path().to_str().unwrap();
        support::corral()
            .current_dir(workspace())
            .args(args)
            .args(["--root", root, "--request-timeout", "60s"])
            .output()
            .expect("run corral")
    }
}

/// `admit` and `status` speak `-o yaml` (the JSON document) and `-o wide` (more columns);
/// every answer names its pod, a rejected one too.
#[test]
fn admit_and_status_speak_yaml_and_wide() {
    let agent = Agent::start();
    let admitted = agent.cli(&["admit", "-f", "examples/pods/gpu.yaml", "-o", "yaml"]);
    assert!(admitted.status.success(), "{}", stderr(&admitted));
    let doc = yaml_doc(&admitted);
    assert_eq!(doc[0]["admitted"], true, "{doc}");
    assert!(
        doc[0]["pod"].as_str().unwrap().starts_with("default/"),
        "{doc}"
    );
    assert_camel_case(&doc, "admit -o yaml");

    let rejected = agent.cli(&[
        "admit",
        "-f",
        "examples/pods/unalignable.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(rejected.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&rejected)).unwrap();
    assert_eq!(
        (doc[0]["pod"].clone(), doc[0]["admitted"].clone()),
        ("default/unalignable".into(), false.into())
    );
    assert_eq!(doc[0]["reason"], "TopologyAffinityError");

    let json = agent.cli(&["status", "-o", "json"]);
    let yaml = agent.cli(&["status", "-o", "yaml"]);
    assert!(yaml.status.success(), "{}", stderr(&yaml));
    let json: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(yaml_doc(&yaml), json);
    assert_camel_case(&json, "status -o json");

    // The pods' lines come first; the NUMA nodes follow a blank line.
    let pods_part = |text: String| text.split("\n\n").next().unwrap().to_owned();
    let table = pods_part(stdout(&agent.cli(&["status"])));
    let wide = pods_part(stdout(&agent.cli(&["status", "-o", "wide"])));
    let header = wide.lines().next().unwrap();
    for column in [
        "POD UID",
        "CPUSET",
        "DEVICES",
        "CONTAINER ID",
        "DEVICE NODES",
        "ENV",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(!table.lines().next().unwrap().contains("CONTAINER ID"));
    assert_eq!(wide.lines().count(), table.lines().count());
    let containers = json[0]["containers"].as_array().unwrap().len();
    assert_eq!(wide.lines().count(), 1 + containers, "{wide}");

    // The agent's own log lines name pods as the kubelet does (`pod` as klog's KObj, beside
    // `podUID`) and carry no Rust Debug forms.
    let lines = agent.log_lines();
    let uid = json[0]["uid"].as_str().unwrap();
    let admitted = lines
        .iter()
        .find(|l| l["msg"] == "pod admitted")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(
        admitted["pod"],
        serde_json::json!({"name": "gpu", "namespace": "default"})
    );
    assert_eq!(admitted["podUID"], uid);
    let rejected = lines
        .iter()
        .find(|l| l["msg"] == "pod rejected")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(rejected["pod"]["name"], "unalignable");
    assert_eq!(rejected["reason"], "TopologyAffinityError");
    assert!(rejected["detail"].as_str().is_some_and(|d| !d.is_empty()));
    let demo = lines
        .iter()
        .find(|l| l["msg"] == "demo devices ready")
        .unwrap();
    assert_eq!(demo["numaNodes"], "0,1");
    for line in lines.iter().filter(|l| {
        let caller = l["caller"].as_str().unwrap_or_default();
        ["node/", "server/", "commands/"]
            .iter()
            .any(|dir| caller.starts_with(dir))
    }) {
        let text = line.to_string();
        assert!(
            !text.contains("Some(") && !text.contains(" { "),
            "Debug form: {text}"
        );
    }
}

/// `config check` prints the feature gates in force with their v1.37 maturity, the names
/// corral does not read, upstream's GA warning, and refuses what v1.36 refuses.
#[test]
fn config_check_prints_feature_gates() {
    let example = workspace().join("examples/config/feature-gates.yaml");
    let output = corral(&["config", "check", "-c", example.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    let line = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line("CPUManagerPolicyAlphaOptions"),
        "CPUManagerPolicyAlphaOptions true alpha since 1.23 (set)"
    );
    assert_eq!(
        line("CPUManagerPolicyOptions"),
        "CPUManagerPolicyOptions true GA since 1.33, locked"
    );
    assert_eq!(
        line("PodLevelResources "),
        "PodLevelResources true beta since 1.34"
    );
    assert!(
        out.contains("featureGates corral does not read: KubeletPSI"),
        "{out}"
    );

    let output = corral(&[
        "config",
        "check",
        "-c",
        example.to_str().unwrap(),
        "--cpu-manager-policy",
        "none",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gates.yaml");
    std::fs::write(
        &file,
        "featureGates: {TopologyManagerPolicyOptions: true}\n",
    )
    .unwrap();
    let output = corral(&["config", "check", "-c", file.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "Warning: setting GA feature gate. It will be removed in a future release. featureGate=\"TopologyManagerPolicyOptions\" value=true"
        ),
        "{}",
        stderr(&output)
    );
    std::fs::write(&file, "featureGates: {CPUManager: true}\n").unwrap();
    let output = corral(&["config", "check", "-c", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("unrecognized feature gate: CPUManager"),
        "{}",
        stderr(&output)
    );
}

/// `config check` prints durations as Go (and the kubelet's own config dump) prints them.
#[test]
fn config_check_prints_durations_as_go() {
    let output = corral(&["config", "check", "--cpu-manager-policy", "none"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    for line in [
        "cpuManagerReconcilePeriod:  10s",
        "devicePluginGracePeriod:    5m0s",
        "pluginWaitTimeout:          30s",
    ] {
        assert!(out.contains(line), "{line:?} in {out}");
    }
}

/// The kubelet's flags for keys corral reads are accepted by `run` and `config check`:
/// `run` gets past the command line to the machine (here absent), `config check` prints
/// what they set.
#[test]
fn kubelet_flags_are_accepted_by_run_and_config_check() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let flags = [
        "--feature-gates=CPUManagerPolicyAlphaOptions=true",
        "--feature-gates",
        "PodLevelResourceManagers=false",
        "--memory-manager-policy=Static",
        "--reserved-memory",
        "0:memory=1Gi,hugepages-2Mi=2Mi;1:memory=1Gi",
        "--kube-reserved=cpu=500m,memory=1Gi",
        "--system-reserved",
        "cpu=500m,memory=100Mi",
        "--cpu-manager-reconcile-period=30s",
        "--root-dir",
        root.to_str().unwrap(),
    ];
    let check = corral(&[&["config", "check"][..], &flags].concat());
    assert!(check.status.success(), "{}", stderr(&check));
    let out = stdout(&check);
    for line in [
        "cpuManagerReconcilePeriod:  30s",
        "reserved CPU (kube+system): 1000m",
        "memoryManagerPolicy:        Static",
        "reservedMemory:             0: hugepages-2Mi=2Mi,memory=1Gi; 1: memory=1Gi",
        &format!("root:                       {}", root.display()),
    ] {
        assert!(out.contains(line), "{line:?} in {out}");
    }
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("PodLevelResourceManagers"))
        .unwrap();
    assert!(line.contains("false") && line.ends_with("(set)"), "{line}");

    let run = [
        &["run", "--host-root", "/nonexistent-host-root"][..],
        &flags,
    ]
    .concat();
    let output = corral(&run);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("discovering the CPU topology under /nonexistent-host-root"),
        "{}",
        stderr(&output)
    );
    // A malformed value is refused by both, with the kubelet's message.
    for command in [&["run"][..], &["config", "check"]] {
        let output = corral(&[command, &["--reserved-memory", "0:memory=1Be"]].concat());
        assert_eq!(output.status.code(), Some(2));
        assert!(
            stderr(&output)
                .contains("failed to parse the quantatity, expected quantatity, got 1Be"),
            "{}",
            stderr(&output)
        );
    }
}

/// `config check --host-root` builds the managers on that machine, as `run` does: CPUs the
/// machine lacks are refused with `run`'s message. Without `--host-root` the same
/// configuration is valid (nothing is known of the machine).
#[test]
fn config_check_with_a_host_root_refuses_what_run_refuses() {
    let machine = workspace().join("testdata/sysfs/16em64t-4s2c2t");
    let machine = machine.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(
        &file,
        "cpuManagerPolicy: static\nreservedSystemCPUs: \"0-99\"\n",
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let root = dir.path().join("state");
    let root = root.to_str().unwrap();

    let unchecked = corral(&["config", "check", "-c", config, "--root", root]);
    assert!(unchecked.status.success(), "{}", stderr(&unchecked));
    assert!(!stdout(&unchecked).contains("machine (--host-root)"));

    let check = corral(&[
        "config",
        "check",
        "-c",
        config,
        "--root",
        root,
        "--host-root",
        machine,
    ]);
    assert_eq!(check.status.code(), Some(2), "{}", stdout(&check));
    assert!(stdout(&check).is_empty(), "{}", stdout(&check));
    let run = corral(&["run", "-c", config, "--root", root, "--host-root", machine]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    // The same words from the CPU manager in both.
    let why = |output: &Output| {
        let err = stderr(output);
        let at = err
            .find("building the CPU manager: ")
            .unwrap_or_else(|| panic!("{err}"));
        err[at..].trim_end().to_owned()
    };
    assert_eq!(why(&check), why(&run));
    assert!(
        why(&check).ends_with("unknown CPU ID: 16"),
        "{}",
        why(&check)
    );

    // The Static memory policy's reservations are checked against the machine's nodes and
    // its node allocatable reservation (100Mi of eviction threshold by default), as `run`'s
    // memory manager checks them.
    for (reserved, why) in [
        (
            "1:memory=100Mi",
            "building the memory manager: the reserved memory configuration references a NUMA node 1 that does not exist on this machine",
        ),
        (
            "0:memory=50Mi",
            "building the memory manager: the total amount \"50Mi\" of type \"memory\" is not equal to the value \"100Mi\" determined by Node Allocatable feature",
        ),
    ] {
        let check = corral(&[
            "config",
            "check",
            "--root",
            root,
            "--host-root",
            machine,
            "--memory-manager-policy=Static",
            "--reserved-memory",
            reserved,
        ]);
        assert_eq!(check.status.code(), Some(2), "{}", stdout(&check));
        assert!(
            stderr(&check).trim_end().ends_with(why),
            "{}",
            stderr(&check)
        );
    }
    let fits = [
        "config",
        "check",
        "--root",
        root,
        "--host-root",
        machine,
        "--memory-manager-policy=Static",
        "--reserved-memory=0:memory=100Mi",
    ];
    let check = corral(&fits);
    assert!(check.status.success(), "{}", stderr(&check));

    // What fits passes, and the machine is named.
    std::fs::write(
        &file,
        "cpuManagerPolicy: static\nreservedSystemCPUs: \"0-1\"\n",
    )
    .unwrap();
    let check = corral(&[
        "config",
        "check",
        "-c",
        config,
        "--root",
        root,
        "--host-root",
        machine,
    ]);
    assert!(check.status.success(), "{}", stderr(&check));
    assert!(
        stdout(&check).contains("machine (--host-root):      16 CPUs, 1 NUMA nodes under"),
        "{}",
        stdout(&check)
    );
}

/// A misspelled key is warned about with the key it likely means.
#[test]
fn config_check_suggests_the_key_a_misspelling_means() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(
        &file,
        "cpuManagerPolicyy: static\nclusterDomain: cluster.local\n",
    )
    .unwrap();
    let output = corral(&["config", "check", "-c", file.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains(r#"warning: config key "cpuManagerPolicyy" is not read by corral (did you mean "cpuManagerPolicy"?)"#),
        "{err}"
    );
    assert!(
        err.contains("warning: config key \"clusterDomain\" is not read by corral\n"),
        "{err}"
    );
}

/// `release NAMESPACE/NAME` finds the pod's uid in the agent's list; a name of no pod, or
/// of several, is refused and nothing is released.
#[test]
fn release_takes_a_namespace_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let machine = workspace().join(support::MACHINE);
    let agent = support::RunningAgent::start(&root, &machine, &[], &dir.path().join("agent.log"));
    let pods = dir.path().join("pods.yaml");
    let pod = |name: &str, uid: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: {uid}}}\n\
             spec: {{containers: [{{name: c, image: pause}}]}}\n"
        )
    };
    std::fs::write(
        &pods,
        [
            pod("web", "web-1"),
            pod("web", "web-2"),
            pod("solo", "solo-uid"),
        ]
        .join("---\n"),
    )
    .unwrap();
    let admitted = agent.cli(&["admit", "-f", pods.to_str().unwrap()]);
    assert!(admitted.status.success(), "{}", stderr(&admitted));
    let uids = || {
        let out = agent.cli(&["status", "-o", "json"]);
        let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        let mut uids: Vec<String> = doc
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["uid"].as_str().unwrap().to_owned())
            .collect();
        uids.sort();
        uids
    };
    assert_eq!(uids(), ["solo-uid", "web-1", "web-2"]);

    let solo = agent.cli(&["release", "default/solo"]);
    assert!(solo.status.success(), "{}", stderr(&solo));
    assert_eq!(stdout(&solo), "pod default/solo (uid solo-uid) released\n");
    assert_eq!(uids(), ["web-1", "web-2"]);

    let several = agent.cli(&["release", "default/web"]);
    assert_eq!(several.status.code(), Some(1));
    assert!(
        stderr(&several).contains(
            "2 admitted pods are named default/web (uids web-1, web-2): release one by its uid"
        ),
        "{}",
        stderr(&several)
    );
    let none = agent.cli(&["release", "kube-system/web"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        stderr(&none).contains("no admitted pod is named kube-system/web"),
        "{}",
        stderr(&none)
    );
    assert_eq!(uids(), ["web-1", "web-2"]);

    assert!(agent.cli(&["release", "web-1"]).status.success());
    let web = agent.cli(&["release", "default/web"]);
    assert!(web.status.success(), "{}", stderr(&web));
    assert_eq!(stdout(&web), "pod default/web (uid web-2) released\n");
    assert!(uids().is_empty());
}

/// `corral completions bash` is a script bash parses (`bash -n`) that completes every
/// command; `corral man` and `corral man COMMAND` print man roff; both on stdout.
#[test]
fn completions_and_man_pages_come_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("corral.bash");
    let output = corral(&["completions", "bash"]);
    assert!(output.status.success(), "{}", stderr(&output));
    std::fs::write(&script, &output.stdout).unwrap();
    let parsed = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .expect("run bash");
    assert!(parsed.status.success(), "{}", stderr(&parsed));
    let text = stdout(&output);
    for command in [
        "run",
        "admit",
        "release",
        "status",
        "topology",
        "explain",
        "checkpoint",
        "config",
        "completions",
        "man",
    ] {
        // The script's dispatch on the words typed so far.
        assert!(text.contains(&format!("corral,{command})")), "{command}");
    }
    assert!(text.contains("corral__subcmd__config,check)"), "{text}");
    for shell in ["zsh", "fish"] {
        let output = corral(&["completions", shell]);
        assert!(output.status.success(), "{shell}: {}", stderr(&output));
        assert!(stdout(&output).contains("reserved-memory"), "{shell}");
    }
    assert_eq!(corral(&["completions", "tcsh"]).status.code(), Some(2));

    let page = corral(&["man"]);
    assert!(page.status.success(), "{}", stderr(&page));
    assert!(stdout(&page).contains(".TH corral 1"), "{}", stdout(&page));
    let page = corral(&["man", "config", "check"]);
    assert!(page.status.success(), "{}", stderr(&page));
    assert!(stdout(&page).contains(".TH corral-config-check 1"));
    let missing = corral(&["man", "frobnicate"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("no command `corral frobnicate`"));
}

/// `config check` on the NRI overlay's config and flags prints the NRI keys it runs with,
/// and `metricsAddress` on every address (probes reach it in a host-network pod).
#[test]
fn config_check_prints_the_nri_keys_and_the_metrics_address() {
    let config = workspace().join("deploy/base/config.yaml");
    let output = corral(&[
        "config",
        "check",
        "-c",
        config.to_str().unwrap(),
        "--nri",
        "--nri-socket=/var/run/nri/nri.sock",
        "--nri-disconnected-grace-period=90s",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    for line in [
        "nri:                        true",
        "nriSocket:                  /var/run/nri/nri.sock",
        "nriPluginIndex:             50",
        "kubeletPodResourcesSocket:  /var/lib/kubelet/pod-resources/kubelet.sock",
        "nriGuardPinnedCpusets:      true",
        "nriDisconnectedGracePeriod: 1m30s",
        "metricsAddress:             0.0.0.0:9464",
    ] {
        assert!(out.contains(line), "{line:?} in {out}");
    }
    let output = corral(&["config", "check", "-c", config.to_str().unwrap()]);
    assert!(
        stdout(&output).contains("nri:                        false"),
        "{}",
        stdout(&output)
    );
}
