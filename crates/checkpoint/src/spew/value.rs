//! One value against its Go type: scalars print in place, slices element by element (a
//! `[]byte` through a fast path for its bytes), maps and structs through `map` and
//! `structs`; nil prints `<nil>`.

use serde::Serialize;
use serde::ser;

use super::Dumper;
use super::key_order::map_key_order;
use super::map::{KeysInOrder, MapSer};
use super::structs::{self, StructSer};
use crate::decimal::decimal;
use crate::dump_sink::DumpSink;
use crate::go_serializer::{check_int, go_value_methods, impossible, see_through};
use crate::gotype::{GoType, IntWidth};
use crate::map_order::KeyOrder;
use crate::schema_mismatch::{SchemaMismatch, mismatch};

/// The associated types of a `Serializer` that prints one value (`ValueSer`, `ByteElem`).
macro_rules! dump_types {
    () => {
        type Ok = ();
        type Error = SchemaMismatch;
        type SerializeSeq = SeqSer<'a, 's, S>;
        type SerializeMap = MapSer<'a, 's, S>;
        type SerializeStruct = StructSer<'a, 's, S>;
        impossible!(();
            SerializeTuple SerializeTupleStruct SerializeTupleVariant SerializeStructVariant
        );
    };
}

/// Prints one value of Go type `ty`.
pub(super) struct ValueSer<'a, 's, S> {
    pub(super) d: &'a mut Dumper<'s, S>,
    pub(super) ty: &'static GoType,
    /// For a map: whether its keys were found in order, so entries print as they come.
    pub(super) map_keys: KeysInOrder,
}

impl<S: DumpSink> ValueSer<'_, '_, S> {
    #[inline]
    fn int(self, v: i128) -> Result<(), SchemaMismatch> {
        check_int(self.d.header(self.ty), v, "integer")?;
        self.d.out.push_str(decimal(&mut [0; 40], v));
        Ok(())
    }
}

impl<'a, 's, S: DumpSink> ser::Serializer for ValueSer<'a, 's, S> {
    dump_types!();

    go_value_methods!(int);

    #[inline]
    fn serialize_bool(self, v: bool) -> Result<(), SchemaMismatch> {
        match self.d.header(self.ty) {
            GoType::Bool => {
                self.d.out.push_str(if v { "true" } else { "false" });
                Ok(())
            }
            other => mismatch(format!("bool for Go type {other}")),
        }
    }

    #[inline]
    fn serialize_str(self, v: &str) -> Result<(), SchemaMismatch> {
        match self.d.header(self.ty) {
            GoType::String => {
                self.d.out.push_str(v);
                Ok(())
            }
            other => mismatch(format!("string for Go type {other}")),
        }
    }

    #[inline]
    fn serialize_bytes(self, v: &[u8]) -> Result<(), SchemaMismatch> {
        let ty = self.ty;
        if !ty.is_bytes() {
            return mismatch(format!("bytes for Go type {ty}"));
        }
        self.d.header(ty);
        self.d.out.push_byte(b'[');
        for (i, &b) in v.iter().enumerate() {
            self.d.out.push_byte_decimal(b, i > 0);
        }
        self.d.out.push_byte(b']');
        Ok(())
    }

    #[inline]
    fn serialize_none(self) -> Result<(), SchemaMismatch> {
        if let GoType::Ptr(_) = self.ty {
            self.d.nil_pointer(self.ty);
            return Ok(());
        }
        match self.d.header(self.ty) {
            GoType::Slice(_) | GoType::Map(..) => {
                self.d.out.push_str("<nil>");
                Ok(())
            }
            other => mismatch(format!("nil for Go type {other}")),
        }
    }

    #[inline]
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), SchemaMismatch> {
        value.serialize(self)
    }

    #[inline]
    fn serialize_unit(self) -> Result<(), SchemaMismatch> {
        match self.d.header(self.ty) {
            GoType::Struct(s) if s.fields.is_empty() => {
                self.d.out.push_str("{}");
                Ok(())
            }
            other => mismatch(format!("unit for Go type {other}")),
        }
    }

    #[inline]
    fn serialize_seq(self, _len: Option<usize>) -> Result<SeqSer<'a, 's, S>, SchemaMismatch> {
        match self.d.header(self.ty) {
            GoType::Slice(elem) => {
                self.d.out.push_byte(b'[');
                Ok(SeqSer {
                    d: self.d,
                    elem,
                    bytes: matches!(elem, GoType::Uint(IntWidth::W8)),
                    elem_map: map_key_order(elem),
                    index: 0,
                })
            }
            other => mismatch(format!("sequence for Go type {other}")),
        }
    }

    #[inline]
    fn serialize_map(self, _len: Option<usize>) -> Result<MapSer<'a, 's, S>, SchemaMismatch> {
        match self.d.header(self.ty) {
            GoType::Map(key, value) => Ok(MapSer::start(self.d, key, value, self.map_keys)),
            other => mismatch(format!("map for Go type {other}")),
        }
    }

    /// serde's own `collect_map`, here so that a map's loop compiles with the dumper (the
    /// checksum's hot path) rather than behind a call.
    #[inline]
    fn collect_map<K, V, I>(self, iter: I) -> Result<(), SchemaMismatch>
    where
        K: Serialize,
        V: Serialize,
        I: IntoIterator<Item = (K, V)>,
    {
        let mut map = self.serialize_map(None)?;
        for (key, value) in iter {
            ser::SerializeMap::serialize_entry(&mut map, &key, &value)?;
        }
        ser::SerializeMap::end(map)
    }

    #[inline]
    fn serialize_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> Result<StructSer<'a, 's, S>, SchemaMismatch> {
        match self.d.header(self.ty) {
            GoType::Struct(s) => Ok(structs::start(self.d, s)),
            other => mismatch(format!("struct {name} for Go type {other}")),
        }
    }
}

