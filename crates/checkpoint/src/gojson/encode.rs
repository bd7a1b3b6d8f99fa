//! `encoding/json.Marshal` as a serde [`Serializer`](serde::Serializer) guided by a
//! [`GoType`]: struct fields in declaration order under their tag names, `omitempty`,
//! `[]byte` as padded base64, nil as `null`, map keys sorted as strings (integer keys too),
//! HTML-safe string escaping, no whitespace.

use serde::Serialize;
use serde::ser::{self, Impossible};

use super::escape::push_quoted;
use crate::gotype::{GoField, GoType, push_int};
use crate::map_order::{KeyOrder, MapEntry, sort_region};
use crate::schema_mismatch::{SchemaMismatch, mismatch};

/// Encodes `value`, described by `ty`, as Go's `json.Marshal` would.
pub(crate) fn to_string<T: Serialize + ?Sized>(
    value: &T,
    ty: &'static GoType,
) -> Result<String, SchemaMismatch> {
    let mut enc = Encoder {
        out: String::with_capacity(256),
        keys: String::new(),
    };
    value.serialize(ValueEnc { e: &mut enc, ty })?;
    Ok(enc.out)
}

struct Encoder {
    out: String,
    /// Raw (unescaped) map keys of the maps being written, for sorting.
    keys: String,
}

/// Serializes one value; `Ok(true)` means the value is "empty" for `omitempty`.
struct ValueEnc<'a> {
    e: &'a mut Encoder,
    ty: &'static GoType,
}

impl ValueEnc<'_> {
    /// The type the value is written as, and whether it sits behind a non-nil pointer
    /// (which is never empty).
    fn resolve(&self) -> (&'static GoType, bool) {
        match self.ty {
            GoType::Ptr(elem) => (elem.underlying(), true),
            ty => (ty.underlying(), false),
        }
    }

    fn int(self, v: i128) -> Result<bool, SchemaMismatch> {
        let (ty, behind_ptr) = self.resolve();
        match ty {
            GoType::Int(w) if i64::try_from(v).is_ok_and(|x| w.fits_signed(x)) => {}
            GoType::Uint(w) if u64::try_from(v).is_ok_and(|x| w.fits_unsigned(x)) => {}
            other => return mismatch(format!("integer {v} does not fit Go type {other}")),
        }
        push_int(&mut self.e.out, v);
        Ok(!behind_ptr && v == 0)
    }
}

impl<'a> ser::Serializer for ValueEnc<'a> {
    type Ok = bool;
    type Error = SchemaMismatch;
    type SerializeSeq = SeqEnc<'a>;
    type SerializeTuple = Impossible<bool, SchemaMismatch>;
    type SerializeTupleStruct = Impossible<bool, SchemaMismatch>;
    type SerializeTupleVariant = Impossible<bool, SchemaMismatch>;
    type SerializeMap = MapEnc<'a>;
    type SerializeStruct = StructEnc<'a>;
    type SerializeStructVariant = Impossible<bool, SchemaMismatch>;

    fn serialize_bool(self, v: bool) -> Result<bool, SchemaMismatch> {
        let (ty, behind_ptr) = self.resolve();
        if !matches!(ty, GoType::Bool) {
            return mismatch(format!("bool for Go type {ty}"));
        }
        self.e.out.push_str(if v { "true" } else { "false" });
        Ok(!behind_ptr && !v)
    }

    fn serialize_i8(self, v: i8) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u8(self, v: u8) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_f32(self, _v: f32) -> Result<bool, SchemaMismatch> {
        mismatch("floats are not used by kubelet checkpoints")
    }
    fn serialize_f64(self, _v: f64) -> Result<bool, SchemaMismatch> {
        mismatch("floats are not used by kubelet checkpoints")
    }

