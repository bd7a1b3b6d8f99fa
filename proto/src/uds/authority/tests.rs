//! Tests of the `:authority` rewriter: fixed cases, then property tests over random header
//! lists, frame splits, padding, interleaved frames and read chunkings.

use proptest::prelude::*;

use super::*;

/// One decoded header list: (name, value) pairs in order.
type HeaderList = Vec<(Vec<u8>, Vec<u8>)>;

const SETTINGS_EMPTY: [u8; 9] = [0, 0, 0, 0x4, 0, 0, 0, 0, 0];

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame_header(payload.len(), kind, flags, stream.to_be_bytes(), &mut out);
    out.extend_from_slice(payload);
    out
}

/// A parsed output frame.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// Split the rewriter's output (after the preface) into frames.
fn parse_frames(bytes: &[u8]) -> Vec<Frame> {
    assert_eq!(&bytes[..PREFACE.len()], PREFACE);
    let mut rest = &bytes[PREFACE.len()..];
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let header = frame_header(rest);
        let payload = rest[FRAME_HEADER_LEN..FRAME_HEADER_LEN + header.length].to_vec();
        assert!(
            payload.len() <= MIN_MAX_FRAME_SIZE,
            "frames respect the default max size"
        );
        frames.push(Frame {
            kind: header.kind,
            flags: header.flags,
            stream: u32::from_be_bytes(header.stream_id),
            payload,
        });
        rest = &rest[FRAME_HEADER_LEN + header.length..];
    }
    frames
}

/// Reassemble header blocks from parsed frames and decode them with a fresh decoder, as h2
/// would. Returns the decoded header lists and the non-header frames, in order.
fn decode_output(frames: &[Frame]) -> (Vec<HeaderList>, Vec<Frame>) {
    let mut decoder = loona_hpack::Decoder::new();
    let mut blocks = Vec::new();
    let mut others = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    for frame in frames {
        match frame.kind {
            TYPE_HEADERS => {
                assert!(open.is_none());
                assert_eq!(frame.flags & FLAG_PADDED, 0, "padding is dropped");
                let skip = if frame.flags & FLAG_PRIORITY != 0 {
                    5
                } else {
                    0
                };
                open = Some(frame.payload[skip..].to_vec());
            }
            TYPE_CONTINUATION => open.as_mut().unwrap().extend_from_slice(&frame.payload),
            _ => {
                assert!(open.is_none());
                others.push(frame.clone());
                continue;
            }
        }
        if frame.flags & FLAG_END_HEADERS != 0 {
            let fragment = open.take().unwrap();
            blocks.push(decoder.decode(&fragment).unwrap());
        }
    }
    assert!(open.is_none());
    (blocks, others)
}

fn request_headers(authority: &[u8]) -> HeaderList {
    vec![
        (b":method".to_vec(), b"POST".to_vec()),
        (b":scheme".to_vec(), b"http".to_vec()),
        (
            b":path".to_vec(),
            b"/v1beta1.Registration/Register".to_vec(),
        ),
        (b":authority".to_vec(), authority.to_vec()),
        (b"content-type".to_vec(), b"application/grpc".to_vec()),
        (b"te".to_vec(), b"trailers".to_vec()),
    ]
}

fn encode(encoder: &mut loona_hpack::Encoder<'_>, headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    encoder.encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())))
}

fn rewrite(input: &[u8]) -> Result<Vec<u8>, RewriteError> {
    let mut rewriter = AuthorityRewriter::default();
    let mut out = Vec::new();
    rewriter.feed(input, &mut out)?;
    Ok(out)
}

fn authority_of(block: &[(Vec<u8>, Vec<u8>)]) -> &[u8] {
    &block.iter().find(|(n, _)| n == b":authority").unwrap().1
}

