//! Tests of manifest reading and conversion.

use super::*;

const GUARANTEED_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: numa-aligned
  namespace: team-a
  uid: 6a1b3c8e-0000-4000-8000-000000000001
spec:
  initContainers:
  - name: setup
    image: busybox
    resources:
      limits: {cpu: "1", memory: 64Mi}
  - name: proxy
    image: envoy
    restartPolicy: Always
    resources:
      requests: {cpu: 500m, memory: 32Mi}
  containers:
  - name: app
    image: app
    resources:
      limits: {cpu: "2", memory: 1Gi, example.com/gpu: "1"}
      claims:
      - name: gpu-claim
        request: gpu
  resourceClaims:
  - name: gpu-claim
    resourceClaimName: shared-gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: shared-gpu
  namespace: team-a
  uid: c1a1e000-0000-4000-8000-00000000000c
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
status:
  allocation:
    devices:
      results:
      - request: gpu
        driver: gpu.example.com
        pool: node-1
        device: gpu-3
  reservedFor:
  - resource: pods
    name: numa-aligned
    uid: 6a1b3c8e-0000-4000-8000-000000000001
"#;

#[test]
fn pods_and_claims_from_one_multi_document_file() {
    let mut manifests = Manifests::default();
    manifests.add_text("pod.yaml", GUARANTEED_POD).unwrap();
    assert_eq!(manifests.pods.len(), 1);
    assert_eq!(manifests.claims.len(), 1);

    let pod = pod_from_manifest(&manifests.pods[0], &crate::config::PodLimits::DEFAULT).unwrap();
    assert_eq!(pod.namespace, "team-a");
    assert_eq!(pod.uid, "6a1b3c8e-0000-4000-8000-000000000001");
    assert_eq!(pod.init_containers.len(), 2);
    assert!(!pod.init_containers[0].is_restartable());
    assert!(
        pod.init_containers[1].is_restartable(),
        "restartPolicy Always makes a sidecar"
    );
    // Requests default to limits, as the API server does.
    let setup = &pod.init_containers[0].resources.requests;
    assert_eq!(setup.cpu_millis, Some(1000));
    assert_eq!(setup.memory_bytes, Some(64 << 20));
    let app = &pod.containers[0];
    assert_eq!(app.resources.requests.cpu_millis, Some(2000));
    assert_eq!(app.resources.requests.extended["example.com/gpu"], 1);
    assert_eq!(app.claims[0].name, "gpu-claim");
    assert_eq!(app.claims[0].request.as_deref(), Some("gpu"));
    assert_eq!(
        pod.resource_claims[0].resource_claim_name.as_deref(),
        Some("shared-gpu")
    );

    let claim = ClaimManifest::from_k8s(&manifests.claims[0]).unwrap();
    assert_eq!(claim.devices[0].device, "gpu-3");
    assert_eq!(claim.devices[0].driver, "gpu.example.com");
    assert_eq!(claim.reserved_for[0].uid, pod.uid);
}

#[test]
fn json_and_lists_are_read_and_a_missing_uid_is_generated() {
    let json = r#"{"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "spec": {"containers": [{"name": "c"}]}}
    ]}"#;
    let mut manifests = Manifests::default();
    manifests.add_text("pods.json", json).unwrap();
    let a = pod_from_manifest(&manifests.pods[0], &crate::config::PodLimits::DEFAULT).unwrap();
    let b = pod_from_manifest(&manifests.pods[1], &crate::config::PodLimits::DEFAULT).unwrap();
    assert_eq!(a.namespace, "default");
    assert_eq!(a.uid.len(), 36, "{}", a.uid);
    assert_ne!(a.uid, b.uid);
}

#[test]
fn bad_manifests_say_which_document_and_why() {
    let mut manifests = Manifests::default();
    let err = manifests
        .add_text(
            "x.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("x.yaml, document 1: kind \"Deployment\""),
        "{err}"
    );

    let err = manifests.add_text("y.yaml", "kind: [").unwrap_err();
    assert!(matches!(err, ManifestError::Syntax { .. }), "{err}");

    let bad_quantity = r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources: {limits: {cpu: two}}
"#;
    let mut manifests = Manifests::default();
    match manifests.add_text("z.yaml", bad_quantity) {
        Err(err) => assert!(err.to_string().contains("z.yaml"), "{err}"),
        Ok(()) => {
            let err = pod_from_manifest(&manifests.pods[0], &crate::config::PodLimits::DEFAULT)
                .unwrap_err();
            // Requests default to limits, so the bad value is reported as the request.
            assert!(
                err.to_string().contains("container c: cpu request \"two\""),
                "{err}"
            );
        }
    }

    let unallocated = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, uid: u}
