//! JSON string quoting exactly as Go's `encoding/json` does it with HTML escaping on.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a quoted JSON string: `<`, `>`, `&`, U+2028 and U+2029 become `\u…`,
/// control characters use `\b \f \n \r \t` or `\u00XX`, DEL stays literal.
pub(crate) fn push_quoted(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            let safe = b >= 0x20 && !matches!(b, b'"' | b'\\' | b'<' | b'>' | b'&');
            if safe {
                i += 1;
                continue;
            }
            out.push_str(&s[start..i]);
            match b {
                b'\\' => out.push_str("\\\\"),
                b'"' => out.push_str("\\\""),
                0x08 => out.push_str("\\b"),
                0x0c => out.push_str("\\f"),
                b'\n' => out.push_str("\\n"),
                b'\r' => out.push_str("\\r"),
                b'\t' => out.push_str("\\t"),
                _ => {
                    out.push_str("\\u00");
                    out.push(HEX[usize::from(b >> 4)] as char);
                    out.push(HEX[usize::from(b & 0xf)] as char);
                }
            }
            i += 1;
            start = i;
            continue;
        }
        // U+2028 and U+2029 are E2 80 A8 / E2 80 A9.
        if b == 0xe2
            && bytes.get(i + 1) == Some(&0x80)
            && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9))
        {
            out.push_str(&s[start..i]);
            out.push_str(if bytes[i + 2] == 0xa8 {
                "\\u2028"
            } else {
                "\\u2029"
            });
            i += 3;
            start = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> String {
        let mut out = String::new();
        push_quoted(&mut out, s);
        out
    }

    #[test]
    fn escapes_like_go() {
        assert_eq!(q("plain"), "\"plain\"");
        assert_eq!(q("<&>"), "\"\\u003c\\u0026\\u003e\"");
        assert_eq!(q("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(q("\n\t\r\u{0}\u{1b}"), "\"\\n\\t\\r\\u0000\\u001b\"");
        assert_eq!(q("\u{8}\u{c}"), "\"\\b\\f\"");
        assert_eq!(
            q("\u{7f}é日本\u{2028}\u{2029}😀"),
            "\"\u{7f}é日本\\u2028\\u2029😀\""
        );
    }
}
