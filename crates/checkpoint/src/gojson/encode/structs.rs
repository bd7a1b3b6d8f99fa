//! Go structs: a JSON object of the fields under their JSON names, in declaration order,
//! `omitempty` fields left out when empty.

use serde::Serialize;
use serde::ser;

use super::{Encoder, ValueEnc};
use crate::go_serializer::StructFields;
use crate::gojson::escape::push_quoted;
use crate::gotype::GoStruct;
use crate::schema_mismatch::SchemaMismatch;

/// A JSON object from a Go struct.
pub(super) struct StructEnc<'a> {
    e: &'a mut Encoder,
    fields: StructFields,
    /// How many fields were written (not left out by `omitempty`).
    written: usize,
}

impl<'a> StructEnc<'a> {
    /// Starts a struct of Go type `go`.
    #[inline]
    pub(super) fn start(e: &'a mut Encoder, go: &'static GoStruct) -> Self {
        e.out.push('{');
        StructEnc {
            e,
            fields: StructFields::new(go),
            written: 0,
        }
    }
}

impl ser::SerializeStruct for StructEnc<'_> {
    type Ok = bool;
    type Error = SchemaMismatch;

    #[inline]
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        let field = self.fields.next(key)?;
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
    fn end(self) -> Result<bool, SchemaMismatch> {
        self.fields.finish()?;
        self.e.out.push('}');
        Ok(false)
    }
}
