//! The fingerprint against vectors made by upstream's Go code (`testdata/podfingerprint.json`,
//! provenance in its header), and its properties.

use std::path::Path;

use proptest::prelude::*;
use serde::Deserialize;
use twox_hash::XxHash64;

use super::*;

#[derive(Deserialize)]
struct Vectors {
    provenance: serde_json::Value,
    fingerprints: Vec<FingerprintVector>,
    check: Vec<CheckVector>,
    xxh64: Vec<HashVector>,
}

#[derive(Deserialize)]
struct FingerprintVector {
    name: String,
    pods: Vec<(String, String)>,
    fingerprint: String,
}

#[derive(Deserialize)]
struct CheckVector {
    name: String,
    pods: Vec<(String, String)>,
    signature: String,
    result: String,
}

#[derive(Deserialize)]
struct HashVector {
    input: String,
    seed: String,
    hash: String,
}

fn vectors() -> Vectors {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/podfingerprint.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn hex_u64(text: &str) -> u64 {
    assert_eq!(text.len(), 16, "{text:?}");
    u64::from_str_radix(text, 16).unwrap()
}

#[test]
fn every_fingerprint_vector() {
    let vectors = vectors();
    assert_eq!(
        vectors.provenance["commit"],
        "929f98bef311b9dd64a1765b45196cfedbdf7209"
    );
    assert!(vectors.fingerprints.len() > 150, "vectors missing");
    let mut failures = Vec::new();
    for vector in &vectors.fingerprints {
        let fingerprint: PodFingerprint = vector.pods.iter().cloned().collect();
        assert_eq!(fingerprint.len(), vector.pods.len());
        let signed = fingerprint.sign();
        if signed != vector.fingerprint {
            failures.push(format!(
                "{}: {signed} != {}",
                vector.name, vector.fingerprint
            ));
        }
        if fingerprint.check(&vector.fingerprint).is_err() {
            failures.push(format!("{}: does not check", vector.name));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn vectors_cover_what_they_claim() {
    // the kinds of input the vectors are meant to hold, so none is lost by a regeneration
    let vectors = vectors();
    let sizes: Vec<usize> = vectors.fingerprints.iter().map(|v| v.pods.len()).collect();
    for size in [0, 1, 4, 5, 32, 33, 259, 1000] {
        assert!(sizes.contains(&size), "no vector of {size} pods");
    }
    let names: Vec<&str> = vectors
        .fingerprints
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    for name in [
        "upstream testdata/pods.json (TestCheck correct fingerprint)",
        "upstream tracing_test.go TestTraceStatusJSON pods",
        "duplicate pod twice",
        "unicode: japanese",
        "1000 pods, shuffled",
    ] {
        assert!(names.contains(&name), "no vector {name:?}");
    }
}

#[test]
fn upstream_fingerprints_of_their_own_tests() {
    // TestCheck "correct fingerprint" and TestTraceStatusJSON, computed by upstream itself
    let vectors = vectors();
    let find = |name: &str| {
        let vector = vectors
            .fingerprints
            .iter()
            .find(|v| v.name == name)
            .unwrap();
        vector
            .pods
            .iter()
            .cloned()
            .collect::<PodFingerprint>()
            .sign()
    };
    assert_eq!(
        find("upstream testdata/pods.json (TestCheck correct fingerprint)"),
        "pfp0v001e477a4e3b2fc0ec6"
    );
    assert_eq!(
        find("upstream tracing_test.go TestTraceStatusJSON pods"),
        "pfp0v001b92008c14168b3a6"
    );
}

#[test]
fn same_pods_in_another_order_have_the_same_vector() {
    // the data's own claim, which the order-independence property relies on
    let vectors = vectors();
    let mut by_set = std::collections::BTreeMap::new();
    for vector in &vectors.fingerprints {
        let mut pods = vector.pods.clone();
        pods.sort();
        by_set
            .entry(pods)
            .or_insert_with(Vec::new)
            .push(vector.fingerprint.as_str());
    }
    let reordered = by_set.values().filter(|f| f.len() > 1).count();
    assert!(
        reordered >= 28,
        "only {reordered} sets given in several orders"
    );
    for fingerprints in by_set.values() {
        assert!(
            fingerprints.iter().all(|f| *f == fingerprints[0]),
            "{fingerprints:?}"
        );
    }
}

#[test]
fn every_check_vector() {
    let vectors = vectors();
    assert!(vectors.check.len() >= 16);
    for vector in &vectors.check {
        let fingerprint: PodFingerprint = vector.pods.iter().cloned().collect();
        let result = match fingerprint.check(&vector.signature) {
            Ok(()) => "ok",
            Err(FingerprintError::Malformed) => "malformed",
            Err(FingerprintError::IncompatibleVersion { .. }) => "incompatible-version",
            Err(FingerprintError::Mismatch { .. }) => "mismatch",
        };
        assert_eq!(result, vector.result, "{}", vector.name);
    }
}

#[test]
fn check_errors_name_what_differs() {
    let fingerprint = PodFingerprint::from_iter([("ns1", "n1")]);
    assert_eq!(
        fingerprint.check("pfp0v002ffffffffffffffff").unwrap_err(),
        FingerprintError::IncompatibleVersion {
            version: "v002".to_owned()
        }
    );
    let err = fingerprint.check("pfp0v001ffffffff").unwrap_err();
    assert_eq!(
        err,
        FingerprintError::Mismatch {
            computed: fingerprint.sign()[8..].to_owned(),
            given: "ffffffff".to_owned()
        }
    );
    assert!(err.to_string().contains("ffffffff"), "{err}");
}

#[test]
fn xxh64_agrees_with_upstreams_hash_library() {
    // the hash crate against OneOfOne/xxhash's ChecksumString64S, lengths 0 to 80 and more
    let vectors = vectors();
    assert!(vectors.xxh64.len() >= 300);
    for vector in &vectors.xxh64 {
        let seed = hex_u64(&vector.seed);
        assert_eq!(
            XxHash64::oneshot(seed, vector.input.as_bytes()),
            hex_u64(&vector.hash),
            "{:?} seed {seed:x}",
            vector.input
        );
    }
}

#[test]
fn signature_shape() {
    let fingerprint = PodFingerprint::from_iter([("default", "nginx")]);
    let signed = fingerprint.sign();
    assert_eq!(signed.len(), 24);
    assert!(signed.starts_with("pfp0v001"));
    assert!(
        signed[8..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
    assert_eq!(format!("{:016x}", fingerprint.digest()), signed[8..]);
}

#[test]
fn method_values_and_the_schedulers_reading() {
    assert_eq!(FingerprintMethod::All.as_str(), "all");
    assert_eq!(
        FingerprintMethod::WithExclusiveResources.as_str(),
        "with-exclusive-resources"
    );
    // scheduler-plugins' TestPodFingerprintForNodeTopology (autodetect): no attribute, an
    // unrecognised one and "all" count every pod; only the exclusive method narrows it
    for (value, expected) in [
        (None, FingerprintMethod::All),
        (Some("foobar"), FingerprintMethod::All),
        (Some(METHOD_ALL), FingerprintMethod::All),
        (
            Some(METHOD_WITH_EXCLUSIVE_RESOURCES),
            FingerprintMethod::WithExclusiveResources,
        ),
    ] {
        assert_eq!(
            FingerprintMethod::as_scheduler_reads(value),
            expected,
            "{value:?}"
        );
    }
}

fn pods() -> impl Strategy<Value = Vec<(String, String)>> {
    // few distinct names, so duplicates happen
    let part = prop_oneof!["[a-c]{0,2}", "\\PC{0,40}", Just("kube-system".to_owned())];
    prop::collection::vec((part.clone(), part), 0..40)
}

proptest! {
    #[test]
    fn the_fingerprint_ignores_input_order(
        (pods, shuffled) in pods().prop_flat_map(|pods| (Just(pods.clone()), Just(pods).prop_shuffle()))
    ) {
        let a: PodFingerprint = pods.iter().cloned().collect();
        let mut b = PodFingerprint::with_capacity(shuffled.len());
        for (namespace, name) in &shuffled {
            b.add(namespace, name);
        }
        prop_assert_eq!(a.sign(), b.sign());
        prop_assert!(b.check(&a.sign()).is_ok());
    }

    #[test]
    fn one_more_pod_changes_the_fingerprint(pods in pods(), namespace in "\\PC{0,20}", name in "\\PC{0,20}") {
        let before: PodFingerprint = pods.iter().cloned().collect();
        let mut after = before.clone();
        after.add(&namespace, &name);
        prop_assert_ne!(before.sign(), after.sign());
        let mismatch = matches!(after.check(&before.sign()), Err(FingerprintError::Mismatch { .. }));
        prop_assert!(mismatch);
    }
}
