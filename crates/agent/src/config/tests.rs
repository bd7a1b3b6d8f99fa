//! Tests of configuration loading, overlay and validation.

use super::nri::{DEFAULT_KUBELET_POD_RESOURCES_SOCKET, DEFAULT_NRI_PLUGIN_INDEX, PinnedCpusets};
use super::*;

fn source(yaml: &str) -> ConfigSource {
    serde_saphyr::from_str(yaml).unwrap()
}

#[test]
fn defaults_match_the_kubelets() {
    let config = ConfigSource::default().validate().unwrap();
    assert_eq!(config.cpu_manager.policy, "none");
    assert_eq!(config.cpu_manager.reconcile_period, Duration::from_secs(10));
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
memoryManagerPolicy: Static
reservedMemory:
  - numaNode: 0
    limits:
      memory: 1124Mi
imageGCHighThresholdPercent: 85
"#,
    );
    assert_eq!(source_unknown(&config), vec!["imageGCHighThresholdPercent"]);
    let config = config.validate().unwrap();
    let cpu = &config.cpu_manager;
    assert_eq!(cpu.policy, "static");
    assert_eq!(cpu.policy_options["full-pcpus-only"], "true");
    assert_eq!(cpu.reconcile_period, Duration::from_secs(5));
    assert_eq!(cpu.reserved_system_cpus.to_string(), "0-1");
    // As the kubelet: reservedSystemCPUs replaces kubeReserved.cpu + systemReserved.cpu.
    assert_eq!(cpu.reserved_cpu_millis, None);
    assert_eq!(cpu.topology_manager_policy.to_string(), "single-numa-node");
    assert_eq!(config.topology.scope.to_string(), "pod");
    assert_eq!(
        config.container_runtime_endpoint.as_deref(),
        Some(Path::new("/run/containerd/containerd.sock"))
    );
    let memory = &config.memory_manager;
    assert_eq!(memory.policy, corral_memmgr::MemoryPolicy::Static);
    assert_eq!(memory.reserved_memory[0].numa_node, 0);
    assert_eq!(
        memory.reserved_memory[0].limits["memory"].as_str(),
        "1124Mi"
    );
    assert_eq!(memory.kube_reserved["memory"].as_str(), "1Gi");
    assert!(!memory.kube_reserved.contains_key("cpu"));
}

fn source_unknown(source: &ConfigSource) -> Vec<&str> {
    source.unknown_keys()
}

#[test]
fn json_files_work_too() {
    let config = source(
        r#"{"cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "topologyManagerPolicy": "restricted"}"#,
    )
        .validate()
        .unwrap();
    assert_eq!(config.cpu_manager.policy, "static");
}

#[test]
fn flags_override_the_file() {
    let file = source(
        "cpuManagerPolicy: static\nkubeReserved: {cpu: 1}\ntopologyManagerPolicy: restricted\n",
    );
    let flags = ConfigSource {
        topology_manager_policy: Some("best-effort".into()),
        ..ConfigSource::default()
    };
    let config = file.overlay(flags).validate().unwrap();
    assert_eq!(config.cpu_manager.policy, "static");
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
metricsAddress: 0.0.0.0
containerRuntimeEndpoint: relative.sock
"#,
    )
    .validate()
    .unwrap_err();
    let keys: Vec<&str> = errors.0.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "cpuManagerReconcilePeriod",
            "reservedSystemCPUs",
            "kubeReserved.cpu",
            "topologyManagerPolicy",
            "cpuManagerPolicy",
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

/// (key, what is accepted) of every error `yaml` is refused with.
fn refused(yaml: &str) -> Vec<(String, String)> {
    source(yaml)
        .validate()
        .unwrap_err()
        .0
        .into_iter()
        .map(|e| (e.key, e.accepted))
        .collect()
}

