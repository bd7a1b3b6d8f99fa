//! `ContainerAllocateResponse` as the kubelet stores it in `kubelet_internal_checkpoint`:
//! gogo-protobuf bytes, whose map entries are sorted by key and always carry key and value.
//! prost writes map entries in hash order and skips empty strings, so
//! [`encode_allocate_response`] writes the maps itself: the same response always gives the
//! kubelet's bytes.

use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use super::ContainerAllocateResponse;

fn encode_string_map(tag: u32, map: &std::collections::HashMap<String, String>, buf: &mut Vec<u8>) {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort();
    for (k, v) in entries {
        let len = 2
            + encoded_len_varint(k.len() as u64)
            + k.len()
            + encoded_len_varint(v.len() as u64)
            + v.len();
        encode_key(tag, WireType::LengthDelimited, buf);
        encode_varint(len as u64, buf);
        encode_key(1, WireType::LengthDelimited, buf);
        encode_varint(k.len() as u64, buf);
        buf.extend_from_slice(k.as_bytes());
        encode_key(2, WireType::LengthDelimited, buf);
        encode_varint(v.len() as u64, buf);
        buf.extend_from_slice(v.as_bytes());
    }
}

/// The bytes a kubelet stores for `response` (gogo-protobuf's `Marshal`).
pub fn encode_allocate_response(response: &ContainerAllocateResponse) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_string_map(1, &response.envs, &mut buf);
    let middle = ContainerAllocateResponse {
        mounts: response.mounts.clone(),
        devices: response.devices.clone(),
        ..ContainerAllocateResponse::default()
    };
    middle.encode(&mut buf).expect("a Vec grows as needed");
    encode_string_map(4, &response.annotations, &mut buf);
    let tail = ContainerAllocateResponse {
        cdi_devices: response.cdi_devices.clone(),
        ..ContainerAllocateResponse::default()
    };
    tail.encode(&mut buf).expect("a Vec grows as needed");
    buf
}

/// The response stored as `bytes` (any valid protobuf encoding of it).
pub fn decode_allocate_response(
    bytes: &[u8],
) -> Result<ContainerAllocateResponse, prost::DecodeError> {
    ContainerAllocateResponse::decode(bytes)
}
