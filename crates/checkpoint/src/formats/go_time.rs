//! Go's `time.Time` in JSON: `MarshalJSON` writes `time.RFC3339Nano` (fraction without
//! trailing zeros, none when whole), `UnmarshalJSON` reads RFC 3339 with any offset.
//!
//! Purpose-built rather than a date crate: the byte form must be Go's (trailing zeros of the
//! fraction dropped, `Z` for UTC), and the civil-date arithmetic is twenty lines.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (`civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Why a string is not an RFC 3339 time, or a time Go cannot write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parsing time {text:?} as RFC 3339: {why}")]
pub struct TimeParseError {
    /// The text.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// A Go `time.Time` as JSON carries it: an instant and the zone offset it is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoTime {
    /// Nanoseconds since 1970-01-01T00:00:00Z (negative before).
    pub unix_nanos: i128,
    /// The zone's offset east of UTC, in seconds.
    pub offset_seconds: i32,
}

impl GoTime {
    /// The instant as a `SystemTime`.
    pub fn system_time(self) -> SystemTime {
        let abs = self.unix_nanos.unsigned_abs();
        let magnitude = Duration::new((abs / 1_000_000_000) as u64, (abs % 1_000_000_000) as u32);
        if self.unix_nanos >= 0 {
            UNIX_EPOCH + magnitude
        } else {
            UNIX_EPOCH - magnitude
        }
    }

    /// `t.Format(time.RFC3339Nano)` as `MarshalJSON` writes it, or `None` where
    /// `MarshalJSON` fails (a year outside 0–9999, an offset of 24 hours or more).
    pub fn format(self) -> Option<String> {
        let offset_minutes = self.offset_seconds / 60;
        if offset_minutes.unsigned_abs() / 60 >= 24 {
            return None;
        }
        let local = self.unix_nanos + i128::from(self.offset_seconds) * 1_000_000_000;
        let secs = local.div_euclid(1_000_000_000) as i64;
        let nanos = local.rem_euclid(1_000_000_000) as u32;
        let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
        if !(0..=9999).contains(&year) {
            return None;
        }
        let rem = secs.rem_euclid(86_400);
        let mut out = format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        );
        if nanos != 0 {
            let fraction = format!("{nanos:09}");
            out.push('.');
            out.push_str(fraction.trim_end_matches('0'));
        }
        if offset_minutes == 0 {
            out.push('Z');
        } else {
            let sign = if offset_minutes < 0 { '-' } else { '+' };
            let abs = offset_minutes.unsigned_abs();
            out.push_str(&format!("{sign}{:02}:{:02}", abs / 60, abs % 60));
        }
        Some(out)
    }
}

/// Nanoseconds since the epoch, negative before it.
fn unix_nanos(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_nanos() as i128,
        Err(before) => -(before.duration().as_nanos() as i128),
    }
}

/// `t.UTC().Format(time.RFC3339Nano)`, e.g. `2026-11-25T08:30:00.5Z` (years 0–9999; others
/// are clamped to the range's ends, which no clock reaches).
pub fn format_rfc3339_nano(t: SystemTime) -> String {
    let time = GoTime {
        unix_nanos: unix_nanos(t),
        offset_seconds: 0,
    };
    time.format().unwrap_or_else(|| {
        if time.unix_nanos < 0 {
            "0000-01-01T00:00:00Z"
        } else {
            "9999-12-31T23:59:59.999999999Z"
        }
        .to_owned()
    })
}

fn leap(y: u32) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `Time.UnmarshalJSON` of the JSON string `text` (Go 1.27): `parseStrictRFC3339`, i.e.
/// the fast RFC 3339 parser, else `time.Parse(time.RFC3339, …)` (whose strict checks Go has
/// disabled), which also takes a one-digit hour, a `,` before the fraction and any two-digit
/// offset hours and minutes. A fraction of more than nine digits is cut to nine.
pub fn parse_go_time(text: &str) -> Result<GoTime, TimeParseError> {
    let fail = |why| TimeParseError {
        text: text.to_owned(),
        why,
    };
    let s = text.as_bytes();
    let digits_at = |at: usize, n: usize| digits(s, at, n).ok_or_else(|| fail("expected digits"));
    let year = digits_at(0, 4)?;
    if s.get(4) != Some(&b'-') {
        return Err(fail("expected - after the year"));
    }
    let month = digits_at(5, 2)?;
    if s.get(7) != Some(&b'-') {
        return Err(fail("expected - after the month"));
    }
    let day = digits_at(8, 2)?;
    if s.get(10) != Some(&b'T') {
        return Err(fail("expected T after the date"));
    }
    // The hour: two digits, or one (time.Parse's `15`).
    let (hour, mut at) = match digits(s, 11, 2) {
        Some(h) => (h, 13),
        None => (digits_at(11, 1)?, 12),
    };
    if s.get(at) != Some(&b':') {
        return Err(fail("expected : after the hour"));
    }
    let minute = digits_at(at + 1, 2)?;
    if s.get(at + 3) != Some(&b':') {
        return Err(fail("expected : after the minute"));
    }
    let second = digits_at(at + 4, 2)?;
    at += 6;
    if !(1..=12).contains(&month) {
        return Err(fail("month out of range"));
    }
    if day == 0 || day > days_in(month, year) {
        return Err(fail("day out of range"));
    }
    if hour > 23 {
        return Err(fail("hour out of range"));
    }
    if minute > 59 {
        return Err(fail("minute out of range"));
    }
    if second > 59 {
        return Err(fail("second out of range"));
    }
    let mut nanos = 0u32;
    if matches!(s.get(at), Some(b'.' | b',')) && s.get(at + 1).is_some_and(u8::is_ascii_digit) {
        let start = at + 1;
        let mut end = start;
        while s.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let used = (end - start).min(9);
        nanos = digits_at(start, used)? * 10u32.pow(9 - used as u32);
        at = end;
    }
    let offset_minutes: i64 = match s.get(at) {
        Some(b'Z') if s.len() == at + 1 => 0,
        Some(&sign @ (b'+' | b'-')) if s.len() == at + 6 && s[at + 3] == b':' => {
            let minutes = i64::from(digits_at(at + 1, 2)? * 60 + digits_at(at + 4, 2)?);
            if sign == b'+' { minutes } else { -minutes }
        }
        _ => return Err(fail("expected Z or a ±hh:mm offset after the time")),
    };
    let secs = days_from_civil(i64::from(year), month, day) * 86_400
        + i64::from(hour * 3600 + minute * 60 + second)
        - offset_minutes * 60;
    Ok(GoTime {
        unix_nanos: i128::from(secs) * 1_000_000_000 + i128::from(nanos),
        offset_seconds: (offset_minutes * 60) as i32,
    })
}

