//! The scheduler plugin `NodeResourceTopologyMatch`'s Filter, ported: would the node's topology
//! manager align this pod, judging by the node's NodeResourceTopology?
//!
//! Upstream is scheduler-plugins `pkg/noderesourcetopology/filter.go` (with `numaresources.go`,
//! `pluginhelpers.go`, `resourcerequests/exclusive.go`, `pkg/util/resource.go`) at 903da7df. The
//! rules, in the order upstream applies them:
//!
//! - A BestEffort pod that requests no extended resource (a name with a domain other than
//!   `kubernetes.io`) is not filtered.
//! - Only the `single-numa-node` policy is filtered; `restricted`, `best-effort` and `none`
//!   nodes pass every pod (upstream has no handler for them).
//! - Container scope: each init container (sidecars too) must fit one NUMA zone on its own,
//!   nothing is taken for it; then each app container must fit one zone, and what it requests is
//!   taken from the lowest-numbered zone that fits it before the next is checked.
//!   Pod scope: the pod's effective request (per resource, the larger of the largest init
//!   container and the sum of the app containers, plus the pod overhead) must fit one zone.
//! - A request fits a zone when, for every resource with a non-zero request: the node's
//!   allocatable names it (else refused at once); and, if some zone lists it, the zone lists it
//!   with `available` ≥ the request — except cpu, memory and hugepages of a pod that is not
//!   Guaranteed, which only need to be listed. A resource no zone lists is ignored when it is
//!   host-level (ephemeral-storage, storage, extended resources: devices without NUMA affinity)
//!   and refuses the pod otherwise (cpu, memory, hugepages-*).
//! - Only zones of type `Node` named `node-<id>` with id ≤ 64 count, and only their `available`.

use std::collections::{BTreeMap, BTreeSet};

use crate::object::{NodeResourceTopology, ZONE_TYPE_NODE, numa_id_of_zone};
use crate::policy::{Policy, Scope, TopologyManagerConfig};
use crate::quantity::{Amount, QuantityError};

/// Requests or limits per resource name (`cpu`, `memory`, `hugepages-2Mi`, `example.com/gpu`).
pub type ResourceList = BTreeMap<String, Amount>;

/// Upstream's `maxNUMAId`: zones with a larger id are skipped.
const MAX_NUMA_ID: usize = 64;
const CPU: &str = "cpu";
const MEMORY: &str = "memory";

/// A pod's QoS class, as the kubelet and the scheduler compute it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QosClass {
    /// Every container has cpu and memory limits equal to its requests.
    Guaranteed,
    /// Some cpu or memory request or limit, but not Guaranteed.
    Burstable,
    /// No cpu or memory request or limit at all.
    BestEffort,
}

impl QosClass {
    /// The QoS class of a pod whose containers (app and init) have these requests and limits:
    /// a port of `v1qos.ComputePodQOS` (without pod-level resources). Only cpu and memory count.
    pub fn of_containers<'a>(
        containers: impl IntoIterator<Item = (&'a ResourceList, &'a ResourceList)>,
    ) -> QosClass {
        let mut requests = ResourceList::new();
        let mut limits = ResourceList::new();
        let mut guaranteed = true;
        for (container_requests, container_limits) in containers {
            for (name, amount) in qos_resources(container_requests) {
                let sum = requests.entry(name.clone()).or_default();
                *sum = sum.saturating_add(*amount);
            }
            let mut found = 0;
            for (name, amount) in qos_resources(container_limits) {
                found += 1;
                let sum = limits.entry(name.clone()).or_default();
                *sum = sum.saturating_add(*amount);
            }
            if found < 2 {
                guaranteed = false;
            }
        }
        if requests.is_empty() && limits.is_empty() {
            return QosClass::BestEffort;
        }
        if guaranteed && requests.len() == limits.len() && requests == limits {
            return QosClass::Guaranteed;
        }
        QosClass::Burstable
    }
}

/// The positive cpu and memory entries of a list.
fn qos_resources(list: &ResourceList) -> impl Iterator<Item = (&String, &Amount)> {
    list.iter()
        .filter(|(name, amount)| (*name == CPU || *name == MEMORY) && **amount > Amount::ZERO)
}

/// What kind of container a refusal is about; it only changes the refusal's wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// An app container (`spec.containers`).
    App,
    /// An init container.
    Init,
    /// An init container with `restartPolicy: Always`.
    Sidecar,
}

