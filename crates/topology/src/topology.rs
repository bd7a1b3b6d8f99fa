//! [`CpuTopology`]: which core, socket (package), NUMA node and uncore (L3) cache each CPU
//! belongs to, the counts the CPU manager divides by, and the NUMA distance matrix.
//!
//! Built from explicit per-CPU records ([`CpuTopology::new`], the shape of the conformance
//! files) or discovered from sysfs ([`crate::sysfs`]). Every id (CPU, core, socket, NUMA
//! node, uncore cache) must be below [`MAX_TOPOLOGY_ID`]: lookups are plain vector indexing,
//! because the CPU manager's packing algorithms query the topology in tight loops.
//!
//! # NUMA node ids are mask bits
//!
//! The managers put NUMA nodes in 64-bit [`NumaMask`](crate::NumaMask)s, so a topology
//! speaks of each NUMA node by its mask bit: [`CpuInfo::numa`], [`CpuTopology::numa_nodes`],
//! [`CpuTopology::numa_distance`], [`CpuTopology::numa_nodes_for_manager`] and every
//! [`CpuDetails`] NUMA query take and return bits, and [`CpuTopology::numa_ids`] translates
//! them to and from the OS ids the records (or sysfs) gave. When every node id is below 64 —
//! every machine upstream supports — the bit *is* the OS id and nothing differs from
//! upstream. A machine with at most 64 nodes but some id ≥ 64 (Linux numbers nodes sparsely
//! on some firmware) gets dense bits in ascending id order instead; upstream cannot run there
//! at all. This is a deliberate deviation, described on [`NumaIds`]. Only
//! [`CpuTopology::to_json`] prints OS ids itself; other edges translate through
//! [`CpuTopology::numa_ids`]. A machine with more than 64 nodes keeps its OS ids (no mask can
//! hold them; the topology manager refuses it).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::details::CpuDetails;
use crate::topologymanager::NumaNode;
use crate::{CpuSet, NumaIds};

/// Ids (of CPUs, cores, sockets, NUMA nodes, uncore caches) must be below this.
pub const MAX_TOPOLOGY_ID: usize = 1 << 16;

/// Where one CPU sits (upstream `CPUInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CpuInfo {
    /// Core id (kubelet: the lowest CPU id of the core).
    pub core: usize,
    /// Socket (package) id.
    pub socket: usize,
    /// NUMA node: its mask bit (the OS id unless the topology renumbers sparse ids above
    /// 63; see [`CpuTopology::numa_ids`]).
    pub numa: usize,
    /// Uncore (L3) cache id; the socket id where the CPU has no L3.
    pub uncore: usize,
}

impl CpuInfo {
    /// A CPU on `core` of `socket`, in NUMA node (bit) `numa`, sharing uncore cache `uncore`.
    pub const fn new(core: usize, socket: usize, numa: usize, uncore: usize) -> CpuInfo {
        CpuInfo {
            core,
            socket,
            numa,
            uncore,
        }
    }
}

/// One CPU record of the conformance files' topology shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuRecord {
    /// CPU id.
    pub cpu: usize,
    /// Where it sits.
    pub info: CpuInfo,
}

/// The `num_*` counts of a topology. Upstream divides by them (CPUs per core = `num_cpus /
/// num_cores`), so tests that give them explicitly must get them back unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopologyCounts {
    /// Number of logical CPUs.
    pub num_cpus: usize,
    /// Number of physical cores.
    pub num_cores: usize,
    /// Number of sockets (packages).
    pub num_sockets: usize,
    /// Number of NUMA nodes with CPUs.
    pub num_numa_nodes: usize,
    /// Number of uncore (L3) caches.
    pub num_uncore_caches: usize,
}

/// Why a topology could not be built from records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// The same CPU twice.
    #[error("CPU {cpu} is listed twice")]
    DuplicateCpu {
        /// The CPU id.
        cpu: usize,
    },
    /// An id at or above [`MAX_TOPOLOGY_ID`].
    #[error("{what} id {id} of CPU {cpu} is too large (ids must be below {MAX_TOPOLOGY_ID})")]
    IdTooLarge {
        /// Which id ("cpu", "core", "socket", "numa", "uncore").
        what: &'static str,
        /// The id.
        id: usize,
        /// The CPU it belongs to.
        cpu: usize,
    },
    /// A distance row for a node the topology does not have, or of the wrong length.
    #[error("NUMA distance row of node {node} does not match the NUMA nodes {nodes:?}")]
    BadDistances {
        /// The node whose row is wrong.
        node: usize,
        /// The topology's NUMA nodes.
        nodes: Vec<usize>,
    },
}

