//! Tests of configuration loading, overlay and validation.

use super::*;

fn source(yaml: &str) -> ConfigSource {
    serde_saphyr::from_str(yaml).unwrap()
}

#[test]
fn defaults_match_the_kubelets() {
    let config = ConfigSource::default().validate().unwrap();
    assert_eq!(config.cpu_manager_policy, "none");
    assert_eq!(config.cpu_manager_reconcile_period, Duration::from_secs(10));
    assert_eq!(config.topology.policy.to_string(), "none");
    assert_eq!(config.topology.scope.to_string(), "container");
    assert_eq!(config.layout.root(), Path::new(".corral"));
    assert_eq!(config.host_root, Path::new("/"));
    assert!(config.metrics_address.is_none());
}

#[test]
fn kubelet_configuration_keys_are_read() {
    let config = source(
        r#"
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
cpuManagerPolicyOptions:
  full-pcpus-only: "true"
cpuManagerReconcilePeriod: 5s
reservedSystemCPUs: "0-1"
kubeReserved:
  cpu: 500m
  memory: 1Gi
systemReserved:
  cpu: "1"
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
topologyManagerPolicyOptions:
  prefer-closest-numa-nodes: "true"
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
evictionHard:
  memory.available: 100Mi
"#,
    );
    assert_eq!(source_unknown(&config), vec!["evictionHard"]);
    let config = config.validate().unwrap();
    assert_eq!(config.cpu_manager_policy, "static");
    assert_eq!(config.cpu_manager_policy_options["full-pcpus-only"], "true");
    assert_eq!(config.cpu_manager_reconcile_period, Duration::from_secs(5));
    assert_eq!(config.reserved_system_cpus.unwrap().to_string(), "0-1");
    assert_eq!(config.reserved_cpu_millis, 1500);
    assert_eq!(config.topology.scope.to_string(), "pod");
    assert_eq!(
        config.container_runtime_endpoint.as_deref(),
        Some(Path::new("/run/containerd/containerd.sock"))
    );
}

fn source_unknown(source: &ConfigSource) -> Vec<&str> {
    source.unknown_keys()
}

#[test]
fn json_files_work_too() {
    let config = source(r#"{"cpuManagerPolicy": "static", "topologyManagerPolicy": "restricted"}"#)
        .validate()
        .unwrap();
    assert_eq!(config.cpu_manager_policy, "static");
}

#[test]
fn flags_override_the_file() {
    let file = source("cpuManagerPolicy: static\ntopologyManagerPolicy: restricted\n");
    let flags = ConfigSource {
        topology_manager_policy: Some("best-effort".into()),
        ..ConfigSource::default()
    };
    let config = file.overlay(flags).validate().unwrap();
    assert_eq!(config.cpu_manager_policy, "static");
    assert_eq!(config.topology.policy.to_string(), "best-effort");
}

#[test]
fn every_invalid_value_is_reported_with_its_key() {
    let errors = source(
        r#"
cpuManagerPolicy: dynamic
cpuManagerReconcilePeriod: soon
reservedSystemCPUs: "3-1"
kubeReserved: {cpu: lots}
topologyManagerPolicy: strict
metricsAddress: 0.0.0.0:9464
containerRuntimeEndpoint: relative.sock
"#,
    )
    .validate()
    .unwrap_err();
    let keys: Vec<&str> = errors.0.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "cpuManagerPolicy",
            "cpuManagerReconcilePeriod",
            "reservedSystemCPUs",
            "kubeReserved.cpu",
            "topologyManagerPolicy/topologyManagerScope/topologyManagerPolicyOptions",
            "metricsAddress",
            "containerRuntimeEndpoint",
        ]
    );
    let text = errors.to_string();
    assert!(
        text.contains("cpuManagerPolicy: \"dynamic\" is not valid; accepted: \"none\", \"static\""),
        "{text}"
    );
    assert!(text.contains("single-numa-node"), "{text}");
}

#[test]
fn root_and_kubelet_layout() {
    let kubelet = ConfigSource {
        kubelet_layout: Some(true),
        ..ConfigSource::default()
    }
    .validate()
    .unwrap();
    assert_eq!(kubelet.layout.root(), Path::new("/var/lib/kubelet"));
    assert_eq!(
        kubelet.layout.device_plugins_dir(),
        Path::new("/var/lib/kubelet/device-plugins")
    );
    assert_eq!(
        kubelet.layout.pod_resources_socket(),
        Path::new("/var/lib/kubelet/pod-resources/kubelet.sock")
    );
    assert_eq!(
        kubelet.layout.plugins_registry_dir(),
        Path::new("/var/lib/kubelet/plugins_registry")
    );
    let both = ConfigSource {
        kubelet_layout: Some(true),
        root: Some("/srv/x".into()),
        ..ConfigSource::default()
    };
    assert_eq!(both.validate().unwrap_err().0[0].key, "root/kubeletLayout");
}

#[test]
fn unreadable_and_malformed_files_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = ConfigSource::from_file(&dir.path().join("nope.yaml")).unwrap_err();
    assert!(missing.to_string().contains("nope.yaml"));
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "cpuManagerPolicy: [unclosed").unwrap();
    let err = ConfigSource::from_file(&bad).unwrap_err();
    assert!(err.to_string().contains("bad.yaml"), "{err}");
}

#[test]
fn request_and_connection_limits_are_read_and_must_be_positive() {
    let config = ConfigSource::default().validate().unwrap();
    assert_eq!(config.pod_limits, PodLimits::DEFAULT);
    assert_eq!(config.max_connections_per_socket, 128);
    assert_eq!(config.max_resources_per_device_plugin, 16);
    let config = source(
        "maxContainersPerPod: 8\nmaxManifestBytes: 4096\nmaxConnectionsPerSocket: 64\nmaxResourcesPerDevicePlugin: 4\n",
    )
    .validate()
    .unwrap();
    assert_eq!(config.pod_limits.max_containers, 8);
    assert_eq!(config.pod_limits.max_manifest_bytes, 4096);
    assert_eq!(config.max_connections_per_socket, 64);
    assert_eq!(config.max_resources_per_device_plugin, 4);
    let errors = source("maxContainersPerPod: 0\nmaxConnectionsPerSocket: 0\n")
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        errors.contains("maxContainersPerPod") && errors.contains("maxConnectionsPerSocket"),
        "{errors}"
    );
}
