//! Go slices: a JSON array, or a `[]byte` as a padded base64 string.

use serde::Serialize;
use serde::ser;

use super::{Behind, Encoder, ValueEnc};
use crate::go_serializer::{impossible, reject, see_through};
use crate::gotype::GoType;
use crate::schema_mismatch::{SchemaMismatch, mismatch};

/// Writes `bytes` as a quoted base64 string.
pub(super) fn push_base64(out: &mut String, bytes: &[u8]) {
    out.push('"');
    crate::gojson::base64::encode_into(out, bytes);
    out.push('"');
}

/// A JSON array, or a `[]byte` collected for base64.
pub(super) struct SeqEnc<'a> {
    e: &'a mut Encoder,
    elem: &'static GoType,
    count: usize,
    bytes: Option<Vec<u8>>,
    behind: Behind,
}

impl<'a> SeqEnc<'a> {
    /// Starts a slice of `elem`; a `[]byte` (`is_bytes`) is collected and written at the end.
    #[inline]
    pub(super) fn start(
        e: &'a mut Encoder,
        elem: &'static GoType,
        is_bytes: bool,
        behind: Behind,
    ) -> Self {
        let bytes = is_bytes.then(Vec::new);
        if bytes.is_none() {
            e.out.push('[');
        }
        SeqEnc {
            e,
            elem,
            count: 0,
            bytes,
            behind,
        }
    }
}

impl ser::SerializeSeq for SeqEnc<'_> {
    type Ok = bool;
    type Error = SchemaMismatch;

    #[inline]
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

    #[inline]
    fn end(self) -> Result<bool, SchemaMismatch> {
        match self.bytes {
            Some(bytes) => push_base64(&mut self.e.out, &bytes),
            None => self.e.out.push(']'),
        }
        Ok(self.behind.empty_if(self.count == 0))
    }
}

/// Takes one `u8` out of a `[]byte` element.
struct ByteCapture;

impl ser::Serializer for ByteCapture {
    impossible!(scalar u8);

    #[inline]
    fn serialize_u8(self, v: u8) -> Result<u8, SchemaMismatch> {
        Ok(v)
    }

    see_through!(serialize_newtype_struct);

    reject!(mismatch("[]byte element must be u8");
        serialize_bool serialize_i8 serialize_i16 serialize_i32 serialize_i64
        serialize_u16 serialize_u32 serialize_u64 serialize_f32 serialize_f64
        serialize_char serialize_str serialize_bytes serialize_none serialize_some
        serialize_unit serialize_unit_struct serialize_unit_variant serialize_newtype_variant
        serialize_seq serialize_tuple serialize_tuple_struct serialize_tuple_variant
        serialize_map serialize_struct serialize_struct_variant
    );
}
