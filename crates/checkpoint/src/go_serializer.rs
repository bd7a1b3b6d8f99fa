//! What the two serde serializers that walk a Rust value beside its [`GoType`] share: the
//! go-spew dumper (`spew`) and the `encoding/json` encoder (`gojson::encode`).
//!
//! Both accept the same Rust shapes for the same Go kinds and refuse the same others with the
//! same words, so the checks live here once: integers against the Go width ([`check_int`]),
//! struct fields against the Go struct's declaration ([`GoStructSer`], which hands matched
//! fields to each serializer's [`FieldWriter`]), the serde methods that never differ between
//! the two ([`go_value_methods!`], [`ints_through!`], [`see_through!`], [`impossible!`]), and
//! those a narrow serializer (a map key, a `[]byte` element, a key-order probe) refuses
//! outright ([`reject!`]).

use crate::gotype::{GoField, GoStruct, GoType};
use crate::schema_mismatch::SchemaMismatch;

/// Checks that the integer `v` fits `ty` (an underlying type: `Int`/`Uint` of some width);
/// `what` names the value in the error (`integer`, `map key`).
#[inline]
pub(crate) fn check_int(ty: &GoType, v: i128, what: &str) -> Result<(), SchemaMismatch> {
    match ty {
        GoType::Int(w) if i64::try_from(v).is_ok_and(|x| w.fits_signed(x)) => Ok(()),
        GoType::Uint(w) if u64::try_from(v).is_ok_and(|x| w.fits_unsigned(x)) => Ok(()),
        other => Err(int_mismatch(other, v, what)),
    }
}

#[cold]
fn int_mismatch(ty: &GoType, v: i128, what: &str) -> SchemaMismatch {
    SchemaMismatch(format!("{what} {v} does not fit Go type {ty}"))
}

/// A Go struct's fields, matched one by one against the fields serde hands over: the same
/// JSON names in the same order, no more and no fewer.
struct StructFields {
    go: &'static GoStruct,
    /// How many fields were matched.
    matched: usize,
}

impl StructFields {
    /// The Go field that the serde field `key` is (the next one in declaration order).
    #[inline]
    fn next(&mut self, key: &str) -> Result<&'static GoField, SchemaMismatch> {
        match self.go.fields.get(self.matched) {
            Some(field) if field.json == key => {
                self.matched += 1;
                Ok(field)
            }
            field => Err(self.unexpected(key, field)),
        }
    }

    /// The error for the serde field `key` where the Go struct has `field` (or no more).
    #[cold]
    fn unexpected(&self, key: &str, field: Option<&GoField>) -> SchemaMismatch {
        let go_name = self.go.name;
        SchemaMismatch(match field {
            None => format!("extra field {key} for Go struct {go_name}"),
            Some(field) => format!(
                "field {key} where Go struct {go_name} has {} ({})",
                field.name, field.json
            ),
        })
    }

    /// Checks that every Go field was given.
    #[inline]
    fn finish(&self) -> Result<(), SchemaMismatch> {
        if self.matched != self.go.fields.len() {
            return Err(self.missing());
        }
        Ok(())
    }

    #[cold]
    fn missing(&self) -> SchemaMismatch {
        SchemaMismatch(format!(
            "Go struct {} has {} fields, value gave {}",
            self.go.name,
            self.go.fields.len(),
            self.matched
        ))
    }
}

/// What a Go-typed serializer writes for a struct, once [`GoStructSer`] has matched each
/// serde field with its Go field.
pub(crate) trait FieldWriter {
    /// What the struct serializes to.
    type Ok;

    /// Writes field number `index` (from 0), `field`, with `value`.
    fn field<T: serde::Serialize + ?Sized>(
        &mut self,
        index: usize,
        field: &'static GoField,
        value: &T,
    ) -> Result<(), SchemaMismatch>;

    /// Closes the struct after its last field.
    fn close(self) -> Result<Self::Ok, SchemaMismatch>;
}

/// A struct of a Go struct type, for both Go-typed serializers: matches the serde fields with
/// the Go ones and hands them to `W`.
pub(crate) struct GoStructSer<W> {
    fields: StructFields,
    writer: W,
}

impl<W: FieldWriter> GoStructSer<W> {
    /// A struct of Go type `go` written by `writer` (which has opened it).
    #[inline]
    pub(crate) fn new(go: &'static GoStruct, writer: W) -> Self {
        GoStructSer {
            fields: StructFields { go, matched: 0 },
            writer,
        }
    }
}

