//! The go-spew dump streams front to back, so a map whose entries do not arrive in Go's
//! order (anything but a `BTreeMap` with Go-ordered keys) is printed through a separate
//! sorting path. These properties feed maps in arbitrary orders — `HashMap`s and reversed
//! `BTreeMap`s, nested, with nil pointers whose "ignore next type" flag leaks past the map —
//! and check the text equals the sorted map's, and the streamed checksum equals the hash of
//! the text.

use std::collections::{BTreeMap, HashMap};

use corral_checkpoint::gotype::{INT64, STRING, STRING_SLICE, UINT64};
use corral_checkpoint::{GoField, GoStruct, GoType, dump_for_hash, fnv32a, kubelet_checksum};
use proptest::prelude::*;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

static TABLE: GoType = GoType::Struct(&GoStruct {
    name: "state.Table",
    fields: &[GoField::tagged("Size", "size", &UINT64)],
});
static TABLES: GoType = GoType::Named("state.Tables", &GoType::Map(&INT64, &GoType::Ptr(&TABLE)));
static NAMES: GoType = GoType::Map(&STRING, &STRING_SLICE);
static BY_POD: GoType = GoType::Map(&STRING, &NAMES);
static OUTER: GoType = GoType::Struct(&GoStruct {
    name: "state.Outer",
    fields: &[
        GoField::tagged("Tables", "tables", &TABLES),
        GoField::tagged("Pods", "pods", &BY_POD),
        GoField::tagged("Name", "name", &STRING),
    ],
});
static OUTER_PTR: GoType = GoType::Ptr(&OUTER);

#[derive(Serialize)]
struct Table {
    size: u64,
}

/// A map serialized in reverse key order.
struct Reversed<'a, K, V>(&'a BTreeMap<K, V>);

impl<K: Serialize, V: Serialize> Serialize for Reversed<'_, K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0.iter().rev() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct Outer<T, P> {
    tables: Option<T>,
    pods: Option<P>,
    name: String,
}

type Tables = BTreeMap<i64, Option<u64>>;
type Names = BTreeMap<String, Option<Vec<String>>>;
type Pods = BTreeMap<String, Names>;
type ReversedPods<'a> = BTreeMap<&'a String, Reversed<'a, String, Option<Vec<String>>>>;

fn tables(t: &Tables) -> BTreeMap<i64, Option<Table>> {
    t.iter()
        .map(|(k, v)| (*k, v.map(|size| Table { size })))
        .collect()
}

fn check<T: Serialize, P: Serialize>(
    value: &Outer<T, P>,
    expected: &str,
) -> Result<(), TestCaseError> {
    let text = dump_for_hash(value, &OUTER_PTR).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&text, expected);
    let checksum =
        kubelet_checksum(value, &OUTER_PTR).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(checksum, u64::from(fnv32a(text.as_bytes())));
    Ok(())
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof!["[a-c]{0,3}", "[0-9]{1,3}", Just("é".to_owned())]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn any_entry_order_prints_sorted(
        t in prop::option::of(prop::collection::btree_map(
            prop_oneof![-20i64..20, any::<i64>()],
            prop::option::of(any::<u64>()),
            0..6,
        )),
        p in prop::option::of(prop::collection::btree_map(
            key(),
            prop::collection::btree_map(key(), prop::option::of(prop::collection::vec(key(), 0..3)), 0..4),
            0..4,
        )),
        name in key(),
    ) {
        let sorted = Outer { tables: t.as_ref().map(tables), pods: p.clone(), name: name.clone() };
        let expected = dump_for_hash(&sorted, &OUTER_PTR).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check(&sorted, &expected)?;

        let hashed = Outer {
            tables: t.as_ref().map(|t| tables(t).into_iter().collect::<HashMap<_, _>>()),
            pods: p.as_ref().map(|p| {
                p.iter()
                    .map(|(k, v)| (k.clone(), v.clone().into_iter().collect::<HashMap<_, _>>()))
                    .collect::<HashMap<_, _>>()
            }),
            name: name.clone(),
        };
        check(&hashed, &expected)?;

        let reversed_tables = t.as_ref().map(tables);
        let reversed_pods: Option<ReversedPods<'_>> =
            p.as_ref().map(|p| p.iter().map(|(k, v)| (k, Reversed(v))).collect());
        let reversed = Outer {
            tables: reversed_tables.as_ref().map(Reversed),
            pods: reversed_pods.as_ref().map(Reversed),
            name,
        };
        check(&reversed, &expected)?;
    }
}

#[test]
fn nil_pointer_last_in_go_order_leaks_its_flag() {
    // Arrives as 10 (nil), 9, -1; Go prints -1, 9, 10: the nil pointer is last, so `Pods`
    // loses its type header.
    let t: Tables = BTreeMap::from([(10, None), (9, Some(1)), (-1, Some(2))]);
    let t = tables(&t);
    let v = Outer {
        tables: Some(Reversed(&t)),
        pods: Some(Pods::new()),
        name: "x".into(),
    };
    let expected = "(*state.Outer){Tables:(state.Tables)map[-1:<*>{Size:(uint64)2} \
                    9:<*>{Size:(uint64)1} 10:<nil>] Pods:map[] Name:(string)x}";
    assert_eq!(dump_for_hash(&v, &OUTER_PTR).unwrap(), expected);
    assert_eq!(
        kubelet_checksum(&v, &OUTER_PTR).unwrap(),
        u64::from(fnv32a(expected.as_bytes()))
    );
}
