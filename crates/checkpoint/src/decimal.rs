//! Integers as decimal text without `fmt`: the go-spew dump prints every integer and every
//! byte of a `[]byte` this way, so these are its hottest paths.

/// Two decimal digits for every value below 100, `"00" "01" … "99"`.
const PAIRS: &[u8; 200] = &{
    let mut out = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        out[2 * i] = b'0' + (i / 10) as u8;
        out[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    out
};

/// Room for any `i128` in decimal (39 digits and a sign).
pub(crate) type DecimalBuf = [u8; 40];

/// Writes `v` in decimal (as Go's `strconv.FormatInt`/`FormatUint`) into the end of `buf`
/// and returns the text.
pub(crate) fn decimal(buf: &mut DecimalBuf, v: i128) -> &str {
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    // Beyond 64 bits (never a valid Go integer; kept exact for error paths).
    while n > u128::from(u64::MAX) {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let mut n = n as u64;
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[n as usize * 2..n as usize * 2 + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + n as u8;
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    // Only ASCII digits and '-' were written.
    std::str::from_utf8(&buf[i..]).unwrap_or_default()
}

/// Bytes in the slot of each value in [`BYTE_TEXT`].
const BYTE_SLOT: usize = 4;

const BYTE_TABLE: ([u8; 256 * BYTE_SLOT], [u8; 256]) = {
    let mut text = [b' '; 256 * BYTE_SLOT];
    let mut len = [0u8; 256];
    let mut v = 0;
    while v < 256 {
        let digits = if v >= 100 {
            3
        } else if v >= 10 {
            2
        } else {
            1
        };
        let mut n = v;
        let mut d = digits;
        while d > 0 {
            text[v * BYTE_SLOT + d] = b'0' + (n % 10) as u8;
            n /= 10;
            d -= 1;
        }
        len[v] = digits as u8 + 1;
        v += 1;
    }
    (text, len)
};

/// Every byte value as `" <decimal>"`, padded to [`BYTE_SLOT`] bytes each.
const BYTE_TEXT: &str = match std::str::from_utf8(&BYTE_TABLE.0) {
    Ok(text) => text,
    Err(_) => panic!("byte table is ASCII"),
};

/// A byte's decimal text preceded by a space (`" 7"`, `" 255"`): a `[]byte` element after
/// the first. [`byte_decimal`] is the same without the space.
pub(crate) fn spaced_byte_decimal(b: u8) -> &'static str {
    let at = usize::from(b) * BYTE_SLOT;
    &BYTE_TEXT[at..at + usize::from(BYTE_TABLE.1[usize::from(b)])]
}

/// A byte's decimal text (`"7"`, `"255"`).
pub(crate) fn byte_decimal(b: u8) -> &'static str {
    &spaced_byte_decimal(b)[1..]
}

/// Every byte value's decimal digits, left-aligned and zero-padded, and how many there are.
pub(crate) static BYTE_DIGITS: [([u8; 3], u8); 256] = {
    let mut out = [([0u8; 3], 0u8); 256];
    let mut v = 0;
    while v < 256 {
        let len = BYTE_TABLE.1[v] - 1;
        let mut d = 0;
        while d < len as usize {
            out[v].0[d] = BYTE_TABLE.0[v * BYTE_SLOT + 1 + d];
            d += 1;
        }
        out[v].1 = len;
        v += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_print_like_to_string() {
        let mut values = vec![
            0i128,
            9,
            10,
            99,
            100,
            101,
            -1,
            -10,
            i128::from(i64::MIN),
            i128::from(i64::MAX),
            i128::from(u64::MAX),
            i128::from(u64::MAX) + 1,
            i128::MAX,
            i128::MIN,
        ];
        values.extend((0..39).map(|p| 10i128.pow(p)));
        values.extend((0..39).map(|p| 10i128.pow(p) - 1));
        values.extend((0..39).map(|p| -(10i128.pow(p)) + 1));
        for v in values {
            let mut buf: DecimalBuf = [0; 40];
            assert_eq!(decimal(&mut buf, v), v.to_string());
        }
    }

    #[test]
    fn every_byte_has_its_decimal() {
        for b in 0..=u8::MAX {
            assert_eq!(byte_decimal(b), b.to_string());
            assert_eq!(spaced_byte_decimal(b), format!(" {b}"));
            let (digits, len) = BYTE_DIGITS[usize::from(b)];
            assert_eq!(&digits[..usize::from(len)], b.to_string().as_bytes());
        }
    }
}
