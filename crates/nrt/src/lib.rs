//! `corral-nrt`: NodeResourceTopology (`topology.node.k8s.io/v1alpha2`), the object through
//! which topology-aware scheduling (the scheduler plugin `NodeResourceTopologyMatch` of
//! kubernetes-sigs/scheduler-plugins) sees what each NUMA node of a node has free.
//!
//! - [`NodeResourceTopology`] and its parts, serialised exactly as the CRD stores them.
//! - [`PodFingerprint`]: the pod fingerprint attribute, byte-identical to podfingerprint's.
//! - [`filter()`]: the scheduler plugin's Filter, ported — would the node align this pod?
//! - [`Amount`]: Kubernetes quantities read exactly; [`TopologyManagerConfig`]: the policy and
//!   scope an object announces, read as the plugin reads them.
//!
//! No I/O and no async: the caller fetches and writes the object with whatever Kubernetes client
//! it uses (corral's agent uses kube-rs).

mod filter;
mod fingerprint;
mod object;
mod policy;
mod quantity;

pub use filter::{
    Container, ContainerKind, Fit, NodeAllocatable, PodRequests, QosClass, Refusal, ResourceList,
    filter, is_host_level, is_native, is_numa_affine,
};
pub use fingerprint::{
    FINGERPRINT_ANNOTATION, FINGERPRINT_PREFIX, FINGERPRINT_VERSION, FingerprintError,
    FingerprintMethod, METHOD_ALL, METHOD_WITH_EXCLUSIVE_RESOURCES, PodFingerprint,
};
pub use object::{
    API_VERSION, ATTRIBUTE_FINGERPRINT, ATTRIBUTE_FINGERPRINT_METHOD, ATTRIBUTE_POLICY,
    ATTRIBUTE_SCOPE, AttributeInfo, CostInfo, GROUP, KIND, NodeResourceTopology, ObjectMeta,
    PLURAL, Quantity, ResourceInfo, VERSION, ZONE_TYPE_NODE, Zone, find_attribute, numa_id_of_zone,
    numa_zone_name,
};
pub use policy::{
    ATTRIBUTE_MAX_NUMA_NODES, DEFAULT_MAX_NUMA_NODES, LIMIT_MAX_NUMA_NODES, Policy, Scope,
    TopologyManagerConfig,
};
pub use quantity::{Amount, QuantityError};
