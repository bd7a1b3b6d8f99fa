//! JSON syntax as Go's `encoding/json` scanner accepts it, into an ordered tree.
//!
//! Objects keep every member in file order, duplicates included, so the decoder can apply
//! Go's "last one wins" (and merge) rules. Strings are unquoted as Go unquotes them: invalid
//! UTF-8 bytes and unpaired surrogate escapes become U+FFFD, one per bad byte or escape.
//! Numbers are kept as their source text; the decoder parses them for the target type.

/// A parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// A number literal, as written.
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// Members in file order, duplicates kept.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Go's name for the JSON kind in `UnmarshalTypeError.Value`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "bool",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }
}

/// A syntax error: Go's message and the byte offset it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) offset: usize,
    pub(crate) message: String,
    /// Whether the document nests deeper than [`MAX_DEPTH`] at `offset` (otherwise it is
    /// not JSON there).
    pub(crate) too_deep: bool,
}

/// How many objects and arrays may enclose one another; the bracket opening one more is
/// refused (Go allows 10000; no checkpoint nests beyond ~8, and a recursive parser must
/// bound its stack).
pub(crate) const MAX_DEPTH: usize = 1000;

/// Parses a whole document: one value, optional surrounding whitespace, nothing else.
pub(crate) fn parse(input: &[u8]) -> Result<Json, SyntaxError> {
    let mut p = Parser { s: input, i: 0 };
    p.skip_ws();
    let value = p.value(0)?;
    p.skip_ws();
    if p.i < p.s.len() {
        return Err(p.invalid("after top-level value"));
    }
    Ok(value)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

/// How Go's scanner quotes an offending byte in messages.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        b'\n' => "'\\n'".to_owned(),
        b'\r' => "'\\r'".to_owned(),
        b'\t' => "'\\t'".to_owned(),
        0x20..=0x7e => format!("'{}'", c as char),
        0x00..=0x1f | 0x7f => format!("'\\x{c:02x}'"),
        _ => format!("'{}'", char::from(c)),
    }
}

