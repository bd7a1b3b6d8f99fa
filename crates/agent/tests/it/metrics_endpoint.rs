//! The real `corral run` and its metrics endpoint: a metrics address that is already taken
//! ends the agent at start, non-zero and naming the address; a served one answers the
//! kubelet's metric names (upstream `pkg/kubelet/metrics/metrics.go`, v1.36) in the text
//! format its content type names, `/healthz` with `ok`, unknown paths with 404.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::support::{Reaped, STATIC_SINGLE_NUMA, WAIT, corral_run, log_file, sigterm, wait_exit};

/// The families an idle agent under the static CPU policy and `single-numa-node` exports
/// from the start (the device and DRA histograms appear with their first observation).
const AT_START: &[&str] = &[
    "corral_admitted_pods",
    "corral_state_journal_syncs_total",
    "corral_topology_manager_approximate_decisions_total",
    "dra_resource_claims_in_use",
    "kubelet_container_aligned_compute_resources_count",
    "kubelet_container_aligned_compute_resources_failure_count",
    "kubelet_cpu_manager_allocation_per_numa",
    "kubelet_cpu_manager_exclusive_cpu_allocation_count",
    "kubelet_cpu_manager_pinning_errors_total",
    "kubelet_cpu_manager_pinning_requests_total",
    "kubelet_cpu_manager_shared_pool_size_millicores",
    "kubelet_memory_manager_pinning_errors_total",
    "kubelet_memory_manager_pinning_requests_total",
    "kubelet_topology_manager_admission_duration_ms",
    "kubelet_topology_manager_admission_errors_total",
    "kubelet_topology_manager_admission_requests_total",
    "resource_manager_allocation_errors_total",
    "resource_manager_allocations_total",
    "resource_manager_container_assignments",
];

/// The families upstream's metrics.go (v1.36) defines that appear with their first
/// observation: with those at start, every family corral exports.
const AFTER_FIRST_USE: &[&str] = &[
    "dra_operations_duration_seconds",
    "kubelet_device_plugin_alloc_duration_seconds",
    "kubelet_device_plugin_registration_total",
];

/// `corral run` on the fixture with a temp root; its stderr goes to `<root>.log`.
fn start(root: &Path, flags: &[&str]) -> Child {
    corral_run(root, flags, log_file(&root.with_extension("log")))
}

fn log(root: &Path) -> String {
    std::fs::read_to_string(root.with_extension("log")).unwrap_or_default()
}

/// `GET path`: the status line, the `Content-Type` and the body.
pub(crate) fn get(addr: SocketAddr, path: &str) -> std::io::Result<(String, String, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, WAIT)?;
    stream.set_read_timeout(Some(WAIT))?;
    stream.set_write_timeout(Some(WAIT))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no head in {answer:?}")))?;
    let status = head.lines().next().unwrap_or_default().to_owned();
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(": ")?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.to_owned())
        })
        .unwrap_or_default();
    Ok((status, content_type, body.to_owned()))
}

/// The address the agent logged it serves metrics on (it binds port 0: a port picked
/// beforehand and released could be taken by anything on the machine before the agent binds
/// it).
fn served_addr(root: &Path) -> Option<SocketAddr> {
    let log = log(root);
    let line = log.lines().find(|l| l.contains("serving metrics"))?;
    let addr = line.split("addr=").nth(1)?.split_whitespace().next()?;
    Some(addr.parse().expect("a socket address"))
}

#[test]
fn a_taken_metrics_address_is_fatal_at_start_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut child = start(&root, &["--metrics-addr", &addr]);
    let status = wait_exit(&mut child, WAIT);
    let log = log(&root);
    let status = status.unwrap_or_else(|| {
        panic!("corral run still running {WAIT:?} after start with {addr} taken:\n{log}")
    });
    assert!(!status.success(), "{status}: {log}");
    assert!(
        log.contains(&format!("binding the metrics address {addr}")),
        "{log}"
    );
    assert!(!log.contains("serving"), "{log}");
    // Nothing was set up: no socket left behind.
    assert!(!root.join("corral/agent.sock").exists(), "{log}");
}

#[test]
fn the_agent_serves_kubelet_metrics_healthz_and_404() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let flags = [&["--metrics-addr=127.0.0.1:0"], STATIC_SINGLE_NUMA].concat();
    let mut agent = Reaped(start(&root, &flags));
    // Ready once /healthz answers ok.
    let deadline = Instant::now() + WAIT;
    let addr = loop {
        if let Some(status) = agent.0.try_wait().unwrap() {
            panic!("corral run exited with {status}: {}", log(&root));
        }
        if let Some(addr) = served_addr(&root)
            && let Ok((status, _, body)) = get(addr, "/healthz")
            && status == "HTTP/1.1 200 OK"
            && body == "ok"
        {
            break addr;
        }
        assert!(
            Instant::now() < deadline,
            "no ok from /healthz: {}",
            log(&root)
        );
        std::thread::sleep(Duration::from_millis(50));
    };

    let (status, content_type, body) = get(addr, "/metrics").unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    // The body is that format: no OpenMetrics `# EOF`, and each family's samples carry its
    // `# TYPE` name (a histogram's with `_bucket`, `_sum`, `_count`).
    assert!(!body.contains("# EOF"), "{body}");
    let mut families = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            families.push(name.to_owned());
            current = Some((name.to_owned(), kind.to_owned()));
        } else if !line.starts_with('#') {
            let (name, kind) = current.as_ref().expect("a sample before any # TYPE");
            let sample = line.split(['{', ' ']).next().unwrap();
            let ok = if kind == "histogram" {
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| sample == format!("{name}{s}"))
            } else {
                sample == name
            };
            assert!(ok, "{line:?} under # TYPE {name} {kind}");
        }
    }
    for family in &families {
        let known = AT_START.iter().chain(AFTER_FIRST_USE);
        assert!(
            known.into_iter().any(|k| k == family),
            "not upstream's: {family}"
        );
    }
    for family in AT_START {
        assert!(
            families.iter().any(|f| f == family),
            "{family} missing:\n{body}"
        );
    }

    // A Guaranteed admission (two containers with integer CPUs) counts in v1.37's resource-manager families.
    let pod = crate::support::workspace().join("examples/pods/guaranteed.yaml");
    let admitted = crate::support::corral()
        .args(["admit", "-f", pod.to_str().unwrap(), "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(admitted.status.success(), "{admitted:?}");
    let (_, _, body) = get(addr, "/metrics").unwrap();
    for sample in [
        "resource_manager_allocations_total{resource_name=\"cpu\",source=\"node\"} 2",
        "resource_manager_container_assignments{assignment_type=\"node_exclusive\",resource_name=\"cpu\"} 2",
        "resource_manager_allocation_errors_total{resource_name=\"cpu\",source=\"node\"} 0",
    ] {
        assert!(
            body.lines().any(|l| l == sample),
            "{sample} not in:\n{body}"
        );
    }

    let (status, _, body) = get(addr, "/healthz").unwrap();
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", "ok"));
    for path in ["/", "/nope", "/metricsx"] {
        let (status, _, body) = get(addr, path).unwrap();
        assert_eq!(status, "HTTP/1.1 404 Not Found", "{path}");
        assert_eq!(body, "404 page not found\n", "{path}");
    }

    // After SIGTERM the agent stops and the endpoint with it.
    sigterm(&agent.0);
    let status = wait_exit(&mut agent.0, WAIT).expect("no exit after SIGTERM");
    assert!(status.success(), "{status}: {}", log(&root));
    assert!(get(addr, "/healthz").is_err());
}
