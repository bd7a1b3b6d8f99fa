//! go-spew's `%#v` dump with `k8s.io/apimachinery/pkg/util/dump.ForHash` settings, as a
//! serde [`Serializer`](serde::Serializer) writing into a [`DumpSink`].
//!
//! The kubelet's checksums hash `dump.ForHash(obj)`: go-spew with `SortKeys`,
//! `DisableMethods`, `SpewKeys`, `DisablePointerAddresses` and `DisableCapacities`, printed
//! with `%#v`. This module reproduces that printer for any serde value described by a
//! [`GoType`], including the quirks that change bytes:
//!
//! - every value is preceded by `(type)` unless go-spew's "ignore next type" flag is set —
//!   it is set before slice elements, map keys and map values, and after a pointer prefix;
//! - a nil pointer printed while that flag is set leaves it set, so it *leaks* into the next
//!   value printed (a map whose last sorted value is a nil pointer makes the next struct
//!   field print without its type);
//! - pointers print as `(*T){…}` where types show and `<*>{…}` where they do not, a nil
//!   pointer as `(*T)<nil>` or `<nil>`;
//! - strings are raw (no quotes, no escapes); nil maps and slices print `<nil>`, empty
//!   ones `map[]` and `[]`; `[]byte` prints as decimal bytes `[1 2 3]`;
//! - map keys are sorted: strings byte-wise, integers numerically.
//!
//! The dump is written front to back and never revisited, so a checksum can stream it into
//! its hasher. Map order is settled before a map is printed: its keys alone are rendered
//! into a scratch buffer and checked (they usually arrive sorted, from a `BTreeMap`); a map
//! whose keys do not is printed entry by entry into side buffers, sorted, then written.

use serde::Serialize;
use serde::ser::{self, Impossible};

use crate::decimal::decimal;
use crate::dump_sink::DumpSink;
use crate::gotype::{GoField, GoType, IntWidth};
use crate::map_order::{KeyOrder, compare_keys};
use crate::schema_mismatch::{SchemaMismatch, mismatch};

/// Dumps `value`, described by `ty`, exactly as `dump.ForHash` would print the Go value.
///
/// Pass a [`GoType::Ptr`] to dump through a pointer (`dump.ForHash(&cp)` prints
/// `(*state.CPUManagerCheckpoint){…}`).
pub fn dump_for_hash<T: Serialize + ?Sized>(
    value: &T,
    ty: &'static GoType,
) -> Result<String, crate::CheckpointError> {
    let mut out = String::with_capacity(256);
    dump_into(value, ty, &mut out)?;
    Ok(out)
}

/// Writes the [`dump_for_hash`] text of `value` into `sink`, front to back.
pub(crate) fn dump_into<T: Serialize + ?Sized, S: DumpSink>(
    value: &T,
    ty: &'static GoType,
    sink: &mut S,
) -> Result<(), crate::CheckpointError> {
    Dumper::new(sink).value(value, ty)?;
    Ok(())
}

struct Dumper<'s, S> {
    out: &'s mut S,
    ignore_next_type: bool,
    /// `(type)` headers of slice, map and pointer types, spelled out once per dump.
    headers: Vec<(&'static GoType, Box<str>)>,
    /// Scratch for map keys while their order is checked.
    key_scratch: [String; 2],
}

impl<'s, S: DumpSink> Dumper<'s, S> {
    fn new(out: &'s mut S) -> Self {
        Dumper {
            out,
            ignore_next_type: false,
            headers: Vec::new(),
            key_scratch: [String::new(), String::new()],
        }
    }

