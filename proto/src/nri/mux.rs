//! NRI's connection multiplexer (upstream `pkg/net/multiplex`): one unix stream, the trunk,
//! carries several byte-stream connections, each frame an 8-byte header — connection id and
//! payload length, both u32 big-endian — and the payload.
//!
//! corral writes frames of at most [`WRITE_FRAME_PAYLOAD`] (4 KiB) bytes: a ttrpc message
//! may span frames, which every upstream reader (NRI v0.6 in containerd 1.7, v0.8 in 2.0)
//! reassembles, and no peer meets a frame larger than ttrpc's own 4 KiB write buffer gives.
//! corral reads frames up to [`MAX_FRAME_PAYLOAD`], one whole ttrpc message (v0.8 writes up
//! to that; upstream's reader allocates whatever length a header names), and refuses larger
//! ones and a peer that floods a connection faster than it is read (more than
//! [`READ_QUEUE_LEN`] frames queued, as upstream): both end the trunk with
//! [`NriError::Protocol`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::error::NriError;

/// A connection's id on the trunk (0 is reserved).
pub type ConnId = u32;

/// The connection the plugin serves its `Plugin` service on.
pub const PLUGIN_SERVICE_CONN: ConnId = 1;
/// The connection the runtime serves its `Runtime` service on.
pub const RUNTIME_SERVICE_CONN: ConnId = 2;
/// Bytes of a frame header.
pub const HEADER_LEN: usize = 8;
/// The largest frame payload corral reads: one whole ttrpc message (its 10-byte header and
/// 4 MiB).
pub const MAX_FRAME_PAYLOAD: usize = 10 + (4 << 20);
/// The largest frame payload corral writes.
pub const WRITE_FRAME_PAYLOAD: usize = 4 << 10;
/// Frames one connection may have queued unread before the trunk is closed.
pub const READ_QUEUE_LEN: usize = 256;

/// The multiplexer of one trunk (cloneable: every clone is the same trunk). The trunk
/// stays open until [`Mux::close`], the peer closes it, or a protocol violation.
#[derive(Debug, Clone)]
pub struct Mux {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    conns: Mutex<HashMap<ConnId, mpsc::Sender<Vec<u8>>>>,
    closed: CancellationToken,
    unblocked: CancellationToken,
    error: Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, why: String) {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(why);
        self.closed.cancel();
    }

    fn error(&self) -> NriError {
        match self
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            Some(why) => NriError::Protocol(why),
            None => NriError::Closed,
        }
    }
}

impl Mux {
    /// Multiplexes `trunk`. Its frames are read by a task on the current runtime, from
    /// [`Mux::unblock`] until the trunk closes: open the connections first, so that no
    /// frame the peer sends at once is dropped for a connection not open yet (upstream's
    /// `WithBlockedRead`).
    pub fn new(trunk: UnixStream) -> Mux {
        let (reader, writer) = trunk.into_split();
        let shared = Arc::new(Shared {
            writer: tokio::sync::Mutex::new(writer),
            conns: Mutex::new(HashMap::new()),
            closed: CancellationToken::new(),
            unblocked: CancellationToken::new(),
            error: Mutex::new(None),
        });
        tokio::spawn(read_frames(reader, Arc::clone(&shared)));
        Mux { shared }
    }

    /// Opens connection `id`. Frames for a connection not open are dropped.
    pub fn open(&self, id: ConnId) -> Result<MuxConn, NriError> {
        if id == 0 {
            return Err(NriError::Protocol("connection id 0 is reserved".into()));
        }
        let (tx, rx) = mpsc::channel(READ_QUEUE_LEN);
        let mut conns = self.conns();
        if conns.insert(id, tx).is_some() {
            return Err(NriError::Protocol(format!(
                "connection {id} is already open"
            )));
        }
        let writer = ConnWriter {
            id,
            shared: Arc::clone(&self.shared),
        };
        let reader = ConnReader {
            rx,
            pending: Vec::new(),
            at: 0,
            shared: Arc::clone(&self.shared),
        };
        Ok(MuxConn { reader, writer })
    }

    /// Starts reading the trunk.
    pub fn unblock(&self) {
        self.shared.unblocked.cancel();
    }

    /// Closes the trunk: every connection reads end of stream, every write fails.
    pub fn close(&self) {
        self.shared.closed.cancel();
    }

    /// Resolves when the trunk is closed (by either side, or by a protocol violation).
    pub async fn closed(&self) {
        self.shared.closed.cancelled().await;
    }

