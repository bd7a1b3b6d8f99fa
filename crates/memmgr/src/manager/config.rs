//! The memory manager's configuration (the KubeletConfiguration keys
//! `memoryManagerPolicy` and `reservedMemory`, and the node allocatable reservation the
//! kubelet derives from `systemReserved`, `kubeReserved` and `evictionHard`), checked as
//! upstream's `NewManager` / `getSystemReservedMemory` / `NewPolicyStatic` check it, with
//! their messages.

use std::collections::{BTreeMap, BTreeSet};

use corral_topology::memory::NumaMemory;
use corral_topology::{PodLevelResources, Quantity, QuantityError, QuantitySum};

use crate::machine_state::{MEMORY, SystemReserved};

/// The policy (`memoryManagerPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryPolicy {
    /// `None`: no exclusive memory (the kubelet's default).
    #[default]
    None,
    /// `Static`: Guaranteed pods' memory and huge pages from the NUMA nodes the topology
    /// manager aligns them to.
    Static,
}

impl MemoryPolicy {
    /// The name upstream uses (and writes in `memory_manager_state`).
    pub fn name(self) -> &'static str {
        match self {
            MemoryPolicy::None => "None",
            MemoryPolicy::Static => "Static",
        }
    }

    /// A policy by its name (case-sensitive, as upstream).
    pub fn parse(name: &str) -> Result<MemoryPolicy, ConfigError> {
        match name {
            "None" => Ok(MemoryPolicy::None),
            "Static" => Ok(MemoryPolicy::Static),
            other => Err(ConfigError::UnknownPolicy(other.to_owned())),
        }
    }
}

/// One `reservedMemory` entry: what the system keeps of one NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryReservation {
    /// The NUMA node.
    pub numa_node: usize,
    /// Per resource (`memory`, `hugepages-<size>`), the quantity kept.
    pub limits: BTreeMap<String, Quantity>,
}

impl MemoryReservation {
    /// A reservation of `limits` (resource, quantity text) on `numa_node`.
    pub fn new<'a>(
        numa_node: usize,
        limits: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<MemoryReservation, QuantityError> {
        Ok(MemoryReservation {
            numa_node,
            limits: MemoryReservation::limits(limits)?,
        })
    }

    /// Parsed quantities by resource name.
    pub fn limits<'a>(
        limits: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<BTreeMap<String, Quantity>, QuantityError> {
        limits
            .into_iter()
            .map(|(name, text)| Ok((name.to_owned(), Quantity::parse(text)?)))
            .collect()
    }
}

/// The memory manager's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryManagerConfig {
    /// `memoryManagerPolicy`.
    pub policy: MemoryPolicy,
    /// `reservedMemory`.
    pub reserved_memory: Vec<MemoryReservation>,
    /// The node allocatable reservation (upstream `GetNodeAllocatableReservation`): per
    /// resource, `systemReserved` + `kubeReserved` + the hard eviction threshold (for
    /// `memory`), summed as upstream sums quantities (the sum's format decides how an error
    /// prints it).
    pub node_allocatable_reservation: BTreeMap<String, QuantitySum>,
    /// How pods with pod-level resources are treated (the `PodLevelResourceManagers`
    /// gate): [`PodLevelResources::Managed`] allocates their budget at pod scope and writes
    /// `memory_manager_state` v2, as a v1.36 kubelet with the gate on does (v1 otherwise;
    /// every version is read).
    pub pod_level_resources: PodLevelResources,
}

/// Why the configuration is refused (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not `None` nor `Static`.
    #[error("unknown policy: {0:?}")]
    UnknownPolicy(String),
    /// A reservation on a node the machine does not have.
    #[error(
        "the reserved memory configuration references a NUMA node {0} that does not exist on this machine"
    )]
    UnknownNode(usize),
    /// The reservations of a type do not add up to the node allocatable reservation.
    #[error(
        "the total amount {reserved:?} of type {resource:?} is not equal to the value {allocatable:?} determined by Node Allocatable feature"
    )]
    TotalMismatch {
        /// The sum of the `reservedMemory` entries.
        reserved: String,
        /// `memory` or `hugepages-<size>`.
        resource: String,
        /// The node allocatable reservation.
        allocatable: String,
    },
    /// A reservation is negative or does not fit 64 bits.
    #[error("the reserved memory of type {resource:?} on NUMA node {numa_node} is invalid")]
    Quantity {
        /// The NUMA node.
        numa_node: usize,
        /// The resource.
        resource: String,
        /// Why.
        #[source]
        source: QuantityError,
    },
    /// The static policy needs memory kept for the system.
    #[error("[memorymanager] you should specify the system reserved memory")]
    NoSystemReserved,
}

