//! The pod vocabulary the managers read: [`Pod`], [`Container`], resource lists and resource
//! claims. The agent converts real Pod manifests into these; quantities are already
//! converted (CPU in millicores, memory in bytes, everything else as an integer count, each
//! rounded up as upstream's `MilliValue`/`Value`). The converter must apply the API
//! server's defaulting first (a container with limits but no requests gets requests equal to
//! its limits), as upstream's managers only ever see defaulted pods.

use std::collections::BTreeMap;

/// Requests or limits of one container (or of the whole pod).
///
/// # Example
///
/// ```
/// use corral_topology::{ResourceList, parse_bytes};
///
/// let mut list = ResourceList::default();
/// assert!(list.is_empty());
/// list.memory_bytes = Some(parse_bytes("1Gi")?);
/// list.extended.insert("hugepages-2Mi".into(), parse_bytes("4Mi")?);
/// assert_eq!(list.len(), 2);
/// assert_eq!(list.get("memory"), Some(1 << 30));
/// assert_eq!(list.get("hugepages-2Mi"), Some(4 << 20));
/// assert_eq!(list.get("cpu"), None);
/// # Ok::<(), corral_topology::QuantityError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ResourceList {
    /// `cpu`, in millicores; `None` when not given.
    pub cpu_millis: Option<i64>,
    /// `memory`, in bytes; `None` when not given.
    pub memory_bytes: Option<i64>,
    /// Every other resource (extended resources, hugepages, …) by name, as an integer.
    pub extended: BTreeMap<String, i64>,
}

impl ResourceList {
    /// Whether no resource is given at all.
    pub fn is_empty(&self) -> bool {
        self.cpu_millis.is_none() && self.memory_bytes.is_none() && self.extended.is_empty()
    }

    /// Number of resources given (upstream `len(ResourceList)`).
    pub fn len(&self) -> usize {
        usize::from(self.cpu_millis.is_some())
            + usize::from(self.memory_bytes.is_some())
            + self.extended.len()
    }

    /// The integer value of `resource` (`"cpu"` in millicores, `"memory"` in bytes).
    pub fn get(&self, resource: &str) -> Option<i64> {
        match resource {
            "cpu" => self.cpu_millis,
            "memory" => self.memory_bytes,
            other => self.extended.get(other).copied(),
        }
    }
}

/// Requests and limits (upstream `ResourceRequirements`).
///
/// # Example
///
/// ```
/// use corral_topology::{Container, ResourceRequirements};
///
/// let mut resources = ResourceRequirements::default();
/// resources.requests.cpu_millis = Some(2000);
/// resources.limits.cpu_millis = Some(2000);
/// let app = Container { resources, ..Container::new("app") };
/// assert_eq!(app.resources.requests.get("cpu"), app.resources.limits.get("cpu"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ResourceRequirements {
    /// What the container asks for.
    pub requests: ResourceList,
    /// The most it may use.
    pub limits: ResourceList,
}

/// A container's reference to one of the pod's resource claims.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ContainerClaim {
    /// The pod-level claim name ([`PodResourceClaim::name`]).
    pub name: String,
    /// The request within the claim, when the container uses only one.
    pub request: Option<String>,
}

/// A pod-level resource claim entry (upstream `PodResourceClaim`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PodResourceClaim {
    /// The name containers use to refer to it.
    pub name: String,
    /// The `ResourceClaim` object it names, if given directly.
    pub resource_claim_name: Option<String>,
    /// The `ResourceClaimTemplate` it is generated from, if any.
    pub resource_claim_template_name: Option<String>,
}

/// A container's restart policy; only `Always` exists upstream, and only init containers
/// set it (they are then "sidecars").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum ContainerRestartPolicy {
    /// Restart the init container for the pod's lifetime (a sidecar).
    Always,
}

/// What kind of container a [`Container`] is within its pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// An init container that runs to completion before the next one.
    Init,
    /// A restartable init container (`restartPolicy: Always`): a sidecar.
    Sidecar,
    /// An app container.
    App,
}

/// One container of a pod.
///
/// # Example
///
/// ```
/// use corral_topology::{Container, ContainerRestartPolicy};
///
/// let mut app = Container::new("app");
/// app.resources.requests.cpu_millis = Some(2000);
/// app.resources.requests.extended.insert("example.com/gpu".into(), 1);
/// assert_eq!(app.resources.requests.get("cpu"), Some(2000));
/// assert_eq!(app.resources.requests.get("example.com/gpu"), Some(1));
/// assert!(!app.is_restartable());
///
/// // An init container with `restartPolicy: Always` is a sidecar.
/// let mut sidecar = Container::new("proxy");
/// sidecar.restart_policy = Some(ContainerRestartPolicy::Always);
/// assert!(sidecar.is_restartable());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Container {
    /// Its name, unique within the pod.
    pub name: String,
    /// `Some(Always)` for a sidecar (restartable init container).
    pub restart_policy: Option<ContainerRestartPolicy>,
    /// Requests and limits.
    pub resources: ResourceRequirements,
    /// The resource claims it uses.
    pub claims: Vec<ContainerClaim>,
}

