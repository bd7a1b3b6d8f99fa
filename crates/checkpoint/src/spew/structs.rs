//! Structs: `{Name:(type)value Other:(type)value}`; field types always print unless a
//! leaked "ignore next type" flag suppresses them.

use serde::Serialize;
use serde::ser;

use super::Dumper;
use crate::dump_sink::DumpSink;
use crate::go_serializer::StructFields;
use crate::gotype::GoStruct;
use crate::schema_mismatch::SchemaMismatch;

/// Struct fields: `Name:(type)value`, space separated.
pub(super) struct StructSer<'a, 's, S> {
    d: &'a mut Dumper<'s, S>,
    fields: StructFields,
}

impl<'a, 's, S: DumpSink> StructSer<'a, 's, S> {
    /// Starts a struct of Go type `go` (its header is written).
    #[inline]
    pub(super) fn start(d: &'a mut Dumper<'s, S>, go: &'static GoStruct) -> Self {
        d.out.push_byte(b'{');
        StructSer {
            d,
            fields: StructFields::new(go),
        }
    }
}

impl<S: DumpSink> ser::SerializeStruct for StructSer<'_, '_, S> {
    type Ok = ();
    type Error = SchemaMismatch;

    #[inline]
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), SchemaMismatch> {
        let field = self.fields.next(key)?;
        if !self.fields.at_first() {
            self.d.out.push_byte(b' ');
        }
        self.d.out.push_str(field.name);
        self.d.out.push_byte(b':');
        self.d.value(value, field.ty)
    }

    #[inline]
    fn end(self) -> Result<(), SchemaMismatch> {
        self.fields.finish()?;
        self.d.out.push_byte(b'}');
        Ok(())
    }
}
