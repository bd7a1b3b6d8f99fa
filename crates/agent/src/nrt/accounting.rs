//! What the node's NodeResourceTopology says: one zone per NUMA node, read from the managers'
//! state as it is now (so it is exact at the moment it is taken, unlike exporters that rebuild
//! it from the kubelet's podresources API).
//!
//! The accounting rule, per zone (documented against upstream in `docs/nrt.md`):
//! - `cpu`: capacity is the NUMA node's online CPUs; allocatable leaves out the reserved CPUs
//!   (`reservedSystemCPUs`, or those the static policy set aside for `kubeReserved` +
//!   `systemReserved`); available further leaves out the CPUs held exclusively (containers'
//!   and pod-level exclusive sets). Shared-pool use is not subtracted: the pool's CPUs stay
//!   available to an exclusive request, exactly as the static policy takes them. With the
//!   `none` CPU policy nothing is held exclusively and the reservation is spread evenly.
//! - `memory` and `hugepages-<size>`: with the static memory policy, the memory manager's
//!   machine state (total, allocatable, free) per NUMA node; otherwise what sysfs gave, all
//!   of it allocatable and available (no policy holds memory per NUMA node).
//! - device resources: a device plugin's devices on this NUMA node (on each of its nodes
//!   when it names several; NUMA ids the machine lacks make no zone); capacity counts them
//!   all, allocatable the healthy ones (by the device manager's health, which marks a
//!   disconnected plugin's devices unhealthy), available the healthy ones no pod holds.
//!   Devices without topology are in no zone.
//! - attributes: the topology manager's policy and scope, and the pod fingerprint over the
//!   admitted pods holding exclusive resources (see `pods_fingerprint`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use corral_nrt::{
    ATTRIBUTE_FINGERPRINT, ATTRIBUTE_FINGERPRINT_METHOD, ATTRIBUTE_POLICY, ATTRIBUTE_SCOPE,
    AttributeInfo, CostInfo, METHOD_WITH_EXCLUSIVE_RESOURCES, NodeResourceTopology, ResourceInfo,
    Zone, numa_zone_name,
};
use corral_topology::topologymanager::{PolicyName, ScopeName};

use super::pods_fingerprint::exclusive_pods_fingerprint;
use crate::node::Node;
use crate::node::numa_resources::{Counts, cpu_counts, device_counts, memory_manager_tables};

/// How one node's NodeResourceTopology is taken from its managers.
#[derive(Clone, Debug)]
pub(crate) struct Accounting {
    /// The object's name: the node's.
    node_name: String,
    /// The CPUs the configuration reserves, as a whole count (rounded up, as the static
    /// policy takes them): what the `none` policy's zones leave out of allocatable.
    reserved_cpus: usize,
}

impl Accounting {
    /// The accounting of node `node_name` under `cpu` (the CPU manager's configuration).
    pub(crate) fn new(node_name: &str, cpu: &corral_cpumgr::CpuManagerConfig) -> Self {
        let reserved_cpus = if cpu.reserved_system_cpus.is_empty() {
            cpu.reserved_cpu_millis.map_or(0, |millis| {
                usize::try_from(millis.max(0))
                    .unwrap_or(usize::MAX)
                    .div_ceil(1000)
            })
        } else {
            cpu.reserved_system_cpus.len()
        };
        Self {
            node_name: node_name.to_owned(),
            reserved_cpus,
        }
    }

    /// The node's name.
    pub(crate) fn node_name(&self) -> &str {
        &self.node_name
    }

    /// The object as the node's managers hold it now.
    pub(crate) fn take(&self, node: &Node) -> NodeResourceTopology {
        node_resource_topology(node, &self.node_name, self.reserved_cpus)
    }

    /// The object as the node's managers hold it once no decision is under way: never the
    /// holdings of a decision that is yet to be given back (an `admit --dry-run` trial, a
    /// refusal), which would be published as taken (see [`Node::settled`]).
    pub(crate) async fn take_settled(
        &self,
        node: &Arc<Node>,
    ) -> anyhow::Result<NodeResourceTopology> {
        let accounting = self.clone();
        node.settled(move |node| accounting.take(node)).await
    }
}

