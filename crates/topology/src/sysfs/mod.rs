//! CPU topology discovery from a host root's sysfs (feature `sysfs`, on by default).
//!
//! [`discover`] reads `<root>/sys/devices/system/{cpu,node}/…` (and `<root>/proc/cpuinfo`
//! for one vendor quirk) and builds a [`CpuTopology`]. Tests point `root` at a fixture
//! directory; the agent uses `/`.
//!
//! # What is read, and how the groups are formed
//!
//! - **Online CPUs**: `cpu/online`; without it (old kernels), every `cpuN` directory whose
//!   `cpuN/online` is not `0` (a missing `cpuN/online` means online). Offline CPUs are
//!   ignored entirely, and every sibling, cache and node set read below is intersected with
//!   the online set (dumps keep stale masks).
//! - **Cores** are the groups of `topology/core_cpus_list` (or `thread_siblings_list`, or the
//!   hex masks `core_cpus` / `thread_siblings` on kernels without list files). On AMD family
//!   0x15/0x16 (`/proc/cpuinfo`), a group whose members report different `core_id`s is split
//!   by `core_id`: those "compute units" are two cores to AMD and to hwloc. A core's id is
//!   the lowest CPU id in it, as kubelet numbers cores.
//! - **Sockets** are the groups of `package_cpus_list` (or `core_siblings_list`, or their
//!   masks); without any of those, CPUs are grouped by `physical_package_id`. The socket id is
//!   `physical_package_id` when every package has one that is valid (≥ 0) and unique;
//!   otherwise (ids of `-1`, or one id shared by several packages) every socket is numbered
//!   0, 1, … in order of its lowest CPU.
//! - **NUMA nodes** are the `node/nodeN` directories (ids may be sparse); a CPU belongs to
//!   the node whose `cpulist` (or `cpumap`) lists it. CPU-less (memory-only) nodes are kept as
//!   NUMA nodes with no CPUs. `node/has_cpu` is not trusted (dumps show it empty on machines
//!   with CPUs). Without a `node/` directory (kernels without NUMA) there is one node 0
//!   holding every CPU and no distances. Distances come from `nodeN/distance`, whose columns
//!   are the nodes in ascending id order.
//! - **Uncore caches** are the groups of the level-3 cache's `shared_cpu_list` (or
//!   `shared_cpu_map`); an all-zero map (old ia64 kernels) means the CPU's own core shares it.
//!   The id is `cache/indexK/id` when every group has a consistent, unique one, otherwise the
//!   lowest CPU id of the group. When some online CPU has no L3 at all, every CPU's uncore id
//!   is its socket id (kubelet's fallback).
//!
//! Any set that does not partition the CPUs (CPU A says it shares a core with B but B
//! disagrees), a core spanning sockets or NUMA nodes, an online CPU without a directory or in
//! no NUMA node, or a distance row of the wrong length is a [`DiscoveryError`] naming the file.
//!
//! # Where this differs from kubelet (cadvisor)
//!
//! Kubelet takes its topology from cadvisor, which keys cores by (NUMA node,
//! `physical_package_id`, `core_id`) and sockets by `physical_package_id`. That is wrong on
//! real machines: `core_id` repeats inside a package on multi-die parts and is per-package on
//! s390, and `physical_package_id` is `-1` or shared by distinct packages on some kernels.
//! corral follows the hardware's sibling masks (as hwloc does) instead, so it may report more
//! cores or sockets than kubelet would on those machines; on ordinary x86 servers both agree.
//! Kubelet also indexes the positional `nodeN/distance` rows by node id, which reads the
//! wrong column when node ids are sparse; corral maps columns to node ids
//! ([`CpuTopology::numa_nodes_for_manager`]).
//!
//! Kubelet cannot run at all where a NUMA node id is 64 or more (its masks are 64-bit, bit =
//! node id): real firmware numbers nodes sparsely, e.g. `0-2,33-34,45,72-73` in the
//! `48amd64-4pa2n6c-sparse` dump. The discovered topology then gives the nodes (at most 64)
//! dense mask bits in ascending id order, so the managers run unchanged; the OS ids stay
//! available through [`CpuTopology::numa_ids`] for everything that reports a node (a
//! deviation, see [`NumaIds`](crate::NumaIds)). With every id below 64, bits are ids.

mod files;
mod memory;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use files::DiscoveryError;
use files::{numbered_entries, read_int, read_list, read_list_or_mask, read_trimmed, read_u64s};
pub use memory::discover_memory;

use crate::topology::MAX_TOPOLOGY_ID;
use crate::{CpuInfo, CpuRecord, CpuSet, CpuTopology};