impl ContainerKind {
    /// The words upstream's refusal uses: "container", "init container", "sidecar container".
    pub fn noun(self) -> &'static str {
        match self {
            ContainerKind::App => "container",
            ContainerKind::Init => "init container",
            ContainerKind::Sidecar => "sidecar container",
        }
    }
}

/// One container's name and requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Container {
    /// The container's name.
    pub name: String,
    /// Whether this init container is a sidecar (`restartPolicy: Always`). Upstream treats
    /// sidecars like other init containers; only the refusal's wording differs.
    pub sidecar: bool,
    /// Its requests.
    pub requests: ResourceList,
}

impl Container {
    /// A container without requests.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ..Self::default()
        }
    }

    /// The container with `amount` of `resource` requested.
    pub fn request(mut self, resource: &str, amount: Amount) -> Self {
        self.requests.insert(resource.to_owned(), amount);
        self
    }
}

/// What the filter needs to know of a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRequests {
    /// Its QoS class (see [`QosClass::of_containers`]).
    pub qos: QosClass,
    /// Its init containers, in order.
    pub init_containers: Vec<Container>,
    /// Its app containers, in order.
    pub containers: Vec<Container>,
    /// `spec.overhead` (counted at pod scope only, as upstream does).
    pub overhead: ResourceList,
}

impl PodRequests {
    /// A pod of class `qos` with these app containers and nothing else.
    pub fn new(qos: QosClass, containers: Vec<Container>) -> Self {
        Self {
            qos,
            init_containers: Vec::new(),
            containers,
            overhead: ResourceList::new(),
        }
    }

    /// The effective request of the pod (upstream's `GetPodEffectiveRequest`): per resource, the
    /// larger of the largest init-container request and the sum of the app containers', plus
    /// the overhead.
    pub fn effective_request(&self) -> ResourceList {
        let mut sum = ResourceList::new();
        for c in &self.containers {
            for (name, amount) in &c.requests {
                let total = sum.entry(name.clone()).or_default();
                *total = total.saturating_add(*amount);
            }
        }
        for c in &self.init_containers {
            for (name, amount) in &c.requests {
                let total = sum.entry(name.clone()).or_insert(*amount);
                if *amount > *total {
                    *total = *amount;
                }
            }
        }
        for (name, amount) in &self.overhead {
            let total = sum.entry(name.clone()).or_default();
            *total = total.saturating_add(*amount);
        }
        sum
    }

    /// Whether any container asks for an extended resource (`IncludeNonNative`), whatever the
    /// amount.
    fn requests_extended(&self) -> bool {
        self.init_containers
            .iter()
            .chain(&self.containers)
            .any(|c| c.requests.keys().any(|name| !is_native(name)))
    }
}

/// The names of the node's allocatable resources (`node.status.allocatable`), as the scheduler's
/// `NodeInfo` gives them: cpu, memory, pods and ephemeral-storage are always there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeAllocatable {
    names: BTreeSet<String>,
}

impl NodeAllocatable {
    /// The node allocatable naming `names`, plus the four the scheduler always lists.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let always = [CPU, MEMORY, "pods", "ephemeral-storage"];
        Self {
            names: always.into_iter().chain(names).map(str::to_owned).collect(),
        }
    }

    /// The node allocatable naming every resource some zone of `nrt` lists.
    pub fn from_zones(nrt: &NodeResourceTopology) -> Self {
        Self::new(
            nrt.zones
                .iter()
                .flat_map(|z| z.resources.iter().map(|r| r.name.as_str())),
        )
    }

    /// Whether the node has `resource` at all.
    pub fn contains(&self, resource: &str) -> bool {
        self.names.contains(resource)
    }
}

/// Why the plugin lets the pod through, and where it expects the kubelet to put it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fit {
    /// A BestEffort pod without extended resources: not filtered.
    BestEffort,
    /// The node's policy is not `single-numa-node`: not filtered.
    NotAligned(Policy),
    /// Pod scope: the pod fits NUMA node `numa` (the lowest that fits).
    Pod {
        /// The NUMA node id.
        numa: usize,
    },
    /// Container scope: the NUMA node of each app container, in order.
    Containers(Vec<usize>),
}

