//! Whether a map can be printed as it comes: go-spew sorts map keys (strings byte-wise,
//! integers numerically), and a map whose keys already arrive in that order (a `BTreeMap`
//! with Go-ordered keys, the usual case) streams straight out; any other takes `map`'s
//! sorting path.

use serde::Serialize;
use serde::ser;

use super::Dumper;
use crate::go_serializer::{impossible, reject, see_through};
use crate::gotype::GoType;
use crate::map_order::{KeyOrder, compare_keys};
use crate::schema_mismatch::SchemaMismatch;

/// The key type and order of the map a value of type `ty` prints as (through names and a
/// pointer), if it is one.
pub(super) fn map_key_order(ty: &'static GoType) -> Option<(&'static GoType, KeyOrder)> {
    let mut ty = ty;
    loop {
        match ty {
            GoType::Named(_, inner) | GoType::Ptr(inner) => ty = inner,
            GoType::Map(key, _) => return Some((key, KeyOrder::of_key(key))),
            _ => return None,
        }
    }
}

/// Checks whether a map's keys arrive in go-spew's order: renders each key into a scratch
/// buffer and compares it with the one before. Any other value, or an error, is `false`.
pub(super) struct KeyProbe {
    key_ty: &'static GoType,
    order: KeyOrder,
    prev: String,
    cur: String,
    count: usize,
}

impl KeyProbe {
    /// A probe that renders keys into the scratch buffers `prev` and `cur`.
    #[inline]
    pub(super) fn new(key_ty: &'static GoType, order: KeyOrder, prev: String, cur: String) -> Self {
        KeyProbe {
            key_ty,
            order,
            prev,
            cur,
            count: 0,
        }
    }

    /// The scratch buffers, for the next probe.
    #[inline]
    pub(super) fn into_scratch(self) -> [String; 2] {
        [self.prev, self.cur]
    }
}

/// Why a probe stopped early (out of order, or not a map); never reported.
fn stop<T>() -> Result<T, SchemaMismatch> {
    Err(SchemaMismatch(String::new()))
}

impl<'p> ser::Serializer for &'p mut KeyProbe {
    type Ok = bool;
    type Error = SchemaMismatch;
    type SerializeMap = &'p mut KeyProbe;
    impossible!(bool;
        SerializeSeq SerializeTuple SerializeTupleStruct SerializeTupleVariant SerializeStruct
        SerializeStructVariant
    );

    reject!(stop();
        serialize_bool serialize_i8 serialize_i16 serialize_i32 serialize_i64
        serialize_u8 serialize_u16 serialize_u32 serialize_u64 serialize_f32 serialize_f64
        serialize_char serialize_str serialize_bytes serialize_unit serialize_unit_struct
        serialize_unit_variant serialize_newtype_variant serialize_seq serialize_tuple
        serialize_tuple_struct serialize_tuple_variant serialize_struct serialize_struct_variant
    );

    #[inline]
    fn serialize_none(self) -> Result<bool, SchemaMismatch> {
        Ok(true)
    }

    see_through!(serialize_some serialize_newtype_struct);

    #[inline]
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, SchemaMismatch> {
        Ok(self)
    }

    /// Only the keys matter; the loop compiles with the probe rather than behind a call.
    #[inline]
    fn collect_map<K, V, I>(mut self, iter: I) -> Result<bool, SchemaMismatch>
    where
        K: Serialize,
        V: Serialize,
        I: IntoIterator<Item = (K, V)>,
    {
        for (key, _) in iter {
            ser::SerializeMap::serialize_key(&mut self, &key)?;
        }
        Ok(true)
    }
}

impl ser::SerializeMap for &mut KeyProbe {
    type Ok = bool;
    type Error = SchemaMismatch;

    #[inline]
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), SchemaMismatch> {
        self.cur.clear();
        Dumper::untyped(&mut self.cur).value(key, self.key_ty)?;
        if self.count > 0 && compare_keys(self.order, &self.prev, &self.cur).is_gt() {
            return stop();
        }
        self.count += 1;
        std::mem::swap(&mut self.prev, &mut self.cur);
        Ok(())
    }

    #[inline]
    fn serialize_value<T: Serialize + ?Sized>(&mut self, _value: &T) -> Result<(), SchemaMismatch> {
        Ok(())
    }

    #[inline]
    fn end(self) -> Result<bool, SchemaMismatch> {
        Ok(true)
    }
}
