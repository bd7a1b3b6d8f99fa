//! [`object_keys_in_order`]: the top-level keys of a JSON object line in the order they are
//! written (a log line's field order is part of its format; `serde_json` maps sort keys).

/// The top-level keys of the JSON object `line`, in the order they appear in the text.
///
/// Panics (with the line) when `line` is not a JSON object: this is for tests.
///
/// ```
/// let keys = corral_testkit::object_keys_in_order(r#"{"ts":1,"msg":"hi","v":0}"#);
/// assert_eq!(keys, ["ts", "msg", "v"]);
/// ```
pub fn object_keys_in_order(line: &str) -> Vec<String> {
    let doc: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|err| panic!("{line:?}: {err}"));
    let object = doc
        .as_object()
        .unwrap_or_else(|| panic!("not a JSON object: {line:?}"));
    let mut keys: Vec<(usize, String)> = object
        .keys()
        .map(|key| {
            let quoted = format!("{}:", serde_json::Value::from(key.as_str()));
            (line.find(&quoted).expect("a key of the line"), key.clone())
        })
        .collect();
    keys.sort();
    keys.into_iter().map(|(_, key)| key).collect()
}

/// The keys that appear more than once in one object of the JSON text `line`, at any depth
/// (`"a"` for `{"a":1,"a":2}`, `"b"` for `{"x":{"b":1,"b":2}}`), each once, in the order
/// their repeats are met. `serde_json::Value` keeps only the last of repeated keys, so it
/// cannot tell; this walks the text with a visitor that sees every key.
///
/// Panics (with the line) when `line` is not JSON: this is for tests.
///
/// ```
/// use corral_testkit::repeated_keys;
///
/// assert!(repeated_keys(r#"{"ts":1,"msg":"hi","pod":{"name":"a","namespace":"b"}}"#).is_empty());
/// assert_eq!(repeated_keys(r#"{"pod":"a","v":0,"pod":"b"}"#), ["pod"]);
/// assert_eq!(repeated_keys(r#"{"x":[{"b":1,"b":2}]}"#), ["b"]);
/// ```
pub fn repeated_keys(line: &str) -> Vec<String> {
    use serde::de::Deserializer as _;
    let mut repeated = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_str(line);
    deserializer
        .deserialize_any(KeyWalker {
            repeated: &mut repeated,
        })
        .and_then(|()| deserializer.end())
        .unwrap_or_else(|err| panic!("{line:?}: {err}"));
    repeated
}

/// A visitor over any JSON value noting, in each object, keys met before.
struct KeyWalker<'a> {
    repeated: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for KeyWalker<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for KeyWalker<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(KeyWalker {
                repeated: &mut *self.repeated,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) && !self.repeated.contains(&key) {
                self.repeated.push(key);
            }
            map.next_value_seed(KeyWalker {
                repeated: &mut *self.repeated,
            })?;
        }
        Ok(())
    }
}
