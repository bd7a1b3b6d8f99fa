//! [`CpuManagerMetrics`]: the CPU manager's counters.

use std::sync::atomic::AtomicU64;

/// Counters with upstream's metric names (`pkg/kubelet/metrics/metrics.go`), counted where
/// upstream's static policy counts them (`Allocate`, `updateMetricsOnAllocate`).
#[derive(Debug, Default)]
pub struct CpuManagerMetrics {
    /// `kubelet_cpu_manager_pinning_requests_total`: allocations of a container that needs
    /// exclusive CPUs (static policy).
    pub pinning_requests_total: AtomicU64,
    /// `kubelet_cpu_manager_pinning_errors_total`: those that failed.
    pub pinning_errors_total: AtomicU64,
    /// `kubelet_container_aligned_compute_resources_count{scope="container",
    /// boundary="physical_cpu"}`: pinned allocations that succeeded with `full-pcpus-only`.
    pub aligned_physical_cpu_total: AtomicU64,
    /// `kubelet_container_aligned_compute_resources_failure_count{scope="container",
    /// boundary="physical_cpu"}`: pinned allocations that failed with `full-pcpus-only`.
    pub aligned_physical_cpu_failures_total: AtomicU64,
    /// `kubelet_container_aligned_compute_resources_count{scope="container",
    /// boundary="uncore_cache"}`: new exclusive allocations whose CPUs all share one uncore
    /// cache (upstream `Allocation.Aligned.UncoreCache`, whatever the options).
    pub aligned_uncore_cache_total: AtomicU64,
}
