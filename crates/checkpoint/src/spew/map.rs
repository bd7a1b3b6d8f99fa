//! Maps: `map[k1:v1 k2:v2]`, keys and values without type headers, keys in go-spew's order.
//! A map whose keys arrived in order (see `key_order`) prints entry by entry; any other is
//! printed entry by entry into side buffers, sorted by key, then written.

use serde::Serialize;
use serde::ser;

use super::Dumper;
use crate::dump_sink::DumpSink;
use crate::gotype::GoType;
use crate::map_order::{KeyOrder, compare_keys};
use crate::schema_mismatch::SchemaMismatch;

/// A map entry printed aside because the map's keys were out of order.
struct HeldEntry {
    /// `key:value`.
    text: String,
    /// Length of the key's text.
    key_len: usize,
    /// The "ignore next type" flag after the value (it leaks past the map).
    tail: bool,
}

/// Map entries: printed as they come when their keys are in order, otherwise held aside
/// and printed sorted at the end.
pub(super) struct MapSer<'a, 's, S> {
    d: &'a mut Dumper<'s, S>,
    key_ty: &'static GoType,
    value_ty: &'static GoType,
    order: KeyOrder,
    count: usize,
    /// The entries of a map whose keys were out of order.
    held: Option<Vec<HeldEntry>>,
}

impl<'a, 's, S: DumpSink> MapSer<'a, 's, S> {
    /// Starts a map of `map[key]value` (its header is written): `in_order` when its keys
    /// were found in go-spew's order.
    #[inline]
    pub(super) fn start(
        d: &'a mut Dumper<'s, S>,
        key: &'static GoType,
        value: &'static GoType,
        in_order: KeysInOrder,
    ) -> Self {
        d.out.push_str("map[");
        MapSer {
            d,
            key_ty: key,
            value_ty: value,
            order: KeyOrder::of_key(key),
            count: 0,
            held: matches!(in_order, KeysInOrder::No).then(Vec::new),
        }
    }
}

/// Whether a map's keys were found to arrive in go-spew's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeysInOrder {
    /// They do: entries print as they come.
    Yes,
    /// They do not (or it could not be told): entries are held aside and sorted.
    No,
}

impl<S: DumpSink> ser::SerializeMap for MapSer<'_, '_, S> {
    type Ok = ();
    type Error = SchemaMismatch;

    #[inline]
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), SchemaMismatch> {
        let Some(held) = &mut self.held else {
            if self.count > 0 {
                self.d.out.push_byte(b' ');
            }
            self.count += 1;
            self.d.ignore_next_type = true;
            self.d.value(key, self.key_ty)?;
            self.d.out.push_byte(b':');
            return Ok(());
        };
        let mut text = String::new();
        Dumper::untyped(&mut text).value(key, self.key_ty)?;
        let key_len = text.len();
        text.push(':');
        held.push(HeldEntry {
            text,
            key_len,
            tail: false,
        });
        Ok(())
    }

    #[inline]
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SchemaMismatch> {
        let Some(entry) = self.held.as_mut().and_then(|held| held.last_mut()) else {
            self.d.ignore_next_type = true;
            return self.d.value(value, self.value_ty);
        };
        let mut aside = Dumper::untyped(&mut entry.text);
        aside.value(value, self.value_ty)?;
        entry.tail = aside.ignore_next_type;
        Ok(())
    }

    #[inline]
    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), SchemaMismatch> {
        self.serialize_key(key)?;
        self.serialize_value(value)
    }

    #[inline]
    fn end(self) -> Result<(), SchemaMismatch> {
        // Printed as they came, the flag left by the last value is already in place: it
        // survives the map (go-spew never resets it after a nil pointer).
        if let Some(mut held) = self.held {
            let order = self.order;
            held.sort_by(|a, b| compare_keys(order, &a.text[..a.key_len], &b.text[..b.key_len]));
            for (i, entry) in held.iter().enumerate() {
                if i > 0 {
                    self.d.out.push_byte(b' ');
                }
                self.d.out.push_str(&entry.text);
            }
            self.d.ignore_next_type = held.last().is_some_and(|e| e.tail);
        }
        self.d.out.push_byte(b']');
        Ok(())
    }
}
