//! The Linux CPU list format ("0-3,8,10-11") for [`CpuSet`], parsed and printed exactly as
//! `k8s.io/utils/cpuset` `Parse` and `String` do.
//!
//! Parsing rules (facts about upstream, checked by the `cpuset` conformance vectors):
//! - `""` is the empty set; otherwise the input is split on every `,` and each element is
//!   split on its *first* `-` only, so `"1-2-3"` fails on the number `"2-3"`.
//! - Numbers are Go `strconv.Atoi`: an optional `+` or `-` sign and one or more ASCII digits,
//!   nothing else (no spaces, no `0x`, no empty string); leading zeros are fine (`"00"` is 0);
//!   values outside `i64` are an out-of-range error.
//! - A range `a-b` with `a > b` is an error; `b` may carry a sign (`"0--0"` is `{0}`).
//! - Elements may repeat or come in any order; printing is always ascending with maximal
//!   ranges, single CPUs bare, `a-b` for runs of two or more.
//!
//! One deliberate difference: upstream would try to materialise a range such as
//! `0-9223372036854775807` element by element (and run out of memory); corral refuses any range
//! that puts more than [`MAX_SPARSE_RANGE`] ids at or above [`CpuSet::DENSE_LIMIT`] with
//! [`CpuSetParseError::RangeTooLarge`]. Single huge ids parse as upstream does.

use std::fmt;
use std::str::FromStr;

use crate::CpuSet;

/// Largest number of ids at or above [`CpuSet::DENSE_LIMIT`] one parsed range may add.
pub const MAX_SPARSE_RANGE: usize = 1 << 16;

/// Why a CPU list did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CpuSetParseError {
    /// A number is not an optionally signed run of decimal digits (Go: "invalid syntax").
    #[error("invalid CPU list {input:?}: {number:?} is not a decimal integer")]
    InvalidNumber {
        /// The whole input.
        input: String,
        /// The offending number text (possibly empty).
        number: String,
    },
    /// A number does not fit a 64-bit signed integer (Go: "value out of range").
    #[error("invalid CPU list {input:?}: {number:?} is out of range")]
    OutOfRange {
        /// The whole input.
        input: String,
        /// The offending number text.
        number: String,
    },
    /// A range whose start is greater than its end.
    #[error("invalid range {range:?} ({start} > {end})")]
    ReversedRange {
        /// The range element as written.
        range: String,
        /// Its start.
        start: i64,
        /// Its end.
        end: i64,
    },
    /// A range that would put more than [`MAX_SPARSE_RANGE`] ids above the dense limit.
    #[error(
        "range {range:?} is too large to materialise (more than {MAX_SPARSE_RANGE} ids at or above {})",
        CpuSet::DENSE_LIMIT
    )]
    RangeTooLarge {
        /// The range element as written.
        range: String,
    },
}

/// Go `strconv.Atoi` on a 64-bit platform.
fn atoi(text: &str, input: &str) -> Result<i64, CpuSetParseError> {
    let invalid = || CpuSetParseError::InvalidNumber {
        input: input.to_owned(),
        number: text.to_owned(),
    };
    let out_of_range = || CpuSetParseError::OutOfRange {
        input: input.to_owned(),
        number: text.to_owned(),
    };
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.first() {
        Some(b'+') => (false, &bytes[1..]),
        Some(b'-') => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() {
        return Err(invalid());
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return Err(invalid());
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(out_of_range)?;
    }
    if negative {
        if value > 1 << 63 {
            return Err(out_of_range());
        }
        Ok((value as i64).wrapping_neg())
    } else {
        i64::try_from(value).map_err(|_| out_of_range())
    }
}

/// A non-negative `i64` as a CPU id (on 64-bit targets every such value fits).
fn to_id(value: i64, text: &str, input: &str) -> Result<usize, CpuSetParseError> {
    usize::try_from(value).map_err(|_| CpuSetParseError::OutOfRange {
        input: input.to_owned(),
        number: text.to_owned(),
    })
}

impl CpuSet {
    /// Parse the Linux list format as `k8s.io/utils/cpuset.Parse` does; see the module docs.
    pub fn parse(input: &str) -> Result<CpuSet, CpuSetParseError> {
        let mut set = CpuSet::new();
        if input.is_empty() {
            return Ok(set);
        }
        for element in input.split(',') {
            match element.split_once('-') {
                None => {
                    let cpu = atoi(element, input)?;
                    // Atoi accepts "-N" only after a '-', which split_once removed: an element
                    // without '-' is never negative, but keep the conversion checked.
                    set.insert(to_id(cpu, element, input)?);
                }
                Some((first, second)) => {
                    let start = atoi(first, input)?;
                    let end = atoi(second, input)?;
                    if start > end {
                        return Err(CpuSetParseError::ReversedRange {
                            range: element.to_owned(),
                            start,
                            end,
                        });
                    }
                    let start = to_id(start, first, input)?;
                    let end = to_id(end, second, input)?;
                    if end >= CpuSet::DENSE_LIMIT
                        && end - start.max(CpuSet::DENSE_LIMIT) >= MAX_SPARSE_RANGE
                    {
                        return Err(CpuSetParseError::RangeTooLarge {
                            range: element.to_owned(),
                        });
                    }
                    set.insert_range(start, end);
                }
            }
        }
        Ok(set)
    }
}

impl FromStr for CpuSet {
    type Err = CpuSetParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse(s)
    }
}

impl fmt::Display for CpuSet {
    /// The Linux list format, as `k8s.io/utils/cpuset.CPUSet.String`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (start, end) in self.ranges() {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_atoi_accepts() {
        for (input, want) in [
            ("", ""),
            ("00", "0"),
            ("0-03", "0-3"),
            ("+1", "1"),
            ("1-+3", "1-3"),
            ("0--0", "0"),
            ("3,2,1,0", "0-3"),
            ("5-5", "5"),
            ("9223372036854775807", "9223372036854775807"),
        ] {
            assert_eq!(
                CpuSet::parse(input).map(|s| s.to_string()),
                Ok(want.into()),
                "{input:?}"
            );
        }
    }

    #[test]
    fn rejects_what_upstream_rejects() {
        for input in [
            "-1", "-", ",", "0,", ",0", " 0", "0 ", "0 - 3", "0x1", "1-2-3", "\n", "０", "1--3",
            "3-1",
        ] {
            assert!(CpuSet::parse(input).is_err(), "{input:?}");
        }
        assert!(matches!(
            CpuSet::parse("9223372036854775808"),
            Err(CpuSetParseError::OutOfRange { .. })
        ));
        assert!(matches!(
            CpuSet::parse("3-1"),
            Err(CpuSetParseError::ReversedRange {
                start: 3,
                end: 1,
                ..
            })
        ));
        assert!(matches!(
            CpuSet::parse("0-9223372036854775807"),
            Err(CpuSetParseError::RangeTooLarge { .. })
        ));
    }

    #[test]
    fn error_messages_name_the_input() {
        let err = CpuSet::parse("0,x").unwrap_err().to_string();
        assert!(err.contains("\"0,x\"") && err.contains("\"x\""), "{err}");
        assert_eq!(
            CpuSet::parse("3-1").unwrap_err().to_string(),
            "invalid range \"3-1\" (3 > 1)"
        );
    }
}