#[test]
fn raw_encoded_and_empty_paths_become_localhost_valid_ones_stay() {
    let cases: [(&[u8], &[u8]); 6] = [
        (
            b"/var/lib/kubelet/device-plugins/kubelet.sock",
            b"localhost",
        ),
        (
            b"%2Fvar%2Flib%2Fkubelet%2Fdevice-plugins%2Fkubelet.sock",
            b"localhost",
        ),
        (b"", b"localhost"),
        (b"unix:/tmp/x.sock", b"localhost"),
        (b"localhost", b"localhost"),
        (b"example.com:8080", b"example.com:8080"),
    ];
    for (sent, expected) in cases {
        let mut encoder = loona_hpack::Encoder::new();
        let block = encode(&mut encoder, &request_headers(sent));
        let mut input = PREFACE.to_vec();
        input.extend(SETTINGS_EMPTY);
        input.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, 1, &block));
        input.extend(frame(0x0, FLAG_END_STREAM, 1, b"\0\0\0\0\0"));
        let out = rewrite(&input).unwrap();
        let (blocks, others) = decode_output(&parse_frames(&out));
        assert_eq!(blocks.len(), 1);
        assert_eq!(authority_of(&blocks[0]), expected, "sent {sent:?}");
        let mut headers = request_headers(expected);
        headers.sort();
        let mut got = blocks[0].clone();
        got.sort();
        assert_eq!(got, headers, "every other header is unchanged");
        assert_eq!(others.len(), 2, "SETTINGS and DATA pass through");
        assert_eq!(others[1].payload, b"\0\0\0\0\0");
    }
}

/// RFC 7541 Appendix C.4.1: a Huffman-coded request (`:authority www.example.com`).
#[test]
fn huffman_coded_request_from_rfc7541_decodes_and_keeps_its_valid_authority() {
    let block = [
        0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90,
        0xf4, 0xff,
    ];
    let mut input = PREFACE.to_vec();
    input.extend(frame(
        TYPE_HEADERS,
        FLAG_END_HEADERS | FLAG_END_STREAM,
        1,
        &block,
    ));
    let out = rewrite(&input).unwrap();
    let frames = parse_frames(&out);
    assert_eq!(frames[0].flags & FLAG_END_STREAM, FLAG_END_STREAM);
    let (blocks, _) = decode_output(&frames);
    assert_eq!(authority_of(&blocks[0]), b"www.example.com");
}

#[test]
fn padding_is_dropped_priority_and_end_stream_are_kept() {
    let mut encoder = loona_hpack::Encoder::new();
    let block = encode(&mut encoder, &request_headers(b"/run/x.sock"));
    let mut payload = vec![3u8]; // pad length
    payload.extend([0x80, 0, 0, 5, 16]); // exclusive dependency on stream 5, weight 16
    payload.extend(&block);
    payload.extend([0, 0, 0]);
    let flags = FLAG_PADDED | FLAG_PRIORITY | FLAG_END_HEADERS | FLAG_END_STREAM;
    let mut input = PREFACE.to_vec();
    input.extend(frame(TYPE_HEADERS, flags, 3, &payload));
    let frames = parse_frames(&rewrite(&input).unwrap());
    assert_eq!(frames.len(), 1);
    assert_eq!(
        frames[0].flags,
        FLAG_PRIORITY | FLAG_END_HEADERS | FLAG_END_STREAM
    );
    assert_eq!(frames[0].stream, 3);
    assert_eq!(&frames[0].payload[..5], &[0x80, 0, 0, 5, 16]);
    let (blocks, _) = decode_output(&frames);
    assert_eq!(authority_of(&blocks[0]), b"localhost");
}

#[test]
fn large_blocks_are_split_into_continuations() {
    let mut headers = request_headers(b"/tmp/a.sock");
    headers.push((b"x-big".to_vec(), vec![b'a'; 40_000]));
    let mut encoder = loona_hpack::Encoder::new();
    let block = encode(&mut encoder, &headers);
    let mut input = PREFACE.to_vec();
    let (first, rest) = block.split_at(100);
    input.extend(frame(TYPE_HEADERS, 0, 1, first));
    input.extend(frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 1, rest));
    let frames = parse_frames(&rewrite(&input).unwrap());
    assert_eq!(frames[0].kind, TYPE_HEADERS);
    assert!(frames.len() >= 3);
    assert!(frames[1..].iter().all(|f| f.kind == TYPE_CONTINUATION));
    assert_eq!(frames.last().unwrap().flags, FLAG_END_HEADERS);
    let (blocks, _) = decode_output(&frames);
    assert_eq!(authority_of(&blocks[0]), b"localhost");
    assert_eq!(blocks[0].last().unwrap().1.len(), 40_000);
}