impl Parser<'_> {
    fn eof(&self) -> SyntaxError {
        SyntaxError {
            offset: self.s.len(),
            message: "unexpected end of JSON input".to_owned(),
            too_deep: false,
        }
    }

    /// `invalid character 'x' <context>` at the current byte (or end of input).
    fn invalid(&self, context: &str) -> SyntaxError {
        match self.s.get(self.i) {
            None => self.eof(),
            Some(&c) => SyntaxError {
                offset: self.i,
                message: format!("invalid character {} {context}", quote_char(c)),
                too_deep: false,
            },
        }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// A value inside `depth` enclosing objects and arrays.
    fn value(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        if matches!(self.peek(), Some(b'{' | b'[')) && depth >= MAX_DEPTH {
            return Err(SyntaxError {
                offset: self.i,
                message: format!("exceeded max depth: nesting deeper than {MAX_DEPTH} levels"),
                too_deep: true,
            });
        }
        match self.peek() {
            None => Err(self.eof()),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(_) => Err(self.invalid("looking for beginning of value")),
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, SyntaxError> {
        for (k, expected) in word.bytes().enumerate() {
            match self.peek() {
                None => return Err(self.eof()),
                Some(c) if c == expected => self.i += 1,
                Some(_) => {
                    return Err(self.invalid(&format!(
                        "in literal {word} (expecting {})",
                        quote_char(word.as_bytes()[k])
                    )));
                }
            }
        }
        Ok(value)
    }

    fn object(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        let mut members = Vec::new();
        if self.opens_empty(b'}') {
            return Ok(Json::Object(members));
        }
        loop {
            match self.peek() {
                Some(b'"') => {}
                _ => return Err(self.invalid("looking for beginning of object key string")),
            }
            let key = self.string()?;
            self.skip_ws();
            match self.peek() {
                Some(b':') => self.i += 1,
                _ => return Err(self.invalid("after object key")),
            }
            self.skip_ws();
            let value = self.value(depth + 1)?;
            members.push((key, value));
            if self.closes(b'}', "after object key:value pair")? {
                return Ok(Json::Object(members));
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        let mut items = Vec::new();
        if self.opens_empty(b']') {
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            if self.closes(b']', "after array element")? {
                return Ok(Json::Array(items));
            }
        }
    }

    /// Skips the opening bracket and the space after it, and a `close` right there (`true`:
    /// the object or array is empty).
    fn opens_empty(&mut self, close: u8) -> bool {
        self.i += 1;
        self.skip_ws();
        let empty = self.peek() == Some(close);
        if empty {
            self.i += 1;
        }
        empty
    }

    /// After an object member or array element: skips a `,` and the space after it
    /// (`false`: another one follows) or the `close` byte (`true`); anything else is invalid
    /// `context`.
    fn closes(&mut self, close: u8, context: &str) -> Result<bool, SyntaxError> {
        self.skip_ws();
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                self.skip_ws();
                Ok(false)
            }
            Some(b) if b == close => {
                self.i += 1;
                Ok(true)
            }
            _ => Err(self.invalid(context)),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<Json, SyntaxError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.invalid("in numeric literal")),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.invalid("after decimal point in numeric literal"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.invalid("in exponent of numeric literal"));
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
        Ok(Json::Number(text.to_owned()))
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek() {
                None => return Err(self.eof()),
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                Some(_) => return Err(self.invalid("in \\u hexadecimal character escape")),
            };
            v = v * 16 + u32::from(d);
            self.i += 1;
        }
        Ok(v)
    }

    /// A string literal, unquoted the way Go's `unquote` does.
    fn string(&mut self) -> Result<String, SyntaxError> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.eof());
            };
            match c {
                b'"' => {
                    self.i += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.i += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.eof());
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => self.unicode_escape(&mut out)?,
                        _ => {
                            self.i -= 1;
                            return Err(self.invalid("in string escape code"));
                        }
                    }
                }
                0x00..=0x1f => return Err(self.invalid("in string literal")),
                0x20..=0x7f => {
                    // Copy the run of plain ASCII at once.
                    let start = self.i;
                    while let Some(0x20..=0x7f) = self.peek() {
                        if matches!(self.peek(), Some(b'"' | b'\\')) {
                            break;
                        }
                        self.i += 1;
                    }
                    out.push_str(std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default());
                }
                _ => self.utf8_char(&mut out),
            }
        }
    }

    /// After `\u`: a code point, a surrogate pair, or U+FFFD for an unpaired surrogate.
    fn unicode_escape(&mut self, out: &mut String) -> Result<(), SyntaxError> {
        let first = self.hex4()?;
        if (0xd800..0xe000).contains(&first) {
            if first < 0xdc00
                && self.s.get(self.i) == Some(&b'\\')
                && self.s.get(self.i + 1) == Some(&b'u')
            {
                let save = self.i;
                self.i += 2;
                if let Ok(second) = self.hex4()
                    && (0xdc00..0xe000).contains(&second)
                {
                    let cp = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
                    out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                    return Ok(());
                }
                self.i = save;
            }
            out.push('\u{fffd}');
            return Ok(());
        }
        out.push(char::from_u32(first).unwrap_or('\u{fffd}'));
        Ok(())
    }

    /// One non-ASCII character; an invalid byte becomes U+FFFD and is consumed alone.
    fn utf8_char(&mut self, out: &mut String) {
        let lead = self.s[self.i];
        let width = match lead {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => 0,
        };
        if width > 0
            && let Some(bytes) = self.s.get(self.i..self.i + width)
            && let Ok(text) = std::str::from_utf8(bytes)
        {
            out.push_str(text);
            self.i += width;
            return;
        }
        out.push('\u{fffd}');
        self.i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(input: &str) -> String {
        parse(input.as_bytes()).unwrap_err().message
    }

    #[test]
    fn parses_values_in_order_with_duplicates() {
        let v = parse(br#" {"a":1,"a":[true,null,"x"],"b":{}} "#).unwrap();
        assert_eq!(
            v,
            Json::Object(vec![
                ("a".into(), Json::Number("1".into())),
                (
                    "a".into(),
                    Json::Array(vec![Json::Bool(true), Json::Null, Json::String("x".into())])
                ),
                ("b".into(), Json::Object(vec![])),
            ])
        );
    }

    #[test]
    fn go_error_messages() {
        assert_eq!(err(""), "unexpected end of JSON input");
        assert_eq!(err("   "), "unexpected end of JSON input");
        assert_eq!(err("{\"a\":"), "unexpected end of JSON input");
        assert_eq!(
            err("garbage"),
            "invalid character 'g' looking for beginning of value"
        );
        assert_eq!(
            err("not json"),
            "invalid character 'o' in literal null (expecting 'u')"
        );
        assert_eq!(err("{} x"), "invalid character 'x' after top-level value");
        assert_eq!(
            err("{\"a\":1 \"b\""),
            "invalid character '\"' after object key:value pair"
        );
        assert_eq!(err("01"), "invalid character '1' after top-level value");
        assert_eq!(
            err("1.e3"),
            "invalid character 'e' after decimal point in numeric literal"
        );
        assert_eq!(err("\"a\nb\""), "invalid character '\\n' in string literal");
        assert_eq!(
            err("[1,]"),
            "invalid character ']' looking for beginning of value"
        );
    }

    #[test]
    fn unquotes_like_go() {
        let s = |b: &[u8]| match parse(b).unwrap() {
            Json::String(s) => s,
            other => panic!("{other:?}"),
        };
        assert_eq!(s(b"\"bad\xff\xfeutf8\""), "bad\u{fffd}\u{fffd}utf8");
        assert_eq!(s(b"\"\xe6\x97x\""), "\u{fffd}\u{fffd}x");
        assert_eq!(s(br#""\ud83d\ude00""#), "😀");
        assert_eq!(s(br#""\ud83dx""#), "\u{fffd}x");
        assert_eq!(s(br#""\ud83d\u0041""#), "\u{fffd}A");
        assert_eq!(s(br#""\u003c\/""#), "</");
        assert_eq!(s("\"日本\"".as_bytes()), "日本");
    }
}
