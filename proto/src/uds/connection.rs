//! An accepted unix-socket connection whose inbound HTTP/2 bytes pass through the
//! [`AuthorityRewriter`](super::authority::AuthorityRewriter), and which, when accepted by
//! [`super::serve_with`], counts against its socket's connection cap and must complete the
//! HTTP/2 handshake before a deadline.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::time::Sleep;
use tonic::transport::server::{Connected, UdsConnectInfo};

use super::authority::AuthorityRewriter;
use super::incoming::ConnectionSlot;

/// How much to read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;
/// Length of the HTTP/2 client connection preface.
const PREFACE_LEN: usize = 24;
/// Length of an HTTP/2 frame header.
const FRAME_HEADER_LEN: usize = 9;

/// How far a client is into the HTTP/2 handshake: the connection preface, then one whole
/// frame (which HTTP/2 requires to be SETTINGS; whether it is, `h2` checks).
#[derive(Debug, Default)]
struct HandshakeProgress {
    /// Bytes received so far (saturating).
    seen: usize,
    /// The first frame's header.
    header: [u8; FRAME_HEADER_LEN],
}

impl HandshakeProgress {
    /// Count bytes the client sent; true once the preface and the first frame are in.
    fn feed(&mut self, mut input: &[u8]) -> bool {
        const HEAD: usize = PREFACE_LEN + FRAME_HEADER_LEN;
        while self.seen < HEAD {
            let Some((&byte, rest)) = input.split_first() else {
                return false;
            };
            if self.seen >= PREFACE_LEN {
                self.header[self.seen - PREFACE_LEN] = byte;
            }
            self.seen += 1;
            input = rest;
        }
        let [a, b, c, ..] = self.header;
        let length = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
        self.seen = self.seen.saturating_add(input.len());
        self.seen >= HEAD + length
    }
}

/// The deadline of a connection that has not completed its handshake yet.
#[derive(Debug)]
struct Handshake {
    timeout: Duration,
    deadline: Pin<Box<Sleep>>,
    progress: HandshakeProgress,
}

/// The client did not complete the HTTP/2 handshake in time.
#[derive(Debug, thiserror::Error)]
#[error("the client did not send the HTTP/2 connection preface and SETTINGS within {timeout:?}")]
struct HandshakeTimeout {
    timeout: Duration,
}

/// A server-side unix-socket connection that accepts any `:authority` a client sends.
///
/// Reads come from the socket through the rewriter; writes go to the socket untouched.
#[derive(Debug)]
pub struct UdsConnection {
    stream: UnixStream,
    rewriter: AuthorityRewriter,
    /// Rewritten bytes not yet handed to the reader, from `pending_pos` on.
    pending: Vec<u8>,
    pending_pos: usize,
    scratch: Box<[u8]>,
    /// Until the handshake completes: its deadline.
    handshake: Option<Handshake>,
    /// The place this connection takes under its socket's cap (given back on drop).
    slot: Option<ConnectionSlot>,
}

impl UdsConnection {
    /// Wrap an accepted connection (no handshake deadline, not counted against a cap).
    pub fn new(stream: UnixStream) -> Self {
        Self {
            stream,
            rewriter: AuthorityRewriter::default(),
            pending: Vec::new(),
            pending_pos: 0,
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
            handshake: None,
            slot: None,
        }
    }

    /// Wrap a connection accepted under a cap: it holds `slot` until dropped, and reads
    /// fail (closing the connection) when the client has not sent the HTTP/2 preface and
    /// its first frame within `handshake_timeout`. Must be called inside a tokio runtime.
    pub(crate) fn limited(
        stream: UnixStream,
        slot: ConnectionSlot,
        handshake_timeout: Option<Duration>,
    ) -> Self {
        let mut connection = Self::new(stream);
        connection.slot = Some(slot);
        connection.handshake = handshake_timeout.map(|timeout| Handshake {
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            progress: HandshakeProgress::default(),
        });
        connection
    }

    /// The handshake deadline passed: log (at a bounded rate) and fail the read.
    fn handshake_timed_out(&self) -> io::Error {
        let timeout = self
            .handshake
            .as_ref()
            .map_or(Duration::ZERO, |h| h.timeout);
        if let Some(slot) = &self.slot {
            slot.shared.handshake_timed_out(timeout);
        }
        io::Error::new(io::ErrorKind::TimedOut, HandshakeTimeout { timeout })
    }

    /// How many requests on this connection had their `:authority` replaced.
    pub fn rewritten_authorities(&self) -> u64 {
        self.rewriter.rewritten()
    }
}

