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
    let err = ClaimManifest::from_k8s(&manifests.claims[0]).unwrap_err();
    assert!(err.contains("no status.allocation"), "{err}");
}