/// A machine's CPU topology (upstream `CPUTopology` with its `CPUDetails`).
///
/// # Example
///
/// ```
/// use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology};
///
/// // 2 cores × 2 threads on one socket and NUMA node.
/// let records = [(0, 0), (1, 1), (2, 0), (3, 1)].map(|(cpu, core)| CpuRecord {
///     cpu,
///     info: CpuInfo { core, socket: 0, numa: 0, uncore: 0 },
/// });
/// let topo = CpuTopology::new(&records)?;
/// assert_eq!(topo.cpus_per_core(), 2);
/// assert_eq!(topo.details().cpus_in_cores([1]), CpuSet::from_iter([1, 3]));
/// let free = topo.details().keep_only(&"0-2".parse()?);
/// assert_eq!(free.cores().to_string(), "0-1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTopology {
    counts: TopologyCounts,
    /// Indexed by CPU id.
    cpus: Vec<Option<CpuInfo>>,
    all: CpuSet,
    /// Indexed by core / socket / NUMA / uncore id: the CPUs with that id.
    by_core: Vec<CpuSet>,
    by_socket: Vec<CpuSet>,
    by_numa: Vec<CpuSet>,
    by_uncore: Vec<CpuSet>,
    /// Every NUMA node of the machine (as mask bits), ascending, CPU-less ones included.
    numa_nodes: Vec<usize>,
    /// `distances[a][b]` (mask bits), for nodes that have a distance row.
    distances: BTreeMap<usize, BTreeMap<usize, u64>>,
    /// OS id ↔ mask bit of every NUMA node.
    numa_ids: NumaIds,
}

fn group_into(groups: &mut Vec<CpuSet>, id: usize, cpu: usize) {
    if groups.len() <= id {
        groups.resize(id + 1, CpuSet::new());
    }
    groups[id].insert(cpu);
}

fn count_nonempty(groups: &[CpuSet]) -> usize {
    groups.iter().filter(|g| !g.is_empty()).count()
}

impl CpuTopology {
    /// A topology from per-CPU records; counts are derived (`num_cpus` = records, the others
    /// = distinct ids), NUMA nodes are the nodes that have CPUs, no distances.
    pub fn new(records: &[CpuRecord]) -> Result<CpuTopology, TopologyError> {
        let mut topo = CpuTopology {
            counts: TopologyCounts::default(),
            cpus: Vec::new(),
            all: CpuSet::new(),
            by_core: Vec::new(),
            by_socket: Vec::new(),
            by_numa: Vec::new(),
            by_uncore: Vec::new(),
            numa_nodes: Vec::new(),
            distances: BTreeMap::new(),
            numa_ids: NumaIds::identity(),
        };
        for record in records {
            let CpuRecord { cpu, info } = *record;
            for (what, id) in [
                ("cpu", cpu),
                ("core", info.core),
                ("socket", info.socket),
                ("numa", info.numa),
                ("uncore", info.uncore),
            ] {
                if id >= MAX_TOPOLOGY_ID {
                    return Err(TopologyError::IdTooLarge { what, id, cpu });
                }
            }
            if !topo.all.insert(cpu) {
                return Err(TopologyError::DuplicateCpu { cpu });
            }
            if topo.cpus.len() <= cpu {
                topo.cpus.resize(cpu + 1, None);
            }
            topo.cpus[cpu] = Some(info);
            group_into(&mut topo.by_core, info.core, cpu);
            group_into(&mut topo.by_socket, info.socket, cpu);
            group_into(&mut topo.by_numa, info.numa, cpu);
            group_into(&mut topo.by_uncore, info.uncore, cpu);
        }
        topo.counts = TopologyCounts {
            num_cpus: topo.all.len(),
            num_cores: count_nonempty(&topo.by_core),
            num_sockets: count_nonempty(&topo.by_socket),
            num_numa_nodes: count_nonempty(&topo.by_numa),
            num_uncore_caches: count_nonempty(&topo.by_uncore),
        };
        // Until renumbered, NUMA ids are the records' OS ids.
        let cpu_nodes: Vec<usize> = (0..topo.by_numa.len())
            .filter(|&id| !topo.by_numa[id].is_empty())
            .collect();
        topo.numa_ids = NumaIds::identity_over(cpu_nodes.clone());
        topo.numa_nodes.clone_from(&cpu_nodes);
        topo.set_numa_layout(cpu_nodes, BTreeMap::new());
        Ok(topo)
    }

