//! The `corral` binary's offline commands, run as a user would: `topology` on real-machine
//! sysfs dumps, `checkpoint inspect|verify` on kubelet-written files, `config check`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn corral(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run corral")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
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
        doc["numa_nodes"],
        serde_json::json!([0, 1, 2, 33, 34, 45, 72, 73])
    );
    assert_eq!(
        doc["numa_distances"]["33"][3], 10,
        "row of node 33, its own column"
    );
    assert_eq!(doc["counts"]["sockets"], 4);
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
        let output = Command::new(env!("CARGO_BIN_EXE_corral"))
            .args(&args)
            .env_remove("RUST_LOG")
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
        let mut child = Command::new(env!("CARGO_BIN_EXE_corral"))
            .args(&args)
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("corral {args:?} hung on a silent agent");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
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
    let doc: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|err| panic!("{line:?}: {err}"));
    let mut keys: Vec<(usize, String)> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(|key| {
            let quoted = format!("{}:", serde_json::Value::from(key.as_str()));
            (line.find(&quoted).unwrap(), key.clone())
        })
        .collect();
    keys.sort();
    keys.into_iter().map(|(_, key)| key).collect()
}

/// The kubelet's `--logging-format=json` and `-v=N`: log lines are the Kubernetes
/// components' JSON (`ts` in epoch milliseconds, `caller`, `msg`, `v`, then key/values).
#[test]
fn kubelet_logging_flags_write_kubernetes_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubelet-config.yaml");
    std::fs::write(&config, "cpuManagerPolicy: none\nevictionHard: {}\n").unwrap();
    let root = dir.path().join("root");
    let output = corral(&[
        "--logging-format=json",
        "-v=2",
        "run",
        "-c",
        config.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--host-root",
        "/nonexistent-host-root",
    ]);
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
    assert_eq!(doc["key"], "evictionHard");
    assert!(doc["ts"].as_f64().unwrap() > 1.6e12, "epoch milliseconds");
    // -v=2 shows debug messages, with their verbosity.
    let debug = lines
        .iter()
        .find(|l| l.contains("open-file limit"))
        .unwrap_or_else(|| panic!("-v=2 shows debug lines: {err}"));
    assert_eq!(json_keys(debug), ["ts", "caller", "msg", "v", "limit"]);
    assert!(debug.contains(r#""v":2"#), "{debug}");
    // Without -v, no debug line.
    let quiet = corral(&[
        "--logging-format",
        "json",
        "run",
        "-c",
        config.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--host-root",
        "/nonexistent-host-root",
    ]);
    assert!(
        !stderr(&quiet).contains("open-file limit"),
        "{}",
        stderr(&quiet)
    );
}
