//! The scrape against upstream's definitions and the values after admissions (the HTTP
//! endpoint is tested in `server::http`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::node::Node;
use crate::node::tests::{config, fixture, open, pod};

const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";

/// Upstream's families, from `pkg/kubelet/metrics/metrics.go` at v1.36.0 (Subsystem
/// `kubelet`, except `DRASubsystem` `dra`; every one `StabilityLevel: metrics.ALPHA`, which
/// component-base writes as `[ALPHA] ` before the help): name, type, help, label names.
/// Plus corral's own `corral_admitted_pods`, `corral_state_journal_syncs_total` and
/// `corral_topology_manager_approximate_decisions_total`.
const UPSTREAM: &[(&str, &str, &str, &[&str])] = &[
    // v1.37 (KEP-5526, PodLevelResourceManagers on by default); the help texts are
    // corral's: upstream's Go source was not readable here.
    (
        "resource_manager_allocations_total",
        "counter",
        "[ALPHA] Counts the total number of exclusive resource allocations performed by a manager, by the source of the resources (the node-level pool or a pod-level pool).",
        &["resource_name", "source"],
    ),
    (
        "resource_manager_allocation_errors_total",
        "counter",
        "[ALPHA] Counts errors encountered during exclusive resource allocation, by the intended source of the resources.",
        &["resource_name", "source"],
    ),
    (
        "resource_manager_container_assignments",
        "counter",
        "[ALPHA] Cumulative number of containers granted a type of resource assignment (node_exclusive, pod_exclusive, pod_shared).",
        &["assignment_type", "resource_name"],
    ),
    (
        "kubelet_topology_manager_admission_requests_total",
        "counter",
        "[ALPHA] The number of admission requests where resources have to be aligned.",
        &[],
    ),
    (
        "kubelet_topology_manager_admission_errors_total",
        "counter",
        "[ALPHA] The number of admission request failures where resources could not be aligned.",
        &[],
    ),
    (
        "kubelet_topology_manager_admission_duration_ms",
        "histogram",
        "[ALPHA] Duration in milliseconds to serve a pod admission request.",
        &[],
    ),
    (
        "kubelet_cpu_manager_pinning_requests_total",
        "counter",
        "[ALPHA] The number of cpu core allocations which required pinning.",
        &[],
    ),
    (
        "kubelet_cpu_manager_pinning_errors_total",
        "counter",
        "[ALPHA] The number of cpu core allocations which required pinning failed.",
        &[],
    ),
    (
        "kubelet_memory_manager_pinning_requests_total",
        "counter",
        "[ALPHA] The number of memory pages allocations which required pinning.",
        &[],
    ),
    (
        "kubelet_memory_manager_pinning_errors_total",
        "counter",
        "[ALPHA] The number of memory pages allocations which required pinning that failed.",
        &[],
    ),
    (
        "kubelet_cpu_manager_shared_pool_size_millicores",
        "gauge",
        "[ALPHA] The size of the shared CPU pool for non-guaranteed QoS pods, in millicores.",
        &[],
    ),
    (
        "kubelet_cpu_manager_exclusive_cpu_allocation_count",
        "gauge",
        "[ALPHA] The total number of CPUs exclusively allocated to containers running on this node",
        &[],
    ),
    (
        "kubelet_cpu_manager_allocation_per_numa",
        "gauge",
        "[ALPHA] Number of CPUs allocated per NUMA node",
        &["numa_node"],
    ),
    (
        "kubelet_container_aligned_compute_resources_count",
        "counter",
        "[ALPHA] Cumulative number of aligned compute resources allocated to containers by alignment type.",
        &["boundary", "scope"],
    ),
    (
        "kubelet_container_aligned_compute_resources_failure_count",
        "counter",
        "[ALPHA] Cumulative number of failures to allocate aligned compute resources to containers by alignment type.",
        &["boundary", "scope"],
    ),
    (
        "kubelet_device_plugin_registration_total",
        "counter",
        "[ALPHA] Cumulative number of device plugin registrations. Broken down by resource name.",
        &["resource_name"],
    ),
    (
        "kubelet_device_plugin_alloc_duration_seconds",
        "histogram",
        "[ALPHA] Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.",
        &["resource_name"],
    ),
    (
        "dra_operations_duration_seconds",
        "histogram",
        "[ALPHA] Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when the pod starts or stops. Identified by the name of the operation (PrepareResources or UnprepareResources) and separated by the success of the operation. The number of failed operations is provided through the histogram's overall count.",
        &["is_error", "operation_name"],
    ),
    (
        "dra_resource_claims_in_use",
        "gauge",
        "[ALPHA] The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label value) and across all drivers (special value <any> for driver_name). Note that the sum of all by-driver counts is not the total number of in-use ResourceClaims because the same ResourceClaim might use devices from different drivers. Instead, use the count for the <any> driver_name.",
        &["driver_name"],
    ),
    (
        "corral_admitted_pods",
        "gauge",
        "Pods admitted and not released",
        &[],
    ),
    (
        "corral_topology_manager_approximate_decisions_total",
        "counter",
        "Admissions whose topology decision ran out of its search budget (affinities best found, not proven upstream's)",
        &[],
    ),
    (
        "corral_state_journal_syncs_total",
        "counter",
        "fsync and fdatasync calls the state journal made (one per committed change of state)",
        &[],
    ),
];