    fn serialize_char(self, v: char) -> Result<bool, SchemaMismatch> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Result<bool, SchemaMismatch> {
        let (ty, behind_ptr) = self.resolve();
        if !matches!(ty, GoType::String) {
            return mismatch(format!("string for Go type {ty}"));
        }
        push_quoted(&mut self.e.out, v);
        Ok(!behind_ptr && v.is_empty())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<bool, SchemaMismatch> {
        let (ty, behind_ptr) = self.resolve();
        if !ty.is_bytes() {
            return mismatch(format!("bytes for Go type {ty}"));
        }
        self.e.out.push('"');
        super::base64::encode_into(&mut self.e.out, v);
        self.e.out.push('"');
        Ok(!behind_ptr && v.is_empty())
    }

    fn serialize_none(self) -> Result<bool, SchemaMismatch> {
        match self.ty.underlying() {
            GoType::Ptr(_) | GoType::Slice(_) | GoType::Map(..) => {
                self.e.out.push_str("null");
                Ok(true)
            }
            other => mismatch(format!("nil for Go type {other}")),
        }
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<bool, SchemaMismatch> {
        match self.ty {
            GoType::Ptr(elem) => {
                value.serialize(ValueEnc {
                    e: self.e,
                    ty: elem,
                })?;
                Ok(false)
            }
            _ => value.serialize(self),
        }
    }

    fn serialize_unit(self) -> Result<bool, SchemaMismatch> {
        let (ty, _) = self.resolve();
        match ty {
            GoType::Struct(s) if s.fields.is_empty() => {
                self.e.out.push_str("{}");
                Ok(false)
            }
            other => mismatch(format!("unit for Go type {other}")),
        }
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<bool, SchemaMismatch> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<bool, SchemaMismatch> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<bool, SchemaMismatch> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<bool, SchemaMismatch> {
        mismatch(format!("enum {name} has no Go counterpart"))
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<SeqEnc<'a>, SchemaMismatch> {
        let (ty, behind_ptr) = self.resolve();
        let GoType::Slice(elem) = ty else {
            return mismatch(format!("sequence for Go type {ty}"));
        };
        let bytes = ty.is_bytes().then(Vec::new);
        if bytes.is_none() {
            self.e.out.push('[');
        }
        Ok(SeqEnc {
            e: self.e,
            elem,
            count: 0,
            bytes,
            behind_ptr,
        })
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, SchemaMismatch> {
        mismatch("tuples have no Go counterpart")
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, SchemaMismatch> {
        mismatch(format!("tuple struct {name} has no Go counterpart"))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, SchemaMismatch> {
        mismatch(format!("enum {name} has no Go counterpart"))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<MapEnc<'a>, SchemaMismatch> {
        let (ty, behind_ptr) = self.resolve();
        let GoType::Map(key, value) = ty else {
            return mismatch(format!("map for Go type {ty}"));
        };
        self.e.out.push('{');
        let region_start = self.e.out.len();
        let keys_start = self.e.keys.len();
        Ok(MapEnc {
            e: self.e,
            key_ty: key,
            value_ty: value,
            region_start,
            keys_start,
            entries: Vec::with_capacity(len.unwrap_or(0)),
            entry_start: 0,
            key_range: 0..0,
            behind_ptr,
        })
    }

    fn serialize_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> Result<StructEnc<'a>, SchemaMismatch> {
        let (ty, _) = self.resolve();
        let GoType::Struct(s) = ty else {
            return mismatch(format!("struct {name} for Go type {ty}"));
        };
        self.e.out.push('{');
        Ok(StructEnc {
            e: self.e,
            fields: s.fields,
            go_name: s.name,
            index: 0,
            written: 0,
        })
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, SchemaMismatch> {
        mismatch(format!("enum {name} has no Go counterpart"))
    }
}

/// A JSON array, or a `[]byte` collected for base64.
struct SeqEnc<'a> {
    e: &'a mut Encoder,
    elem: &'static GoType,
    count: usize,
    bytes: Option<Vec<u8>>,
    behind_ptr: bool,
}

impl ser::SerializeSeq for SeqEnc<'_> {
    type Ok = bool;
    type Error = SchemaMismatch;

    fn serialize_element<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        self.count += 1;
        if let Some(bytes) = &mut self.bytes {
            bytes.push(value.serialize(ByteCapture)?);
            return Ok(());
        }
        if self.count > 1 {
            self.e.out.push(',');
        }
        value.serialize(ValueEnc {
            e: self.e,
            ty: self.elem,
        })?;
        Ok(())
    }

    fn end(self) -> Result<bool, SchemaMismatch> {
        match self.bytes {
            Some(bytes) => {
                self.e.out.push('"');
                super::base64::encode_into(&mut self.e.out, &bytes);
                self.e.out.push('"');
            }
            None => self.e.out.push(']'),
        }
        Ok(!self.behind_ptr && self.count == 0)
    }
}

/// A JSON object from a Go map: keys as strings, sorted byte-wise.
struct MapEnc<'a> {
    e: &'a mut Encoder,
    key_ty: &'static GoType,
    value_ty: &'static GoType,
    region_start: usize,
    keys_start: usize,
    entries: Vec<MapEntry>,
    entry_start: usize,
    key_range: std::ops::Range<usize>,
    behind_ptr: bool,
}

impl ser::SerializeMap for MapEnc<'_> {
    type Ok = bool;
    type Error = SchemaMismatch;

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
        Ok(!self.behind_ptr && self.entries.is_empty())
    }
}

