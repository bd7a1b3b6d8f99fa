//! What each NUMA node has, read from the managers as they are now: the one accounting rule
//! the NodeResourceTopology (`nrt/accounting.rs`), `corral status` and a refusal's
//! explanation (`explain.rs`) share. The rule, per resource, is in `docs/nrt.md` and
//! `nrt/accounting.rs`: capacity, allocatable (reserved CPUs and memory left out, devices
//! the device manager calls unhealthy left out), available (what no pod holds).

use std::collections::{BTreeMap, BTreeSet};

use corral_topology::CpuSet;
use serde::Serialize;

use super::Node;

/// Capacity, allocatable and available of one resource on one NUMA node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Counts {
    /// All of it.
    pub(crate) capacity: u64,
    /// What pods may have: reserved CPUs and memory, unhealthy devices left out.
    pub(crate) allocatable: u64,
    /// What is free now: allocatable, less what pods hold.
    pub(crate) available: u64,
}

/// One NUMA node's CPUs: its counts, and the CPUs still free for exclusive use (empty with
/// the `none` policy, which pins nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NumaCpus {
    pub(crate) counts: Counts,
    pub(crate) free: CpuSet,
}

/// Per NUMA node: its CPUs, those pods may have, those still free for exclusive use.
/// `reserved_cpus`: the reservation as a count, which the `none` policy (no allocatable
/// set) spreads over the nodes, remainder to the lowest ids.
pub(crate) fn cpu_counts(node: &Node, reserved_cpus: usize) -> BTreeMap<usize, NumaCpus> {
    let cpu = node.cpu();
    let index = cpu.topology();
    let all = cpu.all_cpus();
    let allocatable = cpu.allocatable_cpus();
    let state = cpu.state();
    let mut held = state.exclusive_cpus();
    for cpus in state.pod_cpu_sets().values() {
        held.union_with(cpus);
    }
    let policy_none = allocatable.is_empty();
    let reserved_none = if policy_none {
        reserved_cpus.min(all.len())
    } else {
        0
    };
    let ids = index.numa_node_ids();
    ids.iter()
        .enumerate()
        .map(|(at, &id)| {
            let on_node: CpuSet = index.cpus_in_numa_node(id);
            let capacity = on_node.len() as u64;
            let allocatable_here = if policy_none {
                let share = reserved_none / ids.len() + usize::from(at < reserved_none % ids.len());
                capacity.saturating_sub(share as u64)
            } else {
                on_node.intersection(&allocatable).len() as u64
            };
            let held_here = on_node.intersection(&held).len() as u64;
            let counts = Counts {
                capacity,
                allocatable: allocatable_here,
                available: allocatable_here.saturating_sub(held_here),
            };
            let free = on_node.intersection(&allocatable).difference(&held);
            (id, NumaCpus { counts, free })
        })
        .collect()
}

/// Per NUMA node, per memory resource (`memory`, `hugepages-2Mi`, …), as the memory
/// manager's static policy holds them; `None` without it (nothing holds memory per node).
pub(crate) fn memory_manager_tables(
    node: &Node,
) -> Option<BTreeMap<usize, BTreeMap<String, Counts>>> {
    let machine = node.memory().machine_state()?;
    let tables = machine
        .iter()
        .map(|(&id, state)| {
            let tables = state
                .memory
                .iter()
                .map(|(name, table)| {
                    let counts = Counts {
                        capacity: table.total,
                        allocatable: table.allocatable,
                        available: table.free,
                    };
                    (name.clone(), counts)
                })
                .collect();
            (id, tables)
        })
        .collect();
    Some(tables)
}

