//! `encoding/json.Marshal` as a serde [`Serializer`](serde::Serializer) guided by a
//! [`GoType`]: struct fields in declaration order under their tag names, `omitempty`,
//! `[]byte` as padded base64, nil as `null`, map keys sorted as strings (integer keys too),
//! HTML-safe string escaping, no whitespace.
//!
//! This module writes scalars and nil; `seq` writes arrays and `[]byte`, `map` objects from
//! Go maps (keys captured raw, then sorted), `structs` objects from Go structs.
//! Their methods are `#[inline]` so the modules compile together (see `spew`).

mod map;
mod seq;
mod structs;

use serde::Serialize;
use serde::ser;

use super::escape::push_quoted;
use crate::go_serializer::{check_int, go_value_methods, impossible};
use crate::gotype::{GoType, push_int};
use crate::schema_mismatch::{SchemaMismatch, mismatch};
use map::MapEnc;
use seq::SeqEnc;
use structs::StructEnc;

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

/// Whether a value sits behind a non-nil pointer (which is never empty for `omitempty`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behind {
    /// A non-nil pointer.
    Pointer,
    /// Nothing: the value itself.
    Nothing,
}

impl Behind {
    /// Whether a value that is `zero` (Go's zero or empty) counts as empty for `omitempty`.
    #[inline]
    fn empty_if(self, zero: bool) -> bool {
        self == Behind::Nothing && zero
    }
}

impl ValueEnc<'_> {
    /// The type the value is written as, and what it sits behind.
    #[inline]
    fn resolve(&self) -> (&'static GoType, Behind) {
        match self.ty {
            GoType::Ptr(elem) => (elem.underlying(), Behind::Pointer),
            ty => (ty.underlying(), Behind::Nothing),
        }
    }

    #[inline]
    fn int(self, v: i128) -> Result<bool, SchemaMismatch> {
        let (ty, behind) = self.resolve();
        check_int(ty, v, "integer")?;
        push_int(&mut self.e.out, v);
        Ok(behind.empty_if(v == 0))
    }
}

impl<'a> ser::Serializer for ValueEnc<'a> {
    type Ok = bool;
    type Error = SchemaMismatch;
    type SerializeSeq = SeqEnc<'a>;
    type SerializeMap = MapEnc<'a>;
    type SerializeStruct = StructEnc<'a>;
    impossible!(bool;
        SerializeTuple SerializeTupleStruct SerializeTupleVariant SerializeStructVariant
    );

    go_value_methods!(int);

    #[inline]
    fn serialize_bool(self, v: bool) -> Result<bool, SchemaMismatch> {
        let (ty, behind) = self.resolve();
        if !matches!(ty, GoType::Bool) {
            return mismatch(format!("bool for Go type {ty}"));
        }
        self.e.out.push_str(if v { "true" } else { "false" });
        Ok(behind.empty_if(!v))
    }

    #[inline]
    fn serialize_str(self, v: &str) -> Result<bool, SchemaMismatch> {
        let (ty, behind) = self.resolve();
        if !matches!(ty, GoType::String) {
            return mismatch(format!("string for Go type {ty}"));
        }
        push_quoted(&mut self.e.out, v);
        Ok(behind.empty_if(v.is_empty()))
    }

    #[inline]
    fn serialize_bytes(self, v: &[u8]) -> Result<bool, SchemaMismatch> {
        let (ty, behind) = self.resolve();
        if !ty.is_bytes() {
            return mismatch(format!("bytes for Go type {ty}"));
        }
        seq::push_base64(&mut self.e.out, v);
        Ok(behind.empty_if(v.is_empty()))
    }

    #[inline]
    fn serialize_none(self) -> Result<bool, SchemaMismatch> {
        match self.ty.underlying() {
            GoType::Ptr(_) | GoType::Slice(_) | GoType::Map(..) => {
                self.e.out.push_str("null");
                Ok(true)
            }
            other => mismatch(format!("nil for Go type {other}")),
        }
    }

    #[inline]
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

    #[inline]
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

    #[inline]
    fn serialize_seq(self, _len: Option<usize>) -> Result<SeqEnc<'a>, SchemaMismatch> {
        let (ty, behind) = self.resolve();
        let GoType::Slice(elem) = ty else {
            return mismatch(format!("sequence for Go type {ty}"));
        };
        Ok(SeqEnc::start(self.e, elem, ty.is_bytes(), behind))
    }

    #[inline]
    fn serialize_map(self, len: Option<usize>) -> Result<MapEnc<'a>, SchemaMismatch> {
        let (ty, behind) = self.resolve();
        let GoType::Map(key, value) = ty else {
            return mismatch(format!("map for Go type {ty}"));
        };
        Ok(MapEnc::start(self.e, key, value, len, behind))
    }

    #[inline]
    fn serialize_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> Result<StructEnc<'a>, SchemaMismatch> {
        let (ty, _) = self.resolve();
        let GoType::Struct(s) = ty else {
            return mismatch(format!("struct {name} for Go type {ty}"));
        };
        Ok(structs::start(self.e, s))
    }
}

#[cfg(test)]
mod tests;