/// What was read for one online CPU.
struct RawCpu {
    dir: PathBuf,
    package_id: Option<i64>,
    core_id: Option<i64>,
    threads: Option<CpuSet>,
    package: Option<CpuSet>,
    /// The L3 directory, the CPUs sharing it and its `id` file.
    l3: Option<(PathBuf, CpuSet, Option<i64>)>,
}

/// Discover the running machine's topology (`discover("/")`).
///
/// # Example
///
/// ```no_run
/// let topology = corral_topology::discover_host()?;
/// println!("{} CPUs on {} NUMA nodes", topology.num_cpus(), topology.num_numa_nodes());
/// # Ok::<(), corral_topology::DiscoveryError>(())
/// ```
pub fn discover_host() -> Result<CpuTopology, DiscoveryError> {
    discover(Path::new("/"))
}

/// Discover the topology of the machine whose filesystem root is `root`.
///
/// `root` is a host root (`/`, or `/host` in a container that mounts it) or a copy of one's
/// `sys/` and `proc/` (the dumps in the repository's `testdata/sysfs`).
///
/// # Example
///
/// A machine of 4 CPUs (2 cores × 2 threads, one per NUMA node), written as sysfs would
/// show it:
///
/// ```
/// use std::{fs, path::Path};
/// use corral_topology::{CpuSet, discover};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let root = tempfile::tempdir()?;
/// let write = |path: &str, text: &str| -> std::io::Result<()> {
///     let path = root.path().join(path);
///     fs::create_dir_all(path.parent().unwrap())?;
///     fs::write(path, format!("{text}\n"))
/// };
/// write("sys/devices/system/cpu/online", "0-3")?;
/// for cpu in 0..4 {
///     let (core, siblings) = if cpu % 2 == 0 { (0, "0,2") } else { (1, "1,3") };
///     let topo = format!("sys/devices/system/cpu/cpu{cpu}/topology");
///     write(&format!("{topo}/thread_siblings_list"), siblings)?;
///     write(&format!("{topo}/core_siblings_list"), "0-3")?;
///     write(&format!("{topo}/physical_package_id"), "0")?;
///     write(&format!("{topo}/core_id"), &core.to_string())?;
/// }
/// write("sys/devices/system/node/node0/cpulist", "0,2")?;
/// write("sys/devices/system/node/node0/distance", "10 21")?;
/// write("sys/devices/system/node/node1/cpulist", "1,3")?;
/// write("sys/devices/system/node/node1/distance", "21 10")?;
///
/// let topology = discover(root.path())?;
/// assert_eq!((topology.num_cpus(), topology.num_cores(), topology.num_sockets()), (4, 2, 1));
/// assert_eq!(topology.numa_nodes(), &[0, 1]);
/// assert_eq!(topology.details().cpus_in_numa_nodes([1]), CpuSet::from_iter([1, 3]));
/// assert_eq!(topology.numa_distance(0, 1), Some(21));
///
/// // A root without sysfs is an error naming the file, never an empty machine.
/// let err = discover(Path::new("/nonexistent-root")).unwrap_err();
/// assert!(err.to_string().contains("/nonexistent-root"), "{err}");
/// # Ok(())
/// # }
/// ```
pub fn discover(root: &Path) -> Result<CpuTopology, DiscoveryError> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let online = online_cpus(&cpu_dir)?;
    let amd_compute_units = has_amd_compute_units(root)?;

    let mut raw: BTreeMap<usize, RawCpu> = BTreeMap::new();
    for cpu in online.iter() {
        raw.insert(cpu, read_cpu(&cpu_dir, cpu, &online)?);
    }

    let cores = core_groups(&raw, &online, amd_compute_units)?;
    let (packages, socket_ids) = package_groups(&raw, &online)?;
    let (numa_of, numa_nodes, distances) = numa_layout(root, &online)?;
    let uncore_of = uncore_ids(&raw, &online, &packages, &socket_ids)?;

    let mut records = Vec::with_capacity(online.len());
    for (package_index, package) in packages.iter().enumerate() {
        let socket = socket_ids[package_index];
        for cpu in package.iter() {
            let core_group = cores
                .iter()
                .find(|g| g.contains(cpu))
                .ok_or_else(|| inconsistent(&raw[&cpu].dir, "CPU is in no core"))?;
            if !core_group.is_subset_of(package) {
                return Err(inconsistent(
                    &raw[&cpu].dir.join("topology"),
                    format!("core {core_group} spans packages (package {package})"),
                ));
            }
            let numa = numa_of[&cpu];
            if core_group.iter().any(|c| numa_of[&c] != numa) {
                return Err(inconsistent(
                    &root.join("sys/devices/system/node"),
                    format!("core {core_group} spans NUMA nodes"),
                ));
            }
            records.push(CpuRecord {
                cpu,
                info: CpuInfo {
                    core: core_group.min().unwrap_or(cpu),
                    socket,
                    numa,
                    uncore: uncore_of[&cpu],
                },
            });
        }
    }
    records.sort_by_key(|r| r.cpu);
    let topo = CpuTopology::new(&records).map_err(|e| inconsistent(&cpu_dir, e.to_string()))?;
    Ok(topo.with_numa_layout(numa_nodes, distances))
}

