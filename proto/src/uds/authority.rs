//! Rewriting the HTTP/2 `:authority` that unix-socket gRPC clients send.
//!
//! Most gRPC clients that dial a unix socket (grpc-go with a context dialer, grpcio with a
//! `unix:` target, grpc-java with netty's domain sockets) put the socket path, raw
//! (`/var/lib/kubelet/device-plugins/kubelet.sock`) or percent-encoded, into the request's
//! `:authority` pseudo-header. `h2`, under hyper and tonic, parses `:authority` as a URI
//! authority and resets the stream with PROTOCOL_ERROR when that fails, so such clients
//! could not talk to a tonic server at all.
//!
//! [`AuthorityRewriter`] sits between the socket and `h2` on the *inbound* side of a server
//! connection. It forwards the client connection preface and every frame byte for byte,
//! except header blocks (a HEADERS frame and its CONTINUATION frames): those it decodes with
//! the client's HPACK state, replaces an `:authority` that is not a valid URI authority with
//! `localhost`, and re-encodes with literal representations that use no dynamic table, so
//! `h2`'s HPACK state stays trivially in sync. Padding is dropped (it carries no data);
//! END_STREAM and stream priority are kept. Flow control is unaffected: HEADERS frames do not
//! count against it. Everything `h2` checks besides `:authority` it still checks.
//!
//! A client that breaks HTTP/2 framing or HPACK gets its connection closed, as `h2` would.

use std::borrow::Cow;
use std::fmt;

/// The connection preface every HTTP/2 client sends first.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Length of an HTTP/2 frame header.
const FRAME_HEADER_LEN: usize = 9;
/// Frame type HEADERS.
const TYPE_HEADERS: u8 = 0x1;
/// Frame type CONTINUATION.
const TYPE_CONTINUATION: u8 = 0x9;
/// Flag END_STREAM (HEADERS).
const FLAG_END_STREAM: u8 = 0x1;
/// Flag END_HEADERS (HEADERS, CONTINUATION).
const FLAG_END_HEADERS: u8 = 0x4;
/// Flag PADDED (HEADERS).
const FLAG_PADDED: u8 = 0x8;
/// Flag PRIORITY (HEADERS).
const FLAG_PRIORITY: u8 = 0x20;
/// Every HTTP/2 peer must accept frames of this size; re-encoded blocks are split at it.
const MIN_MAX_FRAME_SIZE: usize = 16_384;
/// Upper bound on one header block, compressed or re-encoded (h2's default limit on the
/// decoded header list is 16 MiB as well).
const MAX_HEADER_BLOCK: usize = 16 << 20;
/// Upper bound on the client's HPACK dynamic table. Servers advertise 4 KiB by default;
/// anything up to this is tolerated, beyond it is an error.
const MAX_DYNAMIC_TABLE: usize = 64 << 10;
/// What an unusable `:authority` becomes.
const REPLACEMENT_AUTHORITY: &[u8] = b"localhost";

/// Why a client connection had to be closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RewriteError {
    /// A frame arrived inside a header block that is not its CONTINUATION.
    InterruptedHeaderBlock,
    /// A CONTINUATION frame arrived with no header block open.
    UnexpectedContinuation,
    /// The padding length of a HEADERS frame exceeds its payload.
    BadPadding,
    /// A header block larger than [`MAX_HEADER_BLOCK`].
    HeaderBlockTooLarge,
    /// The header block does not decode.
    Hpack(String),
}

impl fmt::Display for RewriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InterruptedHeaderBlock => {
                f.write_str("HTTP/2 header block interrupted by another frame")
            }
            Self::UnexpectedContinuation => {
                f.write_str("HTTP/2 CONTINUATION frame without an open header block")
            }
            Self::BadPadding => f.write_str("HTTP/2 HEADERS frame with invalid padding"),
            Self::HeaderBlockTooLarge => f.write_str("HTTP/2 header block too large"),
            Self::Hpack(why) => write!(f, "HTTP/2 header block does not decode: {why}"),
        }
    }
}

impl std::error::Error for RewriteError {}

/// Where the rewriter is in the client's byte stream.
#[derive(Debug)]
enum Phase {
    /// Reading the connection preface; `matched` bytes of it seen so far.
    Preface { matched: usize },
    /// Between frames, or collecting a header frame's payload.
    Frames,
    /// Forwarding the payload of a non-header frame; this many bytes to go.
    Forwarding { remaining: usize },
    /// Not HTTP/2 with prior knowledge: forward everything untouched and let h2 refuse it.
    Passthrough,
}

/// A header block being collected across HEADERS and CONTINUATION frames.
#[derive(Debug)]
struct OpenBlock {
    stream_id: [u8; 4],
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
}

/// Rewrites the client-to-server bytes of one HTTP/2 connection (see the module docs).
pub(crate) struct AuthorityRewriter {
    phase: Phase,
    /// Bytes of an incomplete frame header or header-frame payload.
    partial: Vec<u8>,
    block: Option<OpenBlock>,
    decoder: loona_hpack::Decoder<'static>,
    /// Requests whose `:authority` was replaced, for logs and tests.
    rewritten: u64,
}

