//! `corral-topology`: the vocabulary every corral manager shares.
//!
//! This crate will own:
//! - `CpuSet`, a bitset of CPU ids that parses and prints the Linux list format exactly as
//!   Kubernetes' `k8s.io/utils/cpuset` does;
//! - `NumaMask`, the topology manager's 64-bit NUMA bitmask;
//! - `CpuTopology`, per-CPU core/socket/NUMA/uncore-cache placement, discovered from sysfs;
//! - the pod vocabulary (`Pod`, `Container`, QoS class, quantities);
//! - the topology manager: hints, the four policies, the two scopes, the affinity store.
//!
//! It knows nothing of gRPC, files outside sysfs, or tokio.

mod cpuset;
mod cpuset_format;
mod details;
mod numa_mask;
mod pod;
mod qos;
mod quantity;
#[cfg(feature = "sysfs")]
pub mod sysfs;
mod topology;

pub use cpuset::{CpuSet, IntoIter as CpuSetIntoIter, Iter as CpuSetIter, Ranges as CpuSetRanges};
pub use cpuset_format::{CpuSetParseError, MAX_SPARSE_RANGE};
pub use details::CpuDetails;
pub use numa_mask::{NumaMask, NumaMaskError};
pub use pod::{
    Container, ContainerClaim, ContainerKind, ContainerRestartPolicy, Pod, PodResourceClaim,
    ResourceList, ResourceRequirements,
};
pub use qos::QosClass;
pub use quantity::{Quantity, QuantityError, parse_bytes, parse_count, parse_cpu_millis};
#[cfg(feature = "sysfs")]
pub use sysfs::{DiscoveryError, discover, discover_host};
pub use topology::{
    CpuInfo, CpuRecord, CpuTopology, MAX_TOPOLOGY_ID, TopologyCounts, TopologyError,
};
pub mod topologymanager;

pub use topologymanager::{
    MergeResult, NumaInfo, NumaInfoError, NumaNode, Policy, PolicyConfigError, PolicyName,
    PolicyOptions, ProviderHints, ResourceHints, TopologyHint,
};