/// The CPU manager's own rules run in validation: options (names, values, combinations,
/// against the policies) and the static policy's reservation, each under the key that holds
/// the value, with the CPU manager's message.
#[test]
fn cpu_manager_options_and_reservation_are_validated() {
    let one = |yaml: &str, key: &str, message: &str| {
        let errors = refused(yaml);
        assert_eq!(errors.len(), 1, "{yaml}: {errors:?}");
        assert_eq!(errors[0].0, key, "{yaml}");
        assert!(errors[0].1.contains(message), "{yaml}: {}", errors[0].1);
    };
    let static_ = "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n";
    let alpha = "featureGates: {CPUManagerPolicyAlphaOptions: true}\n";
    one(
        &format!("{static_}cpuManagerPolicyOptions: {{bogus: \"true\"}}"),
        "cpuManagerPolicyOptions",
        "new static policy error: unknown CPU Manager Policy option: \"bogus\"",
    );
    one(
        &format!("{static_}cpuManagerPolicyOptions: {{full-pcpus-only: maybe}}"),
        "cpuManagerPolicyOptions",
        "parsing \"maybe\": invalid syntax",
    );
    // v1.36: alpha options need CPUManagerPolicyAlphaOptions, beta ones (on by default)
    // CPUManagerPolicyBetaOptions; GA ones nothing.
    one(
        &format!("{static_}cpuManagerPolicyOptions: {{align-by-socket: \"true\"}}"),
        "cpuManagerPolicyOptions",
        "CPU Manager Policy Alpha-level Options not enabled, but option \"align-by-socket\" provided",
    );
    one(
        &format!(
            "{static_}featureGates: {{CPUManagerPolicyBetaOptions: false}}\ncpuManagerPolicyOptions: {{distribute-cpus-across-numa: \"true\"}}"
        ),
        "cpuManagerPolicyOptions",
        "CPU Manager Policy Beta-level Options not enabled, but option \"distribute-cpus-across-numa\" provided",
    );
    source(&format!(
        "{static_}featureGates: {{CPUManagerPolicyBetaOptions: false}}\ncpuManagerPolicyOptions: {{full-pcpus-only: \"true\", strict-cpu-reservation: \"true\", prefer-align-cpus-by-uncorecache: \"true\"}}"
    ))
    .validate()
    .unwrap();
    one(
        &format!(
            "{static_}{alpha}cpuManagerPolicyOptions: {{full-pcpus-only: \"true\", distribute-cpus-across-cores: \"true\"}}"
        ),
        "cpuManagerPolicyOptions",
        "full-pcpus-only and distribute-cpus-across-cores can not be used at the same time",
    );
    one(
        "cpuManagerPolicyOptions: {full-pcpus-only: \"true\"}",
        "cpuManagerPolicyOptions",
        "None policy: received unsupported options=map[full-pcpus-only:true]",
    );
    one(
        &format!(
            "{static_}{alpha}cpuManagerPolicyOptions: {{align-by-socket: \"true\"}}\ntopologyManagerPolicy: single-numa-node"
        ),
        "cpuManagerPolicyOptions/topologyManagerPolicy",
        "incompatible with CPUManager align-by-socket policy option",
    );
    one(
        "cpuManagerPolicy: static",
        "reservedSystemCPUs/kubeReserved.cpu/systemReserved.cpu",
        "unable to determine reserved CPU resources for static policy",
    );
    one(
        "cpuManagerPolicy: static\nkubeReserved: {cpu: \"0\"}",
        "reservedSystemCPUs/kubeReserved.cpu/systemReserved.cpu",
        "requires systemreserved.cpu + kubereserved.cpu to be greater than zero",
    );
    one(
        "cpuManagerPolicy: dynamic",
        "cpuManagerPolicy",
        "unknown policy: \"dynamic\"",
    );
    one(
        "topologyManagerScope: node",
        "topologyManagerScope",
        "unknown scope: \"node\"",
    );
    one(
        "topologyManagerPolicy: restricted\ntopologyManagerPolicyOptions: {bogus: \"true\"}",
        "topologyManagerPolicyOptions",
        "unknown Topology Manager Policy option: \"bogus\"",
    );
    // A bad reservation is reported once, and the options are still checked.
    let errors = refused(
        "cpuManagerPolicy: static\nreservedSystemCPUs: \"x\"\ncpuManagerPolicyOptions: {bogus: \"1\"}",
    );
    let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["reservedSystemCPUs", "cpuManagerPolicyOptions"]);
    // kubeReserved.cpu + systemReserved.cpu is the reservation when no set is given.
    let config =
        source("cpuManagerPolicy: static\nkubeReserved: {cpu: 500m}\nsystemReserved: {cpu: \"1\"}")
            .validate()
            .unwrap();
    assert_eq!(config.cpu_manager.reserved_cpu_millis, Some(1500));
}

/// `kubeReserved.cpu + systemReserved.cpu` past `i64::MAX` millicores used to panic the
/// config check ("attempt to add with overflow"); it is a config error naming the key. A
/// sum of exactly `i64::MAX` is a reservation (the CPU manager's whole-CPU ceiling of it
/// used to overflow too).
#[test]
fn a_cpu_reservation_sum_past_64_bits_is_an_error() {
    let errors = refused(
        "cpuManagerPolicy: static\nkubeReserved: {cpu: 9223372036854775807m}\nsystemReserved: {cpu: 1m}",
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "systemReserved.cpu");
    assert!(errors[0].1.contains("fits 64-bit millicores"), "{errors:?}");
    let config = source(
        "cpuManagerPolicy: static\nkubeReserved: {cpu: 9223372036854775806m}\nsystemReserved: {cpu: 1m}",
    )
    .validate()
    .unwrap();
    assert_eq!(config.cpu_manager.reserved_cpu_millis, Some(i64::MAX));
}