impl<W: FieldWriter> serde::ser::SerializeStruct for GoStructSer<W> {
    type Ok = W::Ok;
    type Error = SchemaMismatch;

    #[inline]
    fn serialize_field<T: serde::Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        let index = self.fields.matched;
        let field = self.fields.next(key)?;
        self.writer.field(index, field, value)
    }

    #[inline]
    fn end(self) -> Result<W::Ok, SchemaMismatch> {
        self.fields.finish()?;
        self.writer.close()
    }
}

/// The eight `Serializer` integer methods, each widening its value to an `i128` for
/// `self.$int`, which checks it against the Go type and writes it.
macro_rules! ints_through {
    ($int:ident) => {
        $crate::go_serializer::ints_through!(@each $int
            serialize_i8(i8) serialize_i16(i16) serialize_i32(i32) serialize_i64(i64)
            serialize_u8(u8) serialize_u16(u16) serialize_u32(u32) serialize_u64(u64));
    };
    (@each $int:ident $($method:ident($ty:ty))*) => {
        $(fn $method(self, v: $ty) -> Result<Self::Ok, Self::Error> {
            self.$int(v.into())
        })*
    };
}
pub(crate) use ints_through;

/// `serialize_newtype_struct` and/or `serialize_some`, serializing what they wrap with
/// `self` (a newtype and a non-nil `Option` print as their content).
macro_rules! see_through {
    ($($method:ident)*) => {
        $($crate::go_serializer::see_through!(@one $method);)*
    };
    (@one serialize_newtype_struct) => {
        #[inline]
        fn serialize_newtype_struct<T: serde::Serialize + ?Sized>(
            self,
            _name: &'static str,
            value: &T,
        ) -> Result<Self::Ok, Self::Error> {
            value.serialize(self)
        }
    };
    (@one serialize_some) => {
        #[inline]
        fn serialize_some<T: serde::Serialize + ?Sized>(
            self,
            value: &T,
        ) -> Result<Self::Ok, Self::Error> {
            value.serialize(self)
        }
    };
}
pub(crate) use see_through;

/// `Serializer` associated types (`SerializeTuple SerializeMap …`) that are never produced:
/// `Impossible<$ok, SchemaMismatch>`.
///
/// `impossible!(scalar $ok)` declares a serializer of scalars only: `Ok`, `Error` and every
/// compound type.
macro_rules! impossible {
    (scalar $ok:ty) => {
        type Ok = $ok;
        type Error = $crate::schema_mismatch::SchemaMismatch;
        $crate::go_serializer::impossible!($ok;
            SerializeSeq SerializeTuple SerializeTupleStruct SerializeTupleVariant SerializeMap
            SerializeStruct SerializeStructVariant
        );
    };
    ($ok:ty; $($assoc:ident)*) => {
        $(type $assoc = serde::ser::Impossible<$ok, $crate::schema_mismatch::SchemaMismatch>;)*
    };
}
pub(crate) use impossible;

