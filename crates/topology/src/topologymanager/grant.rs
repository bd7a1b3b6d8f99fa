//! What providers granted in an admission: each container's exclusive CPUs, pinned memory
//! and devices, returned by [`HintProvider::allocate`](super::HintProvider::allocate) and
//! collected in [`PodAdmitResult::grants`](super::PodAdmitResult::grants), so the caller
//! records exactly what was given, and gives back exactly that, without asking the
//! providers again.

use std::collections::{BTreeMap, BTreeSet};

use crate::CpuSet;

/// What one container was granted (by one provider, or by all of them merged).
///
/// ```
/// use corral_topology::topologymanager::{Grant, MemoryGrant};
///
/// let mut grant = Grant::cpus("2-3".parse()?);
/// grant.merge(Grant::memory(vec![MemoryGrant::new("memory", 1 << 30, vec![0])]));
/// grant.merge(Grant::devices("example.com/gpu", ["gpu-0"]));
/// assert_eq!(grant.exclusive_cpus.to_string(), "2-3");
/// assert_eq!(grant.memory[0].numa_affinity, [0]);
/// assert!(grant.devices["example.com/gpu"].contains("gpu-0"));
/// assert!(Grant::default().is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// CPUs given to the container alone (empty: it runs in the shared pool).
    pub exclusive_cpus: CpuSet,
    /// Memory and huge pages pinned to NUMA nodes.
    pub memory: Vec<MemoryGrant>,
    /// Device-plugin devices: resource name → device ids.
    pub devices: BTreeMap<String, BTreeSet<String>>,
}

/// Bytes of one memory type pinned to a set of NUMA nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryGrant {
    /// `memory` or `hugepages-<size>`.
    pub resource: String,
    /// Bytes.
    pub size: u64,
    /// The NUMA nodes (ids as the machine numbers them).
    pub numa_affinity: Vec<usize>,
}

impl MemoryGrant {
    /// `size` bytes of `resource` on `numa_affinity`.
    pub fn new(resource: impl Into<String>, size: u64, numa_affinity: Vec<usize>) -> Self {
        MemoryGrant {
            resource: resource.into(),
            size,
            numa_affinity,
        }
    }
}

/// Every container's grant in one admission, by container name.
pub type PodGrants = BTreeMap<String, Grant>;

impl Grant {
    /// Exclusive CPUs.
    pub fn cpus(exclusive_cpus: CpuSet) -> Self {
        Grant {
            exclusive_cpus,
            ..Grant::default()
        }
    }

    /// Pinned memory.
    pub fn memory(memory: Vec<MemoryGrant>) -> Self {
        Grant {
            memory,
            ..Grant::default()
        }
    }

    /// Devices of one resource.
    pub fn devices<S: Into<String>>(
        resource: impl Into<String>,
        ids: impl IntoIterator<Item = S>,
    ) -> Self {
        let ids: BTreeSet<String> = ids.into_iter().map(Into::into).collect();
        let mut devices = BTreeMap::new();
        if !ids.is_empty() {
            devices.insert(resource.into(), ids);
        }
        Grant {
            devices,
            ..Grant::default()
        }
    }

    /// Nothing granted.
    pub fn is_empty(&self) -> bool {
        self.exclusive_cpus.is_empty() && self.memory.is_empty() && self.devices.is_empty()
    }

    /// Add what `other` granted (another provider's grant to the same container).
    pub fn merge(&mut self, other: Grant) {
        self.exclusive_cpus = self.exclusive_cpus.union(&other.exclusive_cpus);
        self.memory.extend(other.memory);
        for (resource, ids) in other.devices {
            self.devices.entry(resource).or_default().extend(ids);
        }
    }
}

/// Add `grants` (one provider's, by container) to `into`.
pub(crate) fn merge_into(into: &mut PodGrants, grants: PodGrants) {
    for (container, grant) in grants {
        into.entry(container).or_default().merge(grant);
    }
}
