//! NRI's connection multiplexer (upstream `pkg/net/multiplex`): one unix stream, the trunk,
//! carries several byte-stream connections, each frame an 8-byte header — connection id and
//! payload length, both u32 big-endian — and the payload.
//!
//! corral writes frames of at most [`WRITE_FRAME_PAYLOAD`] (4 KiB) bytes: a ttrpc message
//! may span frames, which every upstream reader (NRI v0.6 in containerd 1.7, v0.8 in 2.0)
//! reassembles, and no peer meets a frame larger than ttrpc's own 4 KiB write buffer gives.
//! corral reads frames up to [`MAX_FRAME_PAYLOAD`], one whole ttrpc message (v0.8 writes up
//! to that; upstream's reader allocates whatever length a header names), and refuses larger
//! ones with [`NriError::Protocol`].
//!
//! Memory is bounded by bytes, not frames: a frame's payload is read and queued for its
//! connection in pieces of at most 64 KiB, each allocated once its length is known and only
//! as its bytes are due, so a header naming 4 MiB followed by a trickle pins one piece, not
//! 4 MiB. All the trunk's connections together may hold [`MAX_QUEUED_BYTES`] read and not yet
//! read by their connection; a peer that sends more ahead of its reader loses the trunk
//! ([`NriError::QueueFull`]). A piece is freed as soon as its connection has read it, the
//! unread pieces of a connection when its reader is dropped, and those of a trunk that broke
//! the protocol at once.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::Notify;
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
/// Bytes one trunk may hold read and not yet read by their connections, all connections
/// together (each queued piece counted with [`PIECE_OVERHEAD`] more): past it the trunk is
/// closed with [`NriError::QueueFull`]. A reader that keeps up never comes near it, whatever
/// the sizes of messages and frames; it holds three whole maximal frames.
pub const MAX_QUEUED_BYTES: usize = 16 << 20;
/// The most bytes of a frame one queued piece holds: what a frame announced but not yet
/// sent pins at most.
pub const PIECE_LEN: usize = 64 << 10;
/// What a queued piece costs beyond its bytes (its allocation and its queue slot), counted
/// against [`MAX_QUEUED_BYTES`] so that a flood of tiny frames is bounded too.
pub const PIECE_OVERHEAD: usize = 128;

/// What one maximal frame costs queued.
const MAX_FRAME_COST: usize =
    MAX_FRAME_PAYLOAD + MAX_FRAME_PAYLOAD.div_ceil(PIECE_LEN) * PIECE_OVERHEAD;
const _: () = assert!(MAX_QUEUED_BYTES >= 3 * MAX_FRAME_COST);

/// The multiplexer of one trunk (cloneable: every clone is the same trunk). The trunk
/// stays open until [`Mux::close`], the peer closes it, or a protocol violation.
#[derive(Debug, Clone)]
pub struct Mux {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    /// The open connections' inboxes (emptied when the trunk's reader stops).
    conns: Mutex<HashMap<ConnId, Arc<Inbox>>>,
    budget: Arc<Budget>,
    closed: CancellationToken,
    unblocked: CancellationToken,
    failure: Mutex<Option<Failure>>,
}

/// Why a trunk failed.
#[derive(Debug, Clone)]
enum Failure {
    Protocol(String),
    QueueFull,
}

impl Shared {
    fn fail(&self, failure: Failure) {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(failure);
        self.closed.cancel();
    }

    fn error(&self) -> NriError {
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match failure {
            Some(Failure::Protocol(why)) => NriError::Protocol(why),
            Some(Failure::QueueFull) => NriError::QueueFull {
                limit: MAX_QUEUED_BYTES,
            },
            None => NriError::Closed,
        }
    }

    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<ConnId, Arc<Inbox>>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The count of a trunk's queued bytes, against [`MAX_QUEUED_BYTES`].
#[derive(Debug, Default)]
struct Budget {
    queued: AtomicUsize,
    peak: AtomicUsize,
}

impl Budget {
    /// Counts `cost` more bytes; `false`, counting nothing, when that would pass the limit.
    fn charge(&self, cost: usize) -> bool {
        let charged = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                queued.checked_add(cost).filter(|&q| q <= MAX_QUEUED_BYTES)
            });
        match charged {
            Ok(before) => {
                self.peak.fetch_max(before + cost, Ordering::AcqRel);
                true
            }
            Err(_) => false,
        }
    }
}

