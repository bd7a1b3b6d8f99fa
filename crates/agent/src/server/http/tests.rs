//! The HTTP endpoint over a real loopback socket: content type, HEAD, 404, 405, the
//! connection bound, and the probes' answers while restoring, after, and in trouble.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::node::tests::started;
use crate::server::health::Probes;
use crate::server::nri::NriLink;

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";
/// The bound of every wait for something that must happen: it happens far sooner, also on a
/// busy machine; this only ends a test that would otherwise hang.
const WAIT: Duration = Duration::from_secs(60);

/// A raw HTTP/1.1 exchange: the status line, the headers (lower-cased names) and the body.
async fn request(
    addr: std::net::SocketAddr,
    head: &str,
) -> (String, BTreeMap<String, String>, String) {
    tokio::time::timeout(WAIT, async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8(answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().to_owned();
        let headers = lines
            .map(|l| {
                let (name, value) = l.split_once(": ").unwrap();
                (name.to_ascii_lowercase(), value.to_owned())
            })
            .collect();
        (status, headers, body.to_owned())
    })
    .await
    .expect("an answer in time")
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n")
}

/// Serve a fresh node's metrics (its state in a temp dir) on an ephemeral loopback port;
/// the server stops, and the dir goes, when the guard is dropped.
async fn endpoint() -> (
    std::net::SocketAddr,
    (oneshot::Sender<()>, tempfile::TempDir),
) {
    let (dir, _, node) = started(MACHINE, "single-numa-node", &[]).await;
    let probes = Arc::new(Probes::new(None));
    probes.restored(node, Arc::new(Vec::new));
    let (addr, stop) = serve(probes).await;
    (addr, (stop, dir))
}

