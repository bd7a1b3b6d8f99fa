//! go-spew's `%#v` dump with `k8s.io/apimachinery/pkg/util/dump.ForHash` settings, as a
//! serde [`Serializer`](serde::Serializer).
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

use serde::Serialize;
use serde::ser::{self, Impossible};

use crate::gotype::{GoType, push_int, push_type_header};
use crate::map_order::{KeyOrder, MapEntry, sort_region};
use crate::schema_mismatch::{SchemaMismatch, mismatch};

/// Dumps `value`, described by `ty`, exactly as `dump.ForHash` would print the Go value.
///
/// Pass a [`GoType::Ptr`] to dump through a pointer (`dump.ForHash(&cp)` prints
/// `(*state.CPUManagerCheckpoint){…}`).
pub fn dump_for_hash<T: Serialize + ?Sized>(
    value: &T,
    ty: &'static GoType,
) -> Result<String, crate::CheckpointError> {
    let mut dumper = Dumper {
        out: String::with_capacity(256),
        ignore_next_type: false,
    };
    value.serialize(ValueSer { d: &mut dumper, ty })?;
    Ok(dumper.out)
}

struct Dumper {
    out: String,
    ignore_next_type: bool,
}

struct ValueSer<'a> {
    d: &'a mut Dumper,
    ty: &'static GoType,
}

impl ValueSer<'_> {
    /// Writes what go-spew writes before a non-nil value (pointer prefix, type header)
    /// and returns the underlying type the value is printed as.
    fn header(&mut self) -> &'static GoType {
        let mut ty = self.ty;
        if let GoType::Ptr(elem) = ty {
            if self.d.ignore_next_type {
                self.d.out.push_str("<*>");
            } else {
                self.d.out.push_str("(*");
                elem.write_name(&mut self.d.out);
                self.d.out.push(')');
            }
            self.d.ignore_next_type = true;
            ty = elem;
        }
        if !self.d.ignore_next_type {
            push_type_header(&mut self.d.out, ty);
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
        push_int(&mut self.d.out, v);
        Ok(())
    }
}

