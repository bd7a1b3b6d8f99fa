//! [`CpuDetails`]: upstream's `CPUDetails` queries over a subset of a topology's CPUs.
//!
//! Upstream's `CPUDetails` is a map CPU → info that `KeepOnly` copies; here it is a borrowed
//! topology plus a [`CpuSet`] of the CPUs kept, so `keep_only` is one intersection and every
//! "CPUs in …" query is a union of precomputed per-id sets intersected with the kept CPUs.
//! Queries returning ids of cores, sockets, NUMA nodes or uncore caches return them as a
//! [`CpuSet`] too, as upstream does.

use crate::{CpuInfo, CpuSet, CpuTopology};

/// A view of some CPUs of a [`CpuTopology`] (upstream `CPUDetails`).
///
/// # Example
///
/// ```
/// use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology};
///
/// // Two sockets (one NUMA node each) of 2 cores × 2 threads.
/// let records: Vec<CpuRecord> = (0..8)
///     .map(|cpu| CpuRecord {
///         cpu,
///         info: CpuInfo { core: cpu % 4, socket: (cpu % 4) / 2, numa: (cpu % 4) / 2, uncore: (cpu % 4) / 2 },
///     })
///     .collect();
/// let topo = CpuTopology::new(&records)?;
/// let free = topo.details().keep_only(&"1-3,5,7".parse()?);
/// assert_eq!(free.len(), 5);
/// assert_eq!(free.numa_nodes(), CpuSet::from_iter([0, 1]));
/// assert_eq!(free.cpus_in_numa_nodes([1]), "2-3,7".parse()?);
/// assert_eq!(free.get(0), None, "CPU 0 is not in the view");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuDetails<'a> {
    topo: &'a CpuTopology,
    cpus: CpuSet,
}

/// Methods `name(ids) -> CpuSet`: the `field` ids of the view's CPUs in the groups `ids`
/// (found by the method `cpus_in`).
macro_rules! ids_in_groups {
    ($($(#[$doc:meta])* $name:ident => $field:ident of $cpus_in:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, ids: impl IntoIterator<Item = usize>) -> CpuSet {
                self.ids_of(&self.$cpus_in(ids), |i| i.$field)
            }
        )*
    };
}

impl<'a> CpuDetails<'a> {
    /// A view of `cpus` (CPUs the topology does not have are dropped).
    pub fn new(topo: &'a CpuTopology, cpus: CpuSet) -> CpuDetails<'a> {
        let cpus = cpus.intersection(topo.all_cpus());
        CpuDetails { topo, cpus }
    }

    /// The topology viewed.
    pub fn topology(&self) -> &'a CpuTopology {
        self.topo
    }