fn inconsistent(path: &Path, reason: impl Into<String>) -> DiscoveryError {
    DiscoveryError::Inconsistent {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

fn online_cpus(cpu_dir: &Path) -> Result<CpuSet, DiscoveryError> {
    let online = match read_list(&cpu_dir.join("online"))? {
        Some(set) => set,
        None => {
            let mut set = CpuSet::new();
            for cpu in numbered_entries(cpu_dir, "cpu")? {
                let flag = read_trimmed(&cpu_dir.join(format!("cpu{cpu}/online")))?;
                if flag.as_deref() != Some("0") {
                    set.insert(cpu);
                }
            }
            set
        }
    };
    if online.is_empty() {
        return Err(DiscoveryError::NoCpus {
            path: cpu_dir.to_owned(),
        });
    }
    if let Some(max) = online.max().filter(|&m| m >= MAX_TOPOLOGY_ID) {
        return Err(inconsistent(
            cpu_dir,
            format!("CPU id {max} is beyond the supported {MAX_TOPOLOGY_ID}"),
        ));
    }
    Ok(online)
}

/// AMD family 0x15/0x16 report the two cores of a compute unit as thread siblings.
fn has_amd_compute_units(root: &Path) -> Result<bool, DiscoveryError> {
    let Some(cpuinfo) = read_trimmed(&root.join("proc/cpuinfo"))? else {
        return Ok(false);
    };
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_owned())
        })
    };
    Ok(field("vendor_id").as_deref() == Some("AuthenticAMD")
        && matches!(field("cpu family").as_deref(), Some("21" | "22")))
}

fn read_cpu(cpu_dir: &Path, cpu: usize, online: &CpuSet) -> Result<RawCpu, DiscoveryError> {
    let dir = cpu_dir.join(format!("cpu{cpu}"));
    if !dir.is_dir() {
        return Err(inconsistent(
            &dir,
            format!("CPU {cpu} is online but has no directory"),
        ));
    }
    let topo = dir.join("topology");
    let restrict = |set: Option<CpuSet>| {
        set.map(|mut s| {
            s.intersect_with(online);
            s.insert(cpu);
            s
        })
    };
    let threads = match read_list_or_mask(&topo, "core_cpus_list", "core_cpus")? {
        Some(set) => Some(set),
        None => read_list_or_mask(&topo, "thread_siblings_list", "thread_siblings")?,
    };
    let package = match read_list_or_mask(&topo, "package_cpus_list", "package_cpus")? {
        Some(set) => Some(set),
        None => read_list_or_mask(&topo, "core_siblings_list", "core_siblings")?,
    };
    let threads = restrict(threads);
    let package = restrict(package);
    let mut l3 = None;
    let cache = dir.join("cache");
    for index in numbered_entries(&cache, "index")? {
        let index_dir = cache.join(format!("index{index}"));
        if read_int(&index_dir.join("level"))? != Some(3) {
            continue;
        }
        if read_trimmed(&index_dir.join("type"))?.as_deref() == Some("Instruction") {
            continue;
        }
        let shared = read_list_or_mask(&index_dir, "shared_cpu_list", "shared_cpu_map")?
            .unwrap_or_default()
            .intersection(online);
        // An all-zero map (old ia64 kernels): the CPU's own core shares the cache.
        let shared = if shared.is_empty() {
            threads.clone().unwrap_or_else(|| CpuSet::from_iter([cpu]))
        } else {
            let mut s = shared;
            s.insert(cpu);
            s
        };
        let id = read_int(&index_dir.join("id"))?;
        l3 = Some((index_dir, shared, id));
        break;
    }
    Ok(RawCpu {
        package_id: read_int(&topo.join("physical_package_id"))?,
        core_id: read_int(&topo.join("core_id"))?,
        dir,
        threads,
        package,
        l3,
    })
}

