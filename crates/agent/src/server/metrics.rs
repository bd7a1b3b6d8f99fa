//! What `GET /metrics` on `--metrics-addr` answers (served by [`super::http`]): the
//! kubelet's resource-manager series under the kubelet's exact names, help texts, labels
//! and buckets (upstream `pkg/kubelet/metrics/metrics.go`, v1.37), in the text format the
//! kubelet serves ([`crate::exposition`]).
//!
//! Served: `kubelet_topology_manager_admission_requests_total`, `…_admission_errors_total`,
//! `…_admission_duration_ms`; `kubelet_cpu_manager_pinning_requests_total`,
//! `…_pinning_errors_total`, `…_shared_pool_size_millicores`,
//! `…_exclusive_cpu_allocation_count`, `…_allocation_per_numa{numa_node}`;
//! `kubelet_container_aligned_compute_resources_count{scope,boundary}` and
//! `…_failure_count{scope,boundary}`; `kubelet_device_plugin_registration_total` and
//! `kubelet_device_plugin_alloc_duration_seconds{resource_name}`;
//! `dra_operations_duration_seconds{operation_name,is_error}` and
//! `dra_resource_claims_in_use{driver_name}` (the `dra` subsystem has no `kubelet_` prefix
//! upstream either); and corral's own `corral_admitted_pods`,
//! `corral_topology_manager_approximate_decisions_total` and
//! `corral_state_journal_syncs_total`; and v1.37's `resource_manager_allocations_total`,
//! `…_allocation_errors_total` and `…_container_assignments` (KEP-5526; see
//! `node::resource_metrics`).
//!
//! The CPU gauges are computed from the CPU manager's state at each scrape, so they never
//! drift from it (upstream applies deltas and drifts, kubernetes#141261), and
//! `…_allocation_per_numa` has a series for every NUMA node of a `static` policy, 0 included
//! (upstream only sets the nodes that held CPUs and never lowers a node back to 0).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::exposition::{self, Family, HistogramSnapshot, Kind, Series, Value};
use crate::node::Node;

/// A family's name, help text (as upstream defines it, without the stability prefix) and
/// type.
struct Def {
    name: &'static str,
    help: &'static str,
    kind: Kind,
}

