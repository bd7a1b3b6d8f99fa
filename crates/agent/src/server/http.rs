//! The HTTP endpoint on `--metrics-addr` (off unless set): `GET /metrics` answers the
//! kubelet's resource-manager series ([`super::metrics`]), `GET /healthz` and `GET /readyz`
//! the probes ([`super::health`]); any other path is 404. It is bound before anything else
//! and served from the start, so the probes answer while the state is being restored.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};

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
/// [`CONNECTION_DEADLINE`]; beyond [`MAX_CONNECTIONS`] at once, the connection that has
/// waited longest for its request head is closed for the new one (a connection finding
/// every slot answering is closed).
pub(crate) async fn serve(
    listener: TcpListener,
    probes: Arc<Probes>,
    shutdown: impl Future<Output = ()>,
) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving metrics");
    }
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let reading = Arc::new(Reading::default());
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
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => Some(slot),
            // Every slot taken: the connection that has waited longest for its request
            // head gives its slot up (idle or slow clients must not keep a probe out);
            // with every one answering, this one is closed (dropped).
            Err(_) if reading.evict_oldest() => None,
            Err(_) => continue,
        };
        let (probes, slots, reading) = (
            Arc::clone(&probes),
            Arc::clone(&slots),
            Arc::clone(&reading),
        );
        tokio::spawn(async move {
            let slot = match slot {
                Some(slot) => slot,
                None => {
                    match tokio::time::timeout(CONNECTION_DEADLINE, slots.acquire_owned()).await {
                        Ok(Ok(slot)) => slot,
                        _ => return,
                    }
                }
            };
            let (id, evicted) = reading.register();
            let _ = tokio::time::timeout(
                CONNECTION_DEADLINE,
                answer(stream, &probes, evicted, || reading.done(id)),
            )
            .await;
            reading.done(id);
            drop(slot);
        });
    }
}

/// The connections still reading their request head, oldest first, each with the sender
/// that closes it.
#[derive(Default)]
struct Reading(std::sync::Mutex<(u64, BTreeMap<u64, oneshot::Sender<()>>)>);

impl Reading {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, BTreeMap<u64, oneshot::Sender<()>>)> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A connection starts reading its head: its id, and what tells it to give up.
    fn register(&self) -> (u64, oneshot::Receiver<()>) {
        let (evict, evicted) = oneshot::channel();
        let mut reading = self.lock();
        let id = reading.0;
        reading.0 += 1;
        reading.1.insert(id, evict);
        (id, evicted)
    }

    /// Connection `id` has its head (or ended): it is no longer evicted.
    fn done(&self, id: u64) {
        self.lock().1.remove(&id);
    }

    /// Close the connection that has waited longest for its head; false with none.
    fn evict_oldest(&self) -> bool {
        let oldest = self.lock().1.pop_first();
        oldest.is_some_and(|(_, evict)| {
            let _ = evict.send(());
            true
        })
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

/// Read one request head from `stream` (giving up when `evicted` says so) and answer it;
/// `head_read` once the head is in.
async fn answer(
    mut stream: TcpStream,
    probes: &Probes,
    mut evicted: oneshot::Receiver<()>,
    head_read: impl FnOnce(),
) {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            break;
        }
        tokio::select! {
            _ = &mut evicted => return,
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            },
        }
    }
    head_read();
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
