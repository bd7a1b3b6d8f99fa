//! [`TopologyIndex`]: a [`CpuTopology`] re-indexed for the assignment and hint hot paths.
//!
//! Upstream's `CPUDetails` is a map that every query walks. Here every core, socket, NUMA node
//! and uncore cache gets a dense index (ascending id order, so sorting by dense index is
//! sorting by id), each group keeps its CPUs as a [`CpuSet`], and each CPU knows its groups'
//! dense indices. Built once per topology (the static policy keeps one).

use corral_topology::{CpuSet, CpuTopology, TopologyCounts};

/// The four kinds of CPU groups upstream's algorithms walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Numa,
    Socket,
    Core,
    Uncore,
}

/// One kind of group: ids ascending, and each group's CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Groups {
    /// Group ids, ascending; position = dense index.
    pub(crate) ids: Vec<usize>,
    /// CPUs of each group, by dense index.
    pub(crate) cpus: Vec<CpuSet>,
    /// The fewest CPUs any group has (0 without groups).
    pub(crate) smallest: usize,
}

impl Groups {
    fn dense(&self, id: usize) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }
}

/// Per-CPU dense group indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    pub(crate) numa: u32,
    pub(crate) socket: u32,
    pub(crate) core: u32,
    pub(crate) uncore: u32,
}

impl Placement {
    pub(crate) fn of(self, level: Level) -> usize {
        (match level {
            Level::Numa => self.numa,
            Level::Socket => self.socket,
            Level::Core => self.core,
            Level::Uncore => self.uncore,
        }) as usize
    }
}

/// A CPU topology indexed for CPU assignment and hint generation.
///
/// ```
/// use corral_cpumgr::TopologyIndex;
/// use corral_topology::{CpuInfo, CpuRecord, CpuTopology};
///
/// let records: Vec<CpuRecord> = (0..4)
///     .map(|cpu| CpuRecord { cpu, info: CpuInfo { core: cpu % 2, socket: 0, numa: 0, uncore: 0 } })
///     .collect();
/// let index = TopologyIndex::new(&CpuTopology::new(&records)?);
/// assert_eq!(index.all_cpus().len(), 4);
/// assert_eq!(index.numa_node_ids(), &[0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyIndex {
    topology: CpuTopology,
    counts: TopologyCounts,
    all: CpuSet,
    /// Indexed by CPU id.
    placement: Vec<Option<Placement>>,
    numa: Groups,
    socket: Groups,
    core: Groups,
    uncore: Groups,
    /// Per NUMA dense index: the dense socket indices of its CPUs.
    sockets_of_numa: Vec<CpuSet>,
}

fn group_of(groups: &mut Vec<(usize, CpuSet)>, id: usize, cpu: usize) {
    match groups.binary_search_by_key(&id, |(g, _)| *g) {
        Ok(at) => {
            groups[at].1.insert(cpu);
        }
        Err(at) => groups.insert(at, (id, CpuSet::from_iter([cpu]))),
    }
}

fn into_groups(list: Vec<(usize, CpuSet)>) -> Groups {
    let (ids, cpus): (Vec<usize>, Vec<CpuSet>) = list.into_iter().unzip();
    let smallest = cpus.iter().map(CpuSet::len).min().unwrap_or(0);
    Groups {
        ids,
        cpus,
        smallest,
    }
}

impl TopologyIndex {
    /// Index `topology` (its counts are used as given, as upstream divides by them).
    pub fn new(topology: &CpuTopology) -> TopologyIndex {
        let all = topology.all_cpus().clone();
        let (mut numa, mut socket, mut core, mut uncore) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for cpu in &all {
            if let Some(info) = topology.cpu(cpu) {
                group_of(&mut numa, info.numa, cpu);
                group_of(&mut socket, info.socket, cpu);
                group_of(&mut core, info.core, cpu);
                group_of(&mut uncore, info.uncore, cpu);
            }
        }
        let (numa, socket, core, uncore) = (
            into_groups(numa),
            into_groups(socket),
            into_groups(core),
            into_groups(uncore),
        );
        let mut placement = vec![None; all.max().map_or(0, |m| m + 1)];
        for cpu in &all {
            if let Some(info) = topology.cpu(cpu) {
                let dense = |g: &Groups, id| g.dense(id).unwrap_or_default() as u32;
                placement[cpu] = Some(Placement {
                    numa: dense(&numa, info.numa),
                    socket: dense(&socket, info.socket),
                    core: dense(&core, info.core),
                    uncore: dense(&uncore, info.uncore),
                });
            }
        }
        let sockets_of_numa = numa
            .cpus
            .iter()
            .map(|cpus| {
                cpus.iter()
                    .filter_map(|cpu| placement[cpu].map(|p| p.socket as usize))
                    .collect()
            })
            .collect();
        TopologyIndex {
            topology: topology.clone(),
            counts: topology.counts(),
            all,
            placement,
            numa,
            socket,
            core,
            uncore,
            sockets_of_numa,
        }
    }