impl<'a> ser::Serializer for ValueSer<'a> {
    type Ok = ();
    type Error = SchemaMismatch;
    type SerializeSeq = SeqSer<'a>;
    type SerializeTuple = Impossible<(), SchemaMismatch>;
    type SerializeTupleStruct = Impossible<(), SchemaMismatch>;
    type SerializeTupleVariant = Impossible<(), SchemaMismatch>;
    type SerializeMap = MapSer<'a>;
    type SerializeStruct = StructSer<'a>;
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
        // Fast path for `[]byte` elements: no type header, no pointer, just the decimal.
        if self.d.ignore_next_type && matches!(self.ty, GoType::Uint(crate::gotype::IntWidth::W8)) {
            self.d.ignore_next_type = false;
            let digits = [b'0' + v / 100, b'0' + v / 10 % 10, b'0' + v % 10];
            let skip = if v >= 100 {
                0
            } else if v >= 10 {
                1
            } else {
                2
            };
            self.d
                .out
                .push_str(std::str::from_utf8(&digits[skip..]).unwrap_or_default());
            return Ok(());
        }
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
        self.d.out.push('[');
        for (i, b) in v.iter().enumerate() {
            if i > 0 {
                self.d.out.push(' ');
            }
            push_int(&mut self.d.out, (*b).into());
        }
        self.d.out.push(']');
        Ok(())
    }

    fn serialize_none(mut self) -> Result<(), SchemaMismatch> {
        if let GoType::Ptr(_) = self.ty {
            // formatPtr: a nil pointer prints `<nil>` and leaves the flag as it was.
            if !self.d.ignore_next_type {
                push_type_header(&mut self.d.out, self.ty);
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

    fn serialize_seq(mut self, _len: Option<usize>) -> Result<SeqSer<'a>, SchemaMismatch> {
        match self.header() {
            GoType::Slice(elem) => {
                self.d.out.push('[');
                Ok(SeqSer {
                    d: self.d,
                    elem,
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

    fn serialize_map(mut self, len: Option<usize>) -> Result<MapSer<'a>, SchemaMismatch> {
        match self.header() {
            GoType::Map(key, value) => {
                self.d.out.push_str("map[");
                let order = match key.underlying() {
                    GoType::Int(_) => KeyOrder::Signed,
                    GoType::Uint(_) => KeyOrder::Unsigned,
                    _ => KeyOrder::Bytes,
                };
                let region_start = self.d.out.len();
                Ok(MapSer {
                    d: self.d,
                    key_ty: key,
                    value_ty: value,
                    order,
                    region_start,
                    entries: Vec::with_capacity(len.unwrap_or(0)),
                    entry_start: 0,
                    key_end: 0,
                })
            }
            other => mismatch(format!("map for Go type {other}")),
        }
    }

    fn serialize_struct(
        mut self,
        name: &'static str,
        _len: usize,
    ) -> Result<StructSer<'a>, SchemaMismatch> {
        match self.header() {
            GoType::Struct(s) => {
                self.d.out.push('{');
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
struct SeqSer<'a> {
    d: &'a mut Dumper,
    elem: &'static GoType,
    index: usize,
}

impl ser::SerializeSeq for SeqSer<'_> {
    type Ok = ();
    type Error = SchemaMismatch;

    fn serialize_element<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        if self.index > 0 {
            self.d.out.push(' ');
        }
        self.index += 1;
        self.d.ignore_next_type = true;
        value.serialize(ValueSer {
            d: self.d,
            ty: self.elem,
        })
    }

    fn end(self) -> Result<(), SchemaMismatch> {
        self.d.out.push(']');
        Ok(())
    }
}

/// Map entries: written as they come, sorted at the end.
struct MapSer<'a> {
    d: &'a mut Dumper,
    key_ty: &'static GoType,
    value_ty: &'static GoType,
    order: KeyOrder,
    region_start: usize,
    entries: Vec<MapEntry>,
    entry_start: usize,
    key_end: usize,
}

impl ser::SerializeMap for MapSer<'_> {
    type Ok = ();
    type Error = SchemaMismatch;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), SchemaMismatch> {
        if !self.entries.is_empty() {
            self.d.out.push(' ');
        }
        self.entry_start = self.d.out.len();
        self.d.ignore_next_type = true;
        key.serialize(ValueSer {
            d: self.d,
            ty: self.key_ty,
        })?;
        self.key_end = self.d.out.len();
        self.d.out.push(':');
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SchemaMismatch> {
        self.d.ignore_next_type = true;
        value.serialize(ValueSer {
            d: self.d,
            ty: self.value_ty,
        })?;
        self.entries.push(MapEntry {
            key: self.entry_start..self.key_end,
            body: self.entry_start..self.d.out.len(),
            tail: self.d.ignore_next_type,
        });
        Ok(())
    }

    fn end(mut self) -> Result<(), SchemaMismatch> {
        sort_region(
            &mut self.d.out,
            self.region_start,
            &mut self.entries,
            None,
            self.order,
            " ",
        );
        // The flag left by the last printed value survives the map (go-spew never resets
        // it after a nil pointer).
        self.d.ignore_next_type = self.entries.last().is_some_and(|e| e.tail);
        self.d.out.push(']');
        Ok(())
    }
}

/// Struct fields: `Name:(type)value`, space separated; field types always print unless a
/// leaked flag suppresses them.
struct StructSer<'a> {
    d: &'a mut Dumper,
    fields: &'static [crate::gotype::GoField],
    go_name: &'static str,
    index: usize,
}

impl ser::SerializeStruct for StructSer<'_> {
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
            self.d.out.push(' ');
        }
        self.index += 1;
        self.d.out.push_str(field.name);
        self.d.out.push(':');
        value.serialize(ValueSer {
            d: self.d,
            ty: field.ty,
        })
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
        self.d.out.push('}');
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