    /// Prints one value of Go type `ty`.
    fn value<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        ty: &'static GoType,
    ) -> Result<(), SchemaMismatch> {
        self.value_of_kind(value, ty, map_key_order(ty))
    }

    /// [`value`](Self::value) with `map_key_order(ty)` already worked out.
    fn value_of_kind<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        ty: &'static GoType,
        map: Option<(&'static GoType, KeyOrder)>,
    ) -> Result<(), SchemaMismatch> {
        let stream_map = match map {
            Some((key_ty, order)) => self.keys_sorted(value, key_ty, order),
            None => true,
        };
        value.serialize(ValueSer {
            d: self,
            ty,
            stream_map,
        })
    }

    /// Whether `value` is nil or a map whose keys arrive in go-spew's order (so it can be
    /// printed as it comes). Anything else, errors included, takes the sorting path, which
    /// also reports the errors.
    fn keys_sorted<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        key_ty: &'static GoType,
        order: KeyOrder,
    ) -> bool {
        let [prev, cur] = std::mem::take(&mut self.key_scratch);
        let mut probe = KeyProbe {
            key_ty,
            order,
            prev,
            cur,
            count: 0,
        };
        let sorted = value.serialize(&mut probe).unwrap_or(false);
        self.key_scratch = [probe.prev, probe.cur];
        sorted
    }

    /// Writes `(type)`.
    fn type_header(&mut self, ty: &'static GoType) {
        match ty {
            GoType::Struct(s) => self.bracketed(s.name),
            GoType::Named(name, _) => self.bracketed(name),
            GoType::Bool => self.out.push_str("(bool)"),
            GoType::String => self.out.push_str("(string)"),
            GoType::Int(w) => self.out.push_str(int_header(*w)),
            GoType::Uint(w) => self.out.push_str(uint_header(*w)),
            GoType::Slice(_) | GoType::Map(..) | GoType::Ptr(_) => {
                let header = match self.headers.iter().find(|(t, _)| std::ptr::eq(*t, ty)) {
                    Some((_, header)) => header,
                    None => {
                        let mut header = String::from("(");
                        ty.write_name(&mut header);
                        header.push(')');
                        self.headers.push((ty, header.into_boxed_str()));
                        &self.headers[self.headers.len() - 1].1
                    }
                };
                self.out.push_str(header);
            }
        }
    }

    fn bracketed(&mut self, name: &str) {
        self.out.push_byte(b'(');
        self.out.push_str(name);
        self.out.push_byte(b')');
    }
}

fn int_header(w: IntWidth) -> &'static str {
    match w {
        IntWidth::Native => "(int)",
        IntWidth::W8 => "(int8)",
        IntWidth::W16 => "(int16)",
        IntWidth::W32 => "(int32)",
        IntWidth::W64 => "(int64)",
    }
}

fn uint_header(w: IntWidth) -> &'static str {
    match w {
        IntWidth::Native => "(uint)",
        IntWidth::W8 => "(uint8)",
        IntWidth::W16 => "(uint16)",
        IntWidth::W32 => "(uint32)",
        IntWidth::W64 => "(uint64)",
    }
}

/// The key type and order of the map a value of type `ty` prints as (through names and a
/// pointer), if it is one.
fn map_key_order(ty: &'static GoType) -> Option<(&'static GoType, KeyOrder)> {
    let mut ty = ty;
    loop {
        match ty {
            GoType::Named(_, inner) | GoType::Ptr(inner) => ty = inner,
            GoType::Map(key, _) => {
                let order = match key.underlying() {
                    GoType::Int(_) => KeyOrder::Signed,
                    GoType::Uint(_) => KeyOrder::Unsigned,
                    _ => KeyOrder::Bytes,
                };
                return Some((key, order));
            }
            _ => return None,
        }
    }
}

struct ValueSer<'a, 's, S> {
    d: &'a mut Dumper<'s, S>,
    ty: &'static GoType,
    /// For a map: its keys were found in order, so entries print as they come.
    stream_map: bool,
}