    /// Upstream `KeepOnly`: the view restricted to `cpus`.
    #[must_use]
    pub fn keep_only(&self, cpus: &CpuSet) -> CpuDetails<'a> {
        CpuDetails {
            topo: self.topo,
            cpus: self.cpus.intersection(cpus),
        }
    }

    /// Where `cpu` sits, if it is in the view.
    pub fn get(&self, cpu: usize) -> Option<CpuInfo> {
        if self.cpus.contains(cpu) {
            self.topo.cpu(cpu)
        } else {
            None
        }
    }

    /// Number of CPUs in the view.
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// Whether the view has no CPU.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// Upstream `CPUs`.
    pub fn cpus(&self) -> CpuSet {
        self.cpus.clone()
    }

    /// The ids `field` takes over the CPUs in `cpus` (all in the view).
    fn ids_of(&self, cpus: &CpuSet, field: fn(&CpuInfo) -> usize) -> CpuSet {
        cpus.iter()
            .filter_map(|cpu| self.topo.cpu(cpu))
            .map(|info| field(&info))
            .collect()
    }

    /// CPUs of the view whose `lookup(id)` group matches one of `ids`.
    fn cpus_in<'s>(
        &'s self,
        ids: impl IntoIterator<Item = usize>,
        lookup: impl Fn(usize) -> Option<&'s CpuSet>,
    ) -> CpuSet {
        let mut out = CpuSet::new();
        for id in ids {
            if let Some(group) = lookup(id) {
                out.union_with(group);
            }
        }
        out.intersect_with(&self.cpus);
        out
    }

    /// Upstream `NUMANodes`: NUMA node ids of the view's CPUs.
    pub fn numa_nodes(&self) -> CpuSet {
        self.ids_of(&self.cpus, |i| i.numa)
    }

    /// Upstream `Sockets`.
    pub fn sockets(&self) -> CpuSet {
        self.ids_of(&self.cpus, |i| i.socket)
    }

    /// Upstream `Cores`.
    pub fn cores(&self) -> CpuSet {
        self.ids_of(&self.cpus, |i| i.core)
    }

    /// Upstream `UncoreCaches`.
    pub fn uncore_caches(&self) -> CpuSet {
        self.ids_of(&self.cpus, |i| i.uncore)
    }

    /// Upstream `CPUsInNUMANodes`.
    pub fn cpus_in_numa_nodes(&self, ids: impl IntoIterator<Item = usize>) -> CpuSet {
        self.cpus_in(ids, |id| self.topo.cpus_with_numa(id))
    }

    /// Upstream `CPUsInSockets`.
    pub fn cpus_in_sockets(&self, ids: impl IntoIterator<Item = usize>) -> CpuSet {
        self.cpus_in(ids, |id| self.topo.cpus_with_socket(id))
    }

    /// Upstream `CPUsInCores`.
    pub fn cpus_in_cores(&self, ids: impl IntoIterator<Item = usize>) -> CpuSet {
        self.cpus_in(ids, |id| self.topo.cpus_with_core(id))
    }

    /// Upstream `CPUsInUncoreCaches`.
    pub fn cpus_in_uncore_caches(&self, ids: impl IntoIterator<Item = usize>) -> CpuSet {
        self.cpus_in(ids, |id| self.topo.cpus_with_uncore(id))
    }

    ids_in_groups! {
        /// Upstream `NUMANodesInSockets`.
        numa_nodes_in_sockets => numa of cpus_in_sockets;
        /// Upstream `SocketsInNUMANodes`.
        sockets_in_numa_nodes => socket of cpus_in_numa_nodes;
        /// Upstream `CoresInNUMANodes`.
        cores_in_numa_nodes => core of cpus_in_numa_nodes;
        /// Upstream `CoresInSockets`.
        cores_in_sockets => core of cpus_in_sockets;
        /// Upstream `UncoreInNUMANodes`.
        uncore_in_numa_nodes => uncore of cpus_in_numa_nodes;
        /// Core ids of the view's CPUs in the given uncore caches.
        cores_in_uncore_caches => core of cpus_in_uncore_caches;
    }

    /// Upstream `CoresNeededInUncoreCache`: the cores of the given uncore caches, or the
    /// `needed` lowest core ids of them when there are more.
    pub fn cores_needed_in_uncore_cache(
        &self,
        needed: usize,
        ids: impl IntoIterator<Item = usize>,
    ) -> CpuSet {
        let cores = self.cores_in_uncore_caches(ids);
        if cores.len() <= needed {
            cores
        } else {
            cores.first_n(needed)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{CpuInfo, CpuRecord, CpuSet, CpuTopology};

    /// 2 sockets × 2 NUMA... one NUMA per socket, 2 cores × 2 threads per socket, one L3 per
    /// socket.
    fn topo() -> CpuTopology {
        let recs: Vec<CpuRecord> = (0..8)
            .map(|cpu| {
                let core = cpu % 4;
                let socket = core / 2;
                CpuRecord {
                    cpu,
                    info: CpuInfo {
                        core,
                        socket,
                        numa: socket,
                        uncore: socket,
                    },
                }
            })
            .collect();
        CpuTopology::new(&recs).unwrap()
    }

    #[test]
    fn queries() {
        let topo = topo();
        let d = topo.details();
        let set = |s: &str| s.parse::<CpuSet>().unwrap();
        assert_eq!(d.cpus_in_numa_nodes([1]), set("2-3,6-7"));
        assert_eq!(d.cpus_in_sockets([0]), set("0-1,4-5"));
        assert_eq!(d.cpus_in_cores([0, 3]), set("0,3-4,7"));
        assert_eq!(d.cpus_in_uncore_caches([0]), set("0-1,4-5"));
        assert_eq!(d.cores_in_numa_nodes([1]), set("2-3"));
        assert_eq!(d.cores_in_sockets([0]), set("0-1"));
        assert_eq!(d.numa_nodes_in_sockets([1]), set("1"));
        assert_eq!(d.sockets_in_numa_nodes([0, 1]), set("0-1"));
        assert_eq!(d.uncore_in_numa_nodes([1]), set("1"));
        assert_eq!(d.cores_needed_in_uncore_cache(1, [1]), set("2"));
        assert_eq!(d.cores_needed_in_uncore_cache(5, [1]), set("2-3"));
        let kept = d.keep_only(&set("0,2,9"));
        assert_eq!(kept.cpus(), set("0,2"));
        assert_eq!(kept.cores(), set("0,2"));
        assert_eq!(kept.sockets(), set("0-1"));
        assert_eq!(kept.cpus_in_numa_nodes([0]), set("0"));
        assert!(kept.get(1).is_none());
        assert_eq!(kept.len(), 2);
    }
}
