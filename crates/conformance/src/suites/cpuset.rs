//! Suite `cpuset`: `k8s.io/utils/cpuset` Parse/String and set operations against
//! `corral_topology::CpuSet`.

use corral_topology::CpuSet;
use serde_json::Value;

use super::{array, check_each, list_of};
use crate::mismatch::{Mismatch, differs};
use crate::report::SuiteOutcome;

/// Check every case of one `cpuset` vector file.
pub(crate) fn run(doc: &Value, out: &mut SuiteOutcome) {
    for (i, case) in array(doc, "parse_cases").iter().enumerate() {
        let input = case["input"].as_str().unwrap_or_default();
        out.check(
            format!("parse_cases[{i}] {input:?}"),
            check_parse(case, input),
        );
    }
    check_each(doc, "set_ops", out, check_ops);
}

fn list(value: &Value) -> Result<Vec<usize>, Mismatch> {
    list_of(value, "CPU id", |v| {
        v.as_u64().and_then(|n| usize::try_from(n).ok())
    })
}

fn check_parse(case: &Value, input: &str) -> Result<(), Mismatch> {
    let parsed = CpuSet::parse(input);
    match (&case["error"], parsed) {
        (Value::Null, Ok(set)) => {
            let want = list(&case["list"])?;
            if set.to_vec() != want {
                return Err(differs!("expected list {want:?}, got {:?}", set.to_vec()));
            }
            let want_string = case["string"].as_str().unwrap_or_default();
            if set.to_string() != want_string {
                return Err(differs!("expected string {want_string:?}, got {set}"));
            }
            Ok(())
        }
        (Value::Null, Err(e)) => Err(differs!("expected success, got error {e}")),
        (err, Ok(set)) => Err(differs!("expected error {err}, got set {set}")),
        (_, Err(_)) => Ok(()),
    }
}

fn check_ops(case: &Value) -> Result<(), Mismatch> {
    let a = CpuSet::from_cpus(&list(&case["a"])?);
    let b = CpuSet::from_cpus(&list(&case["b"])?);
    let expect = |key: &str, got: String| -> Result<(), Mismatch> {
        let want = case[key].as_str().unwrap_or_default();
        if want == got {
            Ok(())
        } else {
            Err(differs!("{key}: expected {want:?}, got {got:?}"))
        }
    };
    expect("a_string", a.to_string())?;
    expect("union", a.union(&b).to_string())?;
    expect("intersection", a.intersection(&b).to_string())?;
    expect("a_minus_b", a.difference(&b).to_string())?;
    let flag = |key: &str, got: bool| -> Result<(), Mismatch> {
        match case[key].as_bool() {
            Some(want) if want == got => Ok(()),
            want => Err(differs!("{key}: expected {want:?}, got {got}")),
        }
    };
    flag("a_is_subset_of_b", a.is_subset_of(&b))?;
    flag("equals", a == b)
}
