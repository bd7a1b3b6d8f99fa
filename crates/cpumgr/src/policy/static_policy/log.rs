//! What the static policy logs, with upstream's messages, keys and verbosities
//! (`cpumanager/policy_static.go`): klog's `Info` is INFO, `V(2)` DEBUG, `V(4)` TRACE. The
//! values upstream's `Allocate` adds to its logger (`klog.LoggerWithValues`: pod, podUID,
//! containerName) are the fields of a span around the allocation.

use corral_topology::topologymanager::HintSet;
use corral_topology::{Container, CpuSet, NumaMask, Pod, TopologyHint};

/// The span of one container's `Allocate` (upstream's logger with values).
pub(super) fn allocate_span(pod: &Pod, container: &Container) -> tracing::Span {
    tracing::info_span!(
        "Allocate",
        pod = %pod.key(),
        podUID = %pod.uid,
        containerName = %container.name
    )
}

/// The span of one pod's `AllocatePod`.
pub(super) fn allocate_pod_span(pod: &Pod) -> tracing::Span {
    tracing::info_span!("AllocatePod", pod = %pod.key())
}

/// Upstream's `Allocate start` (V(0)) and, when dropped, `Allocate end` (V(2)).
pub(super) struct AllocateLog;

impl AllocateLog {
    pub(super) fn start() -> AllocateLog {
        tracing::info!("Allocate start");
        AllocateLog
    }
}

impl Drop for AllocateLog {
    fn drop(&mut self) {
        tracing::debug!("Allocate end");
    }
}

pub(super) fn already_present() {
    tracing::info!("Static policy: container already present in state, skipping");
}

pub(super) fn topology_affinity(affinity: TopologyHint) {
    tracing::info!(affinity = %affinity, "Topology Affinity");
}

pub(super) fn allocated(cpus: &CpuSet) {
    tracing::trace!(cpuset = %cpus, "Allocated exclusive CPUs");
}

pub(super) fn unable_to_allocate(num_cpus: usize, err: &(dyn std::error::Error + 'static)) {
    tracing::error!(err, numCPUs = num_cpus, "Unable to allocate CPUs");
}

/// Upstream `allocateCPUs`' first line: the request and the affinity's mask (`socket`, as
/// its binary `String`; absent for no affinity, upstream's nil).
pub(super) fn allocate_cpus(num_cpus: usize, affinity: Option<NumaMask>) {
    match affinity {
        Some(mask) => tracing::info!(numCPUs = num_cpus, socket = %mask, "AllocateCPUs"),
        None => tracing::info!(numCPUs = num_cpus, "AllocateCPUs"),
    }
}

/// Upstream `allocateCPUs`' last line.
pub(super) fn allocate_cpus_result(result: &CpuSet) {
    tracing::info!(result = %result, "AllocateCPUs");
}

/// The hints of `GetTopologyHints` (`container` given) or `GetPodTopologyHints`.
pub(super) fn hints_generated(pod: &Pod, container: Option<&Container>, hints: &HintSet) {
    match container {
        Some(c) => tracing::info!(
            pod = %pod.key(),
            podUID = %pod.uid,
            containerName = %c.name,
            cpuHints = %hints,
            "TopologyHints generated"
        ),
        None => tracing::info!(
            pod = %pod.key(),
            podUID = %pod.uid,
            cpuHints = %hints,
            "TopologyHints generated"
        ),
    }
}

/// Hints regenerated from the CPUs a container (or the pod) already holds.
pub(super) fn regenerating(pod: &Pod, container: Option<&Container>) {
    match container {
        Some(c) => tracing::info!(
            pod = %pod.key(),
            podUID = %pod.uid,
            containerName = %c.name,
            "Regenerating TopologyHints for CPUs already allocated"
        ),
        None => tracing::info!(
            pod = %pod.key(),
            podUID = %pod.uid,
            "Regenerating TopologyHints for CPUs already allocated"
        ),
    }
}

/// A container holds another number of CPUs than it requests: no hint can satisfy it.
pub(super) fn different_number(pod: &Pod, container: &Container, requested: usize, held: usize) {
    tracing::info!(
        pod = %pod.key(),
        podUID = %pod.uid,
        containerName = %container.name,
        requestedSize = requested,
        allocatedSize = held,
        "CPUs already allocated to container with different number than request"
    );
}
