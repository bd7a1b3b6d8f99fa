//! Suite `bitmask`: upstream `topologymanager/bitmask` against `corral_topology::NumaMask`.

use corral_topology::NumaMask;
use serde_json::Value;

use super::{check_each, list_of};
use crate::mismatch::{Mismatch, bad_case, differs};
use crate::report::SuiteOutcome;

/// Check every case of one `bitmask` vector file.
pub(crate) fn run(doc: &Value, out: &mut SuiteOutcome) {
    check_each(doc, "masks", out, check_mask);
    check_each(doc, "pairs", out, check_pair);
    check_each(doc, "iterate_bitmasks", out, check_iterate);
    check_each(doc, "errors", out, check_error);
}

fn ids(value: &Value) -> Result<Vec<i64>, Mismatch> {
    list_of(value, "id", Value::as_i64)
}

fn mask(value: &Value) -> Result<NumaMask, Mismatch> {
    NumaMask::from_signed(ids(value)?).map_err(|e| bad_case!("{e}"))
}

fn bits(m: NumaMask) -> Vec<i64> {
    m.iter().map(|b| b as i64).collect()
}

fn eq<T: PartialEq + std::fmt::Debug>(what: &str, want: T, got: T) -> Result<(), Mismatch> {
    if want == got {
        Ok(())
    } else {
        Err(differs!("{what}: expected {want:?}, got {got:?}"))
    }
}

fn check_mask(case: &Value) -> Result<(), Mismatch> {
    let m = mask(&case["bits"])?;
    eq(
        "value_decimal",
        case["value_decimal"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        m.as_u64().to_string(),
    )?;
    eq(
        "string",
        case["string"].as_str().unwrap_or_default().to_owned(),
        m.to_string(),
    )?;
    eq("count", case["count"].as_u64(), Some(m.count() as u64))?;
    // Upstream GetBits returns a nil slice for an empty mask; JSON gives null or [].
    let want_bits = if case["get_bits"].is_null() {
        Vec::new()
    } else {
        ids(&case["get_bits"])?
    };
    eq("get_bits", want_bits, bits(m))?;
    eq("is_empty", case["is_empty"].as_bool(), Some(m.is_empty()))
}

fn check_pair(case: &Value) -> Result<(), Mismatch> {
    let a = mask(&case["a"])?;
    let b = mask(&case["b"])?;
    eq(
        "a_is_narrower_than_b",
        case["a_is_narrower_than_b"].as_bool(),
        Some(a.is_narrower_than(b)),
    )?;
    eq(
        "a_is_less_than_b",
        case["a_is_less_than_b"].as_bool(),
        Some(a.is_less_than(b)),
    )?;
    eq(
        "a_is_greater_than_b",
        case["a_is_greater_than_b"].as_bool(),
        Some(a.is_greater_than(b)),
    )?;
    eq("is_equal", case["is_equal"].as_bool(), Some(a.is_equal(b)))?;
    eq("and", mask(&case["and"])?, a.and(b))?;
    eq("or", mask(&case["or"])?, a.or(b))
}

fn check_iterate(case: &Value) -> Result<(), Mismatch> {
    let input: Vec<usize> = ids(&case["bits"])?
        .into_iter()
        .map(|b| usize::try_from(b).map_err(|_| bad_case!("negative id {b}")))
        .collect::<Result<_, _>>()?;
    let want: Vec<Vec<i64>> = case["masks_in_callback_order"]
        .as_array()
        .ok_or("masks_in_callback_order is not a list")?
        .iter()
        .map(ids)
        .collect::<Result<_, _>>()?;
    let mut got = Vec::new();
    NumaMask::iterate_masks(&input, |m| got.push(bits(m)));
    eq("masks_in_callback_order", want, got)
}

fn check_error(case: &Value) -> Result<(), Mismatch> {
    match NumaMask::from_signed(ids(&case["bits"])?) {
        Err(_) => Ok(()),
        Ok(m) => Err(differs!(
            "expected error {}, got mask {:?}",
            case["error"],
            m
        )),
    }
}
