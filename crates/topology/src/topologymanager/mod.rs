//! The kubelet topology manager (upstream `pkg/kubelet/cm/topologymanager`): hints, the
//! four policies and their options, hint merging, the two scopes, the affinity store and
//! admission.

mod admission;
mod budget;
mod family;
mod grant;
mod hint;
mod hint_text;
mod manager;
mod merge;
mod merge_sets;
mod metrics;
mod numa_info;
mod order;
mod policy;
mod provider;
mod scope;
mod search;
mod store;

pub use admission::{
    PodAdmitResult, RejectedHints, TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE,
    UNEXPECTED_ADMISSION_ERROR,
};
pub use budget::{DECISION_STEPS, Effort, bounded, bounded_apart, spend};
pub use family::{
    Demand, HintFamily, HintSet, Preferred, ProviderHintSets, ResourceHintSets, SocketSpan,
    hint_lists, hint_sets, min_affinity_size,
};
pub use grant::{Grant, MemoryGrant, PodGrants};
pub use hint::{ProviderHints, ResourceHints, TopologyHint};
pub use hint_text::{LISTED_FAMILY_NODES, show_provider_hints};
pub use manager::{TopologyManager, TopologyManagerConfig, TopologyManagerError};
pub use metrics::{
    ADMISSION_DURATION_MS_BUCKETS, AdmissionDurations, AdmissionDurationsSnapshot,
    AlignmentCounters, ManagerMetrics,
};
pub use numa_info::{NumaDistances, NumaInfo, NumaInfoError, NumaNode};
pub use policy::{
    DEFAULT_MAX_ALLOWABLE_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES, MergeResult,
    PREFER_CLOSEST_NUMA_NODES, Policy, PolicyConfigError, PolicyName, PolicyOptions,
    check_option_level, option_maturity,
};
pub use policy::{reference_merge, reference_merge_sets};
pub use provider::{AllocationError, HintProvider};
pub use scope::ScopeName;
pub use store::AffinityStore;
