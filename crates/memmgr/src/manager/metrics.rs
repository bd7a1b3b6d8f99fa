//! [`MemoryManagerMetrics`]: the memory manager's counters.

use std::sync::atomic::AtomicU64;

/// Counters with upstream's metric names (`pkg/kubelet/metrics/metrics.go`), counted where
/// upstream's static policy counts them: once per `Allocate` of a container of a
/// Guaranteed pod the policy does not skip (a container already allocated included), once
/// per `AllocatePod` of a Guaranteed pod managed at pod level.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::atomic::Ordering;
/// use corral_memmgr::{MemoryManager, MemoryManagerConfig};
///
/// let manager = MemoryManager::new(&MemoryManagerConfig::default(), &BTreeMap::new())?;
/// assert_eq!(manager.metrics().pinning_requests_total.load(Ordering::Relaxed), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct MemoryManagerMetrics {
    /// `kubelet_memory_manager_pinning_requests_total`: allocations that required pinning
    /// memory (static policy).
    pub pinning_requests_total: AtomicU64,
    /// `kubelet_memory_manager_pinning_errors_total`: those that failed.
    pub pinning_errors_total: AtomicU64,
}