    /// The OS id of NUMA node (mask bit) `node`.
    fn os_numa(&self, node: usize) -> usize {
        self.numa_ids.os_id(node).unwrap_or(node)
    }

    /// The machine's NUMA nodes as OS ids, ascending.
    fn os_numa_nodes(&self) -> Vec<usize> {
        self.numa_nodes.iter().map(|&n| self.os_numa(n)).collect()
    }

    /// Number the NUMA nodes `os_nodes` (OS ids; the nodes holding CPUs are added) afresh and
    /// store `os_distances` (keyed by OS ids) under their bits: the identity when every id is
    /// below 64 (or there are more than 64 nodes), dense bits in id order otherwise.
    fn set_numa_layout(
        &mut self,
        mut os_nodes: Vec<usize>,
        os_distances: BTreeMap<usize, BTreeMap<usize, u64>>,
    ) {
        let cpu_os: Vec<(usize, usize)> = self
            .all
            .iter()
            .filter_map(|cpu| self.cpu(cpu).map(|info| (cpu, self.os_numa(info.numa))))
            .collect();
        os_nodes.extend(cpu_os.iter().map(|&(_, os)| os));
        os_nodes.sort_unstable();
        os_nodes.dedup();
        let ids = NumaIds::new(os_nodes.iter().copied())
            .unwrap_or_else(|_| NumaIds::identity_over(os_nodes.clone()));
        // Total over `os_nodes` by construction: dense bits are positions, identity bits ids.
        let bit_of: BTreeMap<usize, usize> = os_nodes
            .iter()
            .enumerate()
            .map(|(pos, &os)| (os, if ids.is_identity() { os } else { pos }))
            .collect();
        let bit = |os: usize| bit_of.get(&os).copied().unwrap_or(os);
        self.by_numa.clear();
        for (cpu, os) in cpu_os {
            let numa = bit(os);
            if let Some(Some(info)) = self.cpus.get_mut(cpu) {
                info.numa = numa;
            }
            group_into(&mut self.by_numa, numa, cpu);
        }
        self.numa_nodes = os_nodes.iter().map(|&os| bit(os)).collect();
        self.distances = os_distances
            .into_iter()
            .map(|(from, row)| {
                let row = row.into_iter().map(|(to, d)| (bit(to), d)).collect();
                (bit(from), row)
            })
            .collect();
        self.numa_ids = ids;
    }

    /// Replace the derived counts by explicit ones (as the conformance files give them).
    #[must_use]
    pub fn with_counts(mut self, counts: TopologyCounts) -> CpuTopology {
        self.counts = counts;
        self
    }

    /// Declare the machine's NUMA nodes (CPU-less ones included) and their distance rows,
    /// keyed by OS node id. Each row lists the distances to every node in ascending id order,
    /// as Linux's `nodeN/distance` does. Nodes already known (those holding CPUs, and those
    /// declared before) are kept. The nodes are then numbered afresh (see the module docs).
    pub fn with_numa_distances(
        mut self,
        rows: &BTreeMap<usize, Vec<u64>>,
    ) -> Result<CpuTopology, TopologyError> {
        let mut nodes = self.os_numa_nodes();
        nodes.extend(rows.keys().copied());
        nodes.sort_unstable();
        nodes.dedup();
        let mut distances = BTreeMap::new();
        for (&from, row) in rows {
            if row.len() != nodes.len() {
                return Err(TopologyError::BadDistances { node: from, nodes });
            }
            distances.insert(
                from,
                nodes.iter().copied().zip(row.iter().copied()).collect(),
            );
        }
        self.set_numa_layout(nodes, distances);
        Ok(self)
    }