/// Partition `online` by each CPU's set; every member must report the same set.
fn partition(
    online: &CpuSet,
    set_of: impl Fn(usize) -> (CpuSet, PathBuf),
) -> Result<Vec<CpuSet>, DiscoveryError> {
    let mut assigned = CpuSet::new();
    let mut groups = Vec::new();
    for cpu in online.iter() {
        if assigned.contains(cpu) {
            continue;
        }
        let (group, _) = set_of(cpu);
        for member in group.iter() {
            let (theirs, path) = set_of(member);
            if theirs != group || assigned.contains(member) {
                return Err(inconsistent(
                    &path,
                    format!("CPU {member} shares {theirs} but CPU {cpu} says {group}"),
                ));
            }
        }
        assigned.union_with(&group);
        groups.push(group);
    }
    Ok(groups)
}

fn core_groups(
    raw: &BTreeMap<usize, RawCpu>,
    online: &CpuSet,
    amd_compute_units: bool,
) -> Result<Vec<CpuSet>, DiscoveryError> {
    let groups = partition(online, |cpu| {
        let r = &raw[&cpu];
        let set = r
            .threads
            .clone()
            .unwrap_or_else(|| CpuSet::from_iter([cpu]));
        (set, r.dir.join("topology/thread_siblings_list"))
    })?;
    if !amd_compute_units {
        return Ok(groups);
    }
    let mut split = Vec::with_capacity(groups.len());
    for group in groups {
        let mut by_core_id: BTreeMap<Option<i64>, CpuSet> = BTreeMap::new();
        for cpu in group.iter() {
            by_core_id.entry(raw[&cpu].core_id).or_default().insert(cpu);
        }
        split.extend(by_core_id.into_values());
    }
    split.sort_by_key(CpuSet::min);
    Ok(split)
}

fn package_groups(
    raw: &BTreeMap<usize, RawCpu>,
    online: &CpuSet,
) -> Result<(Vec<CpuSet>, Vec<usize>), DiscoveryError> {
    let groups = if raw.values().all(|r| r.package.is_some()) {
        partition(online, |cpu| {
            let r = &raw[&cpu];
            (
                r.package.clone().unwrap_or_default(),
                r.dir.join("topology/core_siblings_list"),
            )
        })?
    } else {
        let mut by_id: BTreeMap<Option<i64>, CpuSet> = BTreeMap::new();
        for (&cpu, r) in raw {
            by_id
                .entry(r.package_id.filter(|&id| id >= 0))
                .or_default()
                .insert(cpu);
        }
        let mut groups: Vec<CpuSet> = by_id.into_values().collect();
        groups.sort_by_key(CpuSet::min);
        groups
    };
    let (ids, usable) = agreed_ids(&groups, |cpu| raw[&cpu].package_id);
    let socket_ids = if usable {
        ids.into_iter().flatten().collect()
    } else {
        (0..groups.len()).collect()
    };
    Ok((groups, socket_ids))
}

type NumaLayout = (
    BTreeMap<usize, usize>,
    Vec<usize>,
    BTreeMap<usize, Vec<u64>>,
);

fn numa_layout(root: &Path, online: &CpuSet) -> Result<NumaLayout, DiscoveryError> {
    let node_dir = root.join("sys/devices/system/node");
    let node_ids = numbered_entries(&node_dir, "node")?;
    // As CPU ids: a node id this large is no machine's (Linux numbers nodes below
    // MAX_NUMNODES, 1024), and the node lists and distance rows indexed by it must stay
    // small (`node18446744073709551615` overflowed `CpuTopology::numa_nodes_for_manager`).
    if let Some(&max) = node_ids.last().filter(|&&m| m >= MAX_TOPOLOGY_ID) {
        return Err(inconsistent(
            &node_dir.join(format!("node{max}")),
            format!("NUMA node id {max} is beyond the supported {MAX_TOPOLOGY_ID}"),
        ));
    }
    if node_ids.is_empty() {
        let numa_of = online.iter().map(|cpu| (cpu, 0)).collect();
        return Ok((numa_of, vec![0], BTreeMap::new()));
    }
    let mut numa_of = BTreeMap::new();
    let mut distances = BTreeMap::new();
    for &node in &node_ids {
        let dir = node_dir.join(format!("node{node}"));
        let cpus = read_list_or_mask(&dir, "cpulist", "cpumap")?
            .unwrap_or_default()
            .intersection(online);
        for cpu in cpus.iter() {
            if let Some(other) = numa_of.insert(cpu, node) {
                return Err(inconsistent(
                    &dir.join("cpulist"),
                    format!("CPU {cpu} is listed by NUMA nodes {other} and {node}"),
                ));
            }
        }
        if let Some(row) = read_u64s(&dir.join("distance"))? {
            if row.len() != node_ids.len() {
                return Err(inconsistent(
                    &dir.join("distance"),
                    format!("{} distances for {} NUMA nodes", row.len(), node_ids.len()),
                ));
            }
            distances.insert(node, row);
        }
    }
    if !distances.is_empty() && distances.len() != node_ids.len() {
        return Err(inconsistent(
            &node_dir,
            "some NUMA nodes have no distance file",
        ));
    }
    if let Some(cpu) = online.iter().find(|cpu| !numa_of.contains_key(cpu)) {
        return Err(inconsistent(
            &node_dir,
            format!("online CPU {cpu} is in no NUMA node"),
        ));
    }
    Ok((numa_of, node_ids, distances))
}

