//! Structs: `{Name:(type)value Other:(type)value}`; field types always print unless a
//! leaked "ignore next type" flag suppresses them.

use serde::Serialize;

use super::Dumper;
use crate::dump_sink::DumpSink;
use crate::go_serializer::{FieldWriter, GoStructSer};
use crate::gotype::{GoField, GoStruct};
use crate::schema_mismatch::SchemaMismatch;

/// A struct being printed.
pub(super) type StructSer<'a, 's, S> = GoStructSer<FieldPrinter<'a, 's, S>>;

/// Starts a struct of Go type `go` (its header is written).
#[inline]
pub(super) fn start<'a, 's, S: DumpSink>(
    d: &'a mut Dumper<'s, S>,
    go: &'static GoStruct,
) -> StructSer<'a, 's, S> {
    d.out.push_byte(b'{');
    GoStructSer::new(go, FieldPrinter { d })
}

/// Struct fields: `Name:(type)value`, space separated.
pub(super) struct FieldPrinter<'a, 's, S> {
    d: &'a mut Dumper<'s, S>,
}

impl<S: DumpSink> FieldWriter for FieldPrinter<'_, '_, S> {
    type Ok = ();

    #[inline]
    fn field<T: Serialize + ?Sized>(
        &mut self,
        index: usize,
        field: &'static GoField,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        if index > 0 {
            self.d.out.push_byte(b' ');
        }
        self.d.out.push_str(field.name);
        self.d.out.push_byte(b':');
        self.d.value(value, field.ty)
    }

    #[inline]
    fn close(self) -> Result<(), SchemaMismatch> {
        self.d.out.push_byte(b'}');
        Ok(())
    }
}