spec: {devices: {requests: []}}
"#;
    let mut manifests = Manifests::default();
    manifests.add_text("c.yaml", unallocated).unwrap();
    let err = ClaimManifest::from_k8s(&manifests.claims[0])
        .unwrap_err()
        .to_string();
    assert!(err.contains("no status.allocation"), "{err}");
}

/// The claim of `GUARANTEED_POD` in `api_version`, its request written as that version's
/// schema has it (v1beta1: the class on the request; v1beta2 and v1: under `exactly`), with a
/// shared device (`shareID`, consumable capacity).
fn claim_in(api_version: &str) -> String {
    let request = if api_version.ends_with("v1beta1") {
        "{name: gpu, deviceClassName: gpu.example.com}"
    } else {
        "{name: gpu, exactly: {deviceClassName: gpu.example.com}}"
    };
    format!(
        "apiVersion: {api_version}
kind: ResourceClaim
metadata: {{name: shared-gpu, namespace: team-a, uid: claim-uid}}
spec: {{devices: {{requests: [{request}]}}}}
status:
  allocation:
    devices:
      results:
      - {{request: gpu, driver: gpu.example.com, pool: node-1, device: gpu-3, shareID: share-7}}
  reservedFor:
  - {{resource: pods, name: numa-aligned, uid: pod-uid}}
"
    )
}

#[test]
fn claims_of_every_served_version_read_the_same() {
    let mut read = Vec::new();
    for version in CLAIM_API_VERSIONS {
        let mut manifests = Manifests::default();
        manifests
            .add_text("claim.yaml", &claim_in(version))
            .unwrap();
        let claim = ClaimManifest::from_k8s(&manifests.claims[0]).unwrap();
        assert_eq!(
            claim.devices[0].share_id.as_deref(),
            Some("share-7"),
            "{version}"
        );
        assert_eq!(claim.reserved_for[0].uid, "pod-uid", "{version}");
        read.push(claim);
    }
    assert!(read.windows(2).all(|w| w[0] == w[1]), "{read:#?}");
}

#[test]
fn a_claim_that_does_not_fit_its_versions_schema_or_an_unknown_version_is_refused() {
    // Each version's own schema: v1's `exactly` is an object; v1beta1 has no such field.
    let odd = |version: &str| {
        claim_in(version).replace(
            "{name: gpu, deviceClassName: gpu.example.com}",
            "{name: gpu, exactly: not-an-object}",
        )
    };
    let v1 = claim_in("resource.k8s.io/v1").replace(
        "exactly: {deviceClassName: gpu.example.com}",
        "exactly: not-an-object",
    );
    let err = Manifests::default().add_text("m.yaml", &v1).unwrap_err();
    assert!(
        err.to_string()
            .contains("not a resource.k8s.io/v1 ResourceClaim"),
        "{err}"
    );
    Manifests::default()
        .add_text("b.yaml", &odd("resource.k8s.io/v1beta1"))
        .unwrap();
    let broken = claim_in("resource.k8s.io/v1beta2").replace(
        "reservedFor:\n  - {resource: pods, name: numa-aligned, uid: pod-uid}",
        "reservedFor: not-a-list",
    );
    let err = Manifests::default()
        .add_text("r.yaml", &broken)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("not a resource.k8s.io/v1beta2 ResourceClaim"),
        "{err}"
    );

    let alpha = claim_in("resource.k8s.io/v1alpha3");
    let err = Manifests::default().add_text("a.yaml", &alpha).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("resource.k8s.io/v1alpha3"), "{text}");
    assert!(text.contains("v1, v1beta2 or v1beta1"), "{text}");

    let err = claim_from_document(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourceClaim",
    }))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "apiVersion \"resource.k8s.io/v1alpha3\" is not one corral reads ResourceClaims in \
         (resource.k8s.io/v1, resource.k8s.io/v1beta2, resource.k8s.io/v1beta1)"
    );
}

