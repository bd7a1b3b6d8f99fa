//! Where the go-spew dump goes: a `String` (to see or compare the text) or straight into an
//! FNV-32a hasher, so a checksum never materialises the dump.

use crate::decimal::{BYTE_DIGITS, byte_decimal, spaced_byte_decimal};
use crate::hash::Fnv32a;

/// A consumer of dump text. The dumper only ever writes valid UTF-8 through
/// [`push_str`](Self::push_str) and ASCII through [`push_byte`](Self::push_byte).
pub(crate) trait DumpSink {
    /// Appends text.
    fn push_str(&mut self, s: &str);
    /// Appends one ASCII byte.
    fn push_byte(&mut self, b: u8);

    /// Appends a `[]byte` element: `b` in decimal, after a space when `spaced`.
    fn push_byte_decimal(&mut self, b: u8, spaced: bool) {
        self.push_str(if spaced {
            spaced_byte_decimal(b)
        } else {
            byte_decimal(b)
        });
    }
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

    /// Hashes all three digit slots and picks the state after the last real digit:
    /// selects instead of a loop whose length (1–3 digits) would be mispredicted on
    /// random bytes.
    #[inline]
    fn push_byte_decimal(&mut self, b: u8, spaced: bool) {
        if spaced {
            self.write_byte(b' ');
        }
        let (digits, len) = BYTE_DIGITS[usize::from(b)];
        let h1 = self.then(digits[0]);
        let h2 = h1.then(digits[1]);
        let h3 = h2.then(digits[2]);
        *self = if len == 3 {
            h3
        } else if len == 2 {
            h2
        } else {
            h1
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::fnv32a;

    #[test]
    fn hasher_sink_hashes_what_the_string_sink_holds() {
        let mut text = String::new();
        let mut hasher = Fnv32a::new();
        for b in 0..=u8::MAX {
            for spaced in [false, true] {
                text.push_byte_decimal(b, spaced);
                hasher.push_byte_decimal(b, spaced);
            }
            DumpSink::push_str(&mut text, "map[é");
            DumpSink::push_str(&mut hasher, "map[é");
            text.push_byte(b'}');
            hasher.push_byte(b'}');
        }
        assert_eq!(hasher.finish(), fnv32a(text.as_bytes()));
    }
}
