//! Go maps: a JSON object whose keys are the map keys as strings (integers in decimal),
//! sorted byte-wise as `encoding/json` sorts them. Entries are written as they come, the
//! raw keys captured aside; the region is rewritten once if they were out of order.

use serde::Serialize;
use serde::ser;

use super::{Behind, Encoder, ValueEnc};
use crate::go_serializer::{check_int, impossible, ints_through, reject, see_through};
use crate::gojson::escape::push_quoted;
use crate::gotype::{GoType, push_int};
use crate::map_order::{KeyOrder, MapEntry, sort_region};
use crate::schema_mismatch::{SchemaMismatch, mismatch};

/// A JSON object from a Go map: keys as strings, sorted byte-wise.
pub(super) struct MapEnc<'a> {
    e: &'a mut Encoder,
    key_ty: &'static GoType,
    value_ty: &'static GoType,
    region_start: usize,
    keys_start: usize,
    entries: Vec<MapEntry>,
    entry_start: usize,
    key_range: std::ops::Range<usize>,
    behind: Behind,
}

impl<'a> MapEnc<'a> {
    /// Starts a map of `map[key]value` with about `len` entries.
    #[inline]
    pub(super) fn start(
        e: &'a mut Encoder,
        key: &'static GoType,
        value: &'static GoType,
        len: Option<usize>,
        behind: Behind,
    ) -> Self {
        e.out.push('{');
        let region_start = e.out.len();
        let keys_start = e.keys.len();
        MapEnc {
            e,
            key_ty: key,
            value_ty: value,
            region_start,
            keys_start,
            entries: Vec::with_capacity(len.unwrap_or(0)),
            entry_start: 0,
            key_range: 0..0,
            behind,
        }
    }
}

impl ser::SerializeMap for MapEnc<'_> {
    type Ok = bool;
    type Error = SchemaMismatch;

    #[inline]
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), SchemaMismatch> {
        if !self.entries.is_empty() {
            self.e.out.push(',');
        }
        self.entry_start = self.e.out.len();
        let start = self.e.keys.len();
        key.serialize(KeyCapture {
            keys: &mut self.e.keys,
            ty: self.key_ty,
        })?;
        self.key_range = start..self.e.keys.len();
        let Encoder { out, keys } = &mut *self.e;
        push_quoted(out, &keys[self.key_range.clone()]);
        out.push(':');
        Ok(())
    }

    #[inline]
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SchemaMismatch> {
        value.serialize(ValueEnc {
            e: self.e,
            ty: self.value_ty,
        })?;
        self.entries.push(MapEntry {
            key: self.key_range.clone(),
            body: self.entry_start..self.e.out.len(),
        });
        Ok(())
    }

    #[inline]
    fn end(mut self) -> Result<bool, SchemaMismatch> {
        let Encoder { out, keys } = &mut *self.e;
        sort_region(
            out,
            self.region_start,
            &mut self.entries,
            Some(keys.as_str()),
            KeyOrder::Bytes,
            ",",
        );
        keys.truncate(self.keys_start);
        out.push('}');
        Ok(self.behind.empty_if(self.entries.is_empty()))
    }
}

/// Captures a map key's raw text (strings as they are, integers in decimal).
struct KeyCapture<'a> {
    keys: &'a mut String,
    ty: &'static GoType,
}

impl KeyCapture<'_> {
    #[inline]
    fn int(self, v: i128) -> Result<bool, SchemaMismatch> {
        check_int(self.ty.underlying(), v, "map key")?;
        push_int(self.keys, v);
        Ok(false)
    }
}

impl ser::Serializer for KeyCapture<'_> {
    impossible!(scalar bool);

    #[inline]
    fn serialize_str(self, v: &str) -> Result<bool, SchemaMismatch> {
        if !matches!(self.ty.underlying(), GoType::String) {
            return mismatch(format!("string map key for Go type {}", self.ty));
        }
        self.keys.push_str(v);
        Ok(false)
    }

    ints_through!(int);

    see_through!(serialize_newtype_struct);

    reject!(mismatch("unsupported map key type");
        serialize_bool serialize_f32 serialize_f64 serialize_char serialize_bytes
        serialize_none serialize_some serialize_unit serialize_unit_struct
        serialize_unit_variant serialize_newtype_variant serialize_seq serialize_tuple
        serialize_tuple_struct serialize_tuple_variant serialize_map serialize_struct
        serialize_struct_variant
    );
}
