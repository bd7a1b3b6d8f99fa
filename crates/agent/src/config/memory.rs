//! The memory manager's keys: `memoryManagerPolicy`, `reservedMemory`, and what the node
//! allocatable reservation is built from (`systemReserved` and `kubeReserved` memory,
//! `evictionHard`'s `memory.available`: 100Mi when `evictionHard` is not set, as the kubelet
//! defaults it, or with `mergeDefaultEvictionSettings` when it does not name the signal). The entries are checked as the kubelet's configuration
//! validation checks them (`validation_reserved_memory.go`); the sums against the machine
//! when the memory manager is built.

use std::collections::{BTreeMap, BTreeSet};

use corral_memmgr::{
    EvictionThreshold, MemoryManagerConfig, MemoryPolicy, MemoryReservation,
    node_allocatable_reservation,
};
use corral_topology::memory::NumaMemory;
use corral_topology::{Quantity, QuantityError};
use serde::Deserialize;

use super::{ConfigErrors, ConfigSource};

/// The kubelet's default `evictionHard` threshold for `memory.available`.
const DEFAULT_MEMORY_AVAILABLE: &str = "100Mi";

/// One `reservedMemory` entry as written.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReservedMemoryEntry {
    /// `numaNode`.
    pub(crate) numa_node: i32,
    /// `limits`: resource → quantity.
    #[serde(default)]
    pub(crate) limits: BTreeMap<String, String>,
}

/// The memory manager's settings, checked; the machine decides the rest
/// ([`MemorySettings::manager_config`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct MemorySettings {
    /// `memoryManagerPolicy`.
    pub(crate) policy: MemoryPolicy,
    /// `reservedMemory`.
    pub(crate) reserved_memory: Vec<MemoryReservation>,
    /// `systemReserved`'s memory.
    pub(crate) system_reserved: BTreeMap<String, Quantity>,
    /// `kubeReserved`'s memory.
    pub(crate) kube_reserved: BTreeMap<String, Quantity>,
    /// `evictionHard`'s `memory.available`.
    pub(crate) eviction_memory: Option<EvictionThreshold>,
}

impl MemorySettings {
    /// The memory manager's configuration on a machine of `memory`.
    pub(crate) fn manager_config(
        &self,
        memory: &BTreeMap<usize, NumaMemory>,
    ) -> Result<MemoryManagerConfig, QuantityError> {
        let capacity = memory
            .values()
            .fold(0u64, |sum, n| sum.saturating_add(n.memory_bytes));
        let mut resources = BTreeSet::from(["memory".to_owned()]);
        for node in memory.values() {
            resources.extend(node.huge_pages.iter().map(|p| p.resource_name()));
        }
        Ok(MemoryManagerConfig {
            policy: self.policy,
            reserved_memory: self.reserved_memory.clone(),
            node_allocatable_reservation: node_allocatable_reservation(
                resources.iter().map(String::as_str),
                &self.system_reserved,
                &self.kube_reserved,
                self.eviction_memory.as_ref(),
                capacity,
            )?,
            ..MemoryManagerConfig::default()
        })
    }
}

fn is_memory_resource(name: &str) -> bool {
    name == "memory" || name.starts_with("hugepages-")
}