/// Per device resource, per NUMA node: a device plugin's devices on the node (on each of
/// its nodes when it names several); devices without topology are on none.
pub(crate) fn device_counts(node: &Node) -> BTreeMap<String, BTreeMap<usize, Counts>> {
    // Healthy as the device manager holds it, not as the plugin last listed it: when a
    // plugin's stream ends, its devices turn unhealthy (upstream `PluginDisconnected`) though
    // its last list called them healthy, and the manager allocates none of them.
    let mut out: BTreeMap<String, BTreeMap<usize, Counts>> = BTreeMap::new();
    for (resource, inventory) in node.devices().device_inventory() {
        let per_node = out.entry(resource).or_default();
        for device in &inventory.devices {
            let numa: BTreeSet<usize> = device
                .numa_nodes
                .iter()
                .flatten()
                .filter_map(|&id| usize::try_from(id).ok())
                .collect();
            for id in numa {
                let counts = per_node.entry(id).or_default();
                counts.capacity += 1;
                if inventory.healthy.contains(&device.id) {
                    counts.allocatable += 1;
                    if !inventory.allocated.contains(&device.id) {
                        counts.available += 1;
                    }
                }
            }
        }
    }
    out.retain(|_, per_node| !per_node.is_empty());
    out
}

/// One NUMA node's CPUs as `corral status` and an explanation show them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct CpuSummary {
    /// The node's online CPUs.
    pub(crate) total: u64,
    /// Those reserved for the system (`reservedSystemCPUs`, or the static policy's share
    /// of `kubeReserved` + `systemReserved`).
    pub(crate) reserved: u64,
    /// Those held exclusively by containers or pods.
    pub(crate) exclusive: u64,
    /// Those still free for exclusive use.
    pub(crate) free: u64,
    /// The free CPUs, in the Linux list format (empty with the `none` policy).
    pub(crate) free_cpus: String,
}

/// What one NUMA node has and has free, by resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct NumaNodeResources {
    /// The NUMA node, as the OS numbers it.
    pub(crate) id: usize,
    /// Its CPUs (`None` for a node without CPUs, or where an explanation needs none).
    pub(crate) cpus: Option<CpuSummary>,
    /// Memory and huge pages per resource (bytes), only with the memory manager's static
    /// policy: without it nothing holds memory per NUMA node.
    pub(crate) memory: BTreeMap<String, Counts>,
    /// Devices per resource.
    pub(crate) devices: BTreeMap<String, Counts>,
}

impl NumaNodeResources {
    /// Only what `wanted` names (`cpu`, memory resources, device resources); a device
    /// resource wanted but absent from the node shows as none of it.
    pub(crate) fn only(mut self, wanted: &BTreeSet<String>) -> NumaNodeResources {
        if !wanted.contains("cpu") {
            self.cpus = None;
        }
        self.memory.retain(|name, _| wanted.contains(name));
        self.devices.retain(|name, _| wanted.contains(name));
        self
    }
}

impl Node {
    /// Each NUMA node's resources as the managers hold them now, in id order. Devices of a
    /// resource some node has show on every node (none where it has none), so a reader
    /// sees every resource on every node.
    pub(crate) fn numa_resources(&self) -> Vec<NumaNodeResources> {
        let cpus = cpu_counts(self, 0);
        let memory = memory_manager_tables(self).unwrap_or_default();
        let devices = device_counts(self);
        let ids: BTreeSet<usize> = cpus.keys().chain(memory.keys()).copied().collect();
        ids.into_iter()
            .map(|id| NumaNodeResources {
                id,
                cpus: cpus.get(&id).map(|numa| CpuSummary {
                    total: numa.counts.capacity,
                    reserved: numa.counts.capacity - numa.counts.allocatable,
                    exclusive: numa.counts.allocatable - numa.counts.available,
                    free: numa.counts.available,
                    free_cpus: numa.free.to_string(),
                }),
                memory: memory.get(&id).cloned().unwrap_or_default(),
                devices: devices
                    .iter()
                    .map(|(name, per_node)| {
                        (name.clone(), per_node.get(&id).copied().unwrap_or_default())
                    })
                    .collect(),
            })
            .collect()
    }
}
