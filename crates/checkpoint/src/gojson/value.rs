//! A dynamic Go value: what `encoding/json` decodes into, before it becomes a typed Rust
//! value. Keeping the intermediate dynamic lets the decoder start from a constructor's
//! value (the kubelet decodes into `make(map…)`-initialised structs) and merge into it the
//! way Go does.

use std::collections::BTreeMap;

use crate::gotype::GoType;

/// A map key of a Go map (string or integer kinds).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MapKey {
    Str(String),
    Int(i64),
    Uint(u64),
}

/// A Go value. A non-nil pointer is represented by its pointee.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GoValue {
    /// A nil pointer, map or slice.
    Nil,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Str(String),
    /// A non-nil `[]byte`.
    Bytes(Vec<u8>),
    /// A non-nil slice.
    Slice(Vec<GoValue>),
    /// A non-nil map.
    Map(BTreeMap<MapKey, GoValue>),
    /// A struct's fields in declaration order.
    Struct(Vec<GoValue>),
}

impl GoValue {
    /// Go's zero value of `ty`.
    pub(crate) fn zero(ty: &GoType) -> GoValue {
        match ty.underlying() {
            GoType::Bool => GoValue::Bool(false),
            GoType::Int(_) => GoValue::Int(0),
            GoType::Uint(_) => GoValue::Uint(0),
            GoType::String => GoValue::Str(String::new()),
            GoType::Slice(_) | GoType::Map(..) | GoType::Ptr(_) => GoValue::Nil,
            GoType::Struct(s) => {
                GoValue::Struct(s.fields.iter().map(|f| GoValue::zero(f.ty)).collect())
            }
            GoType::Named(..) => GoValue::Nil,
        }
    }

    /// An empty, non-nil value of a slice or map type (`make(…)`, `[]T{}`), else the zero
    /// value.
    pub(crate) fn empty(ty: &GoType) -> GoValue {
        match ty.underlying() {
            GoType::Slice(_) if ty.is_bytes() => GoValue::Bytes(Vec::new()),
            GoType::Slice(_) => GoValue::Slice(Vec::new()),
            GoType::Map(..) => GoValue::Map(BTreeMap::new()),
            _ => GoValue::zero(ty),
        }
    }

    /// Field `index` of a struct value.
    pub(crate) fn field(&self, index: usize) -> Option<&GoValue> {
        match self {
            GoValue::Struct(fields) => fields.get(index),
            _ => None,
        }
    }

    /// Field `index` of a struct value, mutably.
    pub(crate) fn field_mut(&mut self, index: usize) -> Option<&mut GoValue> {
        match self {
            GoValue::Struct(fields) => fields.get_mut(index),
            _ => None,
        }
    }

    /// Takes field `index` out of a struct value, leaving nil.
    pub(crate) fn take_field(&mut self, index: usize) -> GoValue {
        self.field_mut(index)
            .map(|f| std::mem::replace(f, GoValue::Nil))
            .unwrap_or(GoValue::Nil)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gotype::{BYTES, CHECKSUM, MAP_STRING_STRINGS, STRING};

    #[test]
    fn zero_and_empty() {
        assert_eq!(GoValue::zero(&CHECKSUM), GoValue::Uint(0));
        assert_eq!(GoValue::zero(&STRING), GoValue::Str(String::new()));
        assert_eq!(GoValue::zero(&MAP_STRING_STRINGS), GoValue::Nil);
        assert_eq!(
            GoValue::empty(&MAP_STRING_STRINGS),
            GoValue::Map(BTreeMap::new())
        );
        assert_eq!(GoValue::empty(&BYTES), GoValue::Bytes(vec![]));
    }
}
