//! KEP-5526's resource-manager counters (v1.37, ALPHA, no `kubelet_` prefix, as upstream's
//! metrics reference lists them): `resource_manager_allocations_total{resource_name,source}`,
//! `resource_manager_allocation_errors_total{resource_name,source}` and
//! `resource_manager_container_assignments{resource_name,assignment_type}`, for `cpu` and
//! `memory`. An allocation is a container's exclusive CPUs or pinned memory; its source is
//! `pod` when carved from its pod's pod-level budget, `node` otherwise. A container of a pod
//! managed at pod level that gets nothing of its own runs in the pod's shared pool
//! (`pod_shared`). An error is counted when the CPU manager refused the pinning (the
//! memory manager keeps no error count corral could attribute yet).

use std::sync::atomic::{AtomicU64, Ordering};

use corral_topology::Pod;
use corral_topology::topologymanager::PodGrants;

/// The two resources.
pub(crate) const RESOURCES: [&str; 2] = ["cpu", "memory"];
/// The two sources.
pub(crate) const SOURCES: [&str; 2] = ["node", "pod"];
/// The three assignment types.
pub(crate) const ASSIGNMENTS: [&str; 3] = ["node_exclusive", "pod_exclusive", "pod_shared"];

/// The counters, by resource then source or assignment type (the orders above).
#[derive(Debug, Default)]
pub(crate) struct ResourceManagerMetrics {
    pub(crate) allocations: [[AtomicU64; 2]; 2],
    pub(crate) errors: [[AtomicU64; 2]; 2],
    pub(crate) assignments: [[AtomicU64; 3]; 2],
}

impl ResourceManagerMetrics {
    /// Count an admitted pod's grants; `pod_level` when its budget is managed at pod level,
    /// where a container holds CPUs or memory of its own only when it alone would be
    /// Guaranteed (upstream `IsContainerEquivalentQOSGuaranteed`) and the others run in the
    /// pod's shared pool, whatever their grant shows of that pool.
    pub(crate) fn admitted(&self, pod: &Pod, grants: &PodGrants, pod_level: bool) {
        let source = usize::from(pod_level);
        // A resource no container got anything of (e.g. memory under the `None` policy)
        // is not managed for this pod: nobody runs in its pool.
        let pod_holds = [
            grants.values().any(|g| !g.exclusive_cpus.is_empty()),
            grants.values().any(|g| !g.memory.is_empty()),
        ];
        for (_, container) in pod.all_containers() {
            let grant = grants.get(&container.name);
            let held = [
                grant.is_some_and(|g| !g.exclusive_cpus.is_empty()),
                grant.is_some_and(|g| !g.memory.is_empty()),
            ];
            let own = !pod_level || container.is_equivalent_guaranteed();
            for (resource, held) in held.into_iter().enumerate() {
                if !pod_holds[resource] {
                    continue;
                }
                let assignment = match (held && own, pod_level) {
                    (true, false) => 0,
                    (true, true) => 1,
                    (false, true) => 2,
                    (false, false) => continue,
                };
                if assignment != 2 {
                    self.allocations[resource][source].fetch_add(1, Ordering::Relaxed);
                }
                self.assignments[resource][assignment].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Count a CPU pinning the CPU manager refused.
    pub(crate) fn cpu_refused(&self, pod_level: bool) {
        self.errors[0][usize::from(pod_level)].fetch_add(1, Ordering::Relaxed);
    }
}
