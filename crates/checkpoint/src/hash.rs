//! The hash primitives the kubelet's checksums use: FNV-32a (`hash/fnv.New32a`) and
//! CRC32-IEEE (`hash/crc32.ChecksumIEEE`). A leaf: it knows nothing of dumps or formats.

/// FNV-1a, 32 bit, as Go's `hash/fnv.New32a`.
///
/// # Example
///
/// ```
/// // The go-spew dump a v1.32 kubelet hashes for an empty device checkpoint, and the checksum
/// // it records (conformance vector `devicemanager_v2/empty_nil_nil`).
/// let dump = "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)<nil> RegisteredDevices:(map[string][]string)<nil>}";
/// assert_eq!(corral_checkpoint::fnv32a(dump.as_bytes()), 1_944_006_890);
/// assert_eq!(corral_checkpoint::fnv32a(b""), 0x811c_9dc5, "the offset basis");
/// ```
pub fn fnv32a(data: &[u8]) -> u32 {
    let mut hasher = Fnv32a::new();
    hasher.write(data);
    hasher.finish()
}

/// An incremental FNV-1a/32 hasher: feeding the bytes in pieces gives [`fnv32a`] of their
/// concatenation.
///
/// Each byte is one XOR and one dependent multiply, so hashing N bytes takes at least N
/// multiply latencies whatever the loop looks like; the loop below just keeps the state in
/// a register and adds no work per byte.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv32a(u32);

const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

impl Fnv32a {
    /// The hasher of the empty input.
    pub(crate) fn new() -> Self {
        Fnv32a(FNV32_OFFSET)
    }

    /// Hashes `data`.
    #[inline]
    pub(crate) fn write(&mut self, data: &[u8]) {
        let mut hash = self.0;
        for &b in data {
            hash = (hash ^ u32::from(b)).wrapping_mul(FNV32_PRIME);
        }
        self.0 = hash;
    }

    /// Hashes one byte.
    #[inline]
    pub(crate) fn write_byte(&mut self, b: u8) {
        *self = self.then(b);
    }

    /// The hasher after one more byte.
    #[inline]
    pub(crate) fn then(self, b: u8) -> Self {
        Fnv32a((self.0 ^ u32::from(b)).wrapping_mul(FNV32_PRIME))
    }

    /// The hash of everything written so far.
    pub(crate) fn finish(self) -> u32 {
        self.0
    }
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
///
/// # Example
///
/// ```
/// // The `Data` string of an empty `dra_manager_state` and the checksum a v1.32 kubelet
/// // records for it (conformance vector `dra_v132/empty_list`).
/// let data = r#"{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":[]}"#;
/// assert_eq!(corral_checkpoint::crc32_ieee(data.as_bytes()), 2_361_995_144);
/// assert_eq!(corral_checkpoint::crc32_ieee(b"123456789"), 0xcbf4_3926, "the standard check value");
/// ```
pub fn crc32_ieee(data: &[u8]) -> u32 {
    crc32_ieee_of(&[data])
}

/// [`crc32_ieee`] of the concatenation of `parts`, without copying them together.
pub(crate) fn crc32_ieee_of(parts: &[&[u8]]) -> u32 {
    let mut crc = !0u32;
    for &b in parts.iter().flat_map(|part| part.iter()) {
        crc = CRC32_TABLE[usize::from((crc as u8) ^ b)] ^ (crc >> 8);
    }
    !crc
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
}