#[test]
fn an_extended_resource_backed_by_dra_becomes_a_claim_of_the_container() {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "uid": "p"},
        "spec": {
            "resourceClaims": [{"name": "nic", "resourceClaimName": "nic-claim"}],
            "containers": [
                {"name": "a", "resources": {
                    "limits": {"example.com/gpu": "2", "deviceclass.resource.kubernetes.io/fpga": "1", "example.com/dp": "1"},
                    "claims": [{"name": "nic"}],
                }},
                {"name": "b", "resources": {"limits": {"example.com/gpu": "0"}}},
            ],
        },
        "status": {"extendedResourceClaimStatus": {
            "resourceClaimName": "p-extended-resources-x",
            "requestMappings": [
                {"containerName": "a", "resourceName": "example.com/gpu", "requestName": "r0"},
                {"containerName": "a", "resourceName": "example.com/gpu", "requestName": "r1"},
                {"containerName": "a", "resourceName": "deviceclass.resource.kubernetes.io/fpga", "requestName": "r2"},
                {"containerName": "b", "resourceName": "example.com/gpu", "requestName": "r3"},
            ],
        }},
    }))
    .unwrap();
    let limits = crate::config::PodLimits::DEFAULT;
    let converted = pod_from_manifest(&pod, &limits).unwrap();
    let names: Vec<&str> = converted
        .resource_claims
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["nic", "p-extended-resources-x"]);
    let a = &converted.containers[0];
    let claims: Vec<(&str, Option<&str>)> = a
        .claims
        .iter()
        .map(|c| (c.name.as_str(), c.request.as_deref()))
        .collect();
    // Upstream's resource map is unordered; corral goes by resource name.
    assert_eq!(
        claims,
        [
            ("nic", None),
            ("p-extended-resources-x", Some("r2")),
            ("p-extended-resources-x", Some("r0")),
            ("p-extended-resources-x", Some("r1")),
        ]
    );
    // Mapped resources leave the container (the device manager never sees them); an
    // unmapped one stays for its device plugin.
    let left: Vec<&String> = a.resources.limits.extended.keys().collect();
    assert_eq!(left, ["example.com/dp"]);
    // A zero request is not mapped (upstream skips IsZero).
    assert!(converted.containers[1].claims.is_empty());

    // Gate off: the status is not read.
    let off = crate::config::PodLimits {
        dra_extended_resources: false,
        ..limits
    };
    let plain = pod_from_manifest(&pod, &off).unwrap();
    assert_eq!(plain.resource_claims.len(), 1);
    assert_eq!(plain.containers[0].resources.limits.extended.len(), 3);

    // A mapping to a container the pod does not have, or a claim name taken by the spec.
    let mut bad = pod.clone();
    let status = bad
        .status
        .as_mut()
        .unwrap()
        .extended_resource_claim_status
        .as_mut()
        .unwrap();
    status.request_mappings[0].container_name = "ghost".into();
    let err = pod_from_manifest(&bad, &limits).unwrap_err().to_string();
    assert!(err.contains("requestMappings[0].containerName"), "{err}");
    let mut taken = pod.clone();
    let status = taken
        .status
        .as_mut()
        .unwrap()
        .extended_resource_claim_status
        .as_mut()
        .unwrap();
    status.resource_claim_name = "nic".into();
    let err = pod_from_manifest(&taken, &limits).unwrap_err().to_string();
    assert!(err.contains("resourceClaimName"), "{err}");
}

/// A pod with `spec`, converted.
fn convert_spec(spec: serde_json::Value) -> Result<corral_topology::Pod, PodConversionError> {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "p"},
        "spec": spec,
    }))
    .unwrap();
    pod_from_manifest(&pod, &crate::config::PodLimits::DEFAULT)
}

/// A pod whose one container (or init container, with `init`) has `resources`.
fn with_resources(resources: serde_json::Value, init: bool) -> serde_json::Value {
    let container = serde_json::json!({"name": "c", "resources": resources});
    if init {
        serde_json::json!({
            "initContainers": [container],
            "containers": [{"name": "app"}],
        })
    } else {
        serde_json::json!({"containers": [container]})
    }
}

