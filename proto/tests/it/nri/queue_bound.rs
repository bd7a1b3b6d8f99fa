//! The multiplexer's memory bound, attacked on a raw trunk: what a peer sends ahead of the
//! connections' readers is counted in bytes, all connections together, and a peer past
//! [`MAX_QUEUED_BYTES`] loses the trunk; a frame announced and trickled pins one piece, not
//! its announced length; a reader that is dropped, or a trunk that broke the protocol, frees
//! what was queued; and maximal frames a reader takes pass.

use std::time::{Duration, Instant};

use corral_proto::nri::NriError;
use corral_proto::nri::mux::{
    MAX_FRAME_PAYLOAD, MAX_QUEUED_BYTES, Mux, MuxConn, PIECE_LEN, PIECE_OVERHEAD,
};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

/// Upper bound of every wait: what the tests wait for happens far sooner, also on a busy
/// machine.
const WAIT: Duration = Duration::from_secs(60);

/// A mux on one end of a socket pair with connections `ids` open (none read), reading;
/// the other end.
fn mux_with(ids: impl IntoIterator<Item = u32>) -> (Mux, Vec<MuxConn>, UnixStream) {
    let (mine, peer) = UnixStream::pair().unwrap();
    let mux = Mux::new(mine);
    let conns = ids.into_iter().map(|id| mux.open(id).unwrap()).collect();
    mux.unblock();
    (mux, conns, peer)
}

fn header(conn: u32, len: usize) -> Vec<u8> {
    let mut out = conn.to_be_bytes().to_vec();
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out
}

/// The byte at `at` of the payloads these tests send (a pattern a misrouted or lost
/// piece would break).
fn pattern(conn: u32, at: usize) -> u8 {
    (at % 251) as u8 ^ conn as u8
}

fn payload(conn: u32, len: usize) -> Vec<u8> {
    (0..len).map(|at| pattern(conn, at)).collect()
}

/// What `frames` frames of `len` bytes cost queued.
fn cost(frames: usize, len: usize) -> usize {
    frames * (len + len.div_ceil(PIECE_LEN) * PIECE_OVERHEAD)
}