/// Why the plugin turns the pod away from the node. The messages are upstream's status
/// messages; the fields say what upstream only logs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Container scope: a container fits no zone (upstream: Unschedulable).
    #[error("cannot align {}", .kind.noun())]
    Container {
        /// App, init or sidecar.
        kind: ContainerKind,
        /// The container's name.
        name: String,
        /// The first resource found that no zone could give.
        resource: String,
    },
    /// Pod scope: the pod's effective request fits no zone (upstream: Unschedulable).
    #[error("cannot align pod")]
    Pod {
        /// The first resource found that no zone could give.
        resource: String,
    },
    /// Taking an aligned container's request from its zone went below zero, which only a
    /// malformed object (two zones with one name) can cause (upstream: Error).
    #[error("inconsistent resource accounting: {resource} on NUMA node {numa}")]
    InconsistentAccounting {
        /// The NUMA node.
        numa: usize,
        /// The resource.
        resource: String,
    },
    /// A zone's `available` is not a quantity (upstream cannot even decode such an object).
    #[error("zone {zone} resource {resource}: invalid available")]
    InvalidQuantity {
        /// The zone.
        zone: String,
        /// The resource.
        resource: String,
        /// Why the value does not read.
        #[source]
        source: QuantityError,
    },
}

/// One NUMA zone as the filter sees it: its id and what it has available.
#[derive(Clone, Debug)]
struct NumaZone {
    id: usize,
    available: ResourceList,
}

/// Runs the plugin's Filter for `pod` against the node described by `nrt` and `node`.
///
/// # Example
///
/// ```
/// use corral_nrt::{
///     filter, Amount, AttributeInfo, Container, Fit, NodeAllocatable, NodeResourceTopology,
///     PodRequests, QosClass, ResourceInfo, Zone,
/// };
///
/// let mut nrt = NodeResourceTopology::named("worker-1");
/// for (id, free_cpus) in [(0, 2), (1, 6)] {
///     let mut zone = Zone::numa_node(id);
///     zone.resources.push(ResourceInfo::new("cpu", 8, 8, free_cpus));
///     zone.resources.push(ResourceInfo::new("memory", 8 << 30, 8 << 30, 8 << 30));
///     nrt.zones.push(zone);
/// }
/// nrt.attributes.push(AttributeInfo::new("topologyManagerPolicy", "single-numa-node"));
/// nrt.attributes.push(AttributeInfo::new("topologyManagerScope", "container"));
/// let node = NodeAllocatable::from_zones(&nrt);
///
/// let app = Container::named("app")
///     .request("cpu", Amount::units(4))
///     .request("memory", Amount::units(1 << 30));
/// let pod = PodRequests::new(QosClass::Guaranteed, vec![app.clone()]);
/// assert_eq!(filter(&nrt, &node, &pod), Ok(Fit::Containers(vec![1])));
///
/// let two = PodRequests::new(QosClass::Guaranteed, vec![app.clone(), app]);
/// let refusal = filter(&nrt, &node, &two).unwrap_err();
/// assert_eq!(refusal.to_string(), "cannot align container");
/// ```
pub fn filter(
    nrt: &NodeResourceTopology,
    node: &NodeAllocatable,
    pod: &PodRequests,
) -> Result<Fit, Refusal> {
    if pod.qos == QosClass::BestEffort && !pod.requests_extended() {
        return Ok(Fit::BestEffort);
    }
    let conf = TopologyManagerConfig::of(nrt);
    if conf.policy != Policy::SingleNumaNode {
        return Ok(Fit::NotAligned(conf.policy));
    }
    let zones = numa_zones(nrt)?;
    match conf.scope {
        Scope::Pod => align_pod(&zones, node, pod),
        Scope::Container => align_containers(zones, node, pod),
    }
}

/// Upstream's `createNUMANodeList`: the `Node` zones named `node-<id>`, id ≤ 64, with their
/// `available` amounts (a resource listed twice: the last entry counts).
fn numa_zones(nrt: &NodeResourceTopology) -> Result<Vec<NumaZone>, Refusal> {
    let mut zones = Vec::new();
    for zone in &nrt.zones {
        if zone.zone_type != ZONE_TYPE_NODE {
            continue;
        }
        let Some(id) = numa_id_of_zone(&zone.name).filter(|id| *id <= MAX_NUMA_ID) else {
            continue;
        };
        let mut available = ResourceList::new();
        for res in &zone.resources {
            let amount = res
                .available
                .amount()
                .map_err(|source| Refusal::InvalidQuantity {
                    zone: zone.name.clone(),
                    resource: res.name.clone(),
                    source,
                })?;
            available.insert(res.name.clone(), amount);
        }
        zones.push(NumaZone { id, available });
    }
    Ok(zones)
}

fn align_pod(
    zones: &[NumaZone],
    node: &NodeAllocatable,
    pod: &PodRequests,
) -> Result<Fit, Refusal> {
    match fit_one_zone(zones, node, pod.qos, &pod.effective_request()) {
        Ok(numa) => Ok(Fit::Pod { numa }),
        Err(Unfit(resource)) => Err(Refusal::Pod { resource }),
    }
}

