//! How the static policy takes CPUs: the assignment algorithm its options select
//! (upstream `takeByTopology`) and upstream's `allocateCPUs` (aligned CPUs first).

use corral_topology::{CpuSet, NumaMask};

use super::StaticPolicy;
use crate::assignment::{
    DistributedOptions, TakeError, take_by_topology_numa_distributed_with,
    take_by_topology_numa_packed,
};
use crate::state::CpuState;

impl StaticPolicy {
    /// Upstream `takeByTopology`: the assignment algorithm the options select.
    pub fn take_by_topology(
        &self,
        available: &CpuSet,
        num_cpus: usize,
    ) -> Result<CpuSet, TakeError> {
        self.take_by_topology_over_at_least(available, num_cpus, 0)
    }

    /// [`Self::take_by_topology`] for CPUs aligned with an affinity of `min_numas` NUMA
    /// nodes: with `distribute-cpus-across-numa`, spread over at least that many nodes
    /// (upstream v1.38's `minNUMAsFromHint`, #139456), and with `align-by-socket` within one
    /// socket where a combination of that size fits (#141238); see [`DistributedOptions`].
    /// Packing ignores both.
    pub fn take_by_topology_over_at_least(
        &self,
        available: &CpuSet,
        num_cpus: usize,
        min_numas: usize,
    ) -> Result<CpuSet, TakeError> {
        let strategy = self.options.sorting_strategy();
        if self.options.distribute_cpus_across_numa {
            let group = if self.options.full_physical_cpus_only {
                self.cpu_group_size
            } else {
                1
            };
            let options = DistributedOptions {
                min_numas,
                socket_alignment: self.options.socket_alignment(),
                ..DistributedOptions::new(group, strategy)
            };
            return take_by_topology_numa_distributed_with(
                &self.index,
                available,
                num_cpus,
                options,
            );
        }
        take_by_topology_numa_packed(
            &self.index,
            available,
            num_cpus,
            strategy,
            self.options.uncore_cache_alignment(),
        )
    }

    /// Upstream `getAlignedCPUs`.
    fn aligned_cpus(&self, mask: NumaMask, allocatable: &CpuSet) -> CpuSet {
        let mut aligned = CpuSet::new();
        if self.options.align_by_socket {
            let mut sockets = CpuSet::new();
            for numa in mask.iter() {
                for cpu in &self.index.cpus_in_numa_node(numa) {
                    if let Some(info) = self.index.topology().cpu(cpu) {
                        sockets.insert(info.socket);
                    }
                }
            }
            for socket in &sockets {
                aligned.union_with(&allocatable.intersection(&self.index.cpus_in_socket(socket)));
            }
            return aligned;
        }
        for numa in mask.iter() {
            aligned.union_with(&allocatable.intersection(&self.index.cpus_in_numa_node(numa)));
        }
        aligned
    }

    /// Upstream `allocateCPUs`: aligned CPUs first (spread over at least the affinity's NUMA
    /// nodes with `distribute-cpus-across-numa`, v1.38), then the rest.
    pub(in crate::policy) fn allocate_cpus(
        &self,
        state: &mut CpuState,
        num_cpus: usize,
        affinity: Option<NumaMask>,
        reusable: &CpuSet,
    ) -> Result<CpuSet, TakeError> {
        super::log::allocate_cpus(num_cpus, affinity);
        let allocatable = self.available_cpus(state).union(reusable);
        let mut result = CpuSet::new();
        if let Some(mask) = affinity {
            let aligned = self.aligned_cpus(mask, &allocatable);
            let n = num_cpus.min(aligned.len());
            result.union_with(&self.take_by_topology_over_at_least(&aligned, n, mask.count())?);
        }
        let rest =
            self.take_by_topology(&allocatable.difference(&result), num_cpus - result.len())?;
        result.union_with(&rest);
        state.set_default_cpu_set(state.default_cpu_set().difference(&result));
        super::log::allocate_cpus_result(&result);
        Ok(result)
    }
}