impl AsyncRead for UdsConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.pending_pos < this.pending.len() {
                let available = &this.pending[this.pending_pos..];
                let take = available.len().min(buf.remaining());
                buf.put_slice(&available[..take]);
                this.pending_pos += take;
                if this.pending_pos == this.pending.len() {
                    this.pending.clear();
                    this.pending_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut raw = ReadBuf::new(&mut this.scratch);
            let polled = Pin::new(&mut this.stream).poll_read(cx, &mut raw);
            let read = raw.filled().len();
            // Polled on every read attempt, so the deadline wakes a client that sends
            // nothing. Bytes already received are looked at first: a handshake that arrived
            // in time completes even when a busy machine reads it after the deadline; one
            // still incomplete after the deadline fails, so a trickle does not extend it.
            let expired = this
                .handshake
                .as_mut()
                .is_some_and(|handshake| handshake.deadline.as_mut().poll(cx).is_ready());
            match polled {
                Poll::Pending if expired => return Poll::Ready(Err(this.handshake_timed_out())),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Ready(Ok(())) if read == 0 => return Poll::Ready(Ok(())), // end of stream
                Poll::Ready(Ok(())) => {}
            }
            let read = &this.scratch[..read];
            if let Some(handshake) = this.handshake.as_mut() {
                if handshake.progress.feed(read) {
                    this.handshake = None;
                } else if expired {
                    return Poll::Ready(Err(this.handshake_timed_out()));
                }
            }
            this.rewriter
                .feed(read, &mut this.pending)
                .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))?;
        }
    }
}

impl AsyncWrite for UdsConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl Connected for UdsConnection {
    type ConnectInfo = UdsConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn settings(payload: usize) -> Vec<u8> {
        let mut frame = PREFACE.to_vec();
        frame.extend_from_slice(&[0, 0, payload as u8, 0x4, 0, 0, 0, 0, 0]);
        frame.extend(std::iter::repeat_n(0u8, payload));
        frame
    }

    /// A handshake that arrived before the deadline completes even when the connection is
    /// first read after it (a busy machine); one that is still incomplete then fails.
    #[tokio::test]
    async fn a_handshake_read_late_completes_an_incomplete_one_fails() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let timeout = Duration::from_millis(1);
        for (sent, completes) in [(settings(6), true), (PREFACE.to_vec(), false)] {
            let (server, mut client) = UnixStream::pair().unwrap();
            client.write_all(&sent).await.unwrap();
            let mut connection =
                UdsConnection::limited(server, ConnectionSlot::unshared(), Some(timeout));
            // Past the deadline before the first read, whatever the machine's speed.
            tokio::time::sleep(timeout * 20).await;
            let mut buf = vec![0; sent.len()];
            let read = connection.read_exact(&mut buf).await;
            if completes {
                read.unwrap();
                assert_eq!(buf, sent);
                assert!(connection.handshake.is_none());
            } else {
                let err = read.unwrap_err();
                assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
            }
        }
    }

    #[test]
    fn handshake_completes_after_the_preface_and_the_first_whole_frame() {
        for payload in [0, 6, 18] {
            let bytes = settings(payload);
            for split in 0..bytes.len() {
                let mut progress = HandshakeProgress::default();
                let first = progress.feed(&bytes[..split]);
                assert!(!first, "payload {payload}: complete after {split} bytes");
                assert!(
                    progress.feed(&bytes[split..]),
                    "payload {payload}, split {split}"
                );
            }
            let mut byte_by_byte = HandshakeProgress::default();
            let done: Vec<bool> = bytes.iter().map(|b| byte_by_byte.feed(&[*b])).collect();
            assert_eq!(done.iter().position(|d| *d), Some(bytes.len() - 1));
        }
    }

    corral_testkit::fuzz! {
        /// Any bytes, split anywhere: no panic, and the handshake completes at the same
        /// byte as when fed one byte at a time (preface length plus a whole first frame).
        fn fuzz_handshake_progress(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96),
            cuts in proptest::collection::vec(0usize..96, 0..6),
        ) {
            let mut one_by_one = HandshakeProgress::default();
            let expected = bytes.iter().position(|b| one_by_one.feed(&[*b]));
            if let Some(at) = expected {
                let length = usize::from(bytes[24]) << 16 | usize::from(bytes[25]) << 8
                    | usize::from(bytes[26]);
                proptest::prop_assert_eq!(at + 1, 33 + length);
            }
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= bytes.len()).collect();
            cuts.push(bytes.len());
            cuts.sort_unstable();
            let mut progress = HandshakeProgress::default();
            let mut start = 0;
            let mut done_at = None;
            for cut in cuts {
                if progress.feed(&bytes[start..cut]) && done_at.is_none() {
                    done_at = Some(cut);
                }
                start = cut;
            }
            // Done in the piece that holds the completing byte.
            proptest::prop_assert_eq!(done_at.is_some(), expected.is_some());
            if let (Some(cut), Some(at)) = (done_at, expected) {
                proptest::prop_assert!(cut > at);
            }
        }
    }

    #[test]
    fn silence_or_a_preface_alone_is_not_a_handshake() {
        let mut progress = HandshakeProgress::default();
        assert!(!progress.feed(&[]));
        assert!(!progress.feed(PREFACE));
        assert!(!progress.feed(&[0, 0, 6, 0x4, 0, 0, 0, 0, 0, 1, 2]));
    }
}