impl ConfigSource {
    /// The memory manager's settings; every invalid value is pushed to `errors`.
    pub(super) fn memory_settings(&self, errors: &mut ConfigErrors) -> MemorySettings {
        let policy_text = self.memory_manager_policy.as_deref().unwrap_or("None");
        let policy = MemoryPolicy::parse(policy_text).unwrap_or_else(|err| {
            errors.push(
                "memoryManagerPolicy",
                policy_text,
                &format!("\"None\" or \"Static\" ({err})"),
            );
            MemoryPolicy::None
        });
        let mut reserved_memory = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, entry) in self.reserved_memory.iter().flatten().enumerate() {
            let key = format!("reservedMemory[{i}]");
            let Ok(node) = usize::try_from(entry.numa_node) else {
                errors.push(
                    &format!("{key}.numaNode"),
                    &entry.numa_node.to_string(),
                    "a NUMA node id (0 or more)",
                );
                continue;
            };
            let mut limits = BTreeMap::new();
            for (resource, text) in &entry.limits {
                let limit_key = format!("{key}.limits.{resource}");
                if !is_memory_resource(resource) {
                    errors.push(&limit_key, text, &format!("a limit of memory or hugepages-<HugePageSize> (invalid configuration: the limit type {resource:?} for NUMA node {node} is not supported, only [memory hugepages-<HugePageSize>] is accepted)"));
                    continue;
                }
                match Quantity::parse(text) {
                    Ok(q) if q.is_negative() => {
                        errors.push(&limit_key, text, "a quantity of 0 or more, like \"1Gi\"")
                    }
                    Ok(q) if q.value() == Ok(0) => errors.push(&limit_key, text, &format!("a quantity above zero (invalid configuration: reserved memory may not be zero for NUMA node {node} and resource {resource:?})")),
                    Ok(q) => {
                        if !seen.insert((node, resource.clone())) {
                            errors.push(&limit_key, text, &format!("one value per NUMA node and resource (invalid configuration: the reserved memory has a duplicate value for NUMA node {node} and resource {resource:?})"));
                        }
                        limits.insert(resource.clone(), q);
                    }
                    Err(err) => {
                        errors.push(&limit_key, text, &format!("a quantity like \"1Gi\" ({err})"))
                    }
                }
            }
            reserved_memory.push(MemoryReservation {
                numa_node: node,
                limits,
            });
        }
        // As the kubelet's `parseResourceList`: huge pages cannot be reserved this way
        // (so any `reservedMemory` huge pages fail the node allocatable check, as upstream).
        let mut reserved = |key: &str, map: Option<&BTreeMap<String, String>>| {
            let mut out = BTreeMap::new();
            for (resource, text) in map.into_iter().flatten() {
                let key = format!("{key}.{resource}");
                if resource.starts_with("hugepages-") {
                    let why = format!(
                        "cpu, memory, ephemeral-storage or pid (cannot reserve {resource:?} resource)"
                    );
                    errors.push(&key, text, &why);
                    continue;
                }
                if resource != "memory" {
                    continue;
                }
                match Quantity::parse(text) {
                    Ok(q) if !q.is_negative() => {
                        out.insert(resource.clone(), q);
                    }
                    Ok(_) => errors.push(&key, text, "a quantity of 0 or more, like \"1Gi\""),
                    Err(err) => {
                        errors.push(&key, text, &format!("a quantity like \"1Gi\" ({err})"))
                    }
                }
            }
            out
        };
        let system_reserved = reserved("systemReserved", self.system_reserved.as_ref());
        let kube_reserved = reserved("kubeReserved", self.kube_reserved.as_ref());
        // The kubelet's defaults apply when `evictionHard` is not set, or, with
        // `mergeDefaultEvictionSettings`, to each signal it does not set.
        let merge = self.merge_default_eviction_settings == Some(true);
        let eviction_text = match &self.eviction_hard {
            None => Some(DEFAULT_MEMORY_AVAILABLE),
            Some(map) => match map.get("memory.available") {
                Some(text) => Some(text.as_str()),
                None => merge.then_some(DEFAULT_MEMORY_AVAILABLE),
            },
        };
        let eviction_memory = eviction_text.and_then(|text| {
            EvictionThreshold::parse(text)
                .inspect_err(|err| {
                    errors.push(
                        "evictionHard.memory.available",
                        text,
                        &format!("a quantity above zero like \"100Mi\" or a percentage up to 100 like \"5%\" ({err})"),
                    )
                })
                .ok()
                .flatten()
        });
        MemorySettings {
            policy,
            reserved_memory,
            system_reserved,
            kube_reserved,
            eviction_memory,
        }
    }
}
