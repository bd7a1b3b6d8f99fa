//! An accepted unix-socket connection whose inbound HTTP/2 bytes pass through the
//! [`AuthorityRewriter`](super::authority::AuthorityRewriter).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tonic::transport::server::{Connected, UdsConnectInfo};

use super::authority::AuthorityRewriter;

/// How much to read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

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
}

impl UdsConnection {
    /// Wrap an accepted connection.
    pub fn new(stream: UnixStream) -> Self {
        Self {
            stream,
            rewriter: AuthorityRewriter::default(),
            pending: Vec::new(),
            pending_pos: 0,
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        }
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
            ready!(Pin::new(&mut this.stream).poll_read(cx, &mut raw))?;
            let read = raw.filled();
            if read.is_empty() {
                return Poll::Ready(Ok(())); // end of stream
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