#[test]
fn framing_violations_close_the_connection() {
    let mut encoder = loona_hpack::Encoder::new();
    let block = encode(&mut encoder, &request_headers(b"/x"));

    let mut interrupted = PREFACE.to_vec();
    interrupted.extend(frame(TYPE_HEADERS, 0, 1, &block));
    interrupted.extend(SETTINGS_EMPTY);
    assert_eq!(
        rewrite(&interrupted),
        Err(RewriteError::InterruptedHeaderBlock)
    );

    let mut orphan = PREFACE.to_vec();
    orphan.extend(frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 1, &block));
    assert_eq!(rewrite(&orphan), Err(RewriteError::UnexpectedContinuation));

    let mut wrong_stream = PREFACE.to_vec();
    wrong_stream.extend(frame(TYPE_HEADERS, 0, 1, &block[..2]));
    wrong_stream.extend(frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 3, &block[2..]));
    assert_eq!(
        rewrite(&wrong_stream),
        Err(RewriteError::UnexpectedContinuation)
    );

    let mut bad_padding = PREFACE.to_vec();
    bad_padding.extend(frame(
        TYPE_HEADERS,
        FLAG_PADDED | FLAG_END_HEADERS,
        1,
        &[200, 0x82],
    ));
    assert_eq!(rewrite(&bad_padding), Err(RewriteError::BadPadding));

    let mut bad_hpack = PREFACE.to_vec();
    bad_hpack.extend(frame(
        TYPE_HEADERS,
        FLAG_END_HEADERS,
        1,
        &[0xff, 0xff, 0xff],
    ));
    assert!(matches!(rewrite(&bad_hpack), Err(RewriteError::Hpack(_))));
}

#[test]
fn non_http2_bytes_pass_through_untouched() {
    let http1 = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(rewrite(http1).unwrap(), http1);
    let mut almost = PREFACE[..10].to_vec();
    almost.extend(b"garbage");
    assert_eq!(rewrite(&almost).unwrap(), almost);
}

#[test]
fn counts_rewritten_requests() {
    let mut encoder = loona_hpack::Encoder::new();
    let mut input = PREFACE.to_vec();
    for (stream, authority) in [(1, &b"/a"[..]), (3, b"localhost"), (5, b"/b")] {
        let block = encode(&mut encoder, &request_headers(authority));
        input.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, stream, &block));
    }
    let mut rewriter = AuthorityRewriter::default();
    let mut out = Vec::new();
    rewriter.feed(&input, &mut out).unwrap();
    assert_eq!(rewriter.rewritten(), 2);
}

/// One client request as the property tests generate it.
#[derive(Debug, Clone)]
struct GeneratedRequest {
    headers: HeaderList,
    /// Where to cut the encoded block into HEADERS + CONTINUATION fragments (fractions).
    cuts: Vec<u16>,
    padding: Option<u8>,
    priority: bool,
    /// A non-header frame sent after this request's headers: (type, payload).
    after: Option<(u8, Vec<u8>)>,
}

fn authority_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"localhost".to_vec()),
        Just(Vec::new()),
        "(/[a-z0-9._-]{1,12}){1,6}".prop_map(String::into_bytes),
        "%2F[a-z]{1,8}%2F[a-z]{1,8}\\.sock".prop_map(String::into_bytes),
        "[a-z]{1,10}(\\.[a-z]{1,5})?(:[0-9]{1,5})?".prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

fn request_strategy() -> impl Strategy<Value = GeneratedRequest> {
    (
        authority_strategy(),
        proptest::collection::vec(("x-[a-z]{1,6}", "[ -~]{0,30}"), 0..6),
        proptest::collection::vec(any::<u16>(), 0..4),
        proptest::option::of(any::<u8>()),
        any::<bool>(),
        proptest::option::of((
            prop_oneof![Just(0x0u8), Just(0x4), Just(0x6), Just(0x8)],
            proptest::collection::vec(any::<u8>(), 0..64),
        )),
    )
        .prop_map(|(authority, extra, cuts, padding, priority, after)| {
            let mut headers = request_headers(&authority);
            headers.extend(
                extra
                    .into_iter()
                    .map(|(n, v)| (n.into_bytes(), v.into_bytes())),
            );
            GeneratedRequest {
                headers,
                cuts,
                padding,
                priority,
                after,
            }
        })
}