const TOPOLOGY_ADMISSION_REQUESTS: Def = Def {
    name: "kubelet_topology_manager_admission_requests_total",
    help: "The number of admission requests where resources have to be aligned.",
    kind: Kind::Counter,
};
const TOPOLOGY_ADMISSION_ERRORS: Def = Def {
    name: "kubelet_topology_manager_admission_errors_total",
    help: "The number of admission request failures where resources could not be aligned.",
    kind: Kind::Counter,
};
const TOPOLOGY_ADMISSION_DURATION: Def = Def {
    name: "kubelet_topology_manager_admission_duration_ms",
    help: "Duration in milliseconds to serve a pod admission request.",
    kind: Kind::Histogram,
};
const CPU_PINNING_REQUESTS: Def = Def {
    name: "kubelet_cpu_manager_pinning_requests_total",
    help: "The number of cpu core allocations which required pinning.",
    kind: Kind::Counter,
};
const CPU_PINNING_ERRORS: Def = Def {
    name: "kubelet_cpu_manager_pinning_errors_total",
    help: "The number of cpu core allocations which required pinning failed.",
    kind: Kind::Counter,
};
const MEMORY_PINNING_REQUESTS: Def = Def {
    name: "kubelet_memory_manager_pinning_requests_total",
    help: "The number of memory pages allocations which required pinning.",
    kind: Kind::Counter,
};
const MEMORY_PINNING_ERRORS: Def = Def {
    name: "kubelet_memory_manager_pinning_errors_total",
    help: "The number of memory pages allocations which required pinning that failed.",
    kind: Kind::Counter,
};
const CPU_SHARED_POOL: Def = Def {
    name: "kubelet_cpu_manager_shared_pool_size_millicores",
    help: "The size of the shared CPU pool for non-guaranteed QoS pods, in millicores.",
    kind: Kind::Gauge,
};
const CPU_EXCLUSIVE: Def = Def {
    name: "kubelet_cpu_manager_exclusive_cpu_allocation_count",
    help: "The total number of CPUs exclusively allocated to containers running on this node",
    kind: Kind::Gauge,
};
const CPU_PER_NUMA: Def = Def {
    name: "kubelet_cpu_manager_allocation_per_numa",
    help: "Number of CPUs allocated per NUMA node",
    kind: Kind::Gauge,
};
const ALIGNED: Def = Def {
    name: "kubelet_container_aligned_compute_resources_count",
    help: "Cumulative number of aligned compute resources allocated to containers by alignment type.",
    kind: Kind::Counter,
};
const ALIGNED_FAILURES: Def = Def {
    name: "kubelet_container_aligned_compute_resources_failure_count",
    help: "Cumulative number of failures to allocate aligned compute resources to containers by alignment type.",
    kind: Kind::Counter,
};
const DEVICE_PLUGIN_REGISTRATIONS: Def = Def {
    name: "kubelet_device_plugin_registration_total",
    help: "Cumulative number of device plugin registrations. Broken down by resource name.",
    kind: Kind::Counter,
};
const DEVICE_PLUGIN_ALLOC_DURATION: Def = Def {
    name: "kubelet_device_plugin_alloc_duration_seconds",
    help: "Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.",
    kind: Kind::Histogram,
};
const DRA_OPERATIONS_DURATION: Def = Def {
    name: "dra_operations_duration_seconds",
    help: "Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when the pod starts or stops. Identified by the name of the operation (PrepareResources or UnprepareResources) and separated by the success of the operation. The number of failed operations is provided through the histogram's overall count.",
    kind: Kind::Histogram,
};
const DRA_CLAIMS_IN_USE: Def = Def {
    name: "dra_resource_claims_in_use",
    help: "The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label value) and across all drivers (special value <any> for driver_name). Note that the sum of all by-driver counts is not the total number of in-use ResourceClaims because the same ResourceClaim might use devices from different drivers. Instead, use the count for the <any> driver_name.",
    kind: Kind::Gauge,
};

const RESOURCE_MANAGER_ALLOCATIONS: Def = Def {
    name: "resource_manager_allocations_total",
    help: "Counts the total number of exclusive resource allocations performed by a manager, by the source of the resources (the node-level pool or a pod-level pool).",
    kind: Kind::Counter,
};
const RESOURCE_MANAGER_ERRORS: Def = Def {
    name: "resource_manager_allocation_errors_total",
    help: "Counts errors encountered during exclusive resource allocation, by the intended source of the resources.",
    kind: Kind::Counter,
};
const RESOURCE_MANAGER_ASSIGNMENTS: Def = Def {
    name: "resource_manager_container_assignments",
    help: "Cumulative number of containers granted a type of resource assignment (node_exclusive, pod_exclusive, pod_shared).",
    kind: Kind::Counter,
};

/// KEP-5526's three families, every series present from the start.
fn resource_manager_families(node: &Node) -> [Family; 3] {
    use crate::node::resource_metrics::{ASSIGNMENTS, RESOURCES, SOURCES};
    let metrics = node.resource_metrics();
    let by = |counters: &[[AtomicU64; 2]; 2]| {
        let mut series = Vec::new();
        for (r, resource) in RESOURCES.iter().enumerate() {
            for (s, source) in SOURCES.iter().enumerate() {
                series.push(Series {
                    labels: vec![
                        ("resource_name".to_owned(), (*resource).to_owned()),
                        ("source".to_owned(), (*source).to_owned()),
                    ],
                    value: count(&counters[r][s]),
                });
            }
        }
        series
    };
    let mut assignments = Vec::new();
    for (r, resource) in RESOURCES.iter().enumerate() {
        for (a, assignment) in ASSIGNMENTS.iter().enumerate() {
            assignments.push(Series {
                labels: vec![
                    ("resource_name".to_owned(), (*resource).to_owned()),
                    ("assignment_type".to_owned(), (*assignment).to_owned()),
                ],
                value: count(&metrics.assignments[r][a]),
            });
        }
    }
    [
        alpha(&RESOURCE_MANAGER_ALLOCATIONS, by(&metrics.allocations)),
        alpha(&RESOURCE_MANAGER_ERRORS, by(&metrics.errors)),
        alpha(&RESOURCE_MANAGER_ASSIGNMENTS, assignments),
    ]
}

