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
