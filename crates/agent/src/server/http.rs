//! The HTTP endpoint on `--metrics-addr` (off unless set): `GET /metrics` answers the
//! kubelet's resource-manager series ([`super::metrics`]), `GET /healthz` and `GET /readyz`
//! the probes ([`super::health`]); any other path is 404. It is bound before anything else
//! and served from the start, so the probes answer while the state is being restored.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::health::{ProbeAnswer, Probes};
use super::metrics::render_settled;
use crate::exposition;

/// Connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 64;
/// How long one connection may take, request head to last byte of the answer.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// The largest request head read.
const MAX_HEAD: usize = 16 * 1024;
/// Pause after a failed accept (e.g. EMFILE) before the next one.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Bind the metrics address; the error names it.
pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics address {addr}"))
}

/// Answer on `listener` until `shutdown` completes. Each connection gets one answer within
/// [`CONNECTION_DEADLINE`]; beyond [`MAX_CONNECTIONS`] at once, connections are closed.
pub(crate) async fn serve(
    listener: TcpListener,
    probes: Arc<Probes>,
    shutdown: impl Future<Output = ()>,
) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving metrics");
    }
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(%err, "metrics accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Too many at once: dropping the stream closes it.
            continue;
        };
        let probes = Arc::clone(&probes);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_DEADLINE, answer(stream, &probes)).await;
            drop(slot);
        });
    }
}

/// What to send back.
struct Reply {
    status: &'static str,
    content_type: &'static str,
    allow: bool,
    body: String,
    head_only: bool,
}

impl Reply {
    fn text(status: &'static str, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            allow: false,
            body: body.to_owned(),
            head_only: false,
        }
    }
}

/// A probe's reply: 200 with its body, or 503 naming every trouble, a line each.
fn probe(answer: ProbeAnswer) -> Reply {
    match answer {
        Ok(body) => Reply::text("200 OK", body),
        Err(why) => Reply::text("503 Service Unavailable", &format!("{why}\n")),
    }
}

/// The answer to one request head (`GET /path HTTP/1.1 …`).
async fn route(head: &[u8], probes: &Probes) -> Reply {
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Reply::text("400 Bad Request", "400 Bad Request\n");
    };
    if !version.starts_with("HTTP/1.") {
        return Reply::text("400 Bad Request", "400 Bad Request\n");
    }
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let mut reply = match path {
        "/metrics" if probes.node().is_none() => {
            Reply::text("503 Service Unavailable", "restoring state\n")
        }
        "/metrics" => Reply {
            status: "200 OK",
            content_type: exposition::CONTENT_TYPE,
            allow: false,
            body: String::new(),
            head_only: false,
        },
        "/healthz" => probe(probes.health()),
        "/readyz" => probe(probes.readiness()),
        // Go's http.NotFound, as the kubelet answers an unknown path.
        _ => return Reply::text("404 Not Found", "404 page not found\n"),
    };
    match method {
        "GET" => {}
        "HEAD" => reply.head_only = true,
        _ => {
            let mut refused = Reply::text("405 Method Not Allowed", "Method Not Allowed\n");
            refused.allow = true;
            return refused;
        }
    }
    if path == "/metrics"
        && let Some((node, extra)) = probes.node()
    {
        match render_settled(node, extra).await {
            Ok(body) => reply.body = body,
            Err(err) => {
                return Reply::text("500 Internal Server Error", &format!("{err:#}\n"));
            }
        }
    }
    reply
}

/// Read one request head from `stream` and answer it.
async fn answer(mut stream: TcpStream, probes: &Probes) {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            break;
        }
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let reply = if head.windows(4).any(|w| w == b"\r\n\r\n") {
        route(&head, probes).await
    } else {
        Reply::text(
            "431 Request Header Fields Too Large",
            "431 Request Header Fields Too Large\n",
        )
    };
    let allow = if reply.allow {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut response = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\n{allow}Content-Length: {}\r\nConnection: close\r\n\r\n",
        reply.status,
        reply.content_type,
        reply.body.len()
    );
    if !reply.head_only {
        response.push_str(&reply.body);
    }
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests;