/// An upstream (ALPHA) family: component-base writes the stability level before the help.
fn alpha(def: &Def, series: Vec<Series>) -> Family {
    Family {
        name: def.name.to_owned(),
        help: format!("[ALPHA] {}", def.help),
        kind: def.kind,
        series,
    }
}

fn count(counter: &AtomicU64) -> Value {
    Value::Number(counter.load(Ordering::Relaxed) as f64)
}

/// An alpha family of one unlabelled counter.
fn counter(def: &Def, value: &AtomicU64) -> Family {
    alpha(def, vec![Series::plain(count(value))])
}

/// `scope` and `boundary` labels of the alignment counters.
fn aligned(scope: &str, boundary: &str, value: Value) -> Series {
    Series {
        labels: vec![
            ("scope".to_owned(), scope.to_owned()),
            ("boundary".to_owned(), boundary.to_owned()),
        ],
        value,
    }
}

/// Every family, as the kubelet would export it for this node now.
pub(crate) fn families(node: &Node) -> Vec<Family> {
    let mut families = Vec::new();

    let topology = node.topology();
    let tm = topology.metrics();
    let durations = tm.admission_duration_ms.snapshot();
    families.push(counter(
        &TOPOLOGY_ADMISSION_REQUESTS,
        &tm.admission_requests_total,
    ));
    families.push(counter(
        &TOPOLOGY_ADMISSION_ERRORS,
        &tm.admission_errors_total,
    ));
    families.push(alpha(
        &TOPOLOGY_ADMISSION_DURATION,
        vec![Series::plain(Value::Histogram(HistogramSnapshot {
            buckets: corral_topology::topologymanager::ADMISSION_DURATION_MS_BUCKETS
                .iter()
                .copied()
                .zip(durations.cumulative)
                .collect(),
            count: durations.count,
            sum: durations.sum_ms as f64,
        }))],
    ));

    let cpu = node.cpu();
    let cm = cpu.metrics();
    let state = cpu.state();
    let is_static = cpu.policy_name() == "static";
    let exclusive = state.exclusive_cpus();
    // Upstream `GetAvailableCPUs`: the shared pool minus the reserved CPUs (0 under `none`,
    // which never sets the gauge).
    let shared = state
        .default_cpu_set()
        .intersection(&cpu.allocatable_cpus());
    families.push(counter(&CPU_PINNING_REQUESTS, &cm.pinning_requests_total));
    families.push(counter(&CPU_PINNING_ERRORS, &cm.pinning_errors_total));
    families.push(alpha(
        &CPU_SHARED_POOL,
        vec![Series::plain(Value::Number((shared.len() * 1000) as f64))],
    ));
    families.push(alpha(
        &CPU_EXCLUSIVE,
        vec![Series::plain(Value::Number(exclusive.len() as f64))],
    ));
    let mut per_numa = Vec::new();
    if is_static {
        let index = cpu.topology();
        for &bit in index.numa_node_ids() {
            let held = index.cpus_in_numa_node(bit).intersection(&exclusive).len();
            let id = index.topology().numa_ids().os_id(bit).unwrap_or(bit);
            per_numa.push(Series::number(
                &[("numa_node", &id.to_string())],
                held as f64,
            ));
        }
    }
    families.push(alpha(&CPU_PER_NUMA, per_numa));

    // Registered whatever the policy (upstream registers them while the MemoryManager gate,
    // GA and locked, is on); only the Static policy counts.
    let mm = node.memory().metrics();
    families.push(counter(
        &MEMORY_PINNING_REQUESTS,
        &mm.pinning_requests_total,
    ));
    families.push(counter(&MEMORY_PINNING_ERRORS, &mm.pinning_errors_total));

    // Which series exist follows upstream: the static CPU policy's `initializeMetrics`
    // creates the physical_cpu and uncore_cache ones, a topology manager policy other than
    // `none` the numa_node ones.
    let mut successes = Vec::new();
    let mut failures = Vec::new();
    if is_static {
        successes.push(aligned(
            "container",
            "physical_cpu",
            count(&cm.aligned_physical_cpu_total),
        ));
        successes.push(aligned(
            "container",
            "uncore_cache",
            count(&cm.aligned_uncore_cache_total),
        ));
        failures.push(aligned(
            "container",
            "physical_cpu",
            count(&cm.aligned_physical_cpu_failures_total),
        ));
    }
    if topology.scope().is_some() {
        let numa = &tm.numa_alignment;
        successes.push(aligned("container", "numa_node", count(&numa.container)));
        successes.push(aligned("pod", "numa_node", count(&numa.pod)));
        failures.push(aligned(
            "container",
            "numa_node",
            count(&numa.container_failures),
        ));
        failures.push(aligned("pod", "numa_node", count(&numa.pod_failures)));
    }
    families.push(alpha(&ALIGNED, successes));
    families.push(alpha(&ALIGNED_FAILURES, failures));

    families.extend(resource_manager_families(node));

    let devices = node.device_metrics();
    families.push(alpha(
        &DEVICE_PLUGIN_REGISTRATIONS,
        devices.registrations.series(),
    ));
    families.push(alpha(
        &DEVICE_PLUGIN_ALLOC_DURATION,
        devices.alloc_duration.series(),
    ));

    families.push(alpha(
        &DRA_OPERATIONS_DURATION,
        node.dra_durations().series(),
    ));
    families.push(alpha(
        &DRA_CLAIMS_IN_USE,
        node.dra_claims_in_use()
            .into_iter()
            .map(|(driver, claims)| Series::number(&[("driver_name", &driver)], claims as f64))
            .collect(),
    ));

    families.push(Family {
        name: "corral_admitted_pods".to_owned(),
        help: "Pods admitted and not released".to_owned(),
        kind: Kind::Gauge,
        series: vec![Series::plain(Value::Number(node.pods().len() as f64))],
    });
    families.push(Family {
        name: "corral_topology_manager_approximate_decisions_total".to_owned(),
        help: "Admissions whose topology decision ran out of its search budget (affinities best found, not proven upstream's)".to_owned(),
        kind: Kind::Counter,
        series: vec![Series::plain(count(&tm.approximate_decisions_total))],
    });
    families.push(Family {
        name: "corral_state_journal_syncs_total".to_owned(),
        help:
            "fsync and fdatasync calls the state journal made (one per committed change of state)"
                .to_owned(),
        kind: Kind::Counter,
        series: vec![Series::plain(Value::Number(node.state_syncs() as f64))],
    });
    families
}

/// Families that live outside the node (the NodeResourceTopology publisher's counters).
pub(crate) type ExtraFamilies = Arc<dyn Fn() -> Vec<Family> + Send + Sync>;

/// The body of `GET /metrics` (the node's families only).
#[cfg(test)]
pub(crate) fn render(node: &Node) -> String {
    exposition::encode(&families(node))
}

/// The body of `GET /metrics` with `extra`'s families after the node's, the node's read
/// settled ([`Node::settled`]): a gauge never counts the CPUs of a decision under way that
/// is yet to be given back (a dry run's trial, a refusal), nor a counter a trial's count.
pub(crate) async fn render_settled(
    node: &Arc<Node>,
    extra: &ExtraFamilies,
) -> anyhow::Result<String> {
    let mut all = node.settled(families).await?;
    all.extend(extra());
    Ok(exposition::encode(&all))
}

#[cfg(test)]
pub(super) mod tests;