/// `maxManifestBytes` up to `u64::MAX` is accepted; the server's decoding limit (the
/// manifests plus framing) saturates instead of overflowing at start-up.
#[test]
fn the_largest_manifest_limit_gives_a_saturated_request_limit() {
    let config = source("maxManifestBytes: 18446744073709551615")
        .validate()
        .unwrap();
    assert_eq!(config.pod_limits.max_manifest_bytes, usize::MAX);
    assert_eq!(config.pod_limits.max_request_bytes(), usize::MAX);
    assert_eq!(
        PodLimits::DEFAULT.max_request_bytes(),
        3 * 1024 * 1024 + 1024
    );
}

#[test]
fn nri_keys_choose_the_plugin_and_are_checked() {
    assert_eq!(
        ConfigSource::default().validate().unwrap().nri,
        NriMode::Off
    );
    let config = source("nri: true\nnriSocket: /run/nri/nri.sock\nnriPluginIndex: \"07\"\n");
    let NriMode::Plugin(settings) = config.validate().unwrap().nri else {
        panic!("NRI mode not on");
    };
    let plugin = settings.plugin;
    assert_eq!(
        (plugin.name.as_str(), plugin.index.as_str()),
        ("corral", "07")
    );
    assert_eq!(plugin.socket, Path::new("/run/nri/nri.sock"));
    let defaults = source("nri: true\n").validate().unwrap().nri;
    let NriMode::Plugin(settings) = defaults else {
        panic!("NRI mode not on");
    };
    assert_eq!(
        settings.kubelet_pod_resources,
        Path::new(DEFAULT_KUBELET_POD_RESOURCES_SOCKET)
    );
    let plugin = settings.plugin;
    assert_eq!(plugin.socket, Path::new("/var/run/nri/nri.sock"));
    assert_eq!(plugin.index, DEFAULT_NRI_PLUGIN_INDEX);
    for (yaml, key) in [
        ("nri: true\nnriPluginIndex: \"7\"\n", "nriPluginIndex"),
        ("nri: true\nnriSocket: relative.sock\n", "nriSocket"),
        (
            "nri: true\nkubeletPodResourcesSocket: k.sock\n",
            "kubeletPodResourcesSocket",
        ),
        (
            "nri: true\ncontainerRuntimeEndpoint: /run/containerd/containerd.sock\n",
            "nri",
        ),
    ] {
        let errors = source(yaml).validate().unwrap_err();
        assert_eq!(errors.0[0].key, key, "{yaml}");
    }
}

#[test]
fn the_pinned_cpuset_guard_is_on_unless_turned_off() {
    let guard = |yaml: &str| match source(yaml).validate().unwrap().nri {
        NriMode::Plugin(settings) => settings.pinned_cpusets,
        NriMode::Off => panic!("NRI mode not on: {yaml}"),
    };
    assert_eq!(guard("nri: true\n"), PinnedCpusets::Guarded);
    assert_eq!(
        guard("nri: true\nnriGuardPinnedCpusets: true\n"),
        PinnedCpusets::Guarded
    );
    assert_eq!(
        guard("nri: true\nnriGuardPinnedCpusets: false\n"),
        PinnedCpusets::Open
    );
    // A flag overrides the file.
    let file = source("nri: true\nnriGuardPinnedCpusets: true\n");
    let flags = ConfigSource {
        nri_guard_pinned_cpusets: Some(false),
        ..ConfigSource::default()
    };
    let NriMode::Plugin(settings) = file.overlay(flags).validate().unwrap().nri else {
        panic!("NRI mode not on");
    };
    assert_eq!(settings.pinned_cpusets, PinnedCpusets::Open);
}

