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

/// Nanoseconds since the epoch, negative before it.
fn unix_nanos(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_nanos() as i128,
        Err(before) => -(before.duration().as_nanos() as i128),
    }
}

/// `t.UTC().Format(time.RFC3339Nano)`, e.g. `2026-11-25T08:30:00.5Z` (years 0–9999, as Go
/// writes them in JSON).
pub fn format_rfc3339_nano(t: SystemTime) -> String {
    let total = unix_nanos(t);
    let secs = total.div_euclid(1_000_000_000) as i64;
    let nanos = total.rem_euclid(1_000_000_000) as u32;
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
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
    out.push('Z');
    out
}

/// Why a string is not an RFC 3339 time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parsing time {text:?} as RFC 3339: {why}")]
pub struct TimeParseError {
    /// The text.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

fn digits(s: &[u8], at: usize, n: usize) -> Option<u32> {
    let part = s.get(at..at + n)?;
    part.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

/// `time.Parse(time.RFC3339, text)` as `Time.UnmarshalJSON` does it: `YYYY-MM-DDThh:mm:ss`,
/// an optional fraction of 1–9 digits, then `Z` or `±hh:mm`.
pub fn parse_rfc3339(text: &str) -> Result<SystemTime, TimeParseError> {
    let fail = |why| TimeParseError {
        text: text.to_owned(),
        why,
    };
    let s = text.as_bytes();
    let field = |at, n| digits(s, at, n).ok_or_else(|| fail("expected digits"));
    let (year, month, day) = (field(0, 4)?, field(5, 2)?, field(8, 2)?);
    let (hour, minute, second) = (field(11, 2)?, field(14, 2)?, field(17, 2)?);
    if s.get(4) != Some(&b'-')
        || s.get(7) != Some(&b'-')
        || !matches!(s.get(10), Some(b'T' | b't'))
        || s.get(13) != Some(&b':')
        || s.get(16) != Some(&b':')
    {
        return Err(fail("expected YYYY-MM-DDThh:mm:ss"));
    }
    let leap = |y: u32| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let month_days = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month) || day == 0 || day > month_days[month as usize - 1] {
        return Err(fail("day out of range"));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(fail("time of day out of range"));
    }
    let mut at = 19;
    let mut nanos = 0u32;
    if s.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while s.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        let n = at - start;
        if n == 0 || n > 9 {
            return Err(fail("fraction must have 1 to 9 digits"));
        }
        nanos = field(start, n)? * 10u32.pow(9 - n as u32);
    }
    let offset: i64 = match s.get(at) {
        Some(b'Z' | b'z') if s.len() == at + 1 => 0,
        Some(&sign @ (b'+' | b'-')) if s.len() == at + 6 && s[at + 3] == b':' => {
            let (h, m) = (field(at + 1, 2)?, field(at + 4, 2)?);
            if h > 23 || m > 59 {
                return Err(fail("offset out of range"));
            }
            let minutes = i64::from(h * 60 + m);
            if sign == b'+' { minutes } else { -minutes }
        }
        _ => return Err(fail("expected Z or a ±hh:mm offset after the time")),
    };
    let secs = days_from_civil(i64::from(year), month, day) * 86_400
        + i64::from(hour * 3600 + minute * 60 + second)
        - offset * 60;
    let total = i128::from(secs) * 1_000_000_000 + i128::from(nanos);
    let abs = total.unsigned_abs();
    let magnitude = Duration::new((abs / 1_000_000_000) as u64, (abs % 1_000_000_000) as u32);
    Ok(if total >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
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
            "2025-11-25T08:30:00.1234567891Z",
            "2025-11-25T08:30:00Zjunk",
            "2025-11-25 08:30:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
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