impl<S: DumpSink> ValueSer<'_, '_, S> {
    /// Writes what go-spew writes before a non-nil value (pointer prefix, type header)
    /// and returns the underlying type the value is printed as.
    fn header(&mut self) -> &'static GoType {
        let mut ty = self.ty;
        if let GoType::Ptr(elem) = ty {
            if self.d.ignore_next_type {
                self.d.out.push_str("<*>");
            } else {
                self.d.type_header(ty);
            }
            self.d.ignore_next_type = true;
            ty = elem;
        }
        if !self.d.ignore_next_type {
            self.d.type_header(ty);
        }
        self.d.ignore_next_type = false;
        ty.underlying()
    }

    fn int(mut self, v: i128) -> Result<(), SchemaMismatch> {
        match self.header() {
            GoType::Int(w) if i64::try_from(v).is_ok_and(|x| w.fits_signed(x)) => {}
            GoType::Uint(w) if u64::try_from(v).is_ok_and(|x| w.fits_unsigned(x)) => {}
            other => return mismatch(format!("integer {v} does not fit Go type {other}")),
        }
        self.d.out.push_str(decimal(&mut [0; 40], v));
        Ok(())
    }
}

impl<'a, 's, S: DumpSink> ser::Serializer for ValueSer<'a, 's, S> {
    type Ok = ();
    type Error = SchemaMismatch;
    type SerializeSeq = SeqSer<'a, 's, S>;
    type SerializeTuple = Impossible<(), SchemaMismatch>;
    type SerializeTupleStruct = Impossible<(), SchemaMismatch>;
    type SerializeTupleVariant = Impossible<(), SchemaMismatch>;
    type SerializeMap = MapSer<'a, 's, S>;
    type SerializeStruct = StructSer<'a, 's, S>;
    type SerializeStructVariant = Impossible<(), SchemaMismatch>;

    fn serialize_bool(mut self, v: bool) -> Result<(), SchemaMismatch> {
        match self.header() {
            GoType::Bool => {
                self.d.out.push_str(if v { "true" } else { "false" });
                Ok(())
            }
            other => mismatch(format!("bool for Go type {other}")),
        }
    }