/// `memoryManagerPolicy`, `reservedMemory` and `evictionHard.memory.available` are checked
/// as the kubelet's configuration validation checks them, each under its key.
#[test]
fn memory_manager_keys_are_checked() {
    let errors = refused(
        r#"
memoryManagerPolicy: static
reservedMemory:
  - numaNode: -1
    limits: {memory: 1Gi}
  - numaNode: 0
    limits: {memory: "0", cpu: "1", hugepages-2Mi: lots}
  - numaNode: 1
    limits: {memory: 1Gi}
  - numaNode: 1
    limits: {memory: 2Gi}
systemReserved: {hugepages-2Mi: 4Mi}
evictionHard: {memory.available: "150%"}
"#,
    );
    let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "memoryManagerPolicy",
            "reservedMemory[0].numaNode",
            "reservedMemory[1].limits.cpu",
            "reservedMemory[1].limits.hugepages-2Mi",
            "reservedMemory[1].limits.memory",
            "reservedMemory[3].limits.memory",
            "systemReserved.hugepages-2Mi",
            "evictionHard.memory.available",
        ]
    );
    assert!(
        errors[0].1.contains("unknown policy: \"static\""),
        "{errors:?}"
    );
    assert!(
        errors[2].1.contains(
            "the limit type \"cpu\" for NUMA node 0 is not supported, only [memory hugepages-<HugePageSize>] is accepted"
        ),
        "{errors:?}"
    );
    assert!(
        errors[4]
            .1
            .contains("reserved memory may not be zero for NUMA node 0 and resource \"memory\""),
        "{errors:?}"
    );
    assert!(
        errors[5].1.contains(
            "the reserved memory has a duplicate value for NUMA node 1 and resource \"memory\""
        ),
        "{errors:?}"
    );
    assert!(
        errors[6]
            .1
            .contains("cannot reserve \"hugepages-2Mi\" resource"),
        "{errors:?}"
    );
    // Without evictionHard, the kubelet's default memory.available (100Mi) counts; a map
    // without it replaces the defaults unless mergeDefaultEvictionSettings; 0% and 100% set
    // no threshold.
    let eviction = |yaml: &str| {
        let config = source(yaml).validate().unwrap();
        match config.memory_manager.eviction_memory {
            Some(corral_memmgr::EvictionThreshold::Quantity(q)) => Some(q.as_str().to_owned()),
            Some(corral_memmgr::EvictionThreshold::Percentage(p)) => Some(format!("{p}")),
            None => None,
        }
    };
    assert_eq!(
        eviction("memoryManagerPolicy: Static\n").as_deref(),
        Some("100Mi")
    );
    assert_eq!(eviction("evictionHard: {nodefs.available: 5%}\n"), None);
    assert_eq!(
        eviction("evictionHard: {nodefs.available: 5%}\nmergeDefaultEvictionSettings: true\n")
            .as_deref(),
        Some("100Mi")
    );
    assert_eq!(eviction("evictionHard: {memory.available: 0%}\n"), None);
    assert_eq!(
        eviction("evictionHard: {memory.available: 10%}\n").as_deref(),
        Some("0.1")
    );
}

/// Upstream `TestValidateReservedMemoryConfiguration` (validation_reserved_memory_test.go):
/// each row's first error, under the entry's key.
#[test]
fn upstream_reserved_memory_configuration_rows() {
    for (reserved_memory, expected) in [
        ("[]", None),
        ("[{numaNode: 0, limits: {memory: \"128\"}}]", None),
        (
            "[{numaNode: 0, limits: {memory: \"128\"}}, {numaNode: 0, limits: {memory: \"64\"}}]",
            Some(
                "invalid configuration: the reserved memory has a duplicate value for NUMA node 0 and resource \"memory\"",
            ),
        ),
        (
            "[{numaNode: 0, limits: {blabla: \"128\"}}]",
            Some(
                "invalid configuration: the limit type \"blabla\" for NUMA node 0 is not supported, only [memory hugepages-<HugePageSize>] is accepted",
            ),
        ),
        (
            "[{numaNode: 0, limits: {memory: \"0\"}}]",
            Some(
                "invalid configuration: reserved memory may not be zero for NUMA node 0 and resource \"memory\"",
            ),
        ),
    ] {
        let yaml = format!("reservedMemory: {reserved_memory}\n");
        match expected {
            None => assert!(source(&yaml).validate().is_ok(), "{yaml}"),
            Some(text) => {
                let errors = refused(&yaml);
                assert!(errors[0].1.contains(text), "{yaml}: {errors:?}");
            }
        }
    }
}

