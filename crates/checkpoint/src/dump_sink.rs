//! Where the go-spew dump goes: a `String` (to see or compare the text) or straight into an
//! FNV-32a hasher, so a checksum never materialises the dump.

use crate::checksum::Fnv32a;

/// A consumer of dump text. The dumper only ever writes valid UTF-8 through
/// [`push_str`](Self::push_str) and ASCII through [`push_byte`](Self::push_byte).
pub(crate) trait DumpSink {
    /// Appends text.
    fn push_str(&mut self, s: &str);
    /// Appends one ASCII byte.
    fn push_byte(&mut self, b: u8);
}

impl DumpSink for String {
    #[inline]
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }

    #[inline]
    fn push_byte(&mut self, b: u8) {
        debug_assert!(b.is_ascii(), "dump bytes pushed one by one are ASCII");
        self.push(char::from(b));
    }
}

impl DumpSink for Fnv32a {
    #[inline]
    fn push_str(&mut self, s: &str) {
        self.write(s.as_bytes());
    }

    #[inline]
    fn push_byte(&mut self, b: u8) {
        self.write_byte(b);
    }
}