fn align_containers(
    mut zones: Vec<NumaZone>,
    node: &NodeAllocatable,
    pod: &PodRequests,
) -> Result<Fit, Refusal> {
    for init in &pod.init_containers {
        if let Err(Unfit(resource)) = fit_one_zone(&zones, node, pod.qos, &init.requests) {
            let kind = if init.sidecar {
                ContainerKind::Sidecar
            } else {
                ContainerKind::Init
            };
            return Err(Refusal::Container {
                kind,
                name: init.name.clone(),
                resource,
            });
        }
    }
    let mut placed = Vec::with_capacity(pod.containers.len());
    for app in &pod.containers {
        let numa =
            fit_one_zone(&zones, node, pod.qos, &app.requests).map_err(|Unfit(resource)| {
                Refusal::Container {
                    kind: ContainerKind::App,
                    name: app.name.clone(),
                    resource,
                }
            })?;
        take_from_zone(&mut zones, numa, pod.qos, &app.requests)?;
        placed.push(numa);
    }
    Ok(Fit::Containers(placed))
}

/// The first resource (in name order) that rules out every zone.
struct Unfit(String);

/// Upstream's `resourcesAvailableInAnyNUMANodes`: the lowest NUMA id that can give every
/// requested resource, or the first resource (in name order) that rules out every zone.
fn fit_one_zone(
    zones: &[NumaZone],
    node: &NodeAllocatable,
    qos: QosClass,
    requests: &ResourceList,
) -> Result<usize, Unfit> {
    // One bit per NUMA id 0..63, all set: upstream's bitmask.Fill().
    let mut candidates = u64::MAX;
    for (resource, amount) in requests {
        if amount.is_zero() {
            continue;
        }
        if !node.contains(resource) {
            return Err(Unfit(resource.clone()));
        }
        let mut listed = false;
        let mut fitting = 0u64;
        for zone in zones {
            let Some(available) = zone.available.get(resource) else {
                continue;
            };
            listed = true;
            // Ids 64 and up cannot be set in upstream's 64-bit mask either.
            if zone.id < 64 && suits(qos, resource, *amount, *available) {
                fitting |= 1 << zone.id;
            }
        }
        if !listed && is_host_level(resource) {
            continue;
        }
        candidates &= fitting;
        if candidates == 0 {
            return Err(Unfit(resource.clone()));
        }
    }
    Ok(candidates.trailing_zeros() as usize)
}

/// Upstream's `isResourceSetSuitable`.
fn suits(qos: QosClass, resource: &str, amount: Amount, available: Amount) -> bool {
    if qos != QosClass::Guaranteed && is_numa_affine(resource) {
        return true;
    }
    available >= amount
}

/// Upstream's `subtractResourcesFromNUMANodeList`: takes what an aligned container requests
/// from every zone with id `numa`, skipping zero requests, resources the zone does not list,
/// and — unless the pod is Guaranteed — cpu, memory and hugepages.
fn take_from_zone(
    zones: &mut [NumaZone],
    numa: usize,
    qos: QosClass,
    requests: &ResourceList,
) -> Result<(), Refusal> {
    for zone in zones.iter_mut().filter(|z| z.id == numa) {
        for (resource, amount) in requests {
            if qos != QosClass::Guaranteed && is_numa_affine(resource) {
                continue;
            }
            if amount.is_zero() {
                continue;
            }
            let Some(available) = zone.available.get_mut(resource) else {
                continue;
            };
            let left = available.saturating_sub(*amount);
            if left.is_negative() {
                return Err(Refusal::InconsistentAccounting {
                    numa,
                    resource: resource.clone(),
                });
            }
            *available = left;
        }
    }
    Ok(())
}

/// `v1helper.IsNativeResource`: no domain, or a `kubernetes.io/` one.
pub fn is_native(resource: &str) -> bool {
    !resource.contains('/') || resource.contains("kubernetes.io/")
}

/// Upstream's `isNUMAAffineResource`: cpu, memory and huge pages must come from one NUMA node;
/// devices may or may not, so they are not counted as affine.
pub fn is_numa_affine(resource: &str) -> bool {
    resource == CPU || resource == MEMORY || resource.starts_with("hugepages-")
}

/// Upstream's `isHostLevelResource`: resources that may have no NUMA affinity.
pub fn is_host_level(resource: &str) -> bool {
    resource == "ephemeral-storage" || resource == "storage" || !is_native(resource)
}

#[cfg(test)]
mod tests;
