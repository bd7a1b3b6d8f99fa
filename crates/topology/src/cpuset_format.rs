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
//! [`CpuSetParseError::RangeTooLarge`]. Single huge ids parse as upstream does. A short range
//! ending at `9223372036854775807` (`MaxInt64`), on which upstream's loop never ends (its
//! `e++` wraps to `MinInt64`), is the ids it names: upstream's `String` writes it for a set
//! holding `MaxInt64 - 1` and `MaxInt64`, and corral reads back what it prints.
//!
//! Speed: the common shape (unsigned ids below [`CpuSet::DENSE_LIMIT`], `a` or `a-b` with
//! `a <= b`, single commas) is scanned once, byte by byte, straight into the bits; anything
//! else — signs, huge ids, every error — goes through the general parser, which gives the
//! same set or upstream's error. Printing writes digits into a stack buffer and hands the
//! formatter a few large strings instead of one `write!` per number. Both stay within a
//! small factor of 1 ns per byte of text (the 136-of-256 list is 335 bytes); property tests
//! check them against the general parser and a per-range `write!` printer.

use std::fmt;
use std::str::FromStr;

use crate::CpuSet;

/// Largest number of ids at or above [`CpuSet::DENSE_LIMIT`] one parsed range may add.
pub const MAX_SPARSE_RANGE: usize = 1 << 16;

/// Why a CPU list did not parse.
///
/// # Example
///
/// ```
/// use corral_topology::{CpuSet, CpuSetParseError};
///
/// let err = "0-3,x".parse::<CpuSet>().unwrap_err();
/// assert!(matches!(err, CpuSetParseError::InvalidNumber { .. }));
/// assert!(err.to_string().contains("0-3,x"), "the message names the input: {err}");
/// ```
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
        match parse_plain(input.as_bytes()) {
            Some(set) => Ok(set),
            None => parse_general(input),
        }
    }
}

/// The common shape only (see the module docs); `None` for anything else, including every
/// input [`parse_general`] refuses. Where it answers, it answers as [`parse_general`] does:
/// its grammar is a subset of upstream's with the same meaning (a run of decimal digits,
/// leading zeros allowed, is what `strconv.Atoi` reads as that non-negative number).
fn parse_plain(input: &[u8]) -> Option<CpuSet> {
    let mut set = CpuSet::new();
    if input.is_empty() {
        return Some(set);
    }
    let mut at = 0;
    loop {
        let (start, next) = plain_number(input, at)?;
        at = next;
        let end = if input.get(at) == Some(&b'-') {
            let (end, next) = plain_number(input, at + 1)?;
            at = next;
            end
        } else {
            start
        };
        if start == end {
            set.insert(start);
        } else if start < end {
            set.insert_range(start, end);
        } else {
            return None;
        }
        match input.get(at) {
            None => return Some(set),
            Some(b',') => at += 1,
            Some(_) => return None,
        }
    }
}

/// The run of decimal digits at `at`, as a number, and where it ends; `None` when there is
/// no digit or the number reaches [`CpuSet::DENSE_LIMIT`].
fn plain_number(input: &[u8], mut at: usize) -> Option<(usize, usize)> {
    let begin = at;
    let mut value = 0usize;
    while let Some(&byte) = input.get(at) {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        // `value < DENSE_LIMIT` before this step: no overflow.
        value = value * 10 + usize::from(digit);
        if value >= CpuSet::DENSE_LIMIT {
            return None;
        }
        at += 1;
    }
    (at > begin).then_some((value, at))
}

/// Every input, with upstream's errors (see the module docs).
fn parse_general(input: &str) -> Result<CpuSet, CpuSetParseError> {
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

impl FromStr for CpuSet {
    type Err = CpuSetParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse(s)
    }
}

impl fmt::Display for CpuSet {
    /// The Linux list format, as `k8s.io/utils/cpuset.CPUSet.String`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Buffer {
            bytes: [0; Buffer::SIZE],
            len: 0,
        };
        let mut first = true;
        self.try_for_each_range(|start, end| {
            if out.len > Buffer::SIZE - Buffer::MAX_ELEMENT {
                out.flush(f)?;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.number(start);
            if start != end {
                out.push(b'-');
                out.number(end);
            }
            Ok(())
        })?;
        out.flush(f)
    }
}

/// Printed text on the stack, handed to the formatter in large pieces.
struct Buffer {
    bytes: [u8; Buffer::SIZE],
    len: usize,
}

/// `"00"`, `"01"`, … `"99"`: two digits at a time.
const DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0; 200];
    let mut n = 0;
    while n < 100 {
        pairs[2 * n] = b'0' + (n / 10) as u8;
        pairs[2 * n + 1] = b'0' + (n % 10) as u8;
        n += 1;
    }
    pairs
};

impl Buffer {
    const SIZE: usize = 512;
    /// The longest element with its comma: `,a-b` with two 20-digit numbers.
    const MAX_ELEMENT: usize = 1 + 20 + 1 + 20;

    #[inline(always)]
    fn push(&mut self, byte: u8) {
        self.bytes[self.len] = byte;
        self.len += 1;
    }

    #[inline(always)]
    fn pair(&mut self, n: usize) {
        self.bytes[self.len..self.len + 2].copy_from_slice(&DIGIT_PAIRS[2 * n..2 * n + 2]);
        self.len += 2;
    }