/// Requirements the API server refuses (issue 28: huge pages no multiple of their page
/// size, a memory request of 1Ti under a 64Mi limit) are refused, with its field and words.
#[test]
fn requirements_the_api_server_refuses_are_refused_in_its_words() {
    use serde_json::json;
    let cases = [
        (
            json!({"limits": {"memory": "64Mi", "hugepages-2Mi": "0.0001"}}),
            "spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: \"0.0001\": \
             0.0001 is not positive integer multiple of hugepages-2Mi",
        ),
        (
            json!({"requests": {"memory": "1Ti"}, "limits": {"memory": "64Mi"}}),
            "spec.containers[0].resources.requests: Invalid value: \"1Ti\": \
             must be less than or equal to memory limit of 64Mi",
        ),
        (
            json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}),
            "spec.containers[0].resources.requests: Invalid value: \"2\": \
             must be less than or equal to cpu limit of 1500m",
        ),
        (
            json!({"requests": {"memory": "64Mi", "hugepages-2Mi": "2Mi"},
                   "limits": {"memory": "64Mi", "hugepages-2Mi": "4Mi"}}),
            "spec.containers[0].resources.requests: Invalid value: \"2Mi\": \
             must be equal to hugepages-2Mi limit of 4Mi",
        ),
        (
            json!({"requests": {"example.com/gpu": "1"}}),
            "spec.containers[0].resources.limits: Required value: \
             Limit must be set for non overcommitable resources",
        ),
        (
            json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
            "spec.containers[0].resources.requests: Invalid value: \"1\": \
             must be equal to example.com/gpu limit of 2",
        ),
        (
            json!({"limits": {"example.com/gpu": "500m"}}),
            "spec.containers[0].resources.limits[example.com/gpu]: Invalid value: \"500m\": \
             must be an integer",
        ),
        (
            json!({"limits": {"hugepages-1Gi": "1Gi"}}),
            "spec.containers[0].resources: Forbidden: HugePages require cpu or memory",
        ),
        (
            json!({"limits": {"cpus": "2"}}),
            "spec.containers[0].resources.limits[cpus]: Invalid value: \"cpus\": \
             must be a standard resource type or fully qualified",
        ),
        (
            json!({"limits": {"pods": "2"}}),
            "spec.containers[0].resources.limits[pods]: Invalid value: \"pods\": \
             must be a standard resource for containers",
        ),
        (
            json!({"limits": {"example.com/a/b": "1"}}),
            "spec.containers[0].resources.limits[example.com/a/b]: Invalid value: \
             \"example.com/a/b\": a qualified name must consist of",
        ),
    ];
    for (resources, expected) in cases {
        let err = convert_spec(with_resources(resources.clone(), false))
            .expect_err(&resources.to_string())
            .to_string();
        assert!(
            err.starts_with("pod ns/p: ") && err.contains(expected),
            "{resources}: {err}"
        );
        assert!(
            matches!(
                convert_spec(with_resources(resources.clone(), false)),
                Err(PodConversionError::Invalid { .. })
            ),
            "{resources}"
        );
        // An init container is held to the same rules.
        let err = convert_spec(with_resources(resources.clone(), true))
            .expect_err(&resources.to_string())
            .to_string();
        let expected = expected.replace("spec.containers[0]", "spec.initContainers[0]");
        assert!(err.contains(&expected), "{resources}: {err}");
    }
}

#[test]
fn requirements_the_api_server_accepts_are_accepted() {
    use serde_json::json;
    for resources in [
        json!({"limits": {"cpu": "2", "memory": "64Mi", "hugepages-2Mi": "4Mi"}}),
        json!({"requests": {"memory": "64Mi", "hugepages-1Gi": "2Gi"},
               "limits": {"hugepages-1Gi": "2Gi"}}),
        json!({"requests": {"cpu": "500m", "memory": "32Mi"},
               "limits": {"cpu": "1", "memory": "64Mi"}}),
        json!({"requests": {"cpu": "100m"}}),
        json!({"limits": {"example.com/gpu": "2", "deviceclass.resource.kubernetes.io/fpga": "1"}}),
        json!({"limits": {"memory": "64Mi", "hugepages-2Mi": "0"}}),
        json!({"limits": {"memory": "1e3", "ephemeral-storage": "1Gi"}}),
    ] {
        convert_spec(with_resources(resources.clone(), false))
            .unwrap_or_else(|err| panic!("{resources}: {err}"));
        convert_spec(with_resources(resources.clone(), true))
            .unwrap_or_else(|err| panic!("{resources} (init): {err}"));
    }
}

/// Pod-level resources (`spec.resources`) are held to the same rules, take only CPU, memory
/// and huge pages, and no container's limit is above the pod's.
#[test]
fn pod_level_requirements_are_validated() {
    use serde_json::json;
    let pod_level = |resources: serde_json::Value, container: serde_json::Value| {
        convert_spec(json!({
            "resources": resources,
            "containers": [{"name": "c", "resources": container}],
        }))
    };
    pod_level(
        json!({"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}),
        json!({"limits": {"cpu": "1", "memory": "64Mi"}}),
    )
    .unwrap();
    for (resources, container, expected) in [
        (
            json!({"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}),
            json!({}),
            "pod ns/p: spec.resources.requests: Invalid value: \"4\": \
             must be less than or equal to cpu limit of 2",
        ),
        (
            json!({"limits": {"cpu": "2", "example.com/gpu": "1"}}),
            json!({}),
            "pod ns/p: spec.resources.limits[example.com/gpu]: Unsupported value: \
             \"example.com/gpu\": supported values: \"cpu\", \"hugepages-\", \"memory\"",
        ),
        (
            json!({"limits": {"memory": "64Mi", "hugepages-2Mi": "3Mi"}}),
            json!({}),
            "pod ns/p: spec.resources.limits[hugepages-2Mi]: Invalid value: \"3Mi\": \
             3Mi is not positive integer multiple of hugepages-2Mi",
        ),
        (
            json!({"limits": {"cpu": "2"}}),
            json!({"limits": {"cpu": "3"}}),
            "pod ns/p: spec.resources.containers[0][cpu].limits: Invalid value: \"3\": \
             must be less than or equal to pod limits of 2",
        ),
    ] {
        let err = pod_level(resources.clone(), container)
            .expect_err(&resources.to_string())
            .to_string();
        assert_eq!(err, expected, "{resources}");
    }
}
