//! Turning a decoded [`GoValue`] into a typed Rust value with serde: a
//! [`Deserializer`](serde::Deserializer) that walks the value and its [`GoType`] together
//! (struct fields come out under their JSON names, nil as `None`).

use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;

use super::value::{GoValue, MapKey};
use crate::gotype::{GoField, GoType};
use crate::schema_mismatch::SchemaMismatch;

/// Builds a `T` from `value` described by `ty`.
pub(crate) fn from_value<T: DeserializeOwned>(
    value: GoValue,
    ty: &'static GoType,
) -> Result<T, SchemaMismatch> {
    T::deserialize(ValueDe { value, ty })
}

struct ValueDe {
    value: GoValue,
    ty: &'static GoType,
}

impl<'de> de::Deserializer<'de> for ValueDe {
    type Error = SchemaMismatch;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, SchemaMismatch> {
        let ty = match self.ty {
            GoType::Ptr(elem) => elem,
            ty => ty,
        };
        match (self.value, ty.underlying()) {
            (GoValue::Nil, _) => visitor.visit_none(),
            (GoValue::Bool(b), _) => visitor.visit_bool(b),
            (GoValue::Int(n), _) => visitor.visit_i64(n),
            (GoValue::Uint(n), _) => visitor.visit_u64(n),
            (GoValue::Str(s), _) => visitor.visit_string(s),
            (GoValue::Bytes(b), _) => {
                visitor.visit_seq(de::value::SeqDeserializer::new(b.into_iter()))
            }
            (GoValue::Slice(items), GoType::Slice(elem)) => visitor.visit_seq(SeqDe {
                items: items.into_iter(),
                elem,
            }),
            (GoValue::Map(map), GoType::Map(_, value_ty)) => visitor.visit_map(MapDe {
                entries: map.into_iter(),
                value_ty,
                pending: None,
            }),
            (GoValue::Struct(fields), GoType::Struct(s)) => visitor.visit_map(StructDe {
                fields: fields.into_iter().zip(s.fields.iter()),
                pending: None,
            }),
            (value, ty) => Err(SchemaMismatch(format!(
                "decoded {value:?} does not fit Go type {ty}"
            ))),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, SchemaMismatch> {
        match self.value {
            GoValue::Nil => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, SchemaMismatch> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct SeqDe {
    items: std::vec::IntoIter<GoValue>,
    elem: &'static GoType,
}

impl<'de> de::SeqAccess<'de> for SeqDe {
    type Error = SchemaMismatch;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, SchemaMismatch> {
        match self.items.next() {
            Some(value) => seed
                .deserialize(ValueDe {
                    value,
                    ty: self.elem,
                })
                .map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapDe {
    entries: std::collections::btree_map::IntoIter<MapKey, GoValue>,
    value_ty: &'static GoType,
    pending: Option<GoValue>,
}

impl<'de> de::MapAccess<'de> for MapDe {
    type Error = SchemaMismatch;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, SchemaMismatch> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.pending = Some(value);
        match key {
            MapKey::Str(s) => seed.deserialize(s.into_deserializer()).map(Some),
            MapKey::Int(n) => seed.deserialize(n.into_deserializer()).map(Some),
            MapKey::Uint(n) => seed.deserialize(n.into_deserializer()).map(Some),
        }
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, SchemaMismatch> {
        let value = self.pending.take().unwrap_or(GoValue::Nil);
        seed.deserialize(ValueDe {
            value,
            ty: self.value_ty,
        })
    }
}

struct StructDe {
    fields: std::iter::Zip<std::vec::IntoIter<GoValue>, std::slice::Iter<'static, GoField>>,
    pending: Option<(GoValue, &'static GoType)>,
}

impl<'de> de::MapAccess<'de> for StructDe {
    type Error = SchemaMismatch;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, SchemaMismatch> {
        let Some((value, field)) = self.fields.next() else {
            return Ok(None);
        };
        self.pending = Some((value, field.ty));
        seed.deserialize(de::value::BorrowedStrDeserializer::new(field.json))
            .map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, SchemaMismatch> {
        let (value, ty) = self
            .pending
            .take()
            .unwrap_or((GoValue::Nil, &crate::gotype::STRING));
        seed.deserialize(ValueDe { value, ty })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;
    use crate::gotype::{BYTES, GoStruct, INT64, STRING, STRING_SLICE};

    static PER_NUMA: GoType = GoType::Map(&INT64, &STRING_SLICE);
    static T: GoType = GoType::Struct(&GoStruct {
        name: "x.T",
        fields: &[
            GoField::plain("Name", &STRING),
            GoField::plain("Numa", &PER_NUMA),
            GoField::plain("Bytes", &BYTES),
        ],
    });

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct V {
        #[serde(rename = "Name")]
        name: String,
        #[serde(rename = "Numa")]
        numa: Option<BTreeMap<i64, Option<Vec<String>>>>,
        #[serde(rename = "Bytes")]
        bytes: Option<Vec<u8>>,
    }

    #[test]
    fn builds_typed_values() {
        let value = GoValue::Struct(vec![
            GoValue::Str("n".into()),
            GoValue::Map(BTreeMap::from([
                (MapKey::Int(-1), GoValue::Nil),
                (
                    MapKey::Int(2),
                    GoValue::Slice(vec![GoValue::Str("d".into())]),
                ),
            ])),
            GoValue::Bytes(vec![1, 2]),
        ]);
        let v: V = from_value(value, &T).unwrap();
        assert_eq!(
            v,
            V {
                name: "n".into(),
                numa: Some(BTreeMap::from([(-1, None), (2, Some(vec!["d".into()]))])),
                bytes: Some(vec![1, 2]),
            }
        );
    }
}