/// Bytes of one frame, counted in its trunk's [`Budget`] for as long as they live.
#[derive(Debug)]
struct Piece {
    bytes: Vec<u8>,
    budget: Arc<Budget>,
}

impl Piece {
    /// `len` zeroed bytes, if the budget has room for them.
    fn charge(budget: &Arc<Budget>, len: usize) -> Option<Piece> {
        budget.charge(len + PIECE_OVERHEAD).then(|| Piece {
            bytes: vec![0; len],
            budget: Arc::clone(budget),
        })
    }
}

impl Drop for Piece {
    fn drop(&mut self) {
        let cost = self.bytes.len() + PIECE_OVERHEAD;
        self.budget.queued.fetch_sub(cost, Ordering::AcqRel);
    }
}

/// What happens to the pieces a connection has not read when its inbox ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unread {
    /// They are still read (an orderly end: the peer's last bytes count).
    Keep,
    /// They are dropped at once (the reader is gone, or the peer broke the protocol).
    Drop,
}

/// One connection's queue of pieces read off the trunk.
#[derive(Debug, Default)]
struct Inbox {
    state: Mutex<InboxState>,
    arrived: Notify,
}

#[derive(Debug, Default)]
struct InboxState {
    pieces: VecDeque<Piece>,
    /// No piece is queued any more.
    ended: bool,
}

impl Inbox {
    fn state(&self) -> std::sync::MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `piece` (dropped if the inbox has ended).
    fn push(&self, piece: Piece) {
        let mut state = self.state();
        if state.ended {
            return;
        }
        state.pieces.push_back(piece);
        drop(state);
        self.arrived.notify_one();
    }

    fn end(&self, unread: Unread) {
        let mut state = self.state();
        state.ended = true;
        let dropped = match unread {
            Unread::Keep => VecDeque::new(),
            Unread::Drop => std::mem::take(&mut state.pieces),
        };
        drop(state);
        drop(dropped);
        self.arrived.notify_one();
    }

