//! Go `time.Duration` strings as KubeletConfiguration (and kubectl's flags) write them
//! ("10s", "1m30s", "500ms"): parsed exactly as Go's `time.ParseDuration` parses them, in
//! integer nanoseconds, and printed exactly as Go's `Duration.String` prints them ("5m0s",
//! "1h0m0s", "1.5s", "100ms").
//!
//! The parser is a port of `ParseDuration` in Go's `src/time/format.go`: every digit is
//! accumulated in a `u64` of nanoseconds with Go's overflow checks; the only floating-point
//! step is Go's own (a fraction's digits times the unit, e.g. the `.5` of `1.5h`, which Go
//! computes in `float64` to stay nanosecond-accurate for fractions of hours), so every
//! string gives Go's value to the nanosecond, and every refused string Go's error message.
//! One deliberate difference: two terms of exactly 2^63 ns (`"9223372036854775808ns"`
//! twice) wrap Go's `uint64` sum to zero and Go returns 0; corral refuses the string.

use std::fmt;
use std::time::Duration;

/// Nanoseconds per unit, as Go's `unitMap`.
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000, // "µs" is U+00B5 (micro sign), "μs" U+03BC (mu)
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

const TWO_63: u64 = 1 << 63;

/// Why a string is not a duration corral accepts. The first three are Go's errors, with
/// Go's messages word for word (`time: invalid duration "1x"` …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DurationError {
    /// Not of the form `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or out of Go's range (±2^63 ns).
    #[error("time: invalid duration {}", quote(.0))]
    Invalid(String),
    /// A number without a unit (`"3"`).
    #[error("time: missing unit in duration {}", quote(.0))]
    MissingUnit(String),
    /// A unit other than ns, us (µs, μs), ms, s, m, h.
    #[error("time: unknown unit {} in duration {}", quote(.unit), quote(.duration))]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole string.
        duration: String,
    },
    /// A valid Go duration below zero: no duration corral reads may be negative.
    #[error("{} is negative (a duration corral reads must be 0 or more)", quote(.0))]
    Negative(String),
}

/// Go's `time.quote`: double quotes, `"` and `\` escaped, control and non-ASCII characters
/// as `\x` escapes of their UTF-8 bytes.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c < ' ' || !c.is_ascii() {
            let mut bytes = [0u8; 4];
            for byte in c.encode_utf8(&mut bytes).bytes() {
                out.push_str(&format!("\\x{byte:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// Go's `leadingInt`: the leading digits of `s` (`None` beyond 2^63) and the rest.
fn leading_int(s: &[u8]) -> (Option<u64>, usize) {
    let mut x: u64 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if x > TWO_63 / 10 {
            return (None, i);
        }
        x = x * 10 + u64::from(s[i] - b'0');
        if x > TWO_63 {
            return (None, i);
        }
        i += 1;
    }
    (Some(x), i)
}

/// Go's `leadingFraction`: digits after a period; past 2^63 it stops accumulating
/// precision but keeps consuming digits. Returns (digits, 10^count, bytes consumed).
fn leading_fraction(s: &[u8]) -> (u64, f64, usize) {
    let mut x: u64 = 0;
    let mut scale = 1f64;
    let mut overflow = false;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if !overflow {
            if x > (TWO_63 - 1) / 10 {
                overflow = true;
            } else {
                let y = x * 10 + u64::from(s[i] - b'0');
                if y > TWO_63 {
                    overflow = true;
                } else {
                    x = y;
                    scale *= 10.0;
                }
            }
        }
        i += 1;
    }
    (x, scale, i)
}

/// Go's `time.ParseDuration`: signed nanoseconds, or Go's error.
pub(crate) fn parse_go_nanos(text: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(text.to_owned());
    let mut s = text.as_bytes();
    let mut neg = false;
    if let Some(&c) = s.first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut d: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let (v, used) = leading_int(s);
        let mut v = v.ok_or_else(invalid)?;
        let pre = used > 0;
        s = &s[used..];
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let used;
            (f, scale, used) = leading_fraction(s);
            post = used > 0;
            s = &s[used..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(text.to_owned()));
        }
        // The unit ends at an ASCII byte (or the end), so it is whole UTF-8.
        let unit_text = std::str::from_utf8(&s[..unit_len]).map_err(|_| invalid())?;
        s = &s[unit_len..];
        let unit = unit_nanos(unit_text).ok_or_else(|| DurationError::UnknownUnit {
            unit: unit_text.to_owned(),
            duration: text.to_owned(),
        })?;
        if v > TWO_63 / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            // As Go: float64 keeps fractions of hours nanosecond-accurate; the product is
            // at most 3.6e12, so the conversion never saturates.
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > TWO_63 {
                return Err(invalid());
            }
        }
        d = d.checked_add(v).ok_or_else(invalid)?;
        if d > TWO_63 {
            return Err(invalid());
        }
    }
    if neg {
        // d <= 2^63: its negation is an i64 (2^63 becomes i64::MIN).
        return Ok((d as i64).wrapping_neg());
    }
    i64::try_from(d).map_err(|_| invalid())
}

