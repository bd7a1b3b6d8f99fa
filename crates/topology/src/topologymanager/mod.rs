//! The kubelet topology manager (upstream `pkg/kubelet/cm/topologymanager`): hints, the
//! four policies and their options, hint merging, the two scopes, the affinity store and
//! admission.

mod hint;
mod merge;
mod numa_info;
mod policy;

pub use hint::{ProviderHints, ResourceHints, TopologyHint};
pub use merge::reference_merge;
pub use numa_info::{NumaInfo, NumaInfoError, NumaNode};
pub use policy::{
    DEFAULT_MAX_ALLOWABLE_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES, MergeResult,
    PREFER_CLOSEST_NUMA_NODES, Policy, PolicyConfigError, PolicyName, PolicyOptions,
};