/// A JSON object from a Go struct.
struct StructEnc<'a> {
    e: &'a mut Encoder,
    fields: &'static [GoField],
    go_name: &'static str,
    index: usize,
    written: usize,
}

impl ser::SerializeStruct for StructEnc<'_> {
    type Ok = bool;
    type Error = SchemaMismatch;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        let Some(field) = self.fields.get(self.index) else {
            return mismatch(format!("extra field {key} for Go struct {}", self.go_name));
        };
        if field.json != key {
            return mismatch(format!(
                "field {key} where Go struct {} has {} ({})",
                self.go_name, field.name, field.json
            ));
        }
        self.index += 1;
        let rollback = self.e.out.len();
        if self.written > 0 {
            self.e.out.push(',');
        }
        push_quoted(&mut self.e.out, field.json);
        self.e.out.push(':');
        let empty = value.serialize(ValueEnc {
            e: self.e,
            ty: field.ty,
        })?;
        if field.omitempty && empty {
            self.e.out.truncate(rollback);
        } else {
            self.written += 1;
        }
        Ok(())
    }

    fn end(self) -> Result<bool, SchemaMismatch> {
        if self.index != self.fields.len() {
            return mismatch(format!(
                "Go struct {} has {} fields, value gave {}",
                self.go_name,
                self.fields.len(),
                self.index
            ));
        }
        self.e.out.push('}');
        Ok(false)
    }
}

/// Captures a map key's raw text (strings as they are, integers in decimal).
struct KeyCapture<'a> {
    keys: &'a mut String,
    ty: &'static GoType,
}

impl KeyCapture<'_> {
    fn int(self, v: i128) -> Result<bool, SchemaMismatch> {
        match self.ty.underlying() {
            GoType::Int(w) if i64::try_from(v).is_ok_and(|x| w.fits_signed(x)) => {}
            GoType::Uint(w) if u64::try_from(v).is_ok_and(|x| w.fits_unsigned(x)) => {}
            other => return mismatch(format!("map key {v} does not fit Go type {other}")),
        }
        push_int(self.keys, v);
        Ok(false)
    }
}

macro_rules! unsupported_key {
    ($($method:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $method(self, $(_: $arg),*) -> Result<bool, SchemaMismatch> {
            mismatch("unsupported map key type")
        })*
    };
}