/// Waits (at most [`WAIT`]) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "waited {WAIT:?} for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_flooding_unread_connections_loses_the_trunk_at_the_byte_budget() {
    let (mux, mut conns, mut peer) = mux_with(1..=9);
    // Maximal frames round-robin over 64 connection ids (the 55 not open cost nothing
    // lasting), 64 MiB for the open ones alone: far past the budget.
    let flood = tokio::spawn(async move {
        let filler = vec![0x5a; MAX_FRAME_PAYLOAD];
        for id in (1..=64).cycle().take(128) {
            let header = header(id, MAX_FRAME_PAYLOAD);
            if peer.write_all(&header).await.is_err() || peer.write_all(&filler).await.is_err() {
                return;
            }
        }
    });
    tokio::time::timeout(WAIT, mux.closed())
        .await
        .expect("the trunk is closed");
    match mux.close_reason() {
        NriError::QueueFull { limit } => assert_eq!(limit, MAX_QUEUED_BYTES),
        other => panic!("expected QueueFull, got {other:?}"),
    }
    let peak = mux.peak_queued_bytes();
    assert!(peak <= MAX_QUEUED_BYTES, "{peak} bytes queued");
    // It closed because the budget was full, not before.
    assert!(
        peak + PIECE_LEN + PIECE_OVERHEAD > MAX_QUEUED_BYTES,
        "closed at {peak} bytes queued"
    );
    // A trunk that broke the protocol keeps nothing: what was queued is freed unread, and
    // every connection reads the reason.
    until("the queued frames to be freed", || mux.queued_bytes() == 0).await;
    for conn in &mut conns {
        let read = conn.reader.read_exact(&mut [0u8; 1]).await;
        assert!(matches!(read, Err(NriError::QueueFull { .. })), "{read:?}");
    }
    flood.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_frames_are_bounded_by_the_same_budget() {
    let (mux, _conns, mut peer) = mux_with([1]);
    // One-byte frames: 9 bytes each on the wire, each counted with its overhead.
    let frames: Vec<u8> = (0..4096)
        .flat_map(|_| [header(1, 1), vec![7]].concat())
        .collect();
    let flood = tokio::spawn(async move {
        let frames_needed = MAX_QUEUED_BYTES / (1 + PIECE_OVERHEAD) + 1;
        for _ in 0..frames_needed.div_ceil(4096) {
            if peer.write_all(&frames).await.is_err() {
                return;
            }
        }
    });
    tokio::time::timeout(WAIT, mux.closed())
        .await
        .expect("the trunk is closed");
    assert!(matches!(
        mux.close_reason(),
        NriError::QueueFull {
            limit: MAX_QUEUED_BYTES
        }
    ));
    assert!(mux.peak_queued_bytes() <= MAX_QUEUED_BYTES);
    flood.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_announced_and_trickled_pins_one_piece() {
    let (mux, mut conns, mut peer) = mux_with([1, 2]);
    let whole = payload(1, MAX_FRAME_PAYLOAD);
    // A maximal frame announced, then its bytes one at a time: it costs one piece, not
    // the 4 MiB it announced.
    peer.write_all(&header(1, MAX_FRAME_PAYLOAD)).await.unwrap();
    for at in 0..100 {
        peer.write_all(&whole[at..=at]).await.unwrap();
        until("the announced frame to be read", || mux.queued_bytes() > 0).await;
        assert_eq!(mux.queued_bytes(), PIECE_LEN + PIECE_OVERHEAD);
    }
    // The rest, and the same on the other connection: whole frames unread, and one
    // announced frame in progress.
    peer.write_all(&whole[100..]).await.unwrap();
    peer.write_all(&header(2, MAX_FRAME_PAYLOAD)).await.unwrap();
    peer.write_all(&[pattern(2, 0)]).await.unwrap();
    let expected = cost(1, MAX_FRAME_PAYLOAD) + PIECE_LEN + PIECE_OVERHEAD;
    until("the first frame to be queued", || {
        mux.queued_bytes() == expected
    })
    .await;
    // Read whole, byte for byte, and freed as read.
    let mut read = vec![0u8; MAX_FRAME_PAYLOAD];
    conns[0].reader.read_exact(&mut read).await.unwrap();
    assert!(read == whole, "the frame was read altered");
    assert_eq!(mux.queued_bytes(), PIECE_LEN + PIECE_OVERHEAD);
    // The peer gives up mid-frame: a protocol error, and nothing stays queued.
    drop(peer);
    tokio::time::timeout(WAIT, mux.closed())
        .await
        .expect("the trunk is closed");
    assert!(
        matches!(mux.close_reason(), NriError::Protocol(_)),
        "{:?}",
        mux.close_reason()
    );
    until("the partial frame to be freed", || mux.queued_bytes() == 0).await;
    assert!(mux.peak_queued_bytes() <= MAX_QUEUED_BYTES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maximal_frames_a_reader_takes_pass_and_are_freed_as_read() {
    let (mux, mut conns, mut peer) = mux_with([1]);
    // Three maximal frames, unread: within the budget.
    let frames: Vec<u8> = (0..3)
        .flat_map(|_| [header(1, MAX_FRAME_PAYLOAD), payload(1, MAX_FRAME_PAYLOAD)].concat())
        .collect();
    peer.write_all(&frames).await.unwrap();
    let queued = cost(3, MAX_FRAME_PAYLOAD);
    until("three frames to be queued", || mux.queued_bytes() == queued).await;
    let whole = payload(1, MAX_FRAME_PAYLOAD);
    let mut read = vec![0u8; MAX_FRAME_PAYLOAD];
    for left in (0..3).rev() {
        conns[0].reader.read_exact(&mut read).await.unwrap();
        assert!(read == whole, "a frame was read altered");
        assert_eq!(mux.queued_bytes(), cost(left, MAX_FRAME_PAYLOAD));
    }
    // Ten times the budget, each frame read before the next is sent: what counts is what
    // waits unread, not what passes.
    let frame = [header(1, MAX_FRAME_PAYLOAD), whole].concat();
    for _ in 0..10 * MAX_QUEUED_BYTES / MAX_FRAME_PAYLOAD {
        peer.write_all(&frame).await.unwrap();
        conns[0].reader.read_exact(&mut read).await.unwrap();
    }
    assert!(
        matches!(mux.close_reason(), NriError::Closed),
        "the trunk failed: {:?}",
        mux.close_reason()
    );
    assert_eq!(mux.queued_bytes(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_reader_frees_its_queue_and_its_connection_id() {
    let (mux, mut conns, mut peer) = mux_with([1, 2]);
    let frame = [header(1, MAX_FRAME_PAYLOAD), payload(1, MAX_FRAME_PAYLOAD)].concat();
    peer.write_all(&frame).await.unwrap();
    peer.write_all(&frame).await.unwrap();
    let queued = cost(2, MAX_FRAME_PAYLOAD);
    until("two frames to be queued", || mux.queued_bytes() == queued).await;
    let MuxConn { reader, writer } = conns.remove(0);
    drop(reader);
    assert_eq!(mux.queued_bytes(), 0);
    // Later frames for it are dropped (the one for connection 2 is read after them).
    peer.write_all(&frame).await.unwrap();
    peer.write_all(&[header(2, 1), vec![9]].concat())
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    conns[0].reader.read_exact(&mut byte).await.unwrap();
    assert_eq!((byte, mux.queued_bytes()), ([9], 0));
    // Its id can be opened again; its writer still writes.
    let reopened = mux.open(1).unwrap();
    writer.write_all(b"still").await.unwrap();
    drop(reopened);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orderly_end_lets_readers_take_what_was_sent() {
    let (mux, mut conns, mut peer) = mux_with([1]);
    peer.write_all(&[header(1, 5), b"last!".to_vec()].concat())
        .await
        .unwrap();
    drop(peer);
    tokio::time::timeout(WAIT, mux.closed())
        .await
        .expect("the trunk is closed");
    let mut last = [0u8; 5];
    conns[0].reader.read_exact(&mut last).await.unwrap();
    assert_eq!(&last, b"last!");
    let after = conns[0].reader.read_exact(&mut [0u8; 1]).await;
    assert!(matches!(after, Err(NriError::Closed)), "{after:?}");
    assert_eq!(mux.queued_bytes(), 0);
    // A connection opened on a closed trunk reads its end at once.
    let mut late = mux.open(2).unwrap();
    let read = late.reader.read_exact(&mut [0u8; 1]).await;
    assert!(matches!(read, Err(NriError::Closed)), "{read:?}");
}