impl Container {
    /// A container with a name and nothing else.
    pub fn new(name: impl Into<String>) -> Container {
        Container {
            name: name.into(),
            ..Container::default()
        }
    }

    /// Whether `restartPolicy` is `Always` (meaningful on init containers).
    pub fn is_restartable(&self) -> bool {
        self.restart_policy == Some(ContainerRestartPolicy::Always)
    }
}

/// A pod: the few fields the managers read.
///
/// # Example
///
/// ```
/// use corral_topology::{Container, Pod, QosClass};
///
/// let mut app = Container::new("app");
/// app.resources.requests.cpu_millis = Some(2000);
/// app.resources.limits.cpu_millis = Some(2000);
/// app.resources.requests.memory_bytes = Some(1 << 30);
/// app.resources.limits.memory_bytes = Some(1 << 30);
/// let pod = Pod { uid: "uid-1".into(), containers: vec![app], ..Pod::default() };
/// assert_eq!(pod.qos_class(), QosClass::Guaranteed);
/// assert_eq!(pod.all_containers().count(), 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Pod {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.initContainers`, in order (sidecars included).
    pub init_containers: Vec<Container>,
    /// `spec.containers`, in order.
    pub containers: Vec<Container>,
    /// `spec.resources` (pod-level resources), when set.
    pub resources: Option<ResourceRequirements>,
    /// `spec.resourceClaims`.
    pub resource_claims: Vec<PodResourceClaim>,
}

/// How the resource managers treat pods that set pod-level resources (the kubelet's
/// `PodLevelResourceManagers` feature gate, alpha in v1.36).
///
/// # Example
///
/// ```
/// use corral_topology::{FeatureGates, Pod, PodLevelResources, ResourceRequirements};
///
/// let mut resources = ResourceRequirements::default();
/// resources.limits.cpu_millis = Some(4000);
/// let pod = Pod { uid: "u".into(), resources: Some(resources), ..Pod::default() };
/// assert!(!pod.is_managed_at_pod_level(PodLevelResources::Unmanaged));
/// assert!(pod.is_managed_at_pod_level(PodLevelResources::Managed));
/// // v1.37 turns the gate on by default.
/// assert_eq!(FeatureGates::v1_37_defaults().pod_level_resources(), PodLevelResources::Managed);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PodLevelResources {
    /// The gate off (v1.36's default): such pods get nothing exclusive and give no hints.
    #[default]
    Unmanaged,
    /// The gate on: at pod scope, each manager allocates the pod's budget once and
    /// partitions it among the containers (upstream `AllocatePod`).
    Managed,
}

impl Pod {
    /// Whether the managers handle this pod's resources at pod level under `mode`: it sets
    /// pod-level resources and `mode` is [`PodLevelResources::Managed`].
    pub fn is_managed_at_pod_level(&self, mode: PodLevelResources) -> bool {
        mode == PodLevelResources::Managed && self.has_pod_level_resources()
    }

    /// Whether the pod sets pod-level resources (`spec.resources`) that the kubelet
    /// supports there — requests or limits of CPU, memory or huge pages (upstream
    /// `IsPodLevelResourcesSet`). While `PodLevelResourceManagers` is off (v1.36's
    /// default), the CPU and memory managers' static policies give such pods nothing
    /// exclusive.
    ///
    /// ```
    /// use corral_topology::{Pod, ResourceRequirements};
    ///
    /// let mut pod = Pod::default();
    /// assert!(!pod.has_pod_level_resources());
    /// let mut resources = ResourceRequirements::default();
    /// resources.limits.cpu_millis = Some(2000);
    /// pod.resources = Some(resources);
    /// assert!(pod.has_pod_level_resources());
    /// ```
    pub fn has_pod_level_resources(&self) -> bool {
        self.resources.as_ref().is_some_and(|r| {
            [&r.requests, &r.limits].into_iter().any(|list| {
                list.cpu_millis.is_some()
                    || list.memory_bytes.is_some()
                    || list.extended.keys().any(|k| k.starts_with("hugepages-"))
            })
        })
    }

    /// Init containers then app containers, as upstream's admission walks them.
    pub fn all_containers(&self) -> impl Iterator<Item = (ContainerKind, &Container)> {
        self.init_containers
            .iter()
            .map(|c| {
                let kind = if c.is_restartable() {
                    ContainerKind::Sidecar
                } else {
                    ContainerKind::Init
                };
                (kind, c)
            })
            .chain(self.containers.iter().map(|c| (ContainerKind::App, c)))
    }

    /// The container named `name` (init or app).
    pub fn container(&self, name: &str) -> Option<&Container> {
        self.all_containers()
            .map(|(_, c)| c)
            .find(|c| c.name == name)
    }

    /// "namespace/name", as upstream logs a pod.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
