//! `sets.Set[string]` (a `map[string]struct{}`) as a Rust `BTreeSet<String>`: serde helpers
//! for `Option<BTreeSet<String>>` fields (`None` is a nil set).

use std::collections::{BTreeMap, BTreeSet};

use serde::de::IgnoredAny;
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Go's `struct{}` value.
struct Empty;

impl Serialize for Empty {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_struct("Empty", 0)?.end()
    }
}

struct AsMap<'a>(&'a BTreeSet<String>);

impl Serialize for AsMap<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for key in self.0 {
            map.serialize_entry(key, &Empty)?;
        }
        map.end()
    }
}

/// Serializes a set as a map of its members to `{}` (nil for `None`).
pub(crate) fn serialize<S: Serializer>(
    set: &Option<BTreeSet<String>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match set {
        Some(set) => serializer.serialize_some(&AsMap(set)),
        None => serializer.serialize_none(),
    }
}

/// Deserializes a map of members (values ignored) into a set.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<BTreeSet<String>>, D::Error> {
    let map: Option<BTreeMap<String, IgnoredAny>> = Option::deserialize(deserializer)?;
    Ok(map.map(|m| m.into_keys().collect()))
}