impl ser::Serializer for KeyCapture<'_> {
    type Ok = bool;
    type Error = SchemaMismatch;
    type SerializeSeq = Impossible<bool, SchemaMismatch>;
    type SerializeTuple = Impossible<bool, SchemaMismatch>;
    type SerializeTupleStruct = Impossible<bool, SchemaMismatch>;
    type SerializeTupleVariant = Impossible<bool, SchemaMismatch>;
    type SerializeMap = Impossible<bool, SchemaMismatch>;
    type SerializeStruct = Impossible<bool, SchemaMismatch>;
    type SerializeStructVariant = Impossible<bool, SchemaMismatch>;

    fn serialize_str(self, v: &str) -> Result<bool, SchemaMismatch> {
        if !matches!(self.ty.underlying(), GoType::String) {
            return mismatch(format!("string map key for Go type {}", self.ty));
        }
        self.keys.push_str(v);
        Ok(false)
    }
    fn serialize_i8(self, v: i8) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u8(self, v: u8) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<bool, SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<bool, SchemaMismatch> {
        value.serialize(self)
    }
    unsupported_key!(
        serialize_bool(bool),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_unit_variant(&'static str, u32, &'static str),
    );
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<bool, SchemaMismatch> {
        mismatch("unsupported map key type")
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<bool, SchemaMismatch> {
        mismatch("unsupported map key type")
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, SchemaMismatch> {
        mismatch("unsupported map key type")
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, SchemaMismatch> {
        mismatch("unsupported map key type")
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, SchemaMismatch> {
        mismatch("unsupported map key type")
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, SchemaMismatch> {
        mismatch("unsupported map key type")
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, SchemaMismatch> {
        mismatch("unsupported map key type")
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, SchemaMismatch> {
        mismatch("unsupported map key type")
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, SchemaMismatch> {
        mismatch("unsupported map key type")
    }
}

/// Takes one `u8` out of a `[]byte` element.
struct ByteCapture;

impl ser::Serializer for ByteCapture {
    type Ok = u8;
    type Error = SchemaMismatch;
    type SerializeSeq = Impossible<u8, SchemaMismatch>;
    type SerializeTuple = Impossible<u8, SchemaMismatch>;
    type SerializeTupleStruct = Impossible<u8, SchemaMismatch>;
    type SerializeTupleVariant = Impossible<u8, SchemaMismatch>;
    type SerializeMap = Impossible<u8, SchemaMismatch>;
    type SerializeStruct = Impossible<u8, SchemaMismatch>;
    type SerializeStructVariant = Impossible<u8, SchemaMismatch>;

    fn serialize_u8(self, v: u8) -> Result<u8, SchemaMismatch> {
        Ok(v)
    }
    fn serialize_bool(self, _v: bool) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_i8(self, _v: i8) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_i16(self, _v: i16) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_i32(self, _v: i32) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_i64(self, _v: i64) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_u16(self, _v: u16) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_u32(self, _v: u32) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_u64(self, _v: u64) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_f32(self, _v: f32) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_f64(self, _v: f64) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_char(self, _v: char) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_str(self, _v: &str) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_none(self) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_unit(self) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<u8, SchemaMismatch> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<u8, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, SchemaMismatch> {
        mismatch("[]byte element must be u8")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::*;
    use crate::gotype::{BYTES, GoStruct, INT64, MAP_STRING_STRINGS, STRING, STRING_SLICE};

    static PER_NUMA: GoType = GoType::Map(&INT64, &STRING_SLICE);
    static T: GoType = GoType::Struct(&GoStruct {
        name: "x.T",
        fields: &[
            GoField::tagged("Name", "name", &STRING),
            GoField::omitempty("Skip", "skip", &MAP_STRING_STRINGS),
            GoField::plain("Numa", &PER_NUMA),
            GoField::plain("Bytes", &BYTES),
        ],
    });

    #[derive(Serialize)]
    struct V {
        name: String,
        skip: Option<BTreeMap<String, Vec<String>>>,
        #[serde(rename = "Numa")]
        numa: BTreeMap<i64, Option<Vec<String>>>,
        #[serde(rename = "Bytes")]
        bytes: Option<Vec<u8>>,
    }

    #[test]
    fn marshals_like_go() {
        let v = V {
            name: "<a>".into(),
            skip: Some(BTreeMap::new()),
            numa: BTreeMap::from([(2, None), (10, Some(vec!["d".into()])), (-1, Some(vec![]))]),
            bytes: Some(vec![1, 2, 3]),
        };
        assert_eq!(
            to_string(&v, &T).unwrap(),
            r#"{"name":"\u003ca\u003e","Numa":{"-1":[],"10":["d"],"2":null},"Bytes":"AQID"}"#
        );
    }

    #[test]
    fn nil_bytes_and_kept_empty_fields() {
        let v = V {
            name: String::new(),
            skip: None,
            numa: BTreeMap::new(),
            bytes: None,
        };
        assert_eq!(
            to_string(&v, &T).unwrap(),
            r#"{"name":"","Numa":{},"Bytes":null}"#
        );
    }
}