    /// Set the machine's NUMA nodes (OS ids, CPU-less ones included) and positional distance
    /// rows keyed by OS id (columns = the nodes in ascending id order); rows of another length
    /// are dropped.
    #[cfg_attr(not(feature = "sysfs"), allow(dead_code))]
    pub(crate) fn with_numa_layout(
        mut self,
        mut nodes: Vec<usize>,
        rows: BTreeMap<usize, Vec<u64>>,
    ) -> CpuTopology {
        nodes.extend(self.os_numa_nodes());
        nodes.sort_unstable();
        nodes.dedup();
        let distances = rows
            .into_iter()
            .filter(|(_, row)| row.len() == nodes.len())
            .map(|(from, row)| (from, nodes.iter().copied().zip(row).collect()))
            .collect();
        self.set_numa_layout(nodes, distances);
        self
    }

    /// The counts (upstream `NumCPUs`, `NumCores`, …).
    pub fn counts(&self) -> TopologyCounts {
        self.counts
    }

    /// Number of logical CPUs.
    pub fn num_cpus(&self) -> usize {
        self.counts.num_cpus
    }

    /// Number of physical cores.
    pub fn num_cores(&self) -> usize {
        self.counts.num_cores
    }

    /// Number of sockets.
    pub fn num_sockets(&self) -> usize {
        self.counts.num_sockets
    }

    /// Number of NUMA nodes that have CPUs.
    pub fn num_numa_nodes(&self) -> usize {
        self.counts.num_numa_nodes
    }

    /// Number of uncore caches.
    pub fn num_uncore_caches(&self) -> usize {
        self.counts.num_uncore_caches
    }

    /// Upstream `CPUsPerCore` (0 without cores).
    pub fn cpus_per_core(&self) -> usize {
        self.counts
            .num_cpus
            .checked_div(self.counts.num_cores)
            .unwrap_or(0)
    }

    /// Upstream `CPUsPerSocket` (0 without sockets).
    pub fn cpus_per_socket(&self) -> usize {
        self.counts
            .num_cpus
            .checked_div(self.counts.num_sockets)
            .unwrap_or(0)
    }

    /// Upstream `CPUsPerUncore` (0 without uncore caches).
    pub fn cpus_per_uncore(&self) -> usize {
        self.counts
            .num_cpus
            .checked_div(self.counts.num_uncore_caches)
            .unwrap_or(0)
    }

    /// Where `cpu` sits, if the topology has it.
    pub fn cpu(&self, cpu: usize) -> Option<CpuInfo> {
        self.cpus.get(cpu).copied().flatten()
    }

    /// Every CPU.
    pub fn all_cpus(&self) -> &CpuSet {
        &self.all
    }