/// Whether a resource is the memory manager's: `memory` or huge pages.
pub(super) fn is_memory_resource(resource: &str) -> bool {
    resource == MEMORY || resource.starts_with("hugepages-")
}

impl MemoryManagerConfig {
    /// Upstream `getSystemReservedMemory`: the reservations, checked against the machine
    /// and the node allocatable reservation ([`check_reserved_memory`](Self::check_reserved_memory)),
    /// per node and resource in bytes (every node of `memory` present, maybe empty). Unlike
    /// upstream's `AsInt64`, a whole number of bytes written with a fraction or a large unit
    /// (`1.5Gi`, `1Pi`) converts.
    pub fn system_reserved(
        &self,
        memory: &BTreeMap<usize, NumaMemory>,
    ) -> Result<SystemReserved, ConfigError> {
        self.check_reserved_memory(memory)?;
        let mut reserved: SystemReserved = memory.keys().map(|&n| (n, BTreeMap::new())).collect();
        for entry in &self.reserved_memory {
            for (resource, quantity) in &entry.limits {
                let bytes = quantity
                    .value()
                    .and_then(|v| {
                        u64::try_from(v).map_err(|_| QuantityError::Overflow {
                            quantity: quantity.as_str().to_owned(),
                            unit: "value",
                        })
                    })
                    .map_err(|source| ConfigError::Quantity {
                        numa_node: entry.numa_node,
                        resource: resource.clone(),
                        source,
                    })?;
                reserved
                    .entry(entry.numa_node)
                    .or_default()
                    .insert(resource.clone(), bytes);
            }
        }
        Ok(reserved)
    }

    /// [`system_reserved`](Self::system_reserved), then `NewPolicyStatic`'s check: some
    /// `memory` must be reserved for the system.
    pub(crate) fn static_reserved(
        &self,
        memory: &BTreeMap<usize, NumaMemory>,
    ) -> Result<SystemReserved, ConfigError> {
        let reserved = self.system_reserved(memory)?;
        check_system_reserved(&reserved)?;
        Ok(reserved)
    }
}

/// Upstream `NewPolicyStatic`'s check: the reservations keep some `memory` for the system.
pub fn check_system_reserved(reserved: &SystemReserved) -> Result<(), ConfigError> {
    let memory_total = reserved
        .values()
        .filter_map(|r| r.get(MEMORY))
        .fold(0u64, |sum, &b| sum.saturating_add(b));
    if memory_total == 0 {
        return Err(ConfigError::NoSystemReserved);
    }
    Ok(())
}

impl MemoryManagerConfig {
    /// Upstream `validateReservedMemory`: every entry names a node of `memory`, and per
    /// type the entries sum to the node allocatable reservation. A type's sum prints in the
    /// format of the last entry naming it (upstream adds the running total to each entry's
    /// quantity). Types are checked in name order (upstream's order is Go map order, so
    /// which of several mismatches it reports varies).
    pub fn check_reserved_memory(
        &self,
        memory: &BTreeMap<usize, NumaMemory>,
    ) -> Result<(), ConfigError> {
        let mut totals: BTreeMap<&str, QuantitySum> = BTreeMap::new();
        for entry in &self.reserved_memory {
            if !memory.contains_key(&entry.numa_node) {
                return Err(ConfigError::UnknownNode(entry.numa_node));
            }
            for (resource, quantity) in &entry.limits {
                let invalid = |source| ConfigError::Quantity {
                    numa_node: entry.numa_node,
                    resource: resource.clone(),
                    source,
                };
                let mut total = QuantitySum::new(None);
                total.add(quantity).map_err(invalid)?;
                if let Some(&before) = totals.get(resource.as_str()) {
                    total.add_sum(before).ok_or_else(|| {
                        invalid(QuantityError::Overflow {
                            quantity: quantity.as_str().to_owned(),
                            unit: "value",
                        })
                    })?;
                }
                totals.insert(resource, total);
            }
        }
        let types: BTreeSet<&str> = totals
            .keys()
            .copied()
            .chain(
                self.node_allocatable_reservation
                    .keys()
                    .map(String::as_str)
                    .filter(|r| is_memory_resource(r)),
            )
            .collect();
        for resource in types {
            let reserved = totals
                .get(resource)
                .copied()
                .unwrap_or(QuantitySum::new(None));
            let allocatable = self
                .node_allocatable_reservation
                .get(resource)
                .copied()
                .unwrap_or(QuantitySum::new(None));
            if reserved.value() != allocatable.value() {
                return Err(ConfigError::TotalMismatch {
                    reserved: reserved.to_string(),
                    resource: resource.to_owned(),
                    allocatable: allocatable.to_string(),
                });
            }
        }
        Ok(())
    }
}