    /// The next piece; `None` once the inbox has ended and is empty. (One reader only.)
    async fn next(&self) -> Option<Piece> {
        loop {
            {
                let mut state = self.state();
                if let Some(piece) = state.pieces.pop_front() {
                    if state.pieces.is_empty() && state.pieces.capacity() > 64 {
                        // A flood's worth of queue slots is not kept for an idle connection.
                        state.pieces = VecDeque::new();
                    }
                    return Some(piece);
                }
                if state.ended {
                    return None;
                }
            }
            self.arrived.notified().await;
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
            budget: Arc::default(),
            closed: CancellationToken::new(),
            unblocked: CancellationToken::new(),
            failure: Mutex::new(None),
        });
        tokio::spawn(read_frames(reader, Arc::clone(&shared)));
        Mux { shared }
    }

    /// Opens connection `id`. Frames for a connection not open (or whose reader was
    /// dropped) are dropped.
    pub fn open(&self, id: ConnId) -> Result<MuxConn, NriError> {
        if id == 0 {
            return Err(NriError::Protocol("connection id 0 is reserved".into()));
        }
        let inbox = Arc::new(Inbox::default());
        let mut conns = self.shared.conns();
        if conns.contains_key(&id) {
            return Err(NriError::Protocol(format!(
                "connection {id} is already open"
            )));
        }
        if self.shared.closed.is_cancelled() {
            // The trunk's reader has stopped: the connection reads its end at once.
            inbox.end(Unread::Keep);
        } else {
            conns.insert(id, Arc::clone(&inbox));
        }
        let writer = ConnWriter {
            id,
            shared: Arc::clone(&self.shared),
        };
        let reader = ConnReader {
            id,
            inbox,
            pending: None,
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

    /// Bytes read off the trunk and not yet read by their connection, each piece counted
    /// with [`PIECE_OVERHEAD`]: never more than [`MAX_QUEUED_BYTES`].
    pub fn queued_bytes(&self) -> usize {
        self.shared.budget.queued.load(Ordering::Acquire)
    }

    /// The most [`Mux::queued_bytes`] has been on this trunk.
    pub fn peak_queued_bytes(&self) -> usize {
        self.shared.budget.peak.load(Ordering::Acquire)
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

/// Reads a connection's bytes, across frame boundaries. Dropping it closes the
/// connection's reading: what it has not read is freed, later frames for it are dropped.
#[derive(Debug)]
pub struct ConnReader {
    id: ConnId,
    inbox: Arc<Inbox>,
    /// The piece being read, freed once read.
    pending: Option<Piece>,
    at: usize,
    shared: Arc<Shared>,
}

impl ConnReader {
    /// The unread bytes of the current piece, waiting for the next one if it is all read;
    /// [`NriError::Closed`] (or the reason the trunk failed) when the connection ends.
    async fn available(&mut self) -> Result<&[u8], NriError> {
        if self.pending.is_none() {
            // Pieces already queued are read even when the trunk has closed since (unless
            // it broke the protocol); the inbox ends once the trunk's reader is gone.
            let piece = self.inbox.next().await.ok_or_else(|| self.shared.error())?;
            self.pending = Some(piece);
            self.at = 0;
        }
        let piece = self.pending.as_ref().map_or(&[][..], |p| &p.bytes[..]);
        Ok(&piece[self.at..])
    }

    /// Marks `n` available bytes read, freeing the piece once it is all read.
    fn consume(&mut self, n: usize) {
        self.at += n;
        if self
            .pending
            .as_ref()
            .is_some_and(|piece| self.at == piece.bytes.len())
        {
            self.pending = None;
        }
    }

    /// Fills `buf` completely; [`NriError::Closed`] (or the reason the trunk failed) when
    /// the connection ends first.
    pub async fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), NriError> {
        let mut filled = 0;
        while filled < buf.len() {
            let available = self.available().await?;
            let n = (buf.len() - filled).min(available.len());
            buf[filled..filled + n].copy_from_slice(&available[..n]);
            filled += n;
            self.consume(n);
        }
        Ok(())
    }

    /// Reads `len` bytes into a vector that grows as they arrive (at most doubling, never
    /// past `len`): a peer that names a large length and sends little pins little.
    pub(crate) async fn read_vec(&mut self, len: usize) -> Result<Vec<u8>, NriError> {
        let mut out = Vec::new();
        while out.len() < len {
            let available = self.available().await?;
            let n = (len - out.len()).min(available.len());
            if out.capacity() - out.len() < n {
                let target = (out.len() + n).max(2 * out.capacity()).min(len);
                out.reserve_exact(target - out.len());
            }
            out.extend_from_slice(&available[..n]);
            self.consume(n);
        }
        Ok(out)
    }

    /// Reads and drops `len` bytes (a message refused for its size).
    pub async fn skip(&mut self, mut len: usize) -> Result<(), NriError> {
        while len > 0 {
            let n = len.min(self.available().await?.len());
            self.consume(n);
            len -= n;
        }
        Ok(())
    }

    /// Resolves when the trunk is closed.
    pub(crate) async fn trunk_closed(&self) {
        self.shared.closed.cancelled().await;
    }

    /// Why the trunk closed ([`Mux::close_reason`]).
    pub(crate) fn close_reason(&self) -> NriError {
        self.shared.error()
    }
}

impl Drop for ConnReader {
    fn drop(&mut self) {
        self.inbox.end(Unread::Drop);
        let mut conns = self.shared.conns();
        if conns
            .get(&self.id)
            .is_some_and(|inbox| Arc::ptr_eq(inbox, &self.inbox))
        {
            conns.remove(&self.id);
        }
    }
}

/// Writes to a connection.
#[derive(Debug, Clone)]
pub struct ConnWriter {
    id: ConnId,
    shared: Arc<Shared>,
}

/// A write in progress: dropped part-way through (its caller gave up waiting), it leaves a
/// partial frame on the trunk that nothing after it would parse past, so the trunk fails.
struct Progress<'a> {
    shared: &'a Shared,
    written: usize,
    len: usize,
}

impl Drop for Progress<'_> {
    fn drop(&mut self) {
        if 0 < self.written && self.written < self.len && !self.shared.closed.is_cancelled() {
            let why = "a write was abandoned part-way through a frame".to_owned();
            self.shared.fail(Failure::Protocol(why));
        }
    }
}

