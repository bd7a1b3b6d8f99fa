//! The accept loop of [`super::serve_with`]: connections of one listening socket, capped
//! and given a handshake deadline; accept errors logged (at a bounded rate) and backed off
//! from, never retried in a busy loop.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::time::Sleep;
use tokio_stream::Stream;

use super::UdsConnection;
use super::serve_options::ServeOptions;

/// First delay after an accept error; doubled on each further error.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest delay between accept attempts after errors.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Each kind of log line (refused connection, accept error, handshake timeout) is written
/// at most once per this interval per socket; the lines in between are counted.
pub(crate) const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Linux errno values of the accept errors named in logs (corral serves on Linux).
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;
const ENOBUFS: i32 = 105;
const ENOMEM: i32 = 12;

/// Counts events and says when one may be logged: the first, then at most one per
/// interval, with how many were not logged in between.
#[derive(Debug)]
pub(crate) struct RateLimited {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimited {
    pub(crate) fn new(every: Duration) -> Self {
        Self {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// An event: `Some(events not logged since the last logged one)` when this one may be
    /// logged, `None` otherwise.
    pub(crate) fn hit(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_none_or(|last| now.duration_since(last) >= self.every)
        {
            self.last = Some(now);
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

/// What the connections of one socket share with its accept loop.
#[derive(Debug)]
pub(crate) struct SocketShared {
    pub(crate) socket: PathBuf,
    active: AtomicUsize,
    handshake_timeouts: Mutex<RateLimited>,
}

impl SocketShared {
    /// A connection was closed for not completing its handshake in time.
    pub(crate) fn handshake_timed_out(&self, timeout: Duration) {
        let logged = self
            .handshake_timeouts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .hit();
        if let Some(suppressed) = logged {
            tracing::warn!(socket = %self.socket.display(), ?timeout, suppressed,
                "closed a connection that did not send the HTTP/2 preface and SETTINGS in time");
        }
    }
}

/// One counted connection; gives its place back when dropped (when the connection ends).
#[derive(Debug)]
pub(crate) struct ConnectionSlot {
    pub(crate) shared: Arc<SocketShared>,
}

impl ConnectionSlot {
    /// The one slot of a socket of its own: a connection's tests.
    #[cfg(test)]
    pub(crate) fn unshared() -> Self {
        ConnectionSlot {
            shared: Arc::new(SocketShared {
                socket: PathBuf::from("test.sock"),
                active: AtomicUsize::new(1),
                handshake_timeouts: Mutex::new(RateLimited::new(LOG_INTERVAL)),
            }),
        }
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.shared.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why an accept error happened, for the log; `None` for errors about one connection
/// that are retried at once.
fn accept_error_cause(err: &io::Error) -> Option<&'static str> {
    match err.raw_os_error() {
        Some(EMFILE) => Some(
            "too many open files (EMFILE): this process reached its open-file limit (RLIMIT_NOFILE)",
        ),
        Some(ENFILE) => Some("too many open files in the system (ENFILE)"),
        Some(ENOBUFS | ENOMEM) => Some("out of kernel memory for sockets (ENOBUFS/ENOMEM)"),
        _ => match err.kind() {
            io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted => None,
            _ => Some("accept failed"),
        },
    }
}

/// The connections of one listening socket, as a stream for tonic. It never yields an
/// error: accept errors are handled here.
pub(crate) struct Incoming {
    listener: UnixListener,
    shared: Arc<SocketShared>,
    max_connections: usize,
    handshake_timeout: Option<Duration>,
    backoff: Option<Pin<Box<Sleep>>>,
    delay: Duration,
    refused: RateLimited,
    failed: RateLimited,
}

impl Incoming {
    pub(crate) fn new(listener: UnixListener, socket: PathBuf, options: &ServeOptions) -> Self {
        Self {
            listener,
            shared: Arc::new(SocketShared {
                socket,
                active: AtomicUsize::new(0),
                handshake_timeouts: Mutex::new(RateLimited::new(LOG_INTERVAL)),
            }),
            max_connections: options.max_connections,
            handshake_timeout: options.handshake_timeout,
            backoff: None,
            delay: ACCEPT_BACKOFF_MIN,
            refused: RateLimited::new(LOG_INTERVAL),
            failed: RateLimited::new(LOG_INTERVAL),
        }
    }
}

impl Stream for Incoming {
    type Item = io::Result<UdsConnection>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(backoff) = this.backoff.as_mut() {
                ready!(backoff.as_mut().poll(cx));
                this.backoff = None;
            }
            // tokio's cooperative budget makes this return Pending now and then, so a
            // flood of connections to refuse does not monopolize the thread.
            match this.listener.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok((stream, _))) => {
                    this.delay = ACCEPT_BACKOFF_MIN;
                    // Only this loop adds connections, so the check cannot race.
                    let active = this.shared.active.load(Ordering::Acquire);
                    if active >= this.max_connections {
                        drop(stream);
                        if let Some(suppressed) = this.refused.hit() {
                            tracing::warn!(socket = %this.shared.socket.display(),
                                max_connections = this.max_connections, suppressed,
                                "too many connections; closed a new one at once");
                        }
                        continue;
                    }
                    this.shared.active.fetch_add(1, Ordering::AcqRel);
                    let slot = ConnectionSlot {
                        shared: Arc::clone(&this.shared),
                    };
                    return Poll::Ready(Some(Ok(UdsConnection::limited(
                        stream,
                        slot,
                        this.handshake_timeout,
                    ))));
                }
                Poll::Ready(Err(err)) => {
                    let Some(cause) = accept_error_cause(&err) else {
                        continue;
                    };
                    if let Some(suppressed) = this.failed.hit() {
                        tracing::error!(socket = %this.shared.socket.display(),
                            error = %err, retry_in = ?this.delay, suppressed,
                            "cannot accept connections: {cause}");
                    }
                    this.backoff = Some(Box::pin(tokio::time::sleep(this.delay)));
                    this.delay = (this.delay * 2).min(ACCEPT_BACKOFF_MAX);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limited_logs_the_first_then_counts() {
        let mut limit = RateLimited::new(Duration::from_secs(3600));
        assert_eq!(limit.hit(), Some(0));
        for _ in 0..5 {
            assert_eq!(limit.hit(), None);
        }
        let mut every_time = RateLimited::new(Duration::ZERO);
        assert_eq!(every_time.hit(), Some(0));
        assert_eq!(every_time.hit(), Some(0));
        limit.last = Some(Instant::now() - Duration::from_secs(3601));
        assert_eq!(limit.hit(), Some(5), "the suppressed events are reported");
    }

    #[test]
    fn accept_errors_are_named() {
        let cause = |errno| accept_error_cause(&io::Error::from_raw_os_error(errno));
        assert!(cause(EMFILE).unwrap().contains("EMFILE"));
        assert!(cause(ENFILE).unwrap().contains("ENFILE"));
        assert!(cause(ENOBUFS).unwrap().contains("ENOBUFS"));
        let aborted = io::Error::from(io::ErrorKind::ConnectionAborted);
        assert_eq!(accept_error_cause(&aborted), None, "retried at once");
    }
}