/// Slice elements: each printed with the type header suppressed, separated by spaces.
pub(super) struct SeqSer<'a, 's, S> {
    d: &'a mut Dumper<'s, S>,
    elem: &'static GoType,
    /// The elements are `uint8` (a `[]byte`).
    bytes: bool,
    /// `map_key_order(elem)`.
    elem_map: Option<(&'static GoType, KeyOrder)>,
    index: usize,
}

impl<S: DumpSink> ser::SerializeSeq for SeqSer<'_, '_, S> {
    type Ok = ();
    type Error = SchemaMismatch;

    #[inline]
    fn serialize_element<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        let spaced = self.index > 0;
        self.index += 1;
        self.d.ignore_next_type = true;
        if self.bytes {
            return value.serialize(ByteElem {
                d: self.d,
                ty: self.elem,
                spaced,
            });
        }
        if spaced {
            self.d.out.push_byte(b' ');
        }
        self.d.value_of_kind(value, self.elem, self.elem_map)
    }

    #[inline]
    fn end(self) -> Result<(), SchemaMismatch> {
        self.d.out.push_byte(b']');
        Ok(())
    }
}

/// One element of a `[]byte`: a byte prints as its decimal with no type header (the
/// separating space folded in); anything else is separated and printed as usual.
struct ByteElem<'a, 's, S> {
    d: &'a mut Dumper<'s, S>,
    ty: &'static GoType,
    spaced: bool,
}

impl<'a, 's, S: DumpSink> ByteElem<'a, 's, S> {
    /// The ordinary printer for a value that is not a `u8`, after the separator.
    #[inline]
    fn plain(self) -> ValueSer<'a, 's, S> {
        if self.spaced {
            self.d.out.push_byte(b' ');
        }
        ValueSer {
            d: self.d,
            ty: self.ty,
            map_keys: KeysInOrder::Yes,
        }
    }
}

/// `Serializer` methods of [`ByteElem`] that hand the value to [`ByteElem::plain`].
macro_rules! forward_to_plain {
    ($($method:ident($($arg:ident: $ty:ty),*) -> $ret:ty),* $(,)?) => {
        $(fn $method(self, $($arg: $ty),*) -> Result<$ret, SchemaMismatch> {
            self.plain().$method($($arg),*)
        })*
    };
}

impl<'a, 's, S: DumpSink> ser::Serializer for ByteElem<'a, 's, S> {
    dump_types!();

    #[inline]
    fn serialize_u8(self, v: u8) -> Result<(), SchemaMismatch> {
        // The element's type header is suppressed (`ignore_next_type`), and a `uint8` is
        // never a pointer: just the decimal.
        self.d.ignore_next_type = false;
        self.d.out.push_byte_decimal(v, self.spaced);
        Ok(())
    }

    forward_to_plain!(
        serialize_bool(v: bool) -> (),
        serialize_i8(v: i8) -> (),
        serialize_i16(v: i16) -> (),
        serialize_i32(v: i32) -> (),
        serialize_i64(v: i64) -> (),
        serialize_u16(v: u16) -> (),
        serialize_u32(v: u32) -> (),
        serialize_u64(v: u64) -> (),
        serialize_f32(v: f32) -> (),
        serialize_f64(v: f64) -> (),
        serialize_char(v: char) -> (),
        serialize_str(v: &str) -> (),
        serialize_bytes(v: &[u8]) -> (),
        serialize_none() -> (),
        serialize_unit() -> (),
        serialize_unit_struct(name: &'static str) -> (),
        serialize_unit_variant(name: &'static str, index: u32, variant: &'static str) -> (),
        serialize_seq(len: Option<usize>) -> Self::SerializeSeq,
        serialize_tuple(len: usize) -> Self::SerializeTuple,
        serialize_tuple_struct(name: &'static str, len: usize) -> Self::SerializeTupleStruct,
        serialize_tuple_variant(name: &'static str, index: u32, variant: &'static str, len: usize)
            -> Self::SerializeTupleVariant,
        serialize_map(len: Option<usize>) -> Self::SerializeMap,
        serialize_struct(name: &'static str, len: usize) -> Self::SerializeStruct,
        serialize_struct_variant(name: &'static str, index: u32, variant: &'static str, len: usize)
            -> Self::SerializeStructVariant,
    );

    // Still one element: a `u8` inside keeps the fast path.
    see_through!(serialize_some serialize_newtype_struct);

    #[inline]
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        self.plain()
            .serialize_newtype_variant(name, index, variant, value)
    }
}
