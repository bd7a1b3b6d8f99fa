//! What the static policy logs, with upstream's messages, keys and verbosities
//! (`memorymanager/policy_static.go`): klog's `Info` is INFO, `V(4)` TRACE. The values
//! upstream's `Allocate` adds to its logger (`klog.LoggerWithValues`: pod, containerName)
//! are the fields of a span around the allocation.

use corral_topology::{Container, Pod};

/// The span of one container's `Allocate` (upstream's logger with values).
pub(super) fn allocate_span(pod: &Pod, container: &Container) -> tracing::Span {
    tracing::info_span!("Allocate", pod = %pod.key(), containerName = %container.name)
}