    /// A [`CpuDetails`] view over every CPU.
    pub fn details(&self) -> CpuDetails<'_> {
        CpuDetails::new(self, self.all.clone())
    }

    /// Every NUMA node of the machine as mask bits, ascending (CPU-less nodes included when
    /// known). [`numa_ids`](Self::numa_ids) gives their OS ids.
    pub fn numa_nodes(&self) -> &[usize] {
        &self.numa_nodes
    }

    /// The table between the NUMA nodes' mask bits (every NUMA id this topology takes or
    /// returns) and their OS ids: the identity unless some id is 64 or more.
    ///
    /// ```
    /// use corral_topology::{CpuInfo, CpuRecord, CpuTopology};
    ///
    /// // Two CPUs on NUMA nodes 0 and 72 (Linux numbers nodes sparsely on some machines).
    /// let records = [(0, 0), (1, 72)].map(|(cpu, numa)| CpuRecord {
    ///     cpu,
    ///     info: CpuInfo { core: cpu, socket: 0, numa, uncore: 0 },
    /// });
    /// let topo = CpuTopology::new(&records)?;
    /// assert_eq!(topo.numa_nodes(), &[0, 1], "mask bits");
    /// assert_eq!(topo.cpu(1).map(|i| i.numa), Some(1));
    /// assert_eq!(topo.numa_ids().os_id(1)?, 72);
    /// assert_eq!(topo.numa_ids().os_ids(), &[0, 72]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn numa_ids(&self) -> &NumaIds {
        &self.numa_ids
    }

    /// Distance from NUMA node `from` to `to` (mask bits), when known.
    pub fn numa_distance(&self, from: usize, to: usize) -> Option<u64> {
        self.distances.get(&from)?.get(&to).copied()
    }

    /// Whether any distance is known.
    pub fn has_numa_distances(&self) -> bool {
        !self.distances.is_empty()
    }

    /// The NUMA nodes as the topology manager takes them (ids = mask bits), each distance
    /// row indexed by bit (length = largest bit + 1; 0 where Linux gives no distance).
    /// Linux's rows are positional over the online nodes, so for sparse node ids indexing the
    /// raw row by id, as upstream does with cadvisor's rows, would read the wrong column;
    /// corral maps columns to nodes here.
    pub fn numa_nodes_for_manager(&self) -> Vec<NumaNode> {
        let width = self.numa_nodes.last().map_or(0, |&max| max + 1);
        self.numa_nodes
            .iter()
            .map(|&id| NumaNode {
                id,
                distances: self.distances.get(&id).map(|row| {
                    let mut dense = vec![0; width];
                    for (&to, &d) in row {
                        dense[to] = d;
                    }
                    dense
                }),
            })
            .collect()
    }

    pub(crate) fn cpus_with_core(&self, core: usize) -> Option<&CpuSet> {
        self.by_core.get(core)
    }

    pub(crate) fn cpus_with_socket(&self, socket: usize) -> Option<&CpuSet> {
        self.by_socket.get(socket)
    }

    pub(crate) fn cpus_with_numa(&self, numa: usize) -> Option<&CpuSet> {
        self.by_numa.get(numa)
    }

    pub(crate) fn cpus_with_uncore(&self, uncore: usize) -> Option<&CpuSet> {
        self.by_uncore.get(uncore)
    }

    /// The JSON document `corral topology -o json` prints:
    /// `{"cpus": [{"cpu","core","socket","numa","uncore"}…], "numa_distances": {"<id>": [row]},
    /// "numa_nodes": [id…]}` with rows over the NUMA nodes in ascending id order (as
    /// `nodeN/distance`), and `"numa_distances": null` when no distance is known. NUMA nodes
    /// are OS ids here, not mask bits.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"cpus\": [");
        for (i, cpu) in self.all.iter().enumerate() {
            let Some(info) = self.cpu(cpu) else { continue };
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(
                out,
                "{{\"cpu\": {cpu}, \"core\": {}, \"socket\": {}, \"numa\": {}, \"uncore\": {}}}",
                info.core,
                info.socket,
                self.os_numa(info.numa),
                info.uncore
            );
        }
        out.push_str("], \"numa_distances\": ");
        if self.distances.is_empty() {
            out.push_str("null");
        } else {
            out.push('{');
            for (i, (from, row)) in self.distances.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "\"{}\": [", self.os_numa(*from));
                for (j, d) in row.values().enumerate() {
                    if j > 0 {
                        out.push_str(", ");
                    }
                    let _ = write!(out, "{d}");
                }
                out.push(']');
            }
            out.push('}');
        }
        out.push_str(", \"numa_nodes\": [");
        for (i, id) in self.os_numa_nodes().iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{id}");
        }
        out.push_str("]}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU `cpu` on `core`, `socket`, `numa`, `uncore`.
    fn rec(cpu: usize, [core, socket, numa, uncore]: [usize; 4]) -> CpuRecord {
        CpuRecord {
            cpu,
            info: CpuInfo::new(core, socket, numa, uncore),
        }
    }

    /// The records `[cpu, core, socket, numa, uncore]` and their topology.
    fn topo(cpus: &[[usize; 5]]) -> (Vec<CpuRecord>, CpuTopology) {
        let recs: Vec<CpuRecord> = cpus
            .iter()
            .map(|&[cpu, core, socket, numa, uncore]| rec(cpu, [core, socket, numa, uncore]))
            .collect();
        let topo = CpuTopology::new(&recs).unwrap();
        (recs, topo)
    }

    #[test]
    fn counts_and_errors() {
        let (recs, topo) = topo(&[[0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [2, 2, 1, 1, 1]]);
        assert_eq!(
            topo.counts(),
            TopologyCounts {
                num_cpus: 3,
                num_cores: 2,
                num_sockets: 2,
                num_numa_nodes: 2,
                num_uncore_caches: 2
            }
        );
        assert_eq!(topo.cpus_per_core(), 1);
        let dup = [recs[0], recs[0]];
        assert_eq!(
            CpuTopology::new(&dup),
            Err(TopologyError::DuplicateCpu { cpu: 0 })
        );
        let big = [rec(0, [1 << 20, 0, 0, 0])];
        assert!(matches!(
            CpuTopology::new(&big),
            Err(TopologyError::IdTooLarge { what: "core", .. })
        ));
    }

    #[test]
    fn distances_map_columns_to_ids() {
        let recs = [rec(0, [0, 0, 0, 0]), rec(1, [1, 0, 33, 0])];
        let rows = BTreeMap::from([
            (0, vec![10, 20, 30]),
            (33, vec![20, 10, 40]),
            (40, vec![30, 40, 10]),
        ]);
        let topo = CpuTopology::new(&recs)
            .unwrap()
            .with_numa_distances(&rows)
            .unwrap();
        assert_eq!(topo.numa_nodes(), &[0, 33, 40]);
        assert_eq!(topo.numa_distance(33, 40), Some(40));
        let nodes = topo.numa_nodes_for_manager();
        assert_eq!(
            nodes[1].distances.as_ref().map(|r| (r.len(), r[40])),
            Some((41, 40))
        );
        assert!(topo.to_json().contains("\"33\": [20, 10, 40]"));
        let bad = BTreeMap::from([(0, vec![10])]);
        assert!(
            CpuTopology::new(&recs)
                .unwrap()
                .with_numa_distances(&bad)
                .is_err()
        );
    }
    #[test]
    fn sparse_ids_above_63_are_renumbered_in_id_order() {
        let (_, topo) = topo(&[[0, 0, 0, 0, 0], [1, 1, 0, 72, 0], [2, 2, 0, 70, 0]]);
        assert_eq!(topo.numa_ids().os_ids(), &[0, 70, 72]);
        assert_eq!(topo.numa_nodes(), &[0, 1, 2]);
        assert_eq!(topo.cpu(1).map(|i| i.numa), Some(2));
        assert_eq!(
            topo.details().cpus_in_numa_nodes([1]),
            CpuSet::from_iter([2])
        );
        // A CPU-less node 65 declared with distances slots in by id: 70 and 72 move up.
        let rows = BTreeMap::from([
            (0, vec![10, 11, 12, 13]),
            (65, vec![11, 10, 14, 15]),
            (70, vec![12, 14, 10, 16]),
            (72, vec![13, 15, 16, 10]),
        ]);
        let topo = topo.with_numa_distances(&rows).unwrap();
        assert_eq!(topo.numa_ids().os_ids(), &[0, 65, 70, 72]);
        assert_eq!(topo.numa_nodes(), &[0, 1, 2, 3]);
        assert_eq!(topo.cpu(1).map(|i| i.numa), Some(3));
        assert_eq!(topo.cpu(2).map(|i| i.numa), Some(2));
        assert_eq!(topo.details().cpus_in_numa_nodes([1]), CpuSet::new());
        assert_eq!(
            topo.details().cpus_in_numa_nodes([3]),
            CpuSet::from_iter([1])
        );
        assert_eq!(topo.numa_distance(1, 3), Some(15), "65 -> 72");
        assert_eq!(topo.num_numa_nodes(), 3);
        let nodes = topo.numa_nodes_for_manager();
        assert_eq!(nodes[3].distances, Some(vec![13, 15, 16, 10]));
        let json = topo.to_json();
        assert!(
            json.contains("\"cpu\": 1, \"core\": 1, \"socket\": 0, \"numa\": 72"),
            "{json}"
        );
        assert!(json.contains("\"65\": [11, 10, 14, 15]"), "{json}");
        assert!(json.ends_with("\"numa_nodes\": [0, 65, 70, 72]}"), "{json}");
        // Declaring the same layout again changes nothing.
        assert_eq!(topo.clone().with_numa_distances(&rows).unwrap(), topo);
    }

    #[test]
    fn more_than_64_nodes_keep_their_ids() {
        let recs: Vec<CpuRecord> = (0..65)
            .map(|cpu| CpuRecord {
                cpu,
                info: CpuInfo::new(cpu, 0, cpu * 2, 0),
            })
            .collect();
        let topo = CpuTopology::new(&recs).unwrap();
        assert!(topo.numa_ids().is_identity());
        assert_eq!(topo.cpu(64).map(|i| i.numa), Some(128));
        assert_eq!(topo.numa_nodes().len(), 65);
        assert!(
            crate::NumaInfo::new(&topo.numa_nodes_for_manager(), crate::NumaDistances::Ignore)
                .is_err()
        );
    }
}