    /// Why the trunk closed: [`NriError::Closed`] for an orderly end.
    pub fn close_reason(&self) -> NriError {
        self.shared.error()
    }

    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<ConnId, mpsc::Sender<Vec<u8>>>> {
        self.shared
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// One connection on the trunk: its reading and its writing half.
#[derive(Debug)]
pub struct MuxConn {
    /// The reading half.
    pub reader: ConnReader,
    /// The writing half (cloneable: writes of whole messages do not interleave).
    pub writer: ConnWriter,
}

/// Reads a connection's bytes, across frame boundaries.
#[derive(Debug)]
pub struct ConnReader {
    rx: mpsc::Receiver<Vec<u8>>,
    pending: Vec<u8>,
    at: usize,
    shared: Arc<Shared>,
}

impl ConnReader {
    /// Fills `buf` completely; [`NriError::Closed`] (or the reason the trunk failed) when
    /// the connection ends first.
    pub async fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), NriError> {
        let mut filled = 0;
        while filled < buf.len() {
            if self.at == self.pending.len() {
                // Frames already queued are read even when the trunk has closed since; the
                // channel ends once the trunk's reader is gone.
                let frame = self.rx.recv().await;
                self.pending = frame.ok_or_else(|| self.shared.error())?;
                self.at = 0;
            }
            let n = (buf.len() - filled).min(self.pending.len() - self.at);
            buf[filled..filled + n].copy_from_slice(&self.pending[self.at..self.at + n]);
            filled += n;
            self.at += n;
        }
        Ok(())
    }

    /// Reads and drops `len` bytes (a message refused for its size).
    pub async fn skip(&mut self, mut len: usize) -> Result<(), NriError> {
        let mut scratch = vec![0u8; len.min(64 << 10)];
        while len > 0 {
            let n = len.min(scratch.len());
            self.read_exact(&mut scratch[..n]).await?;
            len -= n;
        }
        Ok(())
    }
}

/// Writes to a connection.
#[derive(Debug, Clone)]
pub struct ConnWriter {
    id: ConnId,
    shared: Arc<Shared>,
}

impl ConnWriter {
    /// Writes `data`, in frames of at most [`WRITE_FRAME_PAYLOAD`] bytes, without another
    /// write of the trunk in between.
    pub async fn write_all(&self, data: &[u8]) -> Result<(), NriError> {
        if self.shared.closed.is_cancelled() {
            return Err(self.shared.error());
        }
        let frames = data.len().div_ceil(WRITE_FRAME_PAYLOAD).max(1);
        let mut bytes = Vec::with_capacity(data.len() + frames * HEADER_LEN);
        for chunk in data.chunks(WRITE_FRAME_PAYLOAD) {
            bytes.extend_from_slice(&self.id.to_be_bytes());
            bytes.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
            bytes.extend_from_slice(chunk);
        }
        let mut trunk = self.shared.writer.lock().await;
        if let Err(err) = trunk.write_all(&bytes).await {
            self.shared.fail(format!("writing the trunk: {err}"));
            return Err(NriError::Io(err));
        }
        Ok(())
    }
}

async fn read_frames(mut trunk: tokio::net::unix::OwnedReadHalf, shared: Arc<Shared>) {
    tokio::select! {
        () = shared.unblocked.cancelled() => {}
        () = shared.closed.cancelled() => {}
    }
    let outcome = tokio::select! {
        outcome = route_frames(&mut trunk, &shared) => outcome,
        () = shared.closed.cancelled() => Ok(()),
    };
    if let Err(why) = outcome {
        shared.fail(why);
    }
    shared.closed.cancel();
    shared
        .conns
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    let _ = shared.writer.lock().await.shutdown().await;
}

/// Reads frames until the trunk ends (`Ok`) or breaks the protocol (`Err`, why).
async fn route_frames(
    trunk: &mut tokio::net::unix::OwnedReadHalf,
    shared: &Shared,
) -> Result<(), String> {
    let mut header = [0u8; HEADER_LEN];
    loop {
        match trunk.read_exact(&mut header).await {
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(err) => return Err(format!("reading a frame header: {err}")),
        }
        let id = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if len > MAX_FRAME_PAYLOAD {
            return Err(format!(
                "frame of {len} bytes on connection {id} exceeds {MAX_FRAME_PAYLOAD}"
            ));
        }
        let mut payload = vec![0u8; len];
        trunk
            .read_exact(&mut payload)
            .await
            .map_err(|err| format!("reading a frame of {len} bytes: {err}"))?;
        let conn = shared
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned();
        let Some(conn) = conn else {
            tracing::debug!(
                conn = id,
                len,
                "NRI frame for a connection not open dropped"
            );
            continue;
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = conn.try_send(payload) {
            return Err(format!(
                "connection {id} has {READ_QUEUE_LEN} frames unread"
            ));
        }
    }
}