    fn serialize_i8(self, v: i8) -> Result<(), SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u8(self, v: u8) -> Result<(), SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), SchemaMismatch> {
        self.int(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), SchemaMismatch> {
        self.int(v.into())
    }

    fn serialize_f32(self, _v: f32) -> Result<(), SchemaMismatch> {
        mismatch("floats are not used by kubelet checkpoints")
    }
    fn serialize_f64(self, _v: f64) -> Result<(), SchemaMismatch> {
        mismatch("floats are not used by kubelet checkpoints")
    }

    fn serialize_char(self, v: char) -> Result<(), SchemaMismatch> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(mut self, v: &str) -> Result<(), SchemaMismatch> {
        match self.header() {
            GoType::String => {
                self.d.out.push_str(v);
                Ok(())
            }
            other => mismatch(format!("string for Go type {other}")),
        }
    }

    fn serialize_bytes(mut self, v: &[u8]) -> Result<(), SchemaMismatch> {
        let ty = self.ty;
        if !ty.is_bytes() {
            return mismatch(format!("bytes for Go type {ty}"));
        }
        self.header();
        self.d.out.push_byte(b'[');
        for (i, &b) in v.iter().enumerate() {
            self.d.out.push_byte_decimal(b, i > 0);
        }
        self.d.out.push_byte(b']');
        Ok(())
    }

    fn serialize_none(mut self) -> Result<(), SchemaMismatch> {
        if let GoType::Ptr(_) = self.ty {
            // formatPtr: a nil pointer prints `<nil>` and leaves the flag as it was.
            if !self.d.ignore_next_type {
                self.d.type_header(self.ty);
            }
            self.d.out.push_str("<nil>");
            return Ok(());
        }
        match self.header() {
            GoType::Slice(_) | GoType::Map(..) => {
                self.d.out.push_str("<nil>");
                Ok(())
            }
            other => mismatch(format!("nil for Go type {other}")),
        }
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), SchemaMismatch> {
        value.serialize(self)
    }

    fn serialize_unit(mut self) -> Result<(), SchemaMismatch> {
        match self.header() {
            GoType::Struct(s) if s.fields.is_empty() => {
                self.d.out.push_str("{}");
                Ok(())
            }
            other => mismatch(format!("unit for Go type {other}")),
        }
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), SchemaMismatch> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), SchemaMismatch> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), SchemaMismatch> {
        mismatch(format!("enum {name} has no Go counterpart"))
    }

    fn serialize_seq(mut self, _len: Option<usize>) -> Result<SeqSer<'a, 's, S>, SchemaMismatch> {
        match self.header() {
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

    fn serialize_map(mut self, _len: Option<usize>) -> Result<MapSer<'a, 's, S>, SchemaMismatch> {
        match self.header() {
            GoType::Map(key, value) => {
                self.d.out.push_str("map[");
                let order = match key.underlying() {
                    GoType::Int(_) => KeyOrder::Signed,
                    GoType::Uint(_) => KeyOrder::Unsigned,
                    _ => KeyOrder::Bytes,
                };
                Ok(MapSer {
                    d: self.d,
                    key_ty: key,
                    value_ty: value,
                    order,
                    count: 0,
                    held: (!self.stream_map).then(Vec::new),
                })
            }
            other => mismatch(format!("map for Go type {other}")),
        }
    }

    fn serialize_struct(
        mut self,
        name: &'static str,
        _len: usize,
    ) -> Result<StructSer<'a, 's, S>, SchemaMismatch> {
        match self.header() {
            GoType::Struct(s) => {
                self.d.out.push_byte(b'{');
                Ok(StructSer {
                    d: self.d,
                    fields: s.fields,
                    go_name: s.name,
                    index: 0,
                })
            }
            other => mismatch(format!("struct {name} for Go type {other}")),
        }
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

/// Slice elements: each printed with the type header suppressed, separated by spaces.
struct SeqSer<'a, 's, S> {
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
    fn plain(self) -> ValueSer<'a, 's, S> {
        if self.spaced {
            self.d.out.push_byte(b' ');
        }
        ValueSer {
            d: self.d,
            ty: self.ty,
            stream_map: true,
        }
    }
}

macro_rules! forward_to_plain {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(fn $method(self, $($arg: $ty),*) -> Result<(), SchemaMismatch> {
            self.plain().$method($($arg),*)
        })*
    };
}

impl<'a, 's, S: DumpSink> ser::Serializer for ByteElem<'a, 's, S> {
    type Ok = ();
    type Error = SchemaMismatch;
    type SerializeSeq = SeqSer<'a, 's, S>;
    type SerializeTuple = Impossible<(), SchemaMismatch>;
    type SerializeTupleStruct = Impossible<(), SchemaMismatch>;
    type SerializeTupleVariant = Impossible<(), SchemaMismatch>;
    type SerializeMap = MapSer<'a, 's, S>;
    type SerializeStruct = StructSer<'a, 's, S>;
    type SerializeStructVariant = Impossible<(), SchemaMismatch>;

    fn serialize_u8(self, v: u8) -> Result<(), SchemaMismatch> {
        // The element's type header is suppressed (`ignore_next_type`), and a `uint8` is
        // never a pointer: just the decimal.
        self.d.ignore_next_type = false;
        self.d.out.push_byte_decimal(v, self.spaced);
        Ok(())
    }

    forward_to_plain!(
        serialize_bool(v: bool),
        serialize_i8(v: i8),
        serialize_i16(v: i16),
        serialize_i32(v: i32),
        serialize_i64(v: i64),
        serialize_u16(v: u16),
        serialize_u32(v: u32),
        serialize_u64(v: u64),
        serialize_f32(v: f32),
        serialize_f64(v: f64),
        serialize_char(v: char),
        serialize_str(v: &str),
        serialize_bytes(v: &[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(name: &'static str),
        serialize_unit_variant(name: &'static str, index: u32, variant: &'static str),
    );

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), SchemaMismatch> {
        // Still one element: a `u8` inside keeps the fast path.
        value.serialize(self)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        value.serialize(self)
    }

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

    fn serialize_seq(self, len: Option<usize>) -> Result<SeqSer<'a, 's, S>, SchemaMismatch> {
        self.plain().serialize_seq(len)
    }

    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, SchemaMismatch> {
        self.plain().serialize_tuple(len)
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, SchemaMismatch> {
        self.plain().serialize_tuple_struct(name, len)
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, SchemaMismatch> {
        self.plain()
            .serialize_tuple_variant(name, index, variant, len)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<MapSer<'a, 's, S>, SchemaMismatch> {
        self.plain().serialize_map(len)
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<StructSer<'a, 's, S>, SchemaMismatch> {
        self.plain().serialize_struct(name, len)
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, SchemaMismatch> {
        self.plain()
            .serialize_struct_variant(name, index, variant, len)
    }
}

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
struct MapSer<'a, 's, S> {
    d: &'a mut Dumper<'s, S>,
    key_ty: &'static GoType,
    value_ty: &'static GoType,
    order: KeyOrder,
    count: usize,
    /// The entries of a map whose keys were out of order.
    held: Option<Vec<HeldEntry>>,
}

impl<S: DumpSink> ser::SerializeMap for MapSer<'_, '_, S> {
    type Ok = ();
    type Error = SchemaMismatch;

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
        let mut aside = Dumper::new(&mut text);
        aside.ignore_next_type = true;
        aside.value(key, self.key_ty)?;
        let key_len = text.len();
        text.push(':');
        held.push(HeldEntry {
            text,
            key_len,
            tail: false,
        });
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SchemaMismatch> {
        let Some(entry) = self.held.as_mut().and_then(|held| held.last_mut()) else {
            self.d.ignore_next_type = true;
            return self.d.value(value, self.value_ty);
        };
        let mut aside = Dumper::new(&mut entry.text);
        aside.ignore_next_type = true;
        aside.value(value, self.value_ty)?;
        entry.tail = aside.ignore_next_type;
        Ok(())
    }

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

/// Checks whether a map's keys arrive in go-spew's order: renders each key into a scratch
/// buffer and compares it with the one before. Any other value, or an error, is `false`.
struct KeyProbe {
    key_ty: &'static GoType,
    order: KeyOrder,
    prev: String,
    cur: String,
    count: usize,
}

/// Why a probe stopped early (out of order, or not a map); never reported.
fn stop<T>() -> Result<T, SchemaMismatch> {
    Err(SchemaMismatch(String::new()))
}

macro_rules! not_a_map {
    ($($method:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $method(self, $(_: $arg),*) -> Result<bool, SchemaMismatch> {
            stop()
        })*
    };
}

impl<'p> ser::Serializer for &'p mut KeyProbe {
    type Ok = bool;
    type Error = SchemaMismatch;
    type SerializeSeq = Impossible<bool, SchemaMismatch>;
    type SerializeTuple = Impossible<bool, SchemaMismatch>;
    type SerializeTupleStruct = Impossible<bool, SchemaMismatch>;
    type SerializeTupleVariant = Impossible<bool, SchemaMismatch>;
    type SerializeMap = &'p mut KeyProbe;
    type SerializeStruct = Impossible<bool, SchemaMismatch>;
    type SerializeStructVariant = Impossible<bool, SchemaMismatch>;

    not_a_map!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_unit_variant(&'static str, u32, &'static str),
    );

    fn serialize_none(self) -> Result<bool, SchemaMismatch> {
        Ok(true)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<bool, SchemaMismatch> {
        value.serialize(self)
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
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<bool, SchemaMismatch> {
        stop()
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, SchemaMismatch> {
        stop()
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, SchemaMismatch> {
        stop()
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, SchemaMismatch> {
        stop()
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, SchemaMismatch> {
        stop()
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, SchemaMismatch> {
        Ok(self)
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, SchemaMismatch> {
        stop()
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, SchemaMismatch> {
        stop()
    }
}

impl ser::SerializeMap for &mut KeyProbe {
    type Ok = bool;
    type Error = SchemaMismatch;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), SchemaMismatch> {
        self.cur.clear();
        let mut keys = Dumper::new(&mut self.cur);
        keys.ignore_next_type = true;
        keys.value(key, self.key_ty)?;
        if self.count > 0 && compare_keys(self.order, &self.prev, &self.cur).is_gt() {
            return stop();
        }
        self.count += 1;
        std::mem::swap(&mut self.prev, &mut self.cur);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, _value: &T) -> Result<(), SchemaMismatch> {
        Ok(())
    }

    fn end(self) -> Result<bool, SchemaMismatch> {
        Ok(true)
    }
}

/// Struct fields: `Name:(type)value`, space separated; field types always print unless a
/// leaked flag suppresses them.
struct StructSer<'a, 's, S> {
    d: &'a mut Dumper<'s, S>,
    fields: &'static [GoField],
    go_name: &'static str,
    index: usize,
}

impl<S: DumpSink> ser::SerializeStruct for StructSer<'_, '_, S> {
    type Ok = ();
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
        if self.index > 0 {
            self.d.out.push_byte(b' ');
        }
        self.index += 1;
        self.d.out.push_str(field.name);
        self.d.out.push_byte(b':');
        self.d.value(value, field.ty)
    }

    fn end(self) -> Result<(), SchemaMismatch> {
        if self.index != self.fields.len() {
            return mismatch(format!(
                "Go struct {} has {} fields, value gave {}",
                self.go_name,
                self.fields.len(),
                self.index
            ));
        }
        self.d.out.push_byte(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::*;
    use crate::gotype::{GoField, GoStruct, INT, STRING, UINT64};

    static TABLE: GoType = GoType::Struct(&GoStruct {
        name: "state.T",
        fields: &[GoField::tagged("Size", "size", &UINT64)],
    });
    static NODE_MAP: GoType = GoType::Named("state.M", &GoType::Map(&INT, &GoType::Ptr(&TABLE)));
    static OUTER: GoType = GoType::Struct(&GoStruct {
        name: "state.Outer",
        fields: &[
            GoField::tagged("Nodes", "nodes", &NODE_MAP),
            GoField::tagged("Name", "name", &STRING),
        ],
    });

    #[derive(Serialize)]
    struct Table {
        size: u64,
    }

    #[derive(Serialize)]
    struct Outer {
        nodes: Option<BTreeMap<i64, Option<Table>>>,
        name: String,
    }

    #[test]
    fn pointer_values_print_as_angle_star() {
        let v = Outer {
            nodes: Some(BTreeMap::from([(2, Some(Table { size: 5 }))])),
            name: "x".into(),
        };
        assert_eq!(
            dump_for_hash(&v, &OUTER).unwrap(),
            "(state.Outer){Nodes:(state.M)map[2:<*>{Size:(uint64)5}] Name:(string)x}"
        );
    }

    #[test]
    fn trailing_nil_pointer_leaks_ignore_next_type() {
        let v = Outer {
            nodes: Some(BTreeMap::from([(10, None), (1, Some(Table { size: 0 }))])),
            name: "x".into(),
        };
        // Sorted numerically: 1 then 10; 10 is a nil pointer, so `Name` loses its type.
        assert_eq!(
            dump_for_hash(&v, &OUTER).unwrap(),
            "(state.Outer){Nodes:(state.M)map[1:<*>{Size:(uint64)0} 10:<nil>] Name:x}"
        );
    }

    #[test]
    fn top_level_pointer_and_nil_map() {
        static PTR: GoType = GoType::Ptr(&OUTER);
        let v = Outer {
            nodes: None,
            name: String::new(),
        };
        assert_eq!(
            dump_for_hash(&v, &PTR).unwrap(),
            "(*state.Outer){Nodes:(state.M)<nil> Name:(string)}"
        );
    }

    #[test]
    fn wrong_field_names_are_schema_errors() {
        #[derive(Serialize)]
        struct Wrong {
            sizes: u64,
        }
        let err = dump_for_hash(&Wrong { sizes: 1 }, &TABLE).unwrap_err();
        assert!(err.to_string().contains("sizes"), "{err}");
    }
}
