//! Fuzz targets for what the agent reads from untrusted hands: manifests (YAML and JSON,
//! Pods and ResourceClaims, then the conversion and validation every admission runs), the
//! configuration file and Go durations. Arbitrary text and structure-aware mutations of
//! real documents; every input gives a value or a typed error, never a panic.
//! `CORRAL_FUZZ_CASES` sets the number of inputs (`cargo xtask fuzz`: 1,000,000 each).

use proptest::prelude::*;

use crate::config::{ConfigSource, PodLimits, parse_go_duration};
use crate::manifest::{ClaimManifest, Manifests, pod_from_manifest};

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, uid: 0b5c}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: gpu-claim}]
  initContainers: [{name: init, restartPolicy: Always, resources: {limits: {cpu: "1", memory: 1Gi}}}]
  containers:
  - name: app
    resources:
      requests: {cpu: 500m, memory: 64Mi, example.com/gpu: "1"}
      limits: {cpu: "2", memory: 128Mi, example.com/gpu: "1", hugepages-2Mi: 2Mi}
      claims: [{name: gpu, request: r}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-claim, namespace: default, uid: c1}
spec: {}
status:
  allocation: {devices: {results: [{request: r, driver: gpu.example.com, pool: p, device: gpu-0}]}}
  reservedFor: [{resource: pods, name: web, uid: 0b5c}]
"#;

const CONFIG: &str = r#"cpuManagerPolicy: static
cpuManagerPolicyOptions: {full-pcpus-only: "true"}
cpuManagerReconcilePeriod: 10s
reservedSystemCPUs: "0-1"
kubeReserved: {cpu: 500m}
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
topologyManagerPolicyOptions: {prefer-closest-numa-nodes: "true"}
devicePluginGracePeriod: 5m0s
maxContainersPerPod: 64
"#;

/// `text` with a few bytes replaced, removed or inserted (kept UTF-8).
fn mutated(text: &'static str) -> impl Strategy<Value = String> {
    let edit = (
        0..text.len(),
        0u8..3,
        prop::sample::select(vec![
            "",
            "\0",
            "-1",
            "\"",
            "{",
            "[",
            ":",
            "\n",
            " ",
            "9999999999999999999999",
            "Ki",
            "é",
            "&a",
            "*a",
            "!!binary",
        ]),
    );
    prop::collection::vec(edit, 1..6).prop_map(move |edits| {
        let mut s = text.to_owned();
        for (at, kind, piece) in edits {
            let mut at = at.min(s.len());
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            match kind {
                0 => s.insert_str(at, piece),
                1 => s.truncate(at),
                _ => {
                    let mut end = (at + 4).min(s.len());
                    while !s.is_char_boundary(end) {
                        end += 1;
                    }
                    s.replace_range(at..end, piece);
                }
            }
        }
        s
    })
}

fn read_manifests(text: &str) {
    let mut manifests = Manifests::default();
    if manifests.add_text("fuzz", text).is_ok() {
        for pod in &manifests.pods {
            let _ = pod_from_manifest(pod, &PodLimits::DEFAULT);
        }
        for claim in &manifests.claims {
            let _ = ClaimManifest::from_k8s(claim);
        }
    }
    // The admission API takes JSON: the same documents as JSON bytes.
    if let Ok(pod) = serde_json::from_str::<k8s_openapi::api::core::v1::Pod>(text) {
        let _ = pod_from_manifest(&pod, &PodLimits::DEFAULT);
    }
}

corral_testkit::fuzz! {
    fn fuzz_manifests_never_panic(text in prop_oneof![mutated(POD), ".{0,200}"]) {
        read_manifests(&text);
    }

    fn fuzz_config_never_panics(text in prop_oneof![mutated(CONFIG), ".{0,120}"]) {
        if let Ok(source) = serde_saphyr::from_str::<ConfigSource>(&text) {
            let _ = source.validate();
        }
    }

    fn fuzz_go_durations_never_panic(
        text in prop_oneof!["[-+]?([0-9]{0,22}(\\.[0-9]{0,12})?(ns|us|µs|ms|s|m|h|d|)){0,4}", ".{0,24}"]
    ) {
        let _ = parse_go_duration(&text);
    }
}
