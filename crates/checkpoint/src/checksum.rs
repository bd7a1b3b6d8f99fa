//! The kubelet's checksums: FNV-32a over a go-spew dump (`checksum.New`,
//! `hashutil.DeepHashObject`) and CRC32-IEEE (`hash/crc32.ChecksumIEEE`, DRA v1.32).

use serde::Serialize;

use crate::error::Result;
use crate::gotype::GoType;
use crate::spew::dump_for_hash;

/// FNV-1a, 32 bit, as Go's `hash/fnv.New32a`.
pub fn fnv32a(data: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for &b in data {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

const fn crc32_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

static CRC32_TABLE: [u32; 256] = crc32_table();

/// CRC-32 with the IEEE polynomial, as Go's `crc32.ChecksumIEEE`.
pub fn crc32_ieee(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc = CRC32_TABLE[usize::from((crc as u8) ^ b)] ^ (crc >> 8);
    }
    !crc
}

/// The kubelet's `checksum.New(value)`: FNV-32a of `dump.ForHash(value)`, widened to the
/// `uint64` that `checksum.Checksum` is.
pub fn kubelet_checksum<T: Serialize + ?Sized>(value: &T, ty: &'static GoType) -> Result<u64> {
    Ok(fnv32a(dump_for_hash(value, ty)?.as_bytes()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv32a_known_values() {
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn crc32_known_values() {
        assert_eq!(crc32_ieee(b""), 0);
        assert_eq!(crc32_ieee(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn readme_dump_hashes_to_vector_checksum() {
        // testdata/conformance: devicemanager_v2/empty_nil_nil.
        let dump = "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)<nil> RegisteredDevices:(map[string][]string)<nil>}";
        assert_eq!(fnv32a(dump.as_bytes()), 1_944_006_890);
    }
}
