//! Standard padded base64 exactly as Go's `encoding/base64.StdEncoding` (how
//! `encoding/json` carries `[]byte`): `\r` and `\n` are skipped anywhere, padding is
//! required, non-zero trailing bits are accepted, and errors name the offending byte.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends the padded standard base64 encoding of `data`.
pub(crate) fn encode_into(out: &mut String, data: &[u8]) {
    out.reserve(data.len().div_ceil(3) * 4);
    let mut chunks = data.chunks_exact(3);
    for c in &mut chunks {
        let v = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        for shift in [18, 12, 6, 0] {
            out.push(ALPHABET[((v >> shift) & 63) as usize] as char);
        }
    }
    match *chunks.remainder() {
        [a] => {
            let v = u32::from(a) << 16;
            out.push(ALPHABET[((v >> 18) & 63) as usize] as char);
            out.push(ALPHABET[((v >> 12) & 63) as usize] as char);
            out.push_str("==");
        }
        [a, b] => {
            let v = (u32::from(a) << 16) | (u32::from(b) << 8);
            out.push(ALPHABET[((v >> 18) & 63) as usize] as char);
            out.push(ALPHABET[((v >> 12) & 63) as usize] as char);
            out.push(ALPHABET[((v >> 6) & 63) as usize] as char);
            out.push('=');
        }
        _ => {}
    }
}

fn value_of(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

fn is_newline(c: u8) -> bool {
    c == b'\n' || c == b'\r'
}

/// Decodes like `base64.StdEncoding.DecodeString`; the error is the input byte offset Go
/// reports (`illegal base64 data at input byte N`).
pub(crate) fn decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    loop {
        let mut quantum = [0u8; 4];
        let mut len = 4;
        let mut j = 0;
        let mut done = false;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = value_of(c) {
                quantum[j] = v;
                j += 1;
                continue;
            }
            if is_newline(c) {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    while si < src.len() && is_newline(src[si]) {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && is_newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                return Err(si);
            }
            len = j;
            done = true;
            break;
        }
        let v = (u32::from(quantum[0]) << 18)
            | (u32::from(quantum[1]) << 12)
            | (u32::from(quantum[2]) << 6)
            | u32::from(quantum[3]);
        let bytes = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        out.extend_from_slice(&bytes[..len - 1]);
        if done {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(data: &[u8]) -> String {
        let mut s = String::new();
        encode_into(&mut s, data);
        s
    }

    #[test]
    fn encodes_with_padding() {
        assert_eq!(enc(b""), "");
        assert_eq!(enc(&[1, 2, 3]), "AQID");
        assert_eq!(enc(&[0, 255, 10, 34, 92]), "AP8KIlw=");
        assert_eq!(enc(b"hello"), "aGVsbG8=");
        assert_eq!(enc(&[167]), "pw==");
    }

    #[test]
    fn decodes_like_go() {
        assert_eq!(decode(b"AQID"), Ok(vec![1, 2, 3]));
        assert_eq!(decode(b"AP8KIlw="), Ok(vec![0, 255, 10, 34, 92]));
        assert_eq!(decode(b"pw=="), Ok(vec![167]));
        assert_eq!(decode(b""), Ok(vec![]));
        // Newlines are skipped anywhere.
        assert_eq!(decode(b"AQ\nID\r\n"), Ok(vec![1, 2, 3]));
        // Non-zero trailing bits are accepted by the non-strict encoding.
        assert_eq!(decode(b"px=="), Ok(vec![167]));
    }

    #[test]
    fn rejects_like_go() {
        assert_eq!(decode(b"pw"), Err(0));
        assert_eq!(decode(b"pw="), Err(3));
        assert_eq!(decode(b"AQIDp"), Err(4));
        assert_eq!(decode(b"A==="), Err(1));
        assert_eq!(decode(b"AQ==AQ=="), Err(4));
        assert_eq!(decode(b"AQ*D"), Err(2));
    }
}