/// A family as read back from a scrape: type, help and the label names of its samples
/// (`le` left out).
#[derive(Debug, Default, PartialEq)]
pub(in crate::server) struct Scraped {
    kind: String,
    help: String,
    labels: BTreeSet<String>,
}

/// Parse the 0.0.4 text: every sample must belong to the family of the `# TYPE` before it
/// (a counter's samples carry exactly the family name, a histogram's `_bucket`, `_sum` and
/// `_count`).
pub(in crate::server) fn parse(text: &str) -> BTreeMap<String, Scraped> {
    let mut families: BTreeMap<String, Scraped> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            families.entry(name.to_owned()).or_default().help = help.to_owned();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            families.entry(name.to_owned()).or_default().kind = kind.to_owned();
            current = Some((name.to_owned(), kind.to_owned()));
        } else {
            assert!(!line.starts_with('#'), "unexpected comment {line:?}");
            let (name, kind) = current.as_ref().expect("a sample before any # TYPE");
            let sample = line.split(['{', ' ']).next().unwrap();
            let allowed: Vec<String> = if kind == "histogram" {
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .map(|s| format!("{name}{s}"))
                    .collect()
            } else {
                vec![name.clone()]
            };
            assert!(
                allowed.contains(&sample.to_owned()),
                "{line:?} under {name}"
            );
            if let Some((_, labels)) = line.split_once('{') {
                let labels = labels.split_once('}').unwrap().0;
                for pair in labels.split(",\"").flat_map(|p| p.split(',')) {
                    if let Some((label, _)) = pair.split_once("=\"")
                        && label != "le"
                    {
                        let family = families.get_mut(name).unwrap();
                        family.labels.insert(label.to_owned());
                    }
                }
            }
        }
    }
    families
}

fn line_value(text: &str, sample: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {sample} in:\n{text}"))
        .to_owned()
}

