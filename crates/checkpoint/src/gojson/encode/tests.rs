//! Unit tests of the Go-JSON encoder: `json.Marshal` output like Go's, nil and empty values kept apart.

use std::collections::BTreeMap;

use serde::Serialize;

use super::*;
use crate::gotype::{BYTES, GoField, GoStruct, INT64, MAP_STRING_STRINGS, STRING, STRING_SLICE};

static PER_NUMA: GoType = GoType::Map(&INT64, &STRING_SLICE);
static T: GoType = GoType::Struct(&GoStruct {
    name: "x.T",
    fields: &[
        GoField::tagged("Name", "name", &STRING),
        GoField::omitempty("Skip", "skip", &MAP_STRING_STRINGS),
        GoField::plain("Numa", &PER_NUMA),
        GoField::plain("Bytes", &BYTES),
    ],
});

#[derive(Serialize)]
struct V {
    name: String,
    skip: Option<BTreeMap<String, Vec<String>>>,
    #[serde(rename = "Numa")]
    numa: BTreeMap<i64, Option<Vec<String>>>,
    #[serde(rename = "Bytes")]
    bytes: Option<Vec<u8>>,
}

#[test]
fn marshals_like_go() {
    let v = V {
        name: "<a>".into(),
        skip: Some(BTreeMap::new()),
        numa: BTreeMap::from([(2, None), (10, Some(vec!["d".into()])), (-1, Some(vec![]))]),
        bytes: Some(vec![1, 2, 3]),
    };
    assert_eq!(
        to_string(&v, &T).unwrap(),
        r#"{"name":"\u003ca\u003e","Numa":{"-1":[],"10":["d"],"2":null},"Bytes":"AQID"}"#
    );
}

#[test]
fn nil_bytes_and_kept_empty_fields() {
    let v = V {
        name: String::new(),
        skip: None,
        numa: BTreeMap::new(),
        bytes: None,
    };
    assert_eq!(
        to_string(&v, &T).unwrap(),
        r#"{"name":"","Numa":{},"Bytes":null}"#
    );
}