impl fmt::Debug for AuthorityRewriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthorityRewriter")
            .field("phase", &self.phase)
            .field("partial", &self.partial.len())
            .field("block", &self.block)
            .field("rewritten", &self.rewritten)
            .finish_non_exhaustive()
    }
}

impl Default for AuthorityRewriter {
    fn default() -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(MAX_DYNAMIC_TABLE);
        Self {
            phase: Phase::Preface { matched: 0 },
            partial: Vec::new(),
            block: None,
            decoder,
            rewritten: 0,
        }
    }
}

impl AuthorityRewriter {
    /// How many header blocks had their `:authority` replaced so far.
    pub(crate) fn rewritten(&self) -> u64 {
        self.rewritten
    }

    /// Consume bytes the client sent; append what `h2` should read to `out`.
    ///
    /// The output does not depend on how the input is split into calls.
    pub(crate) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), RewriteError> {
        while !input.is_empty() {
            match &mut self.phase {
                Phase::Passthrough => {
                    out.extend_from_slice(input);
                    return Ok(());
                }
                Phase::Preface { matched } => {
                    let want = &PREFACE[*matched..];
                    let take = want.len().min(input.len());
                    if input[..take] != want[..take] {
                        // Not a prior-knowledge HTTP/2 client: hand h2 the bytes as they are.
                        out.extend_from_slice(&PREFACE[..*matched]);
                        self.phase = Phase::Passthrough;
                        continue;
                    }
                    *matched += take;
                    input = &input[take..];
                    if *matched == PREFACE.len() {
                        out.extend_from_slice(PREFACE);
                        self.phase = Phase::Frames;
                    }
                }
                Phase::Forwarding { remaining } => {
                    let take = (*remaining).min(input.len());
                    out.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    *remaining -= take;
                    if *remaining == 0 {
                        self.phase = Phase::Frames;
                    }
                }
                Phase::Frames => input = self.frames(input, out)?,
            }
        }
        Ok(())
    }

    /// Handle bytes at a frame boundary (or inside a header frame's payload); returns the rest.
    fn frames<'i>(&mut self, input: &'i [u8], out: &mut Vec<u8>) -> Result<&'i [u8], RewriteError> {
        let mut input = input;
        // Complete the frame header first.
        if self.partial.len() < FRAME_HEADER_LEN {
            let take = (FRAME_HEADER_LEN - self.partial.len()).min(input.len());
            self.partial.extend_from_slice(&input[..take]);
            input = &input[take..];
            if self.partial.len() < FRAME_HEADER_LEN {
                return Ok(input);
            }
            let header = frame_header(&self.partial);
            let is_header_frame = matches!(header.kind, TYPE_HEADERS | TYPE_CONTINUATION);
            if self.block.is_some() && header.kind != TYPE_CONTINUATION {
                return Err(RewriteError::InterruptedHeaderBlock);
            }
            if !is_header_frame {
                out.extend_from_slice(&self.partial);
                self.partial.clear();
                if header.length > 0 {
                    self.phase = Phase::Forwarding {
                        remaining: header.length,
                    };
                }
                return Ok(input);
            }
            if header.length > MAX_HEADER_BLOCK {
                return Err(RewriteError::HeaderBlockTooLarge);
            }
            // A header frame: collect its payload below (it may be empty).
        }
        // Collect a header frame's payload.
        let header = frame_header(&self.partial);
        let have = self.partial.len() - FRAME_HEADER_LEN;
        let take = (header.length - have).min(input.len());
        self.partial.extend_from_slice(&input[..take]);
        let input = &input[take..];
        if self.partial.len() - FRAME_HEADER_LEN == header.length {
            let frame = std::mem::take(&mut self.partial);
            self.header_frame(&header, &frame[FRAME_HEADER_LEN..], out)?;
        }
        Ok(input)
    }

    /// A complete HEADERS or CONTINUATION frame.
    fn header_frame(
        &mut self,
        header: &FrameHeader,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), RewriteError> {
        if header.kind == TYPE_HEADERS {
            let mut body = payload;
            let mut pad = 0;
            if header.flags & FLAG_PADDED != 0 {
                let (&len, rest) = body.split_first().ok_or(RewriteError::BadPadding)?;
                pad = usize::from(len);
                body = rest;
            }
            let mut priority = None;
            if header.flags & FLAG_PRIORITY != 0 {
                let bytes: [u8; 5] = body
                    .get(..5)
                    .and_then(|b| b.try_into().ok())
                    .ok_or(RewriteError::BadPadding)?;
                priority = Some(bytes);
                body = &body[5..];
            }
            if pad > body.len() {
                return Err(RewriteError::BadPadding);
            }
            self.block = Some(OpenBlock {
                stream_id: header.stream_id,
                end_stream: header.flags & FLAG_END_STREAM != 0,
                priority,
                fragment: body[..body.len() - pad].to_vec(),
            });
        } else {
            let block = self
                .block
                .as_mut()
                .filter(|block| block.stream_id == header.stream_id)
                .ok_or(RewriteError::UnexpectedContinuation)?;
            if block.fragment.len() + payload.len() > MAX_HEADER_BLOCK {
                return Err(RewriteError::HeaderBlockTooLarge);
            }
            block.fragment.extend_from_slice(payload);
        }
        if header.flags & FLAG_END_HEADERS != 0
            && let Some(block) = self.block.take()
        {
            self.rewrite_block(&block, out)?;
        }
        Ok(())
    }

    /// Decode a complete header block, fix `:authority`, and emit it re-encoded.
    fn rewrite_block(&mut self, block: &OpenBlock, out: &mut Vec<u8>) -> Result<(), RewriteError> {
        let mut encoded = Vec::with_capacity(block.fragment.len() * 2);
        let mut replaced = false;
        let mut too_large = false;
        self.decoder
            .decode_with_cb(&block.fragment, |name, value| {
                let value: Cow<'_, [u8]> =
                    if name.as_ref() == b":authority" && !valid_authority(&value) {
                        replaced = true;
                        Cow::Borrowed(REPLACEMENT_AUTHORITY)
                    } else {
                        value
                    };
                encode_literal(&name, &value, &mut encoded);
                too_large |= encoded.len() > MAX_HEADER_BLOCK;
            })
            .map_err(|err| RewriteError::Hpack(err.to_string()))?;
        if too_large {
            return Err(RewriteError::HeaderBlockTooLarge);
        }
        if replaced {
            self.rewritten += 1;
        }
        emit_header_frames(block, &encoded, out);
        Ok(())
    }
}

