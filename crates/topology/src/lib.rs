//! `corral-topology`: the vocabulary every corral manager shares, and the kubelet topology
//! manager.
//!
//! - [`CpuSet`]: a bitset of CPU ids that parses and prints the Linux list format exactly as
//!   Kubernetes' `k8s.io/utils/cpuset` does.
//! - [`NumaMask`]: the topology manager's 64-bit NUMA bitmask (upstream `bitmask.BitMask`),
//!   and [`NumaIds`]: which mask bit stands for which NUMA node OS id.
//! - [`CpuTopology`] and [`CpuDetails`]: per-CPU core/socket/NUMA/uncore placement and the
//!   queries the CPU manager packs with; [`discover`] reads it from a host root's sysfs
//!   (feature `sysfs`, on by default).
//! - The pod vocabulary: [`Pod`], [`Container`], [`QosClass`], [`Quantity`].
//! - [`FeatureGates`]: the kubelet's feature gates the managers read, with v1.37's defaults
//!   and [`Maturity`], parsed from a `featureGates` map with upstream's refusals.
//! - [`topologymanager`]: hints, the four policies and their options, the hint merge, the two
//!   scopes, the affinity store and admission. A [`TopologyHint`] prints as the kubelet
//!   logs it; [`NumaIds::show`] and [`TopologyHint::show`] print masks with the NUMA nodes
//!   their bits stand for where those are dense bits, not node ids.
//!
//! # Deviations from upstream
//!
//! Each is deliberate and documented where it happens:
//!
//! - **NUMA node ids of 64 and more** ([`NumaIds`], [`topology`](CpuTopology#numa-node-ids-are-mask-bits)):
//!   upstream's masks hold node ids 0–63 only, so kubelet cannot run on a machine whose
//!   firmware numbers nodes sparsely (e.g. `0-2,33-34,45,72-73`). corral gives such a
//!   machine's nodes (at most 64) dense mask bits in ascending id order; the managers work on
//!   bits and every edge reports OS ids. When every id is below 64 the bit is the id, exactly
//!   upstream.
//! - **Discovery follows the hardware** ([`sysfs`]): cores and sockets come from sibling
//!   masks, not cadvisor's `core_id`/`physical_package_id` keys, and NUMA distance columns
//!   are mapped to nodes rather than indexed by node id.
//! - **Distance rows too short to be indexed by node id** are a [`NumaInfoError`] where
//!   upstream would panic ([`NumaInfo::new`]).
//!
//! **Architecture Invariant:** this crate knows nothing of gRPC, checkpoint files or tokio;
//! its only I/O is reading sysfs/procfs in [`sysfs`]. Everything else is synchronous, pure
//! and allocation-light, because it is the admission hot path.
//!
//! ```
//! use std::collections::BTreeMap;
//! use corral_topology::{CpuSet, NumaInfo, NumaMask, Policy, PolicyName, PolicyOptions, TopologyHint};
//!
//! let cpus: CpuSet = "0-3,8,10-11".parse()?;
//! assert_eq!(cpus.len(), 7);
//! assert_eq!(cpus.to_string(), "0-3,8,10-11");
//!
//! // Two providers: the CPU manager prefers node 0 or node 1, a device plugin only node 1.
//! let hint = |ids: &[usize], preferred| TopologyHint::new(Some(NumaMask::new(ids.iter().copied()).unwrap()), preferred);
//! let cpu = BTreeMap::from([("cpu".to_owned(), Some(vec![hint(&[0], true), hint(&[1], true)]))]);
//! let gpu = BTreeMap::from([("example.com/gpu".to_owned(), Some(vec![hint(&[1], true)]))]);
//! let policy = Policy::new(PolicyName::SingleNumaNode, NumaInfo::from_ids([0, 1])?, PolicyOptions::default());
//! let result = policy.merge(&[Some(cpu), Some(gpu)]);
//! assert_eq!(result.best_hint, hint(&[1], true));
//! assert!(result.admit);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

#[macro_use]
mod macros;

mod cpuset;
mod cpuset_format;
mod details;
pub mod feature_gates;
pub mod memory;
mod numa_ids;
mod numa_mask;
mod pod;
mod qos;
mod quantity;
mod quantity_format;
#[cfg(feature = "sysfs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sysfs")))]
pub mod sysfs;
mod topology;

pub use cpuset::{CpuSet, IntoIter as CpuSetIntoIter, Iter as CpuSetIter, Ranges as CpuSetRanges};
pub use cpuset_format::{CpuSetParseError, MAX_SPARSE_RANGE};
pub use details::CpuDetails;
pub use feature_gates::{
    FEATURES, Feature, FeatureGateError, FeatureGates, Maturity, REMOVED_GATES,
};
pub use numa_ids::{NumaIds, NumaIdsError};
pub use numa_mask::{NumaMask, NumaMaskError};
pub use pod::{
    Container, ContainerClaim, ContainerKind, ContainerRestartPolicy, Pod, PodLevelResources,
    PodResourceClaim, ResourceList, ResourceRequirements,
};
pub use qos::QosClass;
pub use quantity::{Quantity, QuantityError, parse_bytes, parse_count, parse_cpu_millis};
pub use quantity_format::{QuantityFormat, QuantitySum};
#[cfg(feature = "sysfs")]
#[cfg_attr(docsrs, doc(cfg(feature = "sysfs")))]
pub use sysfs::{DiscoveryError, discover, discover_host};
pub use topology::{
    CpuInfo, CpuRecord, CpuTopology, MAX_TOPOLOGY_ID, TopologyCounts, TopologyError,
};
pub mod topologymanager;

pub use topologymanager::{
    AffinityStore, AllocationError, HintProvider, MergeResult, NumaDistances, NumaInfo,
    NumaInfoError, NumaNode, PodAdmitResult, Policy, PolicyConfigError, PolicyName, PolicyOptions,
    ProviderHints, ResourceHints, ScopeName, TopologyHint, TopologyManager, TopologyManagerConfig,
    TopologyManagerError,
};