    /// `value` in decimal (the casts keep digits, all below 10).
    #[inline(always)]
    fn number(&mut self, mut value: usize) {
        if value < 10 {
            self.push(b'0' + value as u8);
        } else if value < 100 {
            self.pair(value);
        } else if value < 1000 {
            self.push(b'0' + (value / 100) as u8);
            self.pair(value % 100);
        } else {
            let digits = value.ilog10() as usize + 1;
            let end = self.len + digits;
            for slot in self.bytes[self.len..end].iter_mut().rev() {
                *slot = b'0' + (value % 10) as u8;
                value /= 10;
            }
            self.len = end;
        }
    }

    fn flush(&mut self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only ASCII digits, ',' and '-' were pushed.
        let text = std::str::from_utf8(&self.bytes[..self.len]).map_err(|_| fmt::Error)?;
        self.len = 0;
        f.write_str(text)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
            (
                "9223372036854775807,9223372036854775806",
                "9223372036854775806-9223372036854775807",
            ),
            (
                "9223372036854775806-9223372036854775807",
                "9223372036854775806-9223372036854775807",
            ),
            (
                "9223372036854775807-9223372036854775807",
                "9223372036854775807",
            ),
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

    /// The printer before the stack buffer: one `write!` per range of [`CpuSet::ranges`].
    fn write_per_range(set: &CpuSet) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for (start, end) in set.ranges() {
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                write!(out, "{start}").unwrap();
            } else {
                write!(out, "{start}-{end}").unwrap();
            }
        }
        out
    }

    /// Runs of consecutive ids from the ascending iterator.
    fn runs(set: &CpuSet) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for cpu in set.iter() {
            match out.last_mut() {
                Some((_, end)) if end.checked_add(1) == Some(cpu) => *end = cpu,
                _ => out.push((cpu, cpu)),
            }
        }
        out
    }

    /// Ids around word boundaries, past the inline words, at the dense limit and far above.
    fn ids() -> impl Strategy<Value = usize> {
        prop_oneof![
            0usize..300,
            60usize..70,
            1000usize..1100,
            0usize..5000,
            CpuSet::DENSE_LIMIT - 70..CpuSet::DENSE_LIMIT + 5,
            (1usize << 40)..(1usize << 40) + 3,
            Just(usize::MAX),
        ]
    }

    /// Sets with long runs too (whole words, runs across words and the dense limit).
    fn sets() -> impl Strategy<Value = CpuSet> {
        prop::collection::vec((ids(), 0usize..200), 0..40).prop_map(|runs| {
            let mut set = CpuSet::new();
            for (start, len) in runs {
                let len = if start >= CpuSet::DENSE_LIMIT - 70 {
                    len % 80
                } else {
                    len
                };
                set.insert_range(start, start.saturating_add(len % 3 * len / 2));
            }
            set
        })
    }

    /// Text near the list grammar: numbers (signed, zero-padded, huge), separators and junk.
    fn texts() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            4 => (0usize..300).prop_map(|n| n.to_string()),
            1 => (0usize..100_000).prop_map(|n| n.to_string()),
            1 => (0usize..100).prop_map(|n| format!("00{n}")),
            1 => Just("65535".to_owned()),
            1 => Just("65536".to_owned()),
            1 => Just("9223372036854775807".to_owned()),
            1 => Just("9223372036854775808".to_owned()),
            1 => Just("99999999999999999999999".to_owned()),
            4 => Just(",".to_owned()),
            3 => Just("-".to_owned()),
            1 => Just("+".to_owned()),
            1 => Just(" ".to_owned()),
            1 => Just("x".to_owned()),
            1 => Just("０".to_owned()),
        ];
        prop::collection::vec(token, 0..12).prop_map(|t| t.concat())
    }

    proptest! {
        #[test]
        fn fast_parser_answers_as_the_general_one(text in texts()) {
            prop_assert_eq!(CpuSet::parse(&text), parse_general(&text), "{:?}", text);
        }

        #[test]
        fn printer_answers_as_per_range_writes(set in sets()) {
            let text = set.to_string();
            prop_assert_eq!(&text, &write_per_range(&set));
            // Ids past i64 print but do not parse (upstream's ids are Go ints).
            if set.max().is_none_or(|max| i64::try_from(max).is_ok()) {
                prop_assert_eq!(CpuSet::parse(&text), Ok(set.clone()));
                prop_assert_eq!(parse_general(&text), Ok(set.clone()));
            }
            // Through a formatter that is not a `String` too (width is ignored, as before).
            prop_assert_eq!(format!("{set:>3}"), text);
        }

        #[test]
        fn runs_are_the_iterator_s_runs(set in sets()) {
            let want = runs(&set);
            prop_assert_eq!(set.ranges().collect::<Vec<_>>(), want.clone());
            let mut walked = Vec::new();
            set.try_for_each_range(|start, end| {
                walked.push((start, end));
                Ok::<(), ()>(())
            })
            .unwrap();
            prop_assert_eq!(walked, want);
        }
    }

    #[test]
    fn long_lists_cross_the_print_buffer() {
        let set: CpuSet = (0..20_000)
            .step_by(2)
            .chain(CpuSet::DENSE_LIMIT..CpuSet::DENSE_LIMIT + 3)
            .collect();
        assert_eq!(set.to_string(), write_per_range(&set));
        let full = CpuSet::from_range(0, CpuSet::DENSE_LIMIT + 2);
        assert_eq!(full.to_string(), format!("0-{}", CpuSet::DENSE_LIMIT + 2));
        assert_eq!(
            full.ranges().collect::<Vec<_>>(),
            vec![(0, CpuSet::DENSE_LIMIT + 2)]
        );
    }
}
