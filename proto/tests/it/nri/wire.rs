//! The bytes a raw runtime writes: mux frames, ttrpc messages, ttrpc request envelopes.

use corral_proto::nri::ttrpc::Request;
use corral_proto::prost::Message;

/// A mux frame of `payload` on connection `conn` (any length: tests send oversized ones).
pub(super) fn frame(conn: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = conn.to_be_bytes().to_vec();
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A ttrpc message of `kind` (1 request, 2 response) on `stream`.
pub(super) fn message(stream: u32, kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(&[kind, 0]);
    out.extend_from_slice(payload);
    out
}

/// A ttrpc `Request` envelope for `service`'s `method`, without a timeout.
pub(super) fn request(service: &str, method: &str, payload: Vec<u8>) -> Vec<u8> {
    Request {
        service: service.into(),
        method: method.into(),
        payload,
        timeout_nano: 0,
        metadata: vec![],
    }
    .encode_to_vec()
}