/// The client byte stream for `requests`, encoded with one HPACK encoder (dynamic table in
/// use across requests), plus the expected decoded header lists and non-header payloads.
fn client_stream(requests: &[GeneratedRequest]) -> (Vec<u8>, Vec<HeaderList>, Vec<Vec<u8>>) {
    let mut encoder = loona_hpack::Encoder::new();
    let mut bytes = PREFACE.to_vec();
    let mut expected_blocks = Vec::new();
    let mut expected_others = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        let stream = 2 * i as u32 + 1;
        let block = encode(&mut encoder, &request.headers);
        let mut cut_points: Vec<usize> = request
            .cuts
            .iter()
            .map(|&c| usize::from(c) * block.len() / usize::from(u16::MAX))
            .collect();
        cut_points.sort_unstable();
        let mut fragments = Vec::new();
        let mut start = 0;
        for cut in cut_points {
            fragments.push(&block[start..cut]);
            start = cut;
        }
        fragments.push(&block[start..]);
        let last = fragments.len() - 1;
        for (j, fragment) in fragments.iter().enumerate() {
            let end_headers = if j == last { FLAG_END_HEADERS } else { 0 };
            if j == 0 {
                let mut payload = Vec::new();
                let mut flags = end_headers;
                if let Some(pad) = request.padding {
                    flags |= FLAG_PADDED;
                    payload.push(pad);
                }
                if request.priority {
                    flags |= FLAG_PRIORITY;
                    payload.extend([0, 0, 0, 0, 15]);
                }
                payload.extend_from_slice(fragment);
                payload.extend(std::iter::repeat_n(
                    0,
                    usize::from(request.padding.unwrap_or(0)),
                ));
                bytes.extend(frame(TYPE_HEADERS, flags, stream, &payload));
            } else {
                bytes.extend(frame(TYPE_CONTINUATION, end_headers, stream, fragment));
            }
        }
        let mut expected = request.headers.clone();
        for (name, value) in &mut expected {
            let usable =
                !value.is_empty() && http::uri::Authority::try_from(value.as_slice()).is_ok();
            if name == b":authority" && !usable {
                *value = b"localhost".to_vec();
            }
        }
        expected_blocks.push(expected);
        if let Some((kind, payload)) = &request.after {
            bytes.extend(frame(*kind, 0, stream, payload));
            expected_others.push(payload.clone());
        }
    }
    (bytes, expected_blocks, expected_others)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the header lists, fragmentation, padding, interleaved frames and read
    /// chunking, h2 sees the same requests with only unusable authorities replaced, and every
    /// other frame unchanged and in order.
    #[test]
    fn rewriting_preserves_everything_but_bad_authorities(
        requests in proptest::collection::vec(request_strategy(), 1..6),
        chunk in 1usize..300,
    ) {
        let (input, expected_blocks, expected_others) = client_stream(&requests);
        let mut rewriter = AuthorityRewriter::default();
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            rewriter.feed(piece, &mut out).unwrap();
        }
        let (blocks, others) = decode_output(&parse_frames(&out));
        prop_assert_eq!(blocks, expected_blocks);
        let payloads: Vec<Vec<u8>> = others.into_iter().map(|f| f.payload).collect();
        prop_assert_eq!(payloads, expected_others);
        // Chunking does not change the output.
        prop_assert_eq!(out, rewrite(&input).unwrap());
    }
}

corral_testkit::fuzz! {
    /// Arbitrary bytes after the preface never panic: they are forwarded or refused.
    fn fuzz_arbitrary_frames(
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        chunk in 1usize..64,
    ) {
        let mut input = PREFACE.to_vec();
        input.extend(body);
        let mut rewriter = AuthorityRewriter::default();
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            if rewriter.feed(piece, &mut out).is_err() {
                break;
            }
        }
    }

    /// Arbitrary header-frame payloads (random HPACK) never panic either.
    fn fuzz_header_blocks(
        blocks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..4),
        flags in any::<u8>(),
    ) {
        let mut input = PREFACE.to_vec();
        for (i, block) in blocks.iter().enumerate() {
            input.extend(frame(TYPE_HEADERS, flags | FLAG_END_HEADERS, 2 * i as u32 + 1, block));
        }
        let _ = rewrite(&input);
    }
}
