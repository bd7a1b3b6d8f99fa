//! `k8s.io/utils/cpuset` as the v1.36 checkpoints store it: a pod entry's `CPUSet` is
//! written as its list string (`0-3,8`) and hashed as the Go struct
//! `cpuset.CPUSet{elems: map[int]struct{}}`.
//!
//! corral-checkpoint depends on no other corral crate, so this is its own small parser:
//! `cpuset.Parse` exactly (`strconv.Atoi` bounds, `a-b` ranges, `start > end` refused), and
//! `CPUSet.String` exactly. Two deliberate differences, both where Go never returns: Go
//! would allocate whatever a range spans (`0-9999999999` exhausts memory), so here a set
//! larger than [`MAX_ELEMENTS`] is an error; and Go's loop over a range ending at
//! `9223372036854775807` (`MaxInt64`) never ends (`for e := start; e <= end; e++` wraps to
//! `MinInt64`, still `<= end`, and fills memory), so here such a range is the ids it names —
//! `String` writes a set holding `MaxInt64 - 1` and `MaxInt64` as that range, and a file Go
//! reads (`9223372036854775807,9223372036854775806`) must read back after it is printed. No
//! input gives a negative id: a `-` always splits a range, and a range starts at an unsigned
//! number and ends at or after it.
//!
//! `String` compares each id with the previous one plus 1, a Go `int` that wraps at
//! `MaxInt64`; the ids are sorted ascending, so nothing follows `MaxInt64` and the wrap never
//! changes the text. Here the sum is checked instead, with the same output.

use std::collections::BTreeSet;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::gotype::{EMPTY_STRUCT, GoField, GoStruct, GoType, INT};

/// The most CPUs a checkpointed cpuset may hold (a million: far beyond any machine).
pub(crate) const MAX_ELEMENTS: usize = 1 << 20;

/// `cpuset.CPUSet` as go-spew sees it (its one unexported field).
pub(crate) static CPUSET: GoType = GoType::Struct(&GoStruct {
    name: "cpuset.CPUSet",
    fields: &[GoField::plain("elems", &GoType::Map(&INT, &EMPTY_STRUCT))],
});

/// Why a CPU list does not parse, in Go's words (`cpuset.Parse`, `strconv.Atoi`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParseError {
    /// A number that is not an optionally signed run of decimal digits.
    #[error("strconv.Atoi: parsing {0:?}: invalid syntax")]
    Syntax(String),
    /// A number beyond a 64-bit integer.
    #[error("strconv.Atoi: parsing {0:?}: value out of range")]
    OutOfRange(String),
    /// A range `a-b` with `a > b`.
    #[error("invalid range {range:?} ({start} > {end})")]
    Reversed {
        /// The range as written.
        range: String,
        /// Its start.
        start: i64,
        /// Its end.
        end: i64,
    },
    /// A range that takes the set beyond [`MAX_ELEMENTS`] ids (corral's bound; see the
    /// module docs).
    #[error("range {0:?} makes the set larger than {max} CPUs", max = MAX_ELEMENTS)]
    TooLarge(String),
}

/// Parses a Linux CPU list as `cpuset.Parse` does; the error says why, as Go's would.
pub(crate) fn parse(text: &str) -> Result<BTreeSet<i64>, ParseError> {
    let mut set = BTreeSet::new();
    if text.is_empty() {
        return Ok(set);
    }
    for range in text.split(',') {
        let (start, end) = match range.split_once('-') {
            None => {
                let id = atoi(range)?;
                (id, id)
            }
            Some((start, end)) => {
                let (start, end) = (atoi(start)?, atoi(end)?);
                if start > end {
                    return Err(ParseError::Reversed {
                        range: range.to_owned(),
                        start,
                        end,
                    });
                }
                (start, end)
            }
        };
        let span = end.abs_diff(start).saturating_add(1);
        if usize::try_from(span).map_or(true, |n| n > MAX_ELEMENTS - set.len().min(MAX_ELEMENTS)) {
            return Err(ParseError::TooLarge(range.to_owned()));
        }
        set.extend(start..=end);
    }
    Ok(set)
}

/// `strconv.Atoi` (decimal, optional sign, 64-bit), with its error text.
fn atoi(text: &str) -> Result<i64, ParseError> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::Syntax(text.to_owned()));
    }
    text.parse()
        .map_err(|_| ParseError::OutOfRange(text.to_owned()))
}