impl ConnWriter {
    /// Writes `data`, in frames of at most [`WRITE_FRAME_PAYLOAD`] bytes, without another
    /// write of the trunk in between. A write waiting on a peer that does not read ends
    /// when the trunk closes.
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
        let closed = self.shared.closed.cancelled();
        tokio::pin!(closed);
        let mut trunk = tokio::select! {
            trunk = self.shared.writer.lock() => trunk,
            () = &mut closed => return Err(self.shared.error()),
        };
        let mut progress = Progress {
            shared: &self.shared,
            written: 0,
            len: bytes.len(),
        };
        while progress.written < bytes.len() {
            let wrote = tokio::select! {
                wrote = trunk.write(&bytes[progress.written..]) => wrote,
                () = &mut closed => return Err(self.shared.error()),
            };
            match wrote {
                Ok(0) => {
                    let err = std::io::Error::from(std::io::ErrorKind::WriteZero);
                    return Err(self.failed_writing(err));
                }
                Ok(n) => progress.written += n,
                Err(err) => return Err(self.failed_writing(err)),
            }
        }
        Ok(())
    }

    /// Why the trunk closed ([`Mux::close_reason`]).
    pub(crate) fn close_reason(&self) -> NriError {
        self.shared.error()
    }

    fn failed_writing(&self, err: std::io::Error) -> NriError {
        self.shared
            .fail(Failure::Protocol(format!("writing the trunk: {err}")));
        NriError::Io(err)
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
    let unread = match outcome {
        Ok(()) => Unread::Keep,
        Err(failure) => {
            shared.fail(failure);
            Unread::Drop
        }
    };
    shared.closed.cancel();
    drop(trunk);
    let conns = std::mem::take(&mut *shared.conns());
    for inbox in conns.values() {
        inbox.end(unread);
    }
    drop(conns);
    let _ = shared.writer.lock().await.shutdown().await;
}

/// Reads frames until the trunk ends (`Ok`) or breaks the protocol (`Err`, why).
async fn route_frames(
    trunk: &mut tokio::net::unix::OwnedReadHalf,
    shared: &Shared,
) -> Result<(), Failure> {
    let mut header = [0u8; HEADER_LEN];
    loop {
        match trunk.read_exact(&mut header).await {
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(err) => {
                return Err(Failure::Protocol(format!("reading a frame header: {err}")));
            }
        }
        let id = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if len > MAX_FRAME_PAYLOAD {
            return Err(Failure::Protocol(format!(
                "frame of {len} bytes on connection {id} exceeds {MAX_FRAME_PAYLOAD}"
            )));
        }
        let inbox = shared.conns().get(&id).cloned();
        if inbox.is_none() && len > 0 {
            tracing::debug!(
                conn = id,
                len,
                "NRI frame for a connection not open dropped"
            );
        }
        let mut left = len;
        while left > 0 {
            let n = left.min(PIECE_LEN);
            let Some(mut piece) = Piece::charge(&shared.budget, n) else {
                tracing::debug!(
                    conn = id,
                    limit = MAX_QUEUED_BYTES,
                    "NRI peer sent more than the trunk queues unread"
                );
                return Err(Failure::QueueFull);
            };
            trunk.read_exact(&mut piece.bytes).await.map_err(|err| {
                Failure::Protocol(format!("reading a frame of {len} bytes: {err}"))
            })?;
            left -= n;
            if let Some(inbox) = &inbox {
                inbox.push(piece);
            }
        }
    }
}