/// Whether `h2` would accept `value` as `:authority`.
fn valid_authority(value: &[u8]) -> bool {
    !value.is_empty() && http::uri::Authority::try_from(value).is_ok()
}

/// The fields of a frame header.
#[derive(Debug)]
struct FrameHeader {
    length: usize,
    kind: u8,
    flags: u8,
    stream_id: [u8; 4],
}

fn frame_header(bytes: &[u8]) -> FrameHeader {
    FrameHeader {
        length: usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]),
        kind: bytes[3],
        flags: bytes[4],
        stream_id: [bytes[5], bytes[6], bytes[7], bytes[8]],
    }
}

/// HPACK "literal header field without indexing, new name" (RFC 7541 §6.2.2), no Huffman.
fn encode_literal(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.push(0x00);
    encode_string(name, out);
    encode_string(value, out);
}

/// An HPACK string literal without Huffman coding (RFC 7541 §5.2).
fn encode_string(bytes: &[u8], out: &mut Vec<u8>) {
    encode_integer(bytes.len(), 7, 0x00, out);
    out.extend_from_slice(bytes);
}

/// An HPACK integer with an N-bit prefix (RFC 7541 §5.1); `high` holds the bits above it.
fn encode_integer(mut value: usize, prefix_bits: u8, high: u8, out: &mut Vec<u8>) {
    let max_prefix = (1usize << prefix_bits) - 1;
    if value < max_prefix {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max_prefix as u8);
    value -= max_prefix;
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Emit a HEADERS frame and as many CONTINUATION frames as `block` needs.
fn emit_header_frames(block: &OpenBlock, encoded: &[u8], out: &mut Vec<u8>) {
    let priority_len = if block.priority.is_some() { 5 } else { 0 };
    let first_len = encoded.len().min(MIN_MAX_FRAME_SIZE - priority_len);
    let (first, mut rest) = encoded.split_at(first_len);
    let mut flags = 0;
    if block.end_stream {
        flags |= FLAG_END_STREAM;
    }
    if block.priority.is_some() {
        flags |= FLAG_PRIORITY;
    }
    if rest.is_empty() {
        flags |= FLAG_END_HEADERS;
    }
    write_frame_header(
        first.len() + priority_len,
        TYPE_HEADERS,
        flags,
        block.stream_id,
        out,
    );
    if let Some(priority) = &block.priority {
        out.extend_from_slice(priority);
    }
    out.extend_from_slice(first);
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(rest.len().min(MIN_MAX_FRAME_SIZE));
        rest = tail;
        let flags = if rest.is_empty() { FLAG_END_HEADERS } else { 0 };
        write_frame_header(chunk.len(), TYPE_CONTINUATION, flags, block.stream_id, out);
        out.extend_from_slice(chunk);
    }
}

fn write_frame_header(length: usize, kind: u8, flags: u8, stream_id: [u8; 4], out: &mut Vec<u8>) {
    out.extend_from_slice(&[
        (length >> 16) as u8,
        (length >> 8) as u8,
        length as u8,
        kind,
        flags,
    ]);
    out.extend_from_slice(&stream_id);
}

#[cfg(test)]
mod tests;
