//! Go `time.Duration` strings as KubeletConfiguration writes them ("10s", "1m30s", "500ms").

use std::time::Duration;

/// Parse a Go duration string: a sequence of decimal numbers, each with a unit among
/// `ns`, `us`/`µs`, `ms`, `s`, `m`, `h` (e.g. `"1h2m3.5s"`). `"0"` is zero. Negative
/// durations are refused (no duration corral reads may be negative).
pub(crate) fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return Err(format!(
            "{text:?} is not a non-negative duration like \"10s\" or \"1m30s\""
        ));
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{text:?}: missing unit after {rest:?}"))?;
        let (number, after) = rest.split_at(number_len);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("{text:?}: {number:?} is not a number"))?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, tail) = after.split_at(unit_len);
        let seconds_per_unit = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("{text:?}: missing unit (ns, us, ms, s, m, h)")),
            other => {
                return Err(format!(
                    "{text:?}: unknown unit {other:?} (ns, us, ms, s, m, h)"
                ));
            }
        };
        total += value * seconds_per_unit;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("{text:?} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_forms() {
        assert_eq!(parse_go_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("250us"), Ok(Duration::from_micros(250)));
        for bad in ["", "10", "-1s", "1x", "s", "1.2.3s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