/// A node under the static CPU policy (full-pcpus-only) and single-numa-node, with one
/// admitted pod, one rejected, a device plugin registration and allocation and a DRA
/// preparation recorded: every family has a series.
async fn busy_node(dir: &std::path::Path) -> Arc<Node> {
    let topology = fixture(MACHINE);
    let node = open(
        &config(dir, "single-numa-node", &[("full-pcpus-only", "true")]),
        &topology,
    )
    .await;
    node.admit(pod("ok", &[2]), Vec::new()).await.unwrap();
    node.admit(pod("too-big", &[20]), Vec::new()).await.unwrap();
    {
        use corral_devicemgr::DeviceManagerObserver as _;
        let devices = node.device_metrics();
        devices.plugin_registered("example.com/gpu");
        devices.allocate_rpc_finished("example.com/gpu", Duration::from_millis(3));
    }
    node.dra_durations()
        .observe(&["PrepareResources", "false"], 0.2);
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_has_exactly_upstreams_families_names_types_help_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let node = busy_node(dir.path()).await;
    let scraped = parse(&super::render(&node));
    let expected: BTreeMap<String, Scraped> = UPSTREAM
        .iter()
        .map(|(name, kind, help, labels)| {
            (
                (*name).to_owned(),
                Scraped {
                    kind: (*kind).to_owned(),
                    help: (*help).to_owned(),
                    labels: labels.iter().map(|l| (*l).to_owned()).collect(),
                },
            )
        })
        .collect();
    assert_eq!(scraped, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_values_follow_the_managers() {
    let dir = tempfile::tempdir().unwrap();
    let node = busy_node(dir.path()).await;
    let text = super::render(&node);
    for (sample, value) in [
        ("kubelet_topology_manager_admission_requests_total", "2"),
        ("kubelet_topology_manager_admission_errors_total", "1"),
        ("kubelet_topology_manager_admission_duration_ms_count", "2"),
        (
            "kubelet_topology_manager_admission_duration_ms_bucket{le=\"+Inf\"}",
            "2",
        ),
        ("kubelet_cpu_manager_pinning_requests_total", "1"),
        ("kubelet_cpu_manager_pinning_errors_total", "0"),
        // v1.37's KEP-5526 counters: one container pinned from the node's pool.
        (
            "resource_manager_allocations_total{resource_name=\"cpu\",source=\"node\"}",
            "1",
        ),
        (
            "resource_manager_allocations_total{resource_name=\"cpu\",source=\"pod\"}",
            "0",
        ),
        (
            "resource_manager_allocation_errors_total{resource_name=\"cpu\",source=\"node\"}",
            "0",
        ),
        (
            "resource_manager_container_assignments{assignment_type=\"node_exclusive\",resource_name=\"cpu\"}",
            "1",
        ),
        (
            "resource_manager_container_assignments{assignment_type=\"pod_shared\",resource_name=\"cpu\"}",
            "0",
        ),
        // 16 CPUs, CPU 0 reserved, 2 exclusive.
        ("kubelet_cpu_manager_shared_pool_size_millicores", "13000"),
        ("kubelet_cpu_manager_exclusive_cpu_allocation_count", "2"),
        (
            "kubelet_cpu_manager_allocation_per_numa{numa_node=\"0\"}",
            "2",
        ),
        (
            "kubelet_cpu_manager_allocation_per_numa{numa_node=\"1\"}",
            "0",
        ),
        (
            "kubelet_container_aligned_compute_resources_count{boundary=\"numa_node\",scope=\"container\"}",
            "1",
        ),
        (
            "kubelet_container_aligned_compute_resources_count{boundary=\"numa_node\",scope=\"pod\"}",
            "0",
        ),
        (
            "kubelet_container_aligned_compute_resources_count{boundary=\"physical_cpu\",scope=\"container\"}",
            "1",
        ),
        (
            "kubelet_container_aligned_compute_resources_count{boundary=\"uncore_cache\",scope=\"container\"}",
            "1",
        ),
        (
            "kubelet_container_aligned_compute_resources_failure_count{boundary=\"numa_node\",scope=\"container\"}",
            "1",
        ),
        (
            "kubelet_container_aligned_compute_resources_failure_count{boundary=\"numa_node\",scope=\"pod\"}",
            "0",
        ),
        (
            "kubelet_container_aligned_compute_resources_failure_count{boundary=\"physical_cpu\",scope=\"container\"}",
            "0",
        ),
        (
            "kubelet_device_plugin_registration_total{resource_name=\"example.com/gpu\"}",
            "1",
        ),
        // client_golang's DefBuckets.
        (
            "kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name=\"example.com/gpu\",le=\"0.005\"}",
            "1",
        ),
        (
            "kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name=\"example.com/gpu\",le=\"10\"}",
            "1",
        ),
        // DRADurationBuckets: ExponentialBucketsRange(.1, 40, 15).
        (
            "dra_operations_duration_seconds_bucket{is_error=\"false\",operation_name=\"PrepareResources\",le=\"0.1534127404634391\"}",
            "0",
        ),
        (
            "dra_operations_duration_seconds_bucket{is_error=\"false\",operation_name=\"PrepareResources\",le=\"0.23535468936502524\"}",
            "1",
        ),
        (
            "dra_operations_duration_seconds_bucket{is_error=\"false\",operation_name=\"PrepareResources\",le=\"39.99999999999997\"}",
            "1",
        ),
        ("dra_resource_claims_in_use{driver_name=\"<any>\"}", "0"),
        ("corral_admitted_pods", "1"),
        ("corral_topology_manager_approximate_decisions_total", "0"),
    ] {
        assert_eq!(line_value(&text, sample), value, "{sample}");
    }
    // ExponentialBuckets(.05, 2, 15), in whole milliseconds.
    let bounds: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("kubelet_topology_manager_admission_duration_ms_bucket{le=\"")?
                .split('"')
                .next()
        })
        .collect();
    assert_eq!(
        bounds,
        [
            "0.05", "0.1", "0.2", "0.4", "0.8", "1.6", "3.2", "6.4", "12.8", "25.6", "51.2",
            "102.4", "204.8", "409.6", "819.2", "+Inf"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_none_policies_only_upstreams_unconditional_series_exist() {
    let dir = tempfile::tempdir().unwrap();
    let topology = fixture(MACHINE);
    let mut config = config(dir.path(), "none", &[]);
    config.cpu_manager.policy = "none".to_owned();
    config.cpu_manager.reserved_system_cpus = corral_topology::CpuSet::new();
    config.cpu_manager.reserved_cpu_millis = None;
    let node = open(&config, &topology).await;
    let text = super::render(&node);
    let families: BTreeSet<String> = parse(&text).into_keys().collect();
    // Every family but the static policy's alignment series and those that appear with
    // their first observation.
    let absent = [
        "kubelet_cpu_manager_allocation_per_numa",
        "kubelet_container_aligned_compute_resources_count",
        "kubelet_container_aligned_compute_resources_failure_count",
        "kubelet_device_plugin_registration_total",
        "kubelet_device_plugin_alloc_duration_seconds",
        "dra_operations_duration_seconds",
    ];
    let expected: BTreeSet<String> = UPSTREAM
        .iter()
        .map(|(name, ..)| *name)
        .filter(|name| !absent.contains(name))
        .map(str::to_owned)
        .collect();
    assert_eq!(families, expected);
    // Upstream's none policy never sets the pool gauge.
    assert_eq!(
        line_value(&text, "kubelet_cpu_manager_shared_pool_size_millicores"),
        "0"
    );
}

/// The memory manager's counters under the Static policy: a Guaranteed pod's container is
/// one pinning request; one that asks more memory than a NUMA node set has fails and is
/// counted as an error too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_pinning_counters_follow_the_static_memory_policy() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), "best-effort", &[]);
    config.memory_manager.policy = corral_memmgr::MemoryPolicy::Static;
    config.memory_manager.reserved_memory =
        vec![corral_memmgr::MemoryReservation::new(0, [("memory", "100Mi")]).unwrap()];
    let node = crate::node::tests::open_on(
        &config,
        &fixture(MACHINE),
        &crate::node::tests::fixture_memory(MACHINE),
    )
    .await;
    let text = super::render(&node);
    assert_eq!(
        line_value(&text, "kubelet_memory_manager_pinning_requests_total"),
        "0"
    );
    crate::node::tests::admitted(&node, pod("small", &[1])).await;
    let mut huge = pod("huge", &[1]);
    huge.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .limits
        .as_mut()
        .unwrap()
        .insert(
            "memory".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("64Ti".into()),
        );
    let _ = node.admit(huge, Vec::new()).await;
    let text = super::render(&node);
    assert_eq!(
        line_value(&text, "kubelet_memory_manager_pinning_requests_total"),
        "2"
    );
    assert_eq!(
        line_value(&text, "kubelet_memory_manager_pinning_errors_total"),
        "1"
    );
}
