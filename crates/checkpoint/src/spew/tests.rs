//! Unit tests of the spew dumper: pointers, nil values, headers of every integer width, schema errors.

use std::collections::BTreeMap;

use serde::Serialize;

use super::*;
use crate::gotype::{GoField, GoStruct, INT, IntWidth, STRING, UINT64};

static TABLE: GoType = GoType::Struct(&GoStruct {
    name: "state.T",
    fields: &[GoField::tagged("Size", "size", &UINT64)],
});
static NODE_MAP: GoType = GoType::Named("state.M", &GoType::Map(&INT, &GoType::Ptr(&TABLE)));
static OUTER: GoType = GoType::Struct(&GoStruct {
    name: "state.Outer",
    fields: &[
        GoField::tagged("Nodes", "nodes", &NODE_MAP),
        GoField::tagged("Name", "name", &STRING),
    ],
});

#[derive(Serialize)]
struct Table {
    size: u64,
}

#[derive(Serialize)]
struct Outer {
    nodes: Option<BTreeMap<i64, Option<Table>>>,
    name: String,
}

#[test]
fn pointer_values_print_as_angle_star() {
    let v = Outer {
        nodes: Some(BTreeMap::from([(2, Some(Table { size: 5 }))])),
        name: "x".into(),
    };
    assert_eq!(
        dump_for_hash(&v, &OUTER).unwrap(),
        "(state.Outer){Nodes:(state.M)map[2:<*>{Size:(uint64)5}] Name:(string)x}"
    );
}

#[test]
fn trailing_nil_pointer_leaks_ignore_next_type() {
    let v = Outer {
        nodes: Some(BTreeMap::from([(10, None), (1, Some(Table { size: 0 }))])),
        name: "x".into(),
    };
    // Sorted numerically: 1 then 10; 10 is a nil pointer, so `Name` loses its type.
    assert_eq!(
        dump_for_hash(&v, &OUTER).unwrap(),
        "(state.Outer){Nodes:(state.M)map[1:<*>{Size:(uint64)0} 10:<nil>] Name:x}"
    );
}

#[test]
fn top_level_pointer_and_nil_map() {
    static PTR: GoType = GoType::Ptr(&OUTER);
    let v = Outer {
        nodes: None,
        name: String::new(),
    };
    assert_eq!(
        dump_for_hash(&v, &PTR).unwrap(),
        "(*state.Outer){Nodes:(state.M)<nil> Name:(string)}"
    );
}

#[test]
fn wrong_field_names_are_schema_errors() {
    #[derive(Serialize)]
    struct Wrong {
        sizes: u64,
    }
    let err = dump_for_hash(&Wrong { sizes: 1 }, &TABLE).unwrap_err();
    assert!(err.to_string().contains("sizes"), "{err}");
}

#[test]
fn integer_headers_name_every_width() {
    for w in [
        IntWidth::Native,
        IntWidth::W8,
        IntWidth::W16,
        IntWidth::W32,
        IntWidth::W64,
    ] {
        for ty in [GoType::Int(w), GoType::Uint(w)] {
            let ty: &'static GoType = Box::leak(Box::new(ty));
            let mut out = String::new();
            Dumper::new(&mut out).header(ty);
            assert_eq!(out, format!("({})", ty.name()));
        }
    }
}
