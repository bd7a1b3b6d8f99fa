//! Go structs: a JSON object of the fields under their JSON names, in declaration order,
//! `omitempty` fields left out when empty.

use serde::Serialize;

use super::{Encoder, ValueEnc};
use crate::go_serializer::{FieldWriter, GoStructSer};
use crate::gojson::escape::push_quoted;
use crate::gotype::{GoField, GoStruct};
use crate::schema_mismatch::SchemaMismatch;

/// A struct being encoded.
pub(super) type StructEnc<'a> = GoStructSer<FieldEncoder<'a>>;

/// Starts a struct of Go type `go`.
#[inline]
pub(super) fn start<'a>(e: &'a mut Encoder, go: &'static GoStruct) -> StructEnc<'a> {
    e.out.push('{');
    GoStructSer::new(go, FieldEncoder { e, written: 0 })
}

/// A JSON object's members from a Go struct's fields.
pub(super) struct FieldEncoder<'a> {
    e: &'a mut Encoder,
    /// How many fields were written (not left out by `omitempty`).
    written: usize,
}

impl FieldWriter for FieldEncoder<'_> {
    type Ok = bool;

    #[inline]
    fn field<T: Serialize + ?Sized>(
        &mut self,
        _index: usize,
        field: &'static GoField,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
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

    #[inline]
    fn close(self) -> Result<bool, SchemaMismatch> {
        self.e.out.push('}');
        Ok(false)
    }
}