/// Serve `probes` on an ephemeral loopback port until the sender is dropped.
async fn serve(probes: Arc<Probes>) -> (std::net::SocketAddr, oneshot::Sender<()>) {
    let listener = super::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(super::serve(listener, probes, async move {
        let _ = stopped.await;
    }));
    (addr, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_with_the_content_type_of_the_body() {
    let (addr, _stop) = endpoint().await;
    let (status, headers, body) = request(addr, &get("/metrics")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert_eq!(headers["content-length"], body.len().to_string());
    // The 0.0.4 text format, not OpenMetrics: no `# EOF`, and a counter's `# TYPE` names
    // its samples (OpenMetrics would name the family without `_total`).
    assert!(!body.contains("# EOF"), "{body}");
    assert!(
        body.contains("# TYPE kubelet_cpu_manager_pinning_requests_total counter\n"),
        "{body}"
    );
    crate::server::metrics::tests::parse(&body);
    // HEAD: the same headers, no body.
    let (status, headers, body) =
        request(addr, "HEAD /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_ne!(headers["content-length"], "0");
    assert_eq!(body, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_ok() {
    let (addr, _stop) = endpoint().await;
    let (status, headers, body) = request(addr, &get("/healthz")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(body, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_are_404_and_a_query_string_is_ignored() {
    let (addr, _stop) = endpoint().await;
    for path in ["/", "/metricsx", "/metrics/", "/healthz/x", "/nope"] {
        let (status, _, body) = request(addr, &get(path)).await;
        assert_eq!(status, "HTTP/1.1 404 Not Found", "{path}");
        // Go's http.NotFound, as the kubelet answers.
        assert_eq!(body, "404 page not found\n", "{path}");
    }
    let (status, _, body) = request(addr, &get("/metrics?collect%5B%5D=x")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.starts_with("# HELP "), "{body}");
    let (status, headers, _) =
        request(addr, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").await;
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    assert_eq!(headers["allow"], "GET, HEAD");
    let (status, _, _) = request(addr, "nonsense\r\n\r\n").await;
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_a_taken_address_fails_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let err = super::bind(addr).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("binding the metrics address {addr}")
    );
}

/// Idle and slow clients (connections that never finish their request head) hold every
/// slot, again and again: a probe still gets its answer, the oldest of them closed for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_never_keep_healthz_out() {
    let (addr, _stop) = endpoint().await;
    let mut idle = Vec::new();
    for i in 0..3 * super::MAX_CONNECTIONS {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        // Some send half a head and stop (slow heads), some nothing at all.
        if i % 2 == 0 {
            stream
                .write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
                .await
                .unwrap();
        }
        idle.push(stream);
    }
    for _ in 0..3 {
        let (status, _, body) = request(addr, &get("/healthz")).await;
        assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", "ok"));
    }
    // The oldest idle connection was closed for the newer ones.
    let mut buf = Vec::new();
    let read = tokio::time::timeout(WAIT, idle[0].read_to_end(&mut buf))
        .await
        .expect("the oldest idle connection is closed");
    assert!(read.is_err() || buf.is_empty(), "{buf:?}");
    // A huge head is refused, and does not stop the probe either.
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let _ = stream.write_all(huge.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut answer)).await;
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 431 "),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let (status, _, _) = request(addr, &get("/healthz")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
}

/// Scrapes of `/metrics` wait for a wedged decision (they read settled state); `/healthz`
/// answers meanwhile, off the decision lock, and the scrapes answer once it is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_metrics_wait_for_a_wedged_decision() {
    let (dir, _, node) = started(MACHINE, "single-numa-node", &[]).await;
    let probes = Arc::new(Probes::new(None));
    probes.restored(Arc::clone(&node), Arc::new(Vec::new));
    let (addr, _stop) = serve(probes).await;
    let (release, released) = std::sync::mpsc::channel::<()>();
    let wedged = tokio::spawn({
        let node = Arc::clone(&node);
        async move {
            node.hold_decision_lock_for_test(move || {
                let _ = released.recv_timeout(WAIT);
            })
            .await;
        }
    });
    // A few scrapes wait for the decision (settled metrics)...
    let mut scrapes = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(get("/metrics").as_bytes()).await.unwrap();
        scrapes.push(stream);
    }
    // ...and /healthz answers at once, off the lock.
    let (status, _, _) = request(addr, &get("/healthz")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    release.send(()).unwrap();
    wedged.await.unwrap();
    for mut stream in scrapes {
        let mut answer = Vec::new();
        tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200 OK"));
    }
    drop(dir);
}

/// While the state is restored, `/healthz` is 200 (a liveness probe must not kill a
/// restore) and `/readyz` and `/metrics` are 503; once restored, all three are 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_restoring_only_healthz_is_200() {
    let probes = Arc::new(Probes::new(None));
    let (addr, _stop) = serve(Arc::clone(&probes)).await;
    let (status, _, body) = request(addr, &get("/healthz")).await;
    assert_eq!(
        (status.as_str(), body.as_str()),
        ("HTTP/1.1 200 OK", "restoring state")
    );
    for path in ["/readyz", "/metrics"] {
        let (status, _, body) = request(addr, &get(path)).await;
        assert_eq!(status, "HTTP/1.1 503 Service Unavailable", "{path}");
        assert_eq!(body, "restoring state\n", "{path}");
    }
    let (_dir, _, node) = started(MACHINE, "single-numa-node", &[]).await;
    probes.restored(node, Arc::new(Vec::new));
    for path in ["/healthz", "/readyz"] {
        let (status, _, body) = request(addr, &get(path)).await;
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 200 OK", "ok"),
            "{path}"
        );
    }
    let (status, _, body) = request(addr, &get("/metrics")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        body.contains("kubelet_memory_manager_pinning_requests_total 0"),
        "{body}"
    );
}

/// In NRI mode: `/readyz` waits for the first Synchronize; `/healthz` fails once corral
/// has been unsynchronized past the grace period (from the start, then from a lost
/// connection) and recovers when the runtime synchronizes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nri_unsynchronized_past_the_grace_period_fails_healthz() {
    let grace = Duration::from_millis(200);
    let link = NriLink::new();
    let probes = Arc::new(Probes::new(Some((link.clone(), grace))));
    let (_dir, _, node) = started(MACHINE, "single-numa-node", &[]).await;
    probes.restored(node, Arc::new(Vec::new));
    let (addr, _stop) = serve(Arc::clone(&probes)).await;
    let (status, _, body) = request(addr, &get("/readyz")).await;
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert_eq!(body, "NRI: waiting for the runtime's first Synchronize\n");

    let unhealthy = |addr| async move {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let (status, _, body) = request(addr, &get("/healthz")).await;
            if status != "HTTP/1.1 200 OK" {
                return (status, body);
            }
            assert!(tokio::time::Instant::now() < deadline, "still healthy");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (status, body) = unhealthy(addr).await;
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert!(
        body.starts_with("NRI: not synchronized with the runtime for ")
            && body.contains("(since corral started; nriDisconnectedGracePeriod 200ms)"),
        "{body}"
    );

    link.synchronized();
    for path in ["/healthz", "/readyz"] {
        let (status, _, body) = request(addr, &get(path)).await;
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 200 OK", "ok"),
            "{path}"
        );
    }
    link.lost();
    // Within the grace period after the loss: still healthy, and still ready (it was
    // synchronized once).
    if let (status, _, body) = request(addr, &get("/readyz")).await
        && status != "HTTP/1.1 200 OK"
    {
        // Only a machine slower than the grace period gets here: then it must say why.
        assert!(body.contains("since corral lost"), "{body}");
    }
    let (_, body) = unhealthy(addr).await;
    assert!(body.contains("since corral lost"), "{body}");
    let (status, _, _) = request(addr, &get("/readyz")).await;
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
}

/// A decision holding the decision lock past the wedge bound fails `/healthz` (and
/// `/readyz`), naming it; the lock given back, both are 200 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wedged_decision_fails_healthz() {
    let (_dir, _, node) = started(MACHINE, "single-numa-node", &[]).await;
    let probes = Arc::new(Probes::new(None).wedged_after(Duration::from_millis(100)));
    probes.restored(Arc::clone(&node), Arc::new(Vec::new));
    let (addr, _stop) = serve(Arc::clone(&probes)).await;
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let wedge = {
        let node = Arc::clone(&node);
        tokio::spawn(async move {
            node.hold_decision_lock_for_test(move || {
                entered_tx.send(()).unwrap();
                let _ = release_rx.recv_timeout(WAIT);
            })
            .await
        })
    };
    tokio::task::spawn_blocking(move || entered_rx.recv_timeout(WAIT).unwrap())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    let body = loop {
        let (status, _, body) = request(addr, &get("/healthz")).await;
        if status == "HTTP/1.1 503 Service Unavailable" {
            break body;
        }
        assert!(tokio::time::Instant::now() < deadline, "never wedged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        body.contains("held the decision lock") && body.contains("(wedged)"),
        "{body}"
    );
    let (status, _, _) = request(addr, &get("/readyz")).await;
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    release_tx.send(()).unwrap();
    tokio::time::timeout(WAIT, wedge).await.unwrap().unwrap();
    let (status, _, body) = request(addr, &get("/healthz")).await;
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", "ok"));
}
