//! What decoding a protobuf message can cost in memory, read from its bytes alone, before
//! anything is decoded.
//!
//! A message costs far more decoded than on the wire when it is made of tiny parts: an empty
//! `PodSandbox` is 2 bytes on the wire (`0a 00`) and 1,496 bytes decoded, so 4 MiB of them
//! would take 3 GB. [`decode_cost`] bounds the decoded size without decoding, from where NRI's
//! messages can repeat: only a request's or response's own repeated fields hold large
//! messages (`PodSandbox`, `Container`, `ContainerUpdate`, `PluginInstance`, at most 1,520
//! bytes); every message nested deeper that can repeat is small (`Mount`, `LinuxDevice`,
//! `LinuxSyscall`, a map entry…, at most 120 bytes: an `OwningPlugins` entry), and a
//! singular field that repeats on the wire is merged, not allocated again (the test
//! `the_charges_cover_every_message_that_can_repeat` holds the charges to these sizes). So a length-delimited field whose bytes read as a message (an empty one does) is
//! charged [`TOP_NODE_COST`] at the request's top level and [`NODE_COST`] deeper (twice the
//! largest, for a `Vec`'s spare capacity); any other length-delimited field (a string,
//! bytes) [`FIELD_COST`] plus its length; any other field [`FIELD_COST`] / 4 (a scalar in a
//! `Vec`). Nesting deeper than [`MAX_DEPTH`] is charged by its length only (NRI's messages
//! nest less deeply). The work is at most [`MAX_DEPTH`] passes over the bytes.

/// The charge of a message at a request's top level: at least twice the largest NRI
/// message that can repeat there (`Container`, 1,520 bytes).
pub const TOP_NODE_COST: u64 = 3 << 10;
/// The charge of a message nested deeper: at least twice the largest NRI message that can
/// repeat there (an `OwningPlugins` map entry, a `String` and a `FieldOwners`, 120 bytes).
pub const NODE_COST: u64 = 256;
/// The charge of one string or bytes field besides its length (a `String` in a `Vec` with
/// spare capacity, and the allocator's rounding).
pub const FIELD_COST: u64 = 64;
/// How deep nested messages are looked into.
pub const MAX_DEPTH: u32 = 16;

/// Where a request's own fields are when its bytes are scanned: [`TOP_LEVEL`] for a bare
/// request or response, [`IN_ENVELOPE`] inside a ttrpc `Request` or `Response` envelope
/// (whose `payload` holds it).
pub type Level = u32;
/// A bare request's or response's fields.
pub const TOP_LEVEL: Level = 1;
/// The fields of the request or response a ttrpc envelope carries.
pub const IN_ENVELOPE: Level = 2;

fn varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// What scanning bytes as a message found.
struct Scan {
    /// The cost of the fields read, each in its costlier complete reading (a string or a
    /// message that reads whole), up to where they stop reading.
    sum: u64,
    /// The most decoding may have allocated when it fails inside a nested field that does
    /// not read whole as a message (a string, if the schema says so; else the decode stops
    /// there, after allocating what came before).
    failing: u64,
    /// Whether all the bytes read as fields.
    whole: bool,
}

impl Scan {
    /// The most decoding these bytes may allocate.
    fn peak(&self) -> u64 {
        self.sum.max(self.failing)
    }
}

