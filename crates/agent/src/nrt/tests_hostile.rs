//! kube-rs' client as corral drives it, against a hostile HTTP server on loopback: every
//! answer is bounded (body size, call deadline), statuses map to what the publisher does
//! next, and a 429's `Retry-After` is kept.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use corral_nrt::NodeResourceTopology;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::api::{ApiError, NrtApi};
use super::kube_api::{KubeNrtApi, MAX_BODY_BYTES};
use crate::config::Credentials;

/// What the server sends for every request.
#[derive(Clone)]
enum Answer {
    /// Status line, headers, body.
    Reply(&'static str, Vec<(&'static str, String)>, Vec<u8>),
    /// A body that never ends (a `Content-Length` far larger than what follows, sent slowly).
    Endless,
    /// Read the request, then say nothing.
    Silence,
}

/// A one-answer HTTP/1.1 server on loopback; counts the requests it read.
struct Hostile {
    addr: std::net::SocketAddr,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

impl Hostile {
    async fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let answer = answer.clone();
                let counted = Arc::clone(&counted);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    counted.fetch_add(1, Ordering::SeqCst);
                    match answer {
                        Answer::Reply(status, headers, body) => {
                            let mut out =
                                format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
                            for (k, v) in headers {
                                out.push_str(&format!("{k}: {v}\r\n"));
                            }
                            out.push_str("\r\n");
                            let _ = stream.write_all(out.as_bytes()).await;
                            let _ = stream.write_all(&body).await;
                        }
                        Answer::Endless => {
                            let _ = stream
                                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n")
                                .await;
                            let chunk = vec![b' '; 64 * 1024];
                            while stream.write_all(&chunk).await.is_ok() {}
                        }
                        Answer::Silence => std::future::pending::<()>().await,
                    }
                });
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://{addr}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\ncurrent-context: c\n"
            ),
        )
        .unwrap();
        Self {
            addr,
            requests,
            task,
            _dir: dir,
            kubeconfig,
        }
    }

    async fn api(&self, timeout: Duration) -> KubeNrtApi {
        KubeNrtApi::connect(&Credentials::Kubeconfig(self.kubeconfig.clone()))
            .await
            .unwrap()
            .with_timeout(timeout)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn object() -> NodeResourceTopology {
    NodeResourceTopology::named("worker-1")
}

#[tokio::test]
async fn a_huge_body_is_refused_at_the_cap() {
    let body = vec![b' '; MAX_BODY_BYTES + 1];
    let server = Hostile::start(Answer::Reply("200 OK", vec![], body)).await;
    let api = server.api(Duration::from_secs(60)).await;
    match api.get("worker-1").await {
        Err(ApiError::TooLarge { limit }) => assert_eq!(limit, MAX_BODY_BYTES),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_body_that_never_ends_is_cut_by_the_cap_or_the_deadline() {
    let server = Hostile::start(Answer::Endless).await;
    let api = server.api(Duration::from_secs(20)).await;
    let answer = api.get("worker-1").await;
    assert!(
        matches!(
            answer,
            Err(ApiError::TooLarge { .. } | ApiError::Timeout(_))
        ),
        "{answer:?}"
    );
}

#[tokio::test]
async fn a_silent_server_costs_one_deadline() {
    let server = Hostile::start(Answer::Silence).await;
    let api = server.api(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let answer = api.replace(&object()).await;
    assert!(matches!(answer, Err(ApiError::Timeout(_))), "{answer:?}");
    // It returned: the bound is the deadline, not the server (generous on a busy machine).
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_429_keeps_its_retry_after() {
    let headers = vec![("Retry-After", "7".to_owned())];
    let server = Hostile::start(Answer::Reply(
        "429 Too Many Requests",
        headers,
        b"{}".to_vec(),
    ))
    .await;
    let api = server.api(Duration::from_secs(60)).await;
    match api.create(&object()).await {
        Err(ApiError::TooManyRequests { retry_after }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(7)));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn garbage_and_error_statuses_are_typed() {
    let server = Hostile::start(Answer::Reply(
        "200 OK",
        vec![],
        b"\x00\xffnot json".to_vec(),
    ))
    .await;
    let api = server.api(Duration::from_secs(60)).await;
    assert!(matches!(
        api.get("worker-1").await,
        Err(ApiError::Malformed(_))
    ));
    let status = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server is shutting down","code":503}"#;
    let server = Hostile::start(Answer::Reply(
        "503 Service Unavailable",
        vec![],
        status.to_vec(),
    ))
    .await;
    let api = server.api(Duration::from_secs(60)).await;
    match api.replace(&object()).await {
        Err(ApiError::Status { status, message }) => {
            assert_eq!(status, 503);
            assert_eq!(message, "the server is shutting down");
        }
        other => panic!("{other:?}"),
    }
    let server = Hostile::start(Answer::Reply("404 Not Found", vec![], b"{}".to_vec())).await;
    let api = server.api(Duration::from_secs(60)).await;
    assert!(matches!(api.get("worker-1").await, Ok(None)));
    assert!(matches!(
        api.replace(&object()).await,
        Err(ApiError::NotFound)
    ));
    let _ = server.addr;
}