/// The `Serializer` methods of a Go-typed value serializer that do not depend on the output:
/// every integer through `self.$int(v.into())` (an `i128`), a `char` and a unit variant as a
/// string, a unit struct as the unit, a newtype struct as what it wraps, and the errors for
/// floats, tuples and data-carrying enums, which no Go type matches.
macro_rules! go_value_methods {
    ($int:ident) => {
        $crate::go_serializer::ints_through!($int);
        fn serialize_f32(self, _v: f32) -> Result<Self::Ok, Self::Error> {
            $crate::schema_mismatch::mismatch("floats are not used by kubelet checkpoints")
        }
        fn serialize_f64(self, _v: f64) -> Result<Self::Ok, Self::Error> {
            $crate::schema_mismatch::mismatch("floats are not used by kubelet checkpoints")
        }
        fn serialize_char(self, v: char) -> Result<Self::Ok, Self::Error> {
            self.serialize_str(v.encode_utf8(&mut [0; 4]))
        }
        fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok, Self::Error> {
            self.serialize_unit()
        }
        fn serialize_unit_variant(
            self,
            _name: &'static str,
            _index: u32,
            variant: &'static str,
        ) -> Result<Self::Ok, Self::Error> {
            self.serialize_str(variant)
        }
        $crate::go_serializer::see_through!(serialize_newtype_struct);
        fn serialize_newtype_variant<T: serde::Serialize + ?Sized>(
            self,
            name: &'static str,
            _index: u32,
            _variant: &'static str,
            _value: &T,
        ) -> Result<Self::Ok, Self::Error> {
            $crate::schema_mismatch::mismatch(format!("enum {name} has no Go counterpart"))
        }
        fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Self::Error> {
            $crate::schema_mismatch::mismatch("tuples have no Go counterpart")
        }
        fn serialize_tuple_struct(
            self,
            name: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeTupleStruct, Self::Error> {
            $crate::schema_mismatch::mismatch(format!("tuple struct {name} has no Go counterpart"))
        }
        $crate::go_serializer::go_value_methods!(@enum serialize_tuple_variant SerializeTupleVariant);
        $crate::go_serializer::go_value_methods!(@enum serialize_struct_variant SerializeStructVariant);
    };
    (@enum $method:ident $compound:ident) => {
        fn $method(
            self,
            name: &'static str,
            _index: u32,
            _variant: &'static str,
            _len: usize,
        ) -> Result<Self::$compound, Self::Error> {
            $crate::schema_mismatch::mismatch(format!("enum {name} has no Go counterpart"))
        }
    };
}
pub(crate) use go_value_methods;

/// `Serializer` methods, named in full (`serialize_bool serialize_seq …`), that all return
/// `$refusal` (an expression of type `Result<_, SchemaMismatch>` for any `_`, such as
/// `mismatch("…")`) whatever they are given.
macro_rules! reject {
    ($refusal:expr; $($method:ident)*) => {
        $($crate::go_serializer::reject!(@one $method $refusal);)*
    };
    (@one serialize_bool $r:expr) => {
        fn serialize_bool(self, _: bool) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_i8 $r:expr) => {
        fn serialize_i8(self, _: i8) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_i16 $r:expr) => {
        fn serialize_i16(self, _: i16) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_i32 $r:expr) => {
        fn serialize_i32(self, _: i32) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_i64 $r:expr) => {
        fn serialize_i64(self, _: i64) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_u8 $r:expr) => {
        fn serialize_u8(self, _: u8) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_u16 $r:expr) => {
        fn serialize_u16(self, _: u16) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_u32 $r:expr) => {
        fn serialize_u32(self, _: u32) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_u64 $r:expr) => {
        fn serialize_u64(self, _: u64) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_f32 $r:expr) => {
        fn serialize_f32(self, _: f32) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_f64 $r:expr) => {
        fn serialize_f64(self, _: f64) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_char $r:expr) => {
        fn serialize_char(self, _: char) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_str $r:expr) => {
        fn serialize_str(self, _: &str) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_bytes $r:expr) => {
        fn serialize_bytes(self, _: &[u8]) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_none $r:expr) => {
        fn serialize_none(self) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_some $r:expr) => {
        fn serialize_some<T: serde::Serialize + ?Sized>(
            self,
            _: &T,
        ) -> Result<Self::Ok, Self::Error> {
            $r
        }
    };
    (@one serialize_unit $r:expr) => {
        fn serialize_unit(self) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_unit_struct $r:expr) => {
        fn serialize_unit_struct(self, _: &'static str) -> Result<Self::Ok, Self::Error> { $r }
    };
    (@one serialize_unit_variant $r:expr) => {
        fn serialize_unit_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
        ) -> Result<Self::Ok, Self::Error> {
            $r
        }
    };
    (@one serialize_newtype_variant $r:expr) => {
        fn serialize_newtype_variant<T: serde::Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<Self::Ok, Self::Error> {
            $r
        }
    };
    (@one serialize_seq $r:expr) => {
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Self::Error> { $r }
    };
    (@one serialize_tuple $r:expr) => {
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Self::Error> { $r }
    };
    (@one serialize_tuple_struct $r:expr) => {
        $crate::go_serializer::reject!(@named serialize_tuple_struct SerializeTupleStruct $r);
    };
    (@one serialize_tuple_variant $r:expr) => {
        $crate::go_serializer::reject!(@variant serialize_tuple_variant SerializeTupleVariant $r);
    };
    (@one serialize_map $r:expr) => {
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Self::Error> { $r }
    };
    (@one serialize_struct $r:expr) => {
        $crate::go_serializer::reject!(@named serialize_struct SerializeStruct $r);
    };
    (@one serialize_struct_variant $r:expr) => {
        $crate::go_serializer::reject!(@variant serialize_struct_variant SerializeStructVariant $r);
    };
    (@named $method:ident $compound:ident $r:expr) => {
        fn $method(self, _: &'static str, _: usize) -> Result<Self::$compound, Self::Error> {
            $r
        }
    };
    (@variant $method:ident $compound:ident $r:expr) => {
        fn $method(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::$compound, Self::Error> {
            $r
        }
    };
}
pub(crate) use reject;