    /// The topology indexed.
    pub fn topology(&self) -> &CpuTopology {
        &self.topology
    }

    /// The topology's counts (upstream `NumCPUs`, `NumCores`, …).
    pub fn counts(&self) -> TopologyCounts {
        self.counts
    }

    /// Every CPU of the topology.
    pub fn all_cpus(&self) -> &CpuSet {
        &self.all
    }

    /// NUMA node ids that have CPUs, ascending (upstream `CPUDetails.NUMANodes().List()`).
    pub fn numa_node_ids(&self) -> &[usize] {
        &self.numa.ids
    }

    /// Socket ids, ascending.
    pub fn socket_ids(&self) -> &[usize] {
        &self.socket.ids
    }

    /// The CPUs of NUMA node `id` (empty for an unknown node).
    pub fn cpus_in_numa_node(&self, id: usize) -> CpuSet {
        self.numa
            .dense(id)
            .map(|d| self.numa.cpus[d].clone())
            .unwrap_or_default()
    }

    /// The CPUs of socket `id` (empty for an unknown socket).
    pub fn cpus_in_socket(&self, id: usize) -> CpuSet {
        self.socket
            .dense(id)
            .map(|d| self.socket.cpus[d].clone())
            .unwrap_or_default()
    }

    /// Every CPU sharing a core with a CPU of `cpus` (upstream: the union of
    /// `CPUsInCores(CPUCoreID(cpu))`).
    pub fn core_siblings(&self, cpus: &CpuSet) -> CpuSet {
        let mut out = CpuSet::new();
        for cpu in cpus {
            if let Some(p) = self.place(cpu) {
                out.union_with(&self.core.cpus[p.core as usize]);
            }
        }
        out
    }

    /// Whether every CPU of `cpus` shares one uncore cache (upstream
    /// `CPUTopology.CheckAlignment(cpus).UncoreCache`): false for an empty set or a CPU the
    /// topology lacks, true for a single CPU.
    pub fn is_uncore_aligned(&self, cpus: &CpuSet) -> bool {
        let mut uncores = cpus.iter().map(|cpu| self.place(cpu).map(|p| p.uncore));
        match uncores.next() {
            Some(Some(first)) => uncores.all(|u| u == Some(first)),
            _ => false,
        }
    }

    /// The NUMA node id of `cpu`, if the topology has it.
    pub fn numa_of(&self, cpu: usize) -> Option<usize> {
        self.place(cpu).map(|p| self.numa.ids[p.numa as usize])
    }

    pub(crate) fn place(&self, cpu: usize) -> Option<Placement> {
        self.placement.get(cpu).copied().flatten()
    }

    pub(crate) fn groups(&self, level: Level) -> &Groups {
        match level {
            Level::Numa => &self.numa,
            Level::Socket => &self.socket,
            Level::Core => &self.core,
            Level::Uncore => &self.uncore,
        }
    }

    /// CPUs of the group with dense index `dense` at `level`.
    pub(crate) fn group_cpus(&self, level: Level, dense: usize) -> &CpuSet {
        &self.groups(level).cpus[dense]
    }

    /// Dense socket indices of the CPUs of NUMA node `dense`.
    pub(crate) fn sockets_of_numa(&self, dense: usize) -> &CpuSet {
        &self.sockets_of_numa[dense]
    }

    /// Dense NUMA index of NUMA id `id`.
    pub(crate) fn numa_dense(&self, id: usize) -> Option<usize> {
        self.numa.dense(id)
    }

    /// The dense indices at `level` of the CPUs in `cpus`, as a set.
    pub(crate) fn dense_ids_of(&self, cpus: &CpuSet, level: Level) -> CpuSet {
        let mut out = CpuSet::new();
        for cpu in cpus {
            if let Some(p) = self.place(cpu) {
                out.insert(p.of(level));
            }
        }
        out
    }
}
