//! Putting map entries in the order Go prints them, after they were written in Rust's order.
//!
//! The JSON encoder writes each map entry straight into the output buffer and remembers
//! where it went; when the entries did not arrive in Go's order (go-spew sorts integer keys
//! numerically, `encoding/json` sorts every key as a string) the region is rebuilt once.
//! Entries that already arrive sorted (the usual case with `BTreeMap`) cost nothing extra.

use std::cmp::Ordering;
use std::ops::Range;

use crate::gotype::GoType;

/// How keys compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// Byte-wise, as Go compares strings.
    Bytes,
    /// As signed integers written in decimal.
    Signed,
    /// As unsigned integers written in decimal.
    Unsigned,
}

impl KeyOrder {
    /// How go-spew orders keys of Go type `key`: integers numerically, anything else as
    /// strings.
    pub(crate) fn of_key(key: &GoType) -> Self {
        match key.underlying() {
            GoType::Int(_) => KeyOrder::Signed,
            GoType::Uint(_) => KeyOrder::Unsigned,
            _ => KeyOrder::Bytes,
        }
    }
}

/// One written map entry.
#[derive(Debug, Clone)]
pub(crate) struct MapEntry {
    /// The key's raw text, as a range into the key source.
    pub(crate) key: Range<usize>,
    /// The whole entry (key, separator, value) as a range into the output.
    pub(crate) body: Range<usize>,
}

/// Compares two keys' raw text as Go orders them.
pub(crate) fn compare_keys(order: KeyOrder, a: &str, b: &str) -> Ordering {
    match order {
        KeyOrder::Bytes => a.as_bytes().cmp(b.as_bytes()),
        KeyOrder::Signed => match (a.parse::<i128>(), b.parse::<i128>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => a.as_bytes().cmp(b.as_bytes()),
        },
        KeyOrder::Unsigned => match (a.parse::<u128>(), b.parse::<u128>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => a.as_bytes().cmp(b.as_bytes()),
        },
    }
}

/// Sorts `entries` (written into `out` from `region_start`, joined by `sep`) by key and
/// rewrites the region in that order. Keys are read from `keys`, or from `out` when `None`.
pub(crate) fn sort_region(
    out: &mut String,
    region_start: usize,
    entries: &mut [MapEntry],
    keys: Option<&str>,
    order: KeyOrder,
    sep: &str,
) {
    {
        let src: &str = keys.unwrap_or(out.as_str());
        let sorted = entries
            .windows(2)
            .all(|w| compare_keys(order, &src[w[0].key.clone()], &src[w[1].key.clone()]).is_le());
        if sorted {
            return;
        }
        entries.sort_by(|a, b| compare_keys(order, &src[a.key.clone()], &src[b.key.clone()]));
    }
    let region = out[region_start..].to_owned();
    out.truncate(region_start);
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(&region[entry.body.start - region_start..entry.body.end - region_start]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: Range<usize>, body: Range<usize>) -> MapEntry {
        MapEntry { key, body }
    }

    #[test]
    fn rewrites_out_of_order_entries() {
        let mut out = String::from("map[10:a 9:b -1:c");
        let mut entries = vec![
            entry(4..6, 4..8),
            entry(9..10, 9..12),
            entry(13..15, 13..17),
        ];
        sort_region(&mut out, 4, &mut entries, None, KeyOrder::Signed, " ");
        assert_eq!(out, "map[-1:c 9:b 10:a");
        assert_eq!(entries[0].key, 13..15);
    }

    #[test]
    fn string_order_is_bytewise() {
        let keys = "10910";
        let mut out = String::from("X,Y,Z");
        let mut entries = vec![entry(0..2, 0..1), entry(2..3, 2..3), entry(3..5, 4..5)];
        sort_region(&mut out, 0, &mut entries, Some(keys), KeyOrder::Bytes, ",");
        assert_eq!(out, "X,Z,Y");
    }
}