fn node_resource_topology(
    node: &Node,
    node_name: &str,
    reserved_cpus: usize,
) -> NodeResourceTopology {
    let mut nrt = NodeResourceTopology::named(node_name);
    let policy = node.topology().policy().name();
    let scope = node.topology().scope().unwrap_or(ScopeName::Container);
    nrt.topology_policies = vec![legacy_policy(policy, scope).to_owned()];
    nrt.attributes = vec![
        AttributeInfo::new(ATTRIBUTE_POLICY, policy.as_str()),
        AttributeInfo::new(ATTRIBUTE_SCOPE, scope.as_str()),
    ];
    let cpus = cpu_counts(node, reserved_cpus);
    let memory = memory_tables(node);
    let devices = device_counts(node);
    let ids: BTreeSet<usize> = cpus.keys().chain(memory.keys()).copied().collect();
    let topology = node.cpu().topology().topology();
    for &id in &ids {
        let mut zone = Zone::numa_node(id);
        zone.costs = ids
            .iter()
            .filter_map(|&to| {
                let value = topology.numa_distance(id, to)?;
                Some(CostInfo {
                    name: numa_zone_name(to),
                    value: i64::try_from(value).unwrap_or(i64::MAX),
                })
            })
            .collect();
        if let Some(counts) = cpus.get(&id) {
            zone.resources.push(resource(counts.counts, "cpu"));
        }
        for (name, counts) in memory.get(&id).into_iter().flatten() {
            zone.resources.push(resource(*counts, name));
        }
        for (name, per_node) in &devices {
            if let Some(counts) = per_node.get(&id) {
                zone.resources.push(resource(*counts, name));
            }
        }
        nrt.zones.push(zone);
    }
    let listed: BTreeSet<String> = nrt
        .zones
        .iter()
        .flat_map(|z| z.resources.iter().map(|r| r.name.clone()))
        .collect();
    let pods: Vec<_> = node
        .pods()
        .all()
        .into_iter()
        .map(|admitted| admitted.pod)
        .collect();
    nrt.attributes.push(AttributeInfo::new(
        ATTRIBUTE_FINGERPRINT,
        &exclusive_pods_fingerprint(&pods, &listed),
    ));
    nrt.attributes.push(AttributeInfo::new(
        ATTRIBUTE_FINGERPRINT_METHOD,
        METHOD_WITH_EXCLUSIVE_RESOURCES,
    ));
    nrt
}

/// The deprecated `topologyPolicies` value for a policy and scope
/// (noderesourcetopology-api's `TopologyManagerPolicy` constants).
fn legacy_policy(policy: PolicyName, scope: ScopeName) -> &'static str {
    match (policy, scope) {
        (PolicyName::SingleNumaNode, ScopeName::Container) => "SingleNUMANodeContainerLevel",
        (PolicyName::SingleNumaNode, ScopeName::Pod) => "SingleNUMANodePodLevel",
        (PolicyName::Restricted, ScopeName::Container) => "RestrictedContainerLevel",
        (PolicyName::Restricted, ScopeName::Pod) => "RestrictedPodLevel",
        (PolicyName::BestEffort, ScopeName::Container) => "BestEffortContainerLevel",
        (PolicyName::BestEffort, ScopeName::Pod) => "BestEffortPodLevel",
        _ => "None",
    }
}

fn resource(counts: Counts, name: &str) -> ResourceInfo {
    ResourceInfo::new(name, counts.capacity, counts.allocatable, counts.available)
}

/// Per NUMA node, per memory resource: the memory manager's static policy's, otherwise
/// what sysfs gave, all of it allocatable and available.
fn memory_tables(node: &Node) -> BTreeMap<usize, BTreeMap<String, Counts>> {
    if let Some(tables) = memory_manager_tables(node) {
        return tables;
    }
    node.numa_memory()
        .iter()
        .map(|(&id, numa)| {
            let whole = |bytes: u64| Counts {
                capacity: bytes,
                allocatable: bytes,
                available: bytes,
            };
            let mut tables = BTreeMap::from([("memory".to_owned(), whole(numa.memory_bytes))]);
            for pages in &numa.huge_pages {
                let bytes = pages
                    .count
                    .saturating_mul(pages.page_size_kib.saturating_mul(1024));
                tables.insert(pages.resource_name(), whole(bytes));
            }
            (id, tables)
        })
        .collect()
}