/// `CPUSet.String()`: ascending, runs of consecutive ids as `a-b`.
pub(crate) fn format(set: &BTreeSet<i64>) -> String {
    let mut out = String::new();
    let mut ids = set.iter().copied().peekable();
    while let Some(start) = ids.next() {
        let mut end = start;
        // Go's `end+1` wraps at MaxInt64, where no larger id can follow: `None` is the same.
        while let Some(next) = end.checked_add(1).filter(|next| ids.peek() == Some(next)) {
            end = next;
            ids.next();
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
    }
    out
}

/// Go's `struct{}` value.
struct Empty;

impl Serialize for Empty {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_struct("Empty", 0)?.end()
    }
}

/// The hash view of a set: `cpuset.CPUSet{elems: …}` (type [`CPUSET`]).
pub(crate) struct HashedCpuSet<'a>(pub(crate) &'a BTreeSet<i64>);

struct Elems<'a>(&'a BTreeSet<i64>);

impl Serialize for Elems<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for id in self.0 {
            map.serialize_entry(id, &Empty)?;
        }
        map.end()
    }
}

impl Serialize for HashedCpuSet<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("CPUSet", 1)?;
        s.serialize_field("elems", &Elems(self.0))?;
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format_as_go() {
        for (text, canonical) in [
            ("", ""),
            ("0", "0"),
            ("1,2", "1-2"),
            ("5-7,0,3-3", "0,3,5-7"),
            ("+2,007", "2,7"),
        ] {
            assert_eq!(format(&parse(text).unwrap()), canonical, "{text}");
        }
        for bad in ["a", "-1", "3-1", "1-", ",", "1,,2", " 1", "0-99999999999"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse("3-1").unwrap_err().to_string(),
            "invalid range \"3-1\" (3 > 1)"
        );
    }

    /// `9223372036854775807` (`MaxInt64`) as an id: it used to panic the printer with "attempt
    /// to add with overflow" (`end + 1`). Go prints it as any other id.
    #[test]
    fn the_largest_id_prints_as_go_prints_it() {
        let max = i64::MAX;
        for (text, canonical) in [
            ("9223372036854775807", "9223372036854775807"),
            ("9223372036854775807,0", "0,9223372036854775807"),
            (
                "9223372036854775806,9223372036854775807",
                "9223372036854775806-9223372036854775807",
            ),
            (
                "9223372036854775807,9223372036854775805-9223372036854775806,1",
                "1,9223372036854775805-9223372036854775807",
            ),
            ("+9223372036854775807", "9223372036854775807"),
        ] {
            assert_eq!(format(&parse(text).unwrap()), canonical, "{text}");
        }
        assert_eq!(format(&BTreeSet::from([max])), max.to_string());
        assert_eq!(
            format(&BTreeSet::from([max - 2, max - 1, max])),
            format!("{}-{max}", max - 2)
        );
    }

    /// Negative ids have no text: a `-` splits a range and a range's start is unsigned, so
    /// `-1` is `""-"1"` and `1--1` is reversed (Go's errors). A set that holds them anyway
    /// prints as Go's `String` would.
    #[test]
    fn negative_ids_do_not_parse_and_print_as_go() {
        for bad in ["-1", "-9223372036854775808", "1--1", "-5--1", "0--1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse("0--0").unwrap(), BTreeSet::from([0]));
        assert_eq!(
            parse("-9223372036854775809").unwrap_err().to_string(),
            "strconv.Atoi: parsing \"\": invalid syntax"
        );
        let min = i64::MIN;
        assert_eq!(
            format(&BTreeSet::from([min, min + 1, -1, 0, i64::MAX])),
            format!("{min}-{},-1-0,{}", min + 1, i64::MAX)
        );
    }

    /// Go loops forever on a range ending at `MaxInt64` (its `e++` wraps); here the range
    /// is the ids it names, so what `format` writes for a set holding `MaxInt64` reads back.
    #[test]
    fn a_range_ending_at_the_largest_id_reads_as_its_ids() {
        let max = i64::MAX;
        assert_eq!(
            parse("9223372036854775807-9223372036854775807").unwrap(),
            BTreeSet::from([max])
        );
        assert_eq!(
            parse("0,9223372036854775805-+9223372036854775807").unwrap(),
            BTreeSet::from([0, max - 2, max - 1, max])
        );
        let set = parse("9223372036854775807,9223372036854775806").unwrap();
        let printed = format(&set);
        assert_eq!(printed, "9223372036854775806-9223372036854775807");
        assert_eq!(parse(&printed).unwrap(), set);
        assert!(
            parse("0-9223372036854775807")
                .unwrap_err()
                .to_string()
                .contains("larger than")
        );
    }
}
