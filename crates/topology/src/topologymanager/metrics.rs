//! What the topology manager measures for upstream's metrics
//! (`pkg/kubelet/metrics/metrics.go`): the admission latency histogram and the NUMA
//! alignment counters. Plain atomics, read by whoever exports them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of `topology_manager_admission_duration_ms`, in milliseconds (upstream
/// `metrics.ExponentialBuckets(.05, 2, 15)`).
pub const ADMISSION_DURATION_MS_BUCKETS: [f64; 15] = [
    0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6, 819.2,
];

/// `topology_manager_admission_duration_ms`: how long [`TopologyManager::admit`] took. As
/// upstream, each admission is observed in whole milliseconds (Go's
/// `time.Since(start).Milliseconds()`), so one under a millisecond counts as 0.
///
/// [`TopologyManager::admit`]: super::TopologyManager::admit
#[derive(Debug, Default)]
pub struct AdmissionDurations {
    /// Per bucket of [`ADMISSION_DURATION_MS_BUCKETS`], then `+Inf` (not cumulative).
    counts: [AtomicU64; ADMISSION_DURATION_MS_BUCKETS.len() + 1],
    sum_ms: AtomicU64,
}

/// [`AdmissionDurations`] at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionDurationsSnapshot {
    /// Admissions at or below each bound of [`ADMISSION_DURATION_MS_BUCKETS`] (cumulative).
    pub cumulative: [u64; ADMISSION_DURATION_MS_BUCKETS.len()],
    /// Every admission.
    pub count: u64,
    /// Sum of the observed whole milliseconds.
    pub sum_ms: u64,
}

impl AdmissionDurations {
    /// Record one admission that took `elapsed`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use corral_topology::topologymanager::AdmissionDurations;
    ///
    /// let durations = AdmissionDurations::default();
    /// durations.observe(Duration::from_micros(700)); // 0 ms
    /// durations.observe(Duration::from_millis(3));
    /// let snapshot = durations.snapshot();
    /// assert_eq!((snapshot.count, snapshot.sum_ms), (2, 3));
    /// assert_eq!(snapshot.cumulative[0], 1); // le 0.05
    /// assert_eq!(snapshot.cumulative[6], 2); // le 3.2
    /// ```
    pub fn observe(&self, elapsed: Duration) {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        let value = ms as f64;
        let bucket = ADMISSION_DURATION_MS_BUCKETS.partition_point(|bound| *bound < value);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// The current values.
    pub fn snapshot(&self) -> AdmissionDurationsSnapshot {
        let mut cumulative = [0; ADMISSION_DURATION_MS_BUCKETS.len()];
        let mut running = 0;
        for (slot, count) in cumulative.iter_mut().zip(&self.counts) {
            running += count.load(Ordering::Relaxed);
            *slot = running;
        }
        let count =
            running + self.counts[ADMISSION_DURATION_MS_BUCKETS.len()].load(Ordering::Relaxed);
        AdmissionDurationsSnapshot {
            cumulative,
            count,
            sum_ms: self.sum_ms.load(Ordering::Relaxed),
        }
    }
}

/// `container_aligned_compute_resources_count` and
/// `container_aligned_compute_resources_failure_count` with `boundary="numa_node"`: what the
/// topology manager counts (upstream `containerScope.Admit`, `podScope.Admit`), only under
/// a policy that guarantees alignment (`single-numa-node`, upstream
/// `IsAlignmentGuaranteed`).
#[derive(Debug, Default)]
pub struct AlignmentCounters {
    /// `scope="container"`: containers allocated within one NUMA node.
    pub container: AtomicU64,
    /// `scope="pod"`: pods allocated within one NUMA node.
    pub pod: AtomicU64,
    /// `scope="container"` failures: containers whose hints could not be merged.
    pub container_failures: AtomicU64,
    /// `scope="pod"` failures: pods whose hints could not be merged.
    pub pod_failures: AtomicU64,
}

pub(super) fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// What the topology manager measures, named after upstream's metrics
/// (`kubelet_topology_manager_admission_requests_total`, `…_admission_errors_total`,
/// `…_admission_duration_ms`, and `kubelet_container_aligned_compute_resources_count` /
/// `…_failure_count` with `boundary="numa_node"`), counted where upstream counts them.
#[derive(Debug, Default)]
pub struct ManagerMetrics {
    /// Pods admitted or rejected through [`TopologyManager::admit`](super::TopologyManager::admit).
    pub admission_requests_total: AtomicU64,
    /// Pods rejected in the `container` or `pod` scope, by the policy or by a provider's
    /// allocation (as upstream, a rejection under the `none` policy is not counted).
    pub admission_errors_total: AtomicU64,
    /// How long each [`TopologyManager::admit`](super::TopologyManager::admit) took.
    pub admission_duration_ms: AdmissionDurations,
    /// NUMA alignment achieved or failed, under a policy that guarantees it.
    pub numa_alignment: AlignmentCounters,
    /// Admissions whose searches ran out of their [budget](super::bounded) (corral's own:
    /// `corral_topology_manager_approximate_decisions_total`; see
    /// [`PodAdmitResult::approximate`](super::PodAdmitResult::approximate)).
    pub approximate_decisions_total: AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_whole_milliseconds_in_upstream_buckets() {
        let durations = AdmissionDurations::default();
        for ms in [0, 1, 2, 800, 819, 820, 5000] {
            durations.observe(Duration::from_millis(ms) + Duration::from_micros(999));
        }
        let snapshot = durations.snapshot();
        assert_eq!(snapshot.count, 7);
        assert_eq!(snapshot.sum_ms, 1 + 2 + 800 + 819 + 820 + 5000);
        // le: 0.05 0.1 0.2 0.4 0.8 1.6 3.2 ... 409.6 819.2
        assert_eq!(
            snapshot.cumulative,
            [1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 5]
        );
    }
}