/// `featureGates` is parsed as v1.37's kubelet does (upstream's refusals under the key), and
/// the same gates decide which CPU and topology manager options are accepted.
#[test]
fn feature_gates_are_validated_and_drive_the_options() {
    let one = |yaml: &str, key: &str, message: &str| {
        let errors = refused(yaml);
        assert_eq!(errors.len(), 1, "{yaml}: {errors:?}");
        assert_eq!(errors[0].0, key, "{yaml}");
        assert!(errors[0].1.contains(message), "{yaml}: {}", errors[0].1);
    };
    one(
        "featureGates: {MemoryManager: true}",
        "featureGates",
        "(unrecognized feature gate: MemoryManager)",
    );
    one(
        "featureGates: {CPUManagerPolicyOptions: false}",
        "featureGates",
        "(cannot set feature gate CPUManagerPolicyOptions to false, feature is locked to true)",
    );
    // v1.37 locks these on; turning them off is refused under the key.
    for gate in [
        "TopologyManagerPolicyOptions",
        "DisableCPUQuotaWithExclusiveCPUs",
        "DRAExtendedResource",
    ] {
        one(
            &format!("featureGates: {{{gate}: false}}"),
            "featureGates",
            &format!("(cannot set feature gate {gate} to false, feature is locked to true)"),
        );
    }
    // A gate on while one it depends on is off (v1.37's dependencies).
    one(
        "featureGates: {PodLevelResources: false}",
        "featureGates",
        "(PodLevelResourceManagers is enabled, but depends on features that are disabled: [PodLevelResources])",
    );
    // Both topology manager options are GA in v1.37: no beta gate needed.
    let config = source(
        "featureGates: {TopologyManagerPolicyBetaOptions: false, TopologyManagerPolicyAlphaOptions: false}\ntopologyManagerPolicy: restricted\ntopologyManagerPolicyOptions: {max-allowable-numa-nodes: \"16\", prefer-closest-numa-nodes: \"true\"}",
    )
    .validate()
    .unwrap();
    assert_eq!(config.topology.options.max_allowable_numa_nodes, 16);
    assert!(config.topology.options.prefer_closest_numa);
    assert!(
        !config
            .feature_gates
            .enabled(corral_topology::Feature::TopologyManagerPolicyBetaOptions)
    );
    // A refused map leaves v1.37's defaults for the rest of the check: the alpha option is
    // still reported.
    let errors = refused(
        "featureGates: {TopologyManager: true}\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ncpuManagerPolicyOptions: {align-by-socket: \"true\"}",
    );
    let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["featureGates", "cpuManagerPolicyOptions"]);
    assert!(
        errors[1].1.contains("align-by-socket (alpha)"),
        "{}",
        errors[1].1
    );
}

/// `examples/config/feature-gates.yaml` is valid, and what it sets is in force.
#[test]
fn feature_gates_example_config_is_valid() {
    use corral_topology::Feature;
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/config/feature-gates.yaml");
    let config = ConfigSource::from_file(&path).unwrap().validate().unwrap();
    let gates = &config.feature_gates;
    assert!(gates.enabled(Feature::CpuManagerPolicyAlphaOptions));
    assert!(gates.enabled(Feature::PodLevelResourceManagers));
    assert_eq!(gates.ignored(), ["KubeletPSI"]);
    assert_eq!(
        gates.pod_level_resources(),
        corral_topology::PodLevelResources::Managed
    );
    assert_eq!(config.cpu_manager.feature_gates, *gates);
    assert!(config.topology.options.prefer_closest_numa);
}

/// `metricsAddress` takes any address when given (a host-network DaemonSet's probes and
/// Prometheus reach it on the node's address); unset, nothing is served.
#[test]
fn the_metrics_address_takes_any_address_and_port() {
    for text in ["0.0.0.0:9464", "127.0.0.1:0", "[::]:9464", "10.1.2.3:8080"] {
        let config = source(&format!("metricsAddress: \"{text}\"\n"))
            .validate()
            .unwrap();
        assert_eq!(
            config.metrics_address,
            Some(text.parse().unwrap()),
            "{text}"
        );
    }
    for text in ["0.0.0.0", "localhost:9464", ":9464"] {
        let errors = source(&format!("metricsAddress: \"{text}\"\n"))
            .validate()
            .unwrap_err();
        assert_eq!(errors.0[0].key, "metricsAddress", "{text}");
    }
}

/// `nriDisconnectedGracePeriod`: a Go duration, 1m by default.
#[test]
fn the_nri_disconnected_grace_period_is_a_duration() {
    let grace = |text: &str| match source(text).validate().unwrap().nri {
        NriMode::Plugin(settings) => settings.disconnected_grace,
        NriMode::Off => panic!("NRI off"),
    };
    assert_eq!(grace("nri: true\n"), Duration::from_secs(60));
    assert_eq!(
        grace("nri: true\nnriDisconnectedGracePeriod: 2s\n"),
        Duration::from_secs(2)
    );
    let errors = source("nri: true\nnriDisconnectedGracePeriod: soon\n")
        .validate()
        .unwrap_err();
    assert_eq!(errors.0[0].key, "nriDisconnectedGracePeriod");
}