/// Parse a Go duration string as `time.ParseDuration` does (e.g. `"1h2m3.5s"`, `"0"`,
/// `"500ms"`, `"+5s"`), refusing negative durations (no duration corral reads may be
/// negative; `"-0"` is zero).
pub(crate) fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let nanos = parse_go_nanos(text)?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| DurationError::Negative(text.to_owned()))
}

/// A duration printed as Go's `Duration.String` prints it: `0s`, `1.5µs`, `100ms`, `1.5s`,
/// `5m0s`, `1h0m0s`, `2562047h47m16.854775807s`. Durations longer than Go's (above
/// 2^63-1 ns) keep the same form with more hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GoDuration(pub(crate) Duration);

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_nanos(false, self.0.as_nanos()))
    }
}

/// Go's `Duration.String` of signed nanoseconds.
#[cfg(test)]
pub(crate) fn format_go_nanos(nanos: i64) -> String {
    format_nanos(nanos < 0, u128::from(nanos.unsigned_abs()))
}

/// `v / 10^prec` with its fraction, trailing zeros (and a bare period) omitted, as Go's
/// `fmtFrac` + `fmtInt`.
fn push_frac(out: &mut String, v: u128, prec: u32) {
    let pow = 10u128.pow(prec);
    out.push_str(&(v / pow).to_string());
    let frac = v % pow;
    if frac != 0 {
        let digits = format!("{frac:0width$}", width = prec as usize);
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

/// Go's `Duration.format` for a magnitude `u` in nanoseconds.
fn format_nanos(neg: bool, u: u128) -> String {
    const SECOND: u128 = 1_000_000_000;
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if u < SECOND {
        // Below a second: the largest unit below it, with a fraction ("1.2ms").
        let (prec, unit) = match u {
            0 => return "0s".to_owned(),
            1..1_000 => (0, "ns"),
            1_000..1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        push_frac(&mut out, u, prec);
        out.push_str(unit);
        return out;
    }
    let seconds = u / SECOND;
    let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if seconds >= 60 {
        out.push_str(&format!("{minutes}m"));
    }
    push_frac(&mut out, u % (60 * SECOND), 9);
    out.push('s');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: i64 = 1;
    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    /// Go's `parseDurationTests` (src/time/time_test.go, `TestParseDuration`), every row.
    const PARSE: &[(&str, i64)] = &[
        // simple
        ("0", 0),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        // sign
        ("-5s", -5 * S),
        ("+5s", 5 * S),
        ("-0", 0),
        ("+0", 0),
        // decimal
        ("5.0s", 5 * S),
        ("5.6s", 5 * S + 600 * MS),
        ("5.s", 5 * S),
        (".5s", 500 * MS),
        ("1.0s", S),
        ("1.00s", S),
        ("1.004s", S + 4 * MS),
        ("1.0040s", S + 4 * MS),
        ("100.00100s", 100 * S + MS),
        // different units
        ("10ns", 10 * NS),
        ("11us", 11 * US),
        ("12µs", 12 * US), // U+00B5
        ("12μs", 12 * US), // U+03BC
        ("13ms", 13 * MS),
        ("14s", 14 * S),
        ("15m", 15 * M),
        ("16h", 16 * H),
        // composite durations
        ("3h30m", 3 * H + 30 * M),
        ("10.5s4m", 4 * M + 10 * S + 500 * MS),
        ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
        (
            "1h2m3s4ms5us6ns",
            H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
        ),
        ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
        // large value
        ("52763797000ns", 52763797000 * NS),
        // more than 9 digits after decimal point, see https://golang.org/issue/6617
        ("0.3333333333333333333h", 20 * M),
        // 9007199254740993 = 1<<53+1 cannot be stored precisely in a float64
        ("9007199254740993ns", (1 << 53) + 1),
        // largest duration that can be represented by int64 in nanoseconds
        ("9223372036854775807ns", i64::MAX),
        ("9223372036854775.807us", i64::MAX),
        ("9223372036s854ms775us807ns", i64::MAX),
        ("-9223372036854775808ns", i64::MIN),
        ("-9223372036854775.808us", i64::MIN),
        ("-9223372036s854ms775us808ns", i64::MIN),
        // largest negative round trip value, see https://golang.org/issue/48629
        ("-2562047h47m16.854775808s", i64::MIN),
        // huge string; issue 15011.
        ("0.100000000000000000000h", 6 * M),
        // This value tests the first overflow check in leadingFraction.
        ("0.830103483285477580700h", 49 * M + 48 * S + 372539827 * NS),
    ];

    /// Go's `parseDurationErrorTests` (`TestParseDurationErrors`): each error contains the
    /// quoted input. Rust strings are UTF-8, so Go's rows of invalid UTF-8 have no
    /// counterpart; the rows with U+FFFD do.
    const PARSE_ERRORS: &[(&str, &str)] = &[
        // invalid
        ("", r#""""#),
        ("3", r#""3""#),
        ("-", r#""-""#),
        ("s", r#""s""#),
        (".", r#"".""#),
        ("-.", r#""-.""#),
        (".s", r#"".s""#),
        ("+.s", r#""+.s""#),
        ("1d", r#""1d""#),
        ("\u{FFFD}", r#""\xef\xbf\xbd""#),
        (
            "\u{FFFD} hello \u{FFFD} world",
            r#""\xef\xbf\xbd hello \xef\xbf\xbd world""#,
        ),
        // overflow
        ("9223372036854775810ns", r#""9223372036854775810ns""#),
        ("9223372036854775808ns", r#""9223372036854775808ns""#),
        ("-9223372036854775809ns", r#""-9223372036854775809ns""#),
        ("9223372036854776us", r#""9223372036854776us""#),
        ("3000000h", r#""3000000h""#),
        ("9223372036854775.808us", r#""9223372036854775.808us""#),
        (
            "9223372036854ms775us808ns",
            r#""9223372036854ms775us808ns""#,
        ),
    ];

    /// Go's `durationTests` (`TestDurationString`).
    const STRINGS: &[(&str, i64)] = &[
        ("0s", 0),
        ("1ns", NS),
        ("1.1µs", 1100 * NS),
        ("2.2ms", 2200 * US),
        ("3.3s", 3300 * MS),
        ("4m5s", 4 * M + 5 * S),
        ("4m5.001s", 4 * M + 5001 * MS),
        ("5h6m7.001s", 5 * H + 6 * M + 7001 * MS),
        ("8m0.000000001s", 8 * M + NS),
        ("2562047h47m16.854775807s", i64::MAX),
        ("-2562047h47m16.854775808s", i64::MIN),
    ];

    #[test]
    fn go_parse_duration_table() {
        for &(text, want) in PARSE {
            assert_eq!(parse_go_nanos(text), Ok(want), "ParseDuration({text:?})");
        }
    }

    #[test]
    fn go_parse_duration_error_table() {
        for &(text, quoted) in PARSE_ERRORS {
            let err = parse_go_nanos(text).expect_err(text).to_string();
            assert!(err.contains(quoted), "{text:?}: {err:?} lacks {quoted}");
            assert!(err.starts_with("time: "), "{err}");
        }
    }

    #[test]
    fn go_error_messages_word_for_word() {
        let cases = [
            ("1x", r#"time: unknown unit "x" in duration "1x""#),
            ("10", r#"time: missing unit in duration "10""#),
            ("", r#"time: invalid duration """#),
            ("3000000h", r#"time: invalid duration "3000000h""#),
            ("1.2.3s", r#"time: missing unit in duration "1.2.3s""#),
            ("1\"s", r#"time: unknown unit "\"s" in duration "1\"s""#),
            ("1 s", r#"time: unknown unit " s" in duration "1 s""#),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_nanos(text).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn go_duration_string_table() {
        for &(want, nanos) in STRINGS {
            assert_eq!(format_go_nanos(nanos), want, "Duration({nanos}).String()");
            if nanos > 0 {
                assert_eq!(format_go_nanos(-nanos), format!("-{want}"));
            }
        }
    }

    #[test]
    fn go_round_trip() {
        // Go's TestParseDurationRoundTrip: the extremes, then millisecond multiples.
        for nanos in [i64::MAX, i64::MIN, 0, 1, 999, 1_000_000_001, 7 * H + 59 * M] {
            assert_eq!(parse_go_nanos(&format_go_nanos(nanos)), Ok(nanos));
        }
        for ms in (0..i64::from(i32::MAX)).step_by(9_999_991) {
            let nanos = ms * MS;
            assert_eq!(parse_go_nanos(&format_go_nanos(nanos)), Ok(nanos));
        }
    }

    #[test]
    fn exact_in_integer_nanoseconds() {
        // f64 accumulation gave 1.1s + 0.000000001s != 1_100_000_001 ns and lost 2^53+1.
        assert_eq!(parse_go_nanos("1.1s1ns"), Ok(1_100_000_001));
        assert_eq!(
            parse_go_duration("9007199254740993ns"),
            Ok(Duration::from_nanos((1 << 53) + 1))
        );
        assert_eq!(
            parse_go_duration("2562047h47m16.854775807s"),
            Ok(Duration::from_nanos(i64::MAX as u64))
        );
    }

    #[test]
    fn corral_refuses_negative_and_what_go_wraps() {
        assert_eq!(
            parse_go_duration("-5s"),
            Err(DurationError::Negative("-5s".into()))
        );
        assert_eq!(parse_go_duration("-0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("+5s"), Ok(Duration::from_secs(5)));
        // Go wraps 2^63 + 2^63 to 0 and returns 0s; corral refuses.
        let twice = "9223372036854775808ns9223372036854775808ns";
        assert_eq!(
            parse_go_nanos(twice),
            Err(DurationError::Invalid(twice.into()))
        );
        // Go does not trim: a space is part of a unit.
        assert!(parse_go_duration(" 10s").is_err());
    }

    #[test]
    fn go_duration_display() {
        let cases = [
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(100), "100ms"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(120), "2m0s"),
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1500), "1.5µs"),
        ];
        for (duration, want) in cases {
            assert_eq!(GoDuration(duration).to_string(), want);
            assert_eq!(parse_go_duration(want), Ok(duration), "{want}");
        }
        // Beyond Go's range: more hours, same form.
        assert_eq!(
            GoDuration(Duration::from_secs(u64::MAX)).to_string(),
            "5124095576030431h0m15s"
        );
    }
}
