//! The real `corral` binary's log at the kubelet's `-v=4` in JSON, through admissions over
//! its socket: every line one JSON object repeating no key; the kubelet's own messages
//! (each provider's hints, the best hint, the CPU allocation) present; the HTTP/2 and gRPC
//! stack's internals out unless `RUST_LOG` asks for them.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{
    self, MACHINE, Reaped, STATIC_SINGLE_NUMA, WAIT, log_file, sigterm, stderr, wait_exit,
    workspace,
};

/// A pod whose 12 CPUs fit the machine (15 free) but no single NUMA node (7 and 8 free):
/// refused under `single-numa-node`.
const TOO_WIDE: &str = "apiVersion: v1\nkind: Pod\n\
    metadata: {name: too-wide, namespace: default, uid: too-wide-uid}\n\
    spec: {containers: [{name: wide, image: pause, resources: {limits: {cpu: \"12\", memory: 64Mi}}}]}\n";

/// Dependencies whose internals the issue saw fill the log (HPACK is `loona_hpack`).
const HTTP2_AND_GRPC: &[&str] = &[
    "h2",
    "loona_hpack",
    "hyper",
    "hyper_util",
    "tonic",
    "tower",
    "tower_http",
];

/// `corral run` at `-v=4 --logging-format=json` with `RUST_LOG` as given; one admitted
/// and one refused pod through `corral admit`, then SIGTERM: the log, one line per entry.
fn log_of_two_admissions(dir: &Path, rust_log: Option<&str>) -> Vec<String> {
    let root = dir.join("root");
    let log = dir.join("agent.log");
    let mut command = support::corral();
    command
        .arg("run")
        .arg("--root")
        .arg(&root)
        .arg("--host-root")
        .arg(workspace().join(MACHINE))
        .args(STATIC_SINGLE_NUMA)
        .args(["-v=4", "--logging-format=json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file(&log));
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    let mut child = Reaped(command.spawn().expect("start corral run"));
    let cli = |args: &[&str]| {
        let mut cli: Command = support::corral();
        cli.args(args).arg("--root").arg(&root).output().unwrap()
    };
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + WAIT;
    while !cli(&["status"]).status.success() {
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("corral run exited with {status}: {}", read_log());
        }
        assert!(Instant::now() < deadline, "agent not ready: {}", read_log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let guaranteed = workspace().join("examples/pods/guaranteed.yaml");
    let admitted = cli(&["admit", "-f", guaranteed.to_str().unwrap()]);
    assert!(admitted.status.success(), "{}", stderr(&admitted));
    let too_wide = dir.join("too-wide.yaml");
    std::fs::write(&too_wide, TOO_WIDE).unwrap();
    let refused = cli(&["admit", "-f", too_wide.to_str().unwrap()]);
    assert!(!refused.status.success(), "the too-wide pod was admitted");
    sigterm(&child.0);
    assert!(
        wait_exit(&mut child.0, WAIT).is_some_and(|status| status.success()),
        "corral run did not stop on SIGTERM: {}",
        read_log()
    );
    read_log().lines().map(str::to_owned).collect()
}

/// Each line parsed, after checking it is one JSON object that repeats no key.
fn parse(lines: &[String]) -> Vec<serde_json::Value> {
    lines
        .iter()
        .map(|line| {
            assert_eq!(
                corral_testkit::repeated_keys(line),
                Vec::<String>::new(),
                "a repeated key in {line}"
            );
            let doc: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(doc.is_object(), "not an object: {line}");
            doc
        })
        .collect()
}

/// The crate a line came from: its `logger` (a dependency's target), corral otherwise.
fn crate_of(line: &serde_json::Value) -> &str {
    line["logger"].as_str().map_or("corral", |target| {
        target.split("::").next().unwrap_or(target)
    })
}

/// The lines whose message is `msg`.
fn with_msg<'a>(lines: &'a [serde_json::Value], msg: &str) -> Vec<&'a serde_json::Value> {
    lines.iter().filter(|line| line["msg"] == msg).collect()
}

#[test]
fn v4_shows_the_kubelets_messages_without_http2_internals() {
    let dir = tempfile::tempdir().unwrap();
    let raw = log_of_two_admissions(dir.path(), None);
    let lines = parse(&raw);
    let all = raw.join("\n");

    // The kubelet's messages, with its keys.
    let best = with_msg(&lines, "Best TopologyHint");
    let app = best
        .iter()
        .find(|line| line["containerName"] == "app")
        .unwrap_or_else(|| panic!("no Best TopologyHint for app: {all}"));
    assert_eq!(
        app["pod"],
        serde_json::json!({"name": "guaranteed", "namespace": "default"})
    );
    assert_eq!(app["bestHint"]["Preferred"], true, "{app}");
    assert!(app["bestHint"]["NUMANodeAffinity"].is_u64(), "{app}");
    assert_eq!(app["v"], 0);
    let wide = best
        .iter()
        .find(|line| line["containerName"] == "wide")
        .unwrap_or_else(|| panic!("no Best TopologyHint for the refused pod: {all}"));
    assert_eq!(wide["bestHint"]["Preferred"], false, "{wide}");

    let cpu_hints = with_msg(&lines, "TopologyHints generated");
    assert!(
        cpu_hints.iter().any(|line| line["containerName"] == "app"
            && line["cpuHints"]
                .as_array()
                .is_some_and(|hints| !hints.is_empty())),
        "no CPU hints for app: {all}"
    );
    assert!(
        with_msg(&lines, "TopologyHints")
            .iter()
            .any(|line| line["hints"]["cpu"].is_array()),
        "no provider's hints: {all}"
    );
    assert!(
        with_msg(&lines, "Topology Affinity")
            .iter()
            .any(|line| line["containerName"] == "app" && line["bestHint"].is_object()),
        "{all}"
    );
    let allocated = with_msg(&lines, "Allocated exclusive CPUs");
    let allocated_app = allocated
        .iter()
        .find(|line| line["containerName"] == "app")
        .unwrap_or_else(|| panic!("no allocation logged for app: {all}"));
    assert_eq!(allocated_app["v"], 4, "upstream's V(4)");
    assert_eq!(
        allocated_app["podUID"].as_str().map(str::is_empty),
        Some(false)
    );

    // The HTTP/2 and gRPC stack: out (its warnings would stay).
    let from_stack = lines
        .iter()
        .filter(|line| HTTP2_AND_GRPC.contains(&crate_of(line)))
        .count();
    assert!(
        from_stack * 10 < lines.len(),
        "{from_stack} of {} lines from the HTTP/2 and gRPC stack: {all}",
        lines.len()
    );
    let from_dependencies = lines
        .iter()
        .filter(|line| crate_of(line) != "corral")
        .count();
    assert!(from_dependencies * 10 < lines.len(), "{all}");
}

#[test]
fn rust_log_brings_http2_internals_back() {
    let dir = tempfile::tempdir().unwrap();
    let raw = log_of_two_admissions(dir.path(), Some("info,corral=trace,h2=trace"));
    let lines = parse(&raw);
    let from_h2 = lines.iter().filter(|line| crate_of(line) == "h2").count();
    assert!(from_h2 > 0, "RUST_LOG asked for h2: {}", raw.join("\n"));
    let sample = lines.iter().find(|line| crate_of(line) == "h2").unwrap();
    assert!(
        sample["v"] == 2 || sample["v"] == 4,
        "h2 logs at DEBUG and TRACE: {sample}"
    );
    assert!(
        sample["logger"]
            .as_str()
            .is_some_and(|l| l.starts_with("h2::")),
        "{sample}"
    );
    // corral's own messages are still there.
    assert!(!with_msg(&lines, "Best TopologyHint").is_empty());
}

/// Logging everything (TRACE) changes no decision on the large machines: the log lines
/// search nothing (a family too wide to list is summarised from its description), so they
/// spend none of a decision's budget. Both scopes, with the memory manager; the log has the
/// best hint, and the 64-node families as summaries.
#[test]
fn logging_at_trace_decides_as_without_it() {
    use corral_testkit::large_machines::{gb200, synthetic64};
    use corral_topology::{PolicyName, ScopeName};

    use crate::in_process::{GI, NodeConfig, Providers, guaranteed, holdings, node};

    for machine in [gb200(), synthetic64()] {
        for scope in [ScopeName::Container, ScopeName::Pod] {
            let config = NodeConfig {
                policy: PolicyName::Restricted,
                scope,
                prefer_closest_numa: false,
                providers: Providers::CpusDevicesAndMemory,
            };
            let pod = guaranteed("pod", machine.resource, 4, 4 * GI, 1);
            let quiet = node(&machine, config);
            let decided = quiet.manager.admit(&pod);
            let held = holdings(&quiet, &machine, &pod);

            let logged = node(&machine, config);
            let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
            let writer = buffer.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(move || SharedBuffer(writer.clone()))
                .finish();
            let again =
                tracing::subscriber::with_default(subscriber, || logged.manager.admit(&pod));
            let what = format!("{} {config:?}", machine.resource);
            assert_eq!(
                (again.admit, &again.reason, again.approximate),
                (decided.admit, &decided.reason, decided.approximate),
                "{what}"
            );
            assert_eq!(holdings(&logged, &machine, &pod), held, "{what}");
            assert_eq!(
                logged.manager.affinity("pod", "app"),
                quiet.manager.affinity("pod", "app"),
                "{what}"
            );
            let log = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
            assert!(log.contains("Best TopologyHint bestHint="), "{what}: {log}");
            let merged = match scope {
                ScopeName::Pod => "PodTopologyHint",
                _ => "ContainerTopologyHint",
            };
            assert!(log.contains(merged), "{what}: {log}");
            if machine.nodes.len() > corral_topology::topologymanager::LISTED_FAMILY_NODES {
                assert!(log.contains("\"family of NUMA nodes "), "{what}: {log}");
            }
        }
    }
}

/// A writer into a shared buffer, for a subscriber's output.
struct SharedBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
