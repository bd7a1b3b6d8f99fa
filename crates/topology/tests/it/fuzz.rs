//! Fuzz targets for the parsers of untrusted text in this crate: resource quantities (from
//! pod manifests and config) and cpusets (from manifests, config, checkpoints and sysfs
//! files). Arbitrary strings and structure-aware ones; any input gives a value or a typed
//! error, never a panic, and whatever parses round-trips. `CORRAL_FUZZ_CASES` sets the
//! number of inputs (`cargo xtask fuzz` runs 1,000,000 of each).

use corral_topology::{CpuSet, Quantity, parse_bytes, parse_count, parse_cpu_millis};
use proptest::prelude::*;

/// Quantity-shaped text: sign, digits, a fraction, an exponent or a suffix, noise.
fn quantity_text() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["", "+", "-", "--", " "]),
        "[0-9]{0,40}",
        prop::option::of("\\.[0-9]{0,30}"),
        prop::sample::select(vec![
            "",
            "m",
            "k",
            "M",
            "G",
            "T",
            "P",
            "E",
            "Ki",
            "Mi",
            "Gi",
            "Ti",
            "Pi",
            "Ei",
            "n",
            "u",
            "e3",
            "E-3",
            "e999999999",
            "e-999999999",
            "E+18",
            "i",
            "KI",
            "mm",
            "\u{0}",
        ]),
        "[ a-z.\u{0}-\u{1f}]{0,2}",
    )
        .prop_map(|(sign, digits, fraction, suffix, tail)| {
            format!(
                "{sign}{digits}{}{suffix}{tail}",
                fraction.unwrap_or_default()
            )
        })
}

/// cpuset-shaped text: ranges, singles, separators, huge numbers, noise.
fn cpuset_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[0-9]{1,4}",
        "[0-9]{1,4}-[0-9]{1,4}",
        "[0-9]{15,25}",
        "[0-9]{1,3}-[0-9]{15,22}",
        "[-, \\n]{1,2}",
        ".{0,3}",
    ];
    prop::collection::vec(piece, 0..12).prop_map(|parts| parts.join(","))
}

corral_testkit::fuzz! {
    fn fuzz_quantity_parsers_never_panic(text in prop_oneof![quantity_text(), ".{0,48}"]) {
        if let Ok(q) = Quantity::parse(&text) {
            let _ = (q.milli_value(), q.value(), q.to_string());
        }
        let cpu = parse_cpu_millis(&text);
        let bytes = parse_bytes(&text);
        let count = parse_count(&text);
        if Quantity::parse(&text).is_err() {
            prop_assert!(cpu.is_err() && bytes.is_err() && count.is_err());
        }
    }

    fn fuzz_cpuset_parse_never_panics_and_round_trips(text in prop_oneof![cpuset_text(), ".{0,64}"]) {
        if let Ok(set) = CpuSet::parse(&text) {
            let printed = set.to_string();
            prop_assert_eq!(CpuSet::parse(&printed).unwrap(), set);
        }
    }
}