fn uncore_ids(
    raw: &BTreeMap<usize, RawCpu>,
    online: &CpuSet,
    packages: &[CpuSet],
    socket_ids: &[usize],
) -> Result<BTreeMap<usize, usize>, DiscoveryError> {
    let mut uncore_of = BTreeMap::new();
    if raw.values().any(|r| r.l3.is_none()) {
        for (package, &socket) in packages.iter().zip(socket_ids) {
            for cpu in package.iter() {
                uncore_of.insert(cpu, socket);
            }
        }
        return Ok(uncore_of);
    }
    let groups = partition(online, |cpu| {
        let (dir, set, _) = raw[&cpu].l3.clone().unwrap_or_default();
        (set, dir.join("shared_cpu_list"))
    })?;
    let (ids, use_files) = agreed_ids(&groups, |cpu| raw[&cpu].l3.as_ref().and_then(|l3| l3.2));
    for (group, id) in groups.iter().zip(ids) {
        let id = match id {
            Some(id) if use_files => id,
            _ => group.min().unwrap_or(0),
        };
        for cpu in group.iter() {
            uncore_of.insert(cpu, id);
        }
    }
    Ok(uncore_of)
}

/// Per group, the id file value all its CPUs agree on (`None` when one has none, they
/// disagree, or it is negative or not below [`MAX_TOPOLOGY_ID`]); and whether those ids can
/// be used as they are: every group has one and no two groups share it.
fn agreed_ids(
    groups: &[CpuSet],
    id_of: impl Fn(usize) -> Option<i64>,
) -> (Vec<Option<usize>>, bool) {
    let ids: Vec<Option<usize>> = groups
        .iter()
        .map(|g| {
            let mut ids = g.iter().map(&id_of);
            let first = ids.next().flatten()?;
            if ids.all(|id| id == Some(first)) {
                usize::try_from(first)
                    .ok()
                    .filter(|&id| id < MAX_TOPOLOGY_ID)
            } else {
                None
            }
        })
        .collect();
    let mut unique: Vec<usize> = ids.iter().flatten().copied().collect();
    unique.sort_unstable();
    unique.dedup();
    let usable = ids.iter().all(Option::is_some) && unique.len() == groups.len();
    (ids, usable)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One online CPU in node 0, and memory-only nodes with the given ids.
    fn machine_with_nodes(extra_nodes: impl IntoIterator<Item = usize>) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let cpu_dir = root.path().join("sys/devices/system/cpu");
        std::fs::create_dir_all(cpu_dir.join("cpu0/topology")).unwrap();
        std::fs::write(cpu_dir.join("online"), "0\n").unwrap();
        let node_dir = root.path().join("sys/devices/system/node");
        std::fs::create_dir_all(node_dir.join("node0")).unwrap();
        std::fs::write(node_dir.join("node0/cpulist"), "0\n").unwrap();
        for id in extra_nodes {
            std::fs::create_dir_all(node_dir.join(format!("node{id}"))).unwrap();
        }
        root
    }

    /// A node directory numbered `usize::MAX` beside 64 others (so the ids stay as they are,
    /// no dense numbering) made `numa_nodes_for_manager` compute `usize::MAX + 1`; any node id
    /// at or above `MAX_TOPOLOGY_ID` is now refused, naming the directory.
    #[test]
    fn node_ids_beyond_the_supported_are_refused() {
        for huge in [usize::MAX, MAX_TOPOLOGY_ID] {
            let root = machine_with_nodes((1..64).chain([huge]));
            let err = discover(root.path()).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(&format!("node{huge}")) && text.contains("beyond the supported"),
                "{text}"
            );
        }
        let root = machine_with_nodes((1..64).chain([MAX_TOPOLOGY_ID - 1]));
        let topo = discover(root.path()).unwrap();
        let nodes = topo.numa_nodes_for_manager();
        assert_eq!(nodes.len(), 65);
        assert_eq!(nodes.last().map(|n| n.id), Some(MAX_TOPOLOGY_ID - 1));
    }
}