/// Skips a group whose start (field `number`) was just read, as prost skips an unknown one:
/// `false` when its end is missing or it is malformed.
fn skip_group(bytes: &[u8], pos: &mut usize, number: u64, depth: u32) -> bool {
    if depth > 100 {
        return false;
    }
    while *pos < bytes.len() {
        let Some(key) = varint(bytes, pos) else {
            return false;
        };
        let ok = match key & 7 {
            0 => varint(bytes, pos).is_some(),
            1 | 5 => {
                *pos += if key & 7 == 1 { 8 } else { 4 };
                *pos <= bytes.len()
            }
            2 => varint(bytes, pos)
                .and_then(|len| usize::try_from(len).ok())
                .and_then(|len| pos.checked_add(len))
                .filter(|end| *end <= bytes.len())
                .map(|end| *pos = end)
                .is_some(),
            3 => skip_group(bytes, pos, key >> 3, depth + 1),
            4 => return key >> 3 == number,
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    false
}

/// The cost of `bytes` read as a message whose fields are at `level` (see [`Scan`]).
fn message_cost(bytes: &[u8], level: u32, top: Level) -> Scan {
    let mut pos = 0;
    let mut scan = Scan {
        sum: 0,
        failing: 0,
        whole: false,
    };
    while pos < bytes.len() {
        let Some(key) = varint(bytes, &mut pos) else {
            return scan;
        };
        if key >> 3 == 0 {
            return scan;
        }
        match key & 7 {
            0 => {
                if varint(bytes, &mut pos).is_none() {
                    return scan;
                }
                scan.sum += FIELD_COST / 4;
            }
            1 | 5 => {
                pos += if key & 7 == 1 { 8 } else { 4 };
                if pos > bytes.len() {
                    return scan;
                }
                scan.sum += FIELD_COST / 4;
            }
            2 => {
                let Some(end) = varint(bytes, &mut pos)
                    .and_then(|len| usize::try_from(len).ok())
                    .and_then(|len| pos.checked_add(len))
                    .filter(|end| *end <= bytes.len())
                else {
                    return scan;
                };
                let payload = &bytes[pos..end];
                pos = end;
                let as_bytes = FIELD_COST + payload.len() as u64;
                if level >= MAX_DEPTH {
                    scan.sum += as_bytes;
                    continue;
                }
                let node = if level == top {
                    TOP_NODE_COST
                } else {
                    NODE_COST
                };
                let inner = message_cost(payload, level + 1, top);
                let inner_failing = if inner.whole {
                    inner.failing
                } else {
                    inner.peak()
                };
                if inner_failing > 0 || !inner.whole {
                    scan.failing = scan.failing.max(scan.sum + node + inner_failing);
                }
                let as_message = if inner.whole { node + inner.sum } else { 0 };
                scan.sum += as_bytes.max(as_message);
            }
            // An unknown group is skipped, not allocated (NRI's messages have none).
            3 => {
                if !skip_group(bytes, &mut pos, key >> 3, 0) {
                    return scan;
                }
            }
            _ => return scan,
        }
    }
    scan.whole = true;
    scan
}

/// An upper bound of the memory decoding `bytes` (a request or response whose own fields
/// are at `top`) may take, see the module documentation. Bytes that stop reading as a
/// message part-way cost what comes before (decoding allocates it before it fails), and at
/// least their length.
///
/// ```
/// use corral_proto::nri::decode_cost::{decode_cost, TOP_LEVEL, TOP_NODE_COST};
///
/// // A SynchronizeRequest of 1,000 empty pods: 2 KB on the wire, up to 3 MB decoded.
/// let pods = [0x0a, 0x00].repeat(1000);
/// assert_eq!(decode_cost(&pods, TOP_LEVEL), 1000 * TOP_NODE_COST);
/// ```
pub fn decode_cost(bytes: &[u8], top: Level) -> u64 {
    message_cost(bytes, 1, top).peak().max(bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nri::api;
    use prost::Message;

    #[test]
    fn tiny_parts_cost_what_they_decode_to() {
        let sync = api::SynchronizeRequest {
            pods: vec![api::PodSandbox::default(); 100],
            containers: vec![api::Container::default(); 100],
            more: false,
        };
        let bytes = sync.encode_to_vec();
        let decoded = 100 * std::mem::size_of::<api::PodSandbox>()
            + 100 * std::mem::size_of::<api::Container>();
        assert!(decode_cost(&bytes, TOP_LEVEL) >= decoded as u64);
    }

    /// Every message that can repeat at a request's top level, and every one nested deeper
    /// (a repeated field's or a map's entry, NRI v0.12.2), fits half its charge.
    #[test]
    fn the_charges_cover_every_message_that_can_repeat() {
        use std::mem::size_of;
        let top = [
            ("PodSandbox", size_of::<api::PodSandbox>()),
            ("Container", size_of::<api::Container>()),
            ("ContainerUpdate", size_of::<api::ContainerUpdate>()),
            ("ContainerEviction", size_of::<api::ContainerEviction>()),
            ("PluginInstance", size_of::<api::PluginInstance>()),
        ];
        for (name, size) in top {
            assert!(2 * size as u64 <= TOP_NODE_COST, "{name}: {size} bytes");
        }
        let deeper = [
            ("Mount", size_of::<api::Mount>()),
            ("LinuxDevice", size_of::<api::LinuxDevice>()),
            ("LinuxNamespace", size_of::<api::LinuxNamespace>()),
            ("Hook", size_of::<api::Hook>()),
            ("POSIXRlimit", size_of::<api::PosixRlimit>()),
            ("KeyValue", size_of::<api::KeyValue>()),
            ("LinuxDeviceCgroup", size_of::<api::LinuxDeviceCgroup>()),
            ("HugepageLimit", size_of::<api::HugepageLimit>()),
            ("CDIDevice", size_of::<api::CdiDevice>()),
            ("LinuxSyscall", size_of::<api::LinuxSyscall>()),
            ("LinuxSeccompArg", size_of::<api::LinuxSeccompArg>()),
            ("string entry", size_of::<(String, String)>()),
            (
                "net device entry",
                size_of::<(String, api::LinuxNetDevice)>(),
            ),
            ("owners entry", size_of::<(String, api::FieldOwners)>()),
            (
                "compound entry",
                size_of::<(i32, api::CompoundFieldOwners)>(),
            ),
            ("simple entry", size_of::<(i32, String)>()),
        ];
        for (name, size) in deeper {
            assert!(2 * size as u64 <= NODE_COST, "{name}: {size} bytes");
        }
    }

    /// A realistic synchronization of 50 pods costs a small multiple of its bytes.
    #[test]
    fn a_realistic_synchronization_costs_a_small_multiple_of_its_bytes() {
        let pod = |i: usize| api::PodSandbox {
            id: format!("{i:064x}"),
            name: format!("web-7d9f8-{i}"),
            uid: "5f0c0c5e-8a0b-4bd4-9a55-0d4f1f1c2b3a".to_owned(),
            namespace: "default".to_owned(),
            labels: (0..10)
                .map(|i| (format!("app.kubernetes.io/label-{i}"), format!("value-{i}")))
                .collect(),
            annotations: (0..10)
                .map(|i| {
                    (
                        format!("kubernetes.io/note-{i}"),
                        "{\"json\": true}".to_owned(),
                    )
                })
                .collect(),
            ..Default::default()
        };
        let sync = api::SynchronizeRequest {
            pods: (0..50).map(pod).collect(),
            containers: Vec::new(),
            more: false,
        };
        let bytes = sync.encode_to_vec();
        let cost = decode_cost(&bytes, TOP_LEVEL);
        assert!(
            cost < 16 * bytes.len() as u64,
            "{cost} for {} bytes",
            bytes.len()
        );
    }

    #[test]
    fn crafted_nesting_costs_bounded_work_and_never_panics() {
        let mut nested = Vec::new();
        for _ in 0..1000 {
            let mut outer = vec![0x0a];
            let mut len = nested.len();
            while len >= 0x80 {
                outer.push(len as u8 | 0x80);
                len >>= 7;
            }
            outer.push(len as u8);
            outer.extend_from_slice(&nested);
            nested = outer;
        }
        assert!(decode_cost(&nested, TOP_LEVEL) > 0);
        assert_eq!(decode_cost(&[0x0a, 0xff], TOP_LEVEL), 2);
        assert_eq!(decode_cost(&[0x08], TOP_LEVEL), 1);
    }

    /// What stops the scan (an unknown group after the pods, a byte that is no field, a
    /// field cut short) does not hide what comes before it: prost allocates every pod
    /// before it skips the group or fails.
    #[test]
    fn what_follows_the_pods_never_hides_them() {
        let pods = [0x0a, 0x00].repeat(1000);
        let expected = 1000 * TOP_NODE_COST;
        for tail in [
            &[0xa3, 0x06, 0xa4, 0x06][..],
            &[0x0f],
            &[0x0a, 0x05],
            &[0xa3, 0x06],
        ] {
            let mut bytes = pods.clone();
            bytes.extend_from_slice(tail);
            assert!(
                decode_cost(&bytes, TOP_LEVEL) >= expected,
                "tail {tail:02x?}"
            );
        }
        // Nested inside a container, too: CreateContainerRequest.container { mounts… group }.
        let mut container = [0x52, 0x00].repeat(1000);
        container.extend_from_slice(&[0xa3, 0x06, 0xa4, 0x06]);
        let mut create = vec![0x12];
        prost::encoding::encode_varint(container.len() as u64, &mut create);
        create.extend_from_slice(&container);
        assert!(decode_cost(&create, TOP_LEVEL) >= 1000 * NODE_COST);
    }
}