/// The instant of an RFC 3339 time as Go's `Time.UnmarshalJSON` reads it ([`parse_go_time`]).
pub fn parse_rfc3339(text: &str) -> Result<SystemTime, TimeParseError> {
    parse_go_time(text).map(GoTime::system_time)
}

/// What Go writes back for a time it read from `text`: its canonical RFC3339Nano form in
/// the same offset; an error where Go cannot read it or cannot write it back.
pub fn normalize_rfc3339(text: &str) -> Result<String, TimeParseError> {
    parse_go_time(text)?.format().ok_or_else(|| TimeParseError {
        text: text.to_owned(),
        why: "Go cannot write this time back (year outside 0-9999 or offset of 24 hours or more)",
    })
}

fn digits(s: &[u8], at: usize, n: usize) -> Option<u32> {
    let part = s.get(at..at + n)?;
    part.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, nanos: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, nanos)
    }

    // Go: time.Unix(s, ns).UTC().Format(time.RFC3339Nano).
    #[test]
    fn formats_like_go() {
        assert_eq!(format_rfc3339_nano(at(0, 0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_rfc3339_nano(at(1_764_059_400, 500_000_000)),
            "2025-11-25T08:30:00.5Z"
        );
        assert_eq!(
            format_rfc3339_nano(at(951_782_400, 123_456_789)),
            "2000-02-29T00:00:00.123456789Z"
        );
        assert_eq!(
            format_rfc3339_nano(at(4_102_444_799, 10)),
            "2099-12-31T23:59:59.00000001Z"
        );
    }

    #[test]
    fn parses_what_go_accepts() {
        assert_eq!(
            parse_rfc3339("2025-11-25T08:30:00.5Z").unwrap(),
            at(1_764_059_400, 500_000_000)
        );
        assert_eq!(
            parse_rfc3339("2025-11-25T09:30:00+01:00").unwrap(),
            at(1_764_059_400, 0)
        );
        assert_eq!(
            parse_rfc3339("2025-11-25T03:00:00.000000001-05:30").unwrap(),
            at(1_764_059_400, 1)
        );
        for bad in [
            "",
            "2025-11-25",
            "2025-11-25T08:30:00",
            "2025-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2025-11-25T24:00:00Z",
            "2025-11-25T08:30:00.Z",
            "2025-11-25t08:30:00Z",
            "2025-11-25T08:30:00z",
            "2025-11-25T08:30:00+0100",
            "2016-12-31T23:59:60Z",
            "2025-11-25T08:30:00Zjunk",
            "2025-11-25 08:30:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }

    // Go's lenient fallback (time.Parse with its strict checks disabled) and what it writes
    // back (vectors: testdata/conformance/checkpoint_dra_health.json).
    #[test]
    fn go_leniency() {
        let norm = |s| normalize_rfc3339(s).unwrap();
        assert_eq!(norm("2025-11-25T8:30:00Z"), "2025-11-25T08:30:00Z");
        assert_eq!(norm("2025-11-25T08:30:00,5Z"), "2025-11-25T08:30:00.5Z");
        assert_eq!(
            norm("2025-11-25T08:30:00.1234567891Z"),
            "2025-11-25T08:30:00.123456789Z"
        );
        assert_eq!(norm("2025-11-25T08:30:00+00:00"), "2025-11-25T08:30:00Z");
        assert_eq!(
            norm("2025-11-25T08:30:00+01:60"),
            "2025-11-25T08:30:00+02:00"
        );
        assert_eq!(norm("0000-01-01T00:00:00Z"), "0000-01-01T00:00:00Z");
        assert!(parse_go_time("2025-11-25T08:30:00+24:00").is_ok());
        assert!(normalize_rfc3339("2025-11-25T08:30:00+24:00").is_err());
    }

    // Go's zero time, which a `DeviceHealth` never reported has.
    #[test]
    fn zero_time() {
        let zero = parse_rfc3339("0001-01-01T00:00:00Z").unwrap();
        assert_eq!(format_rfc3339_nano(zero), "0001-01-01T00:00:00Z");
        assert_eq!(
            format_rfc3339_nano(UNIX_EPOCH - Duration::from_nanos(1)),
            "1969-12-31T23:59:59.999999999Z"
        );
    }

    #[test]
    fn round_trips_every_day_of_four_centuries() {
        let mut day = 0u64;
        while day < 146_097 {
            let t = at(day * 86_400 + 3_723, 1_000);
            assert_eq!(parse_rfc3339(&format_rfc3339_nano(t)).unwrap(), t);
            day += 7;
        }
    }
}
