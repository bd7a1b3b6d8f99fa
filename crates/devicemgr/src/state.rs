//! [`DeviceState`]: the device manager's synchronous core — registered resources and their
//! devices, plugin endpoints' bookkeeping, pod allocations, in-flight reservations and the
//! devices init containers leave for reuse. No I/O, no async: the facade in
//! [`crate::DeviceManager`] holds it under a lock and talks to plugins outside it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use corral_topology::Pod;

use crate::bitset::BitSet;
use crate::pod_devices::PodDevices;
use crate::resource_devices::ResourceDevices;
use crate::{Device, PluginOptions};

/// A registered plugin's endpoint as the core sees it (upstream `endpointInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointInfo {
    /// The plugin's options; `None` for an endpoint restored from a checkpoint.
    pub options: Option<PluginOptions>,
    /// When the endpoint stopped (its stream ended, or it was restored from a checkpoint
    /// and its plugin has not registered again); `None` while it runs.
    pub stopped_at: Option<Instant>,
}

impl EndpointInfo {
    /// Whether the endpoint stopped and `grace` has passed since, at `now`.
    pub fn grace_expired(&self, now: Instant, grace: Duration) -> bool {
        self.stopped_at
            .is_some_and(|t| now.saturating_duration_since(t) > grace)
    }
}

/// What `GetCapacity` reports (upstream `GetCapacity`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capacity {
    /// Healthy plus unhealthy devices per live resource.
    pub capacity: BTreeMap<String, i64>,
    /// Healthy devices per live resource.
    pub allocatable: BTreeMap<String, i64>,
    /// Resources removed by this call (their endpoint's grace period expired).
    pub removed: Vec<String>,
}

/// Who may use a container's devices after it (upstream's reusable devices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceReuse {
    /// A (non-restartable) init container: the containers after it may reuse its devices.
    LaterContainers,
    /// A sidecar or an app container: its devices stay its own.
    Nobody,
}

impl DeviceReuse {
    /// The reuse of the devices of `pod`'s container `container` (by name).
    pub fn after(pod: &Pod, container: &str) -> DeviceReuse {
        let init = pod.init_containers.iter().find(|c| c.name == container);
        if init.is_some_and(|c| !c.is_restartable()) {
            DeviceReuse::LaterContainers
        } else {
            DeviceReuse::Nobody
        }
    }
}

/// Devices reserved for one container of one resource while its `Allocate` call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub(crate) id: u64,
    /// The resource.
    pub resource: String,
    /// The devices, in the order taken.
    pub devices: Vec<String>,
}

/// What to ask the plugin's `GetPreferredAllocation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferredRequest {
    /// Resource name.
    pub resource: String,
    /// Devices to choose from (sorted).
    pub available: Vec<String>,
    /// Devices the answer must include (sorted).
    pub must_include: Vec<String>,
    /// How many devices to choose.
    pub size: usize,
}

/// One pod's device admission in flight.
#[derive(Debug, Clone, Default)]
pub(crate) struct AdmissionInFlight {
    /// Container name and its reservation, in the order reserved.
    pub(crate) reserved: Vec<(String, Reservation)>,
    /// Container name and its question, not asked yet.
    pub(crate) questions: Vec<(String, PreferredRequest)>,
    /// (container, resource) → the last question asked, its answer and how often asked.
    pub(crate) answers: BTreeMap<(String, String), Answer>,
    /// The devices init containers left for reuse as they were before the decision (saved
    /// at its first reservation; put back when it is cancelled).
    pub(crate) reuse_before: Option<ReuseSets>,
}

/// pod uid → resource → devices its init containers left for reuse.
pub(crate) type ReuseSets = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

#[derive(Debug, Clone)]
/// A plugin's answer to a question of an admission in flight.
pub(crate) struct Answer {
    pub(crate) question: PreferredRequest,
    pub(crate) devices: BTreeSet<String>,
    pub(crate) asked: u32,
}

/// The device manager's state.
///
/// ```
/// use std::collections::BTreeSet;
/// use corral_devicemgr::{AllocationRequest, Device, DeviceState, PluginOptions, ToAllocate};
/// use corral_topology::NumaMask;
///
/// let mut state = DeviceState::new(vec![0, 1]);
/// state.plugin_connected("example.com/gpu", PluginOptions::default());
/// state.update_devices("example.com/gpu", &[
///     Device::new("gpu0", Some(vec![0])),
///     Device::new("gpu1", Some(vec![1])),
/// ]);
/// let request = AllocationRequest {
///     affinity: Some(NumaMask::new([1])?),
///     ..AllocationRequest::new("pod-uid", "app", "example.com/gpu", 1)
/// };
/// let ToAllocate::Devices(reservation) = state.devices_to_allocate(&request, None)? else {
///     panic!("expected devices");
/// };
/// assert_eq!(reservation.devices, vec!["gpu1".to_owned()]);
/// assert_eq!(state.available_devices("example.com/gpu"), BTreeSet::from(["gpu0".to_owned()]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct DeviceState {
    pub(crate) numa_nodes: Vec<usize>,
    /// OS id ↔ mask bit of the NUMA nodes (see [`DeviceState::with_numa_ids`]).
    pub(crate) numa_ids: corral_topology::NumaIds,
    pub(crate) resources: BTreeMap<String, ResourceDevices>,
    pub(crate) endpoints: BTreeMap<String, EndpointInfo>,
    pub(crate) pod_devices: PodDevices,
    pub(crate) reservations: BTreeMap<u64, (String, Vec<String>)>,
    pub(crate) next_reservation: u64,
    /// pod uid → resource → devices its init containers left for reuse.
    pub(crate) devices_to_reuse: ReuseSets,
    /// pod uid → its device admission in flight (see `in_flight.rs`).
    pub(crate) in_flight: BTreeMap<String, AdmissionInFlight>,
}

impl DeviceState {
    /// An empty state for a machine with these NUMA node ids (in the order the topology
    /// manager iterates them).
    pub fn new(numa_nodes: Vec<usize>) -> DeviceState {
        DeviceState {
            numa_nodes,
            ..DeviceState::default()
        }
    }

    /// The machine's NUMA nodes as mask bits ([`numa_ids`](Self::numa_ids) maps OS ids).
    pub fn numa_nodes(&self) -> &[usize] {
        &self.numa_nodes
    }

    pub(crate) fn resource_mut(&mut self, resource: &str) -> &mut ResourceDevices {
        self.resources.entry(resource.to_owned()).or_default()
    }

    /// A plugin registered (upstream `PluginConnected`): its endpoint runs with `options`.
    pub fn plugin_connected(&mut self, resource: &str, options: PluginOptions) {
        self.endpoints.insert(
            resource.to_owned(),
            EndpointInfo {
                options: Some(options),
                stopped_at: None,
            },
        );
    }

    /// A plugin's stream ended (upstream `PluginDisconnected`): all its devices become
    /// unhealthy at once and the grace period starts. Unknown resources are ignored.
    pub fn plugin_disconnected(&mut self, resource: &str, now: Instant) {
        let Some(endpoint) = self.endpoints.get_mut(resource) else {
            return;
        };
        endpoint.stopped_at = Some(now);
        let devices = self.resource_mut(resource);
        let healthy = std::mem::take(&mut devices.healthy);
        devices.unhealthy.union_with(&healthy);
        devices.has_unhealthy = true;
        tracing::info!(
            resource,
            "device plugin disconnected; all its devices are unhealthy"
        );
    }

    /// The endpoint bookkeeping of a resource.
    pub fn endpoint(&self, resource: &str) -> Option<EndpointInfo> {
        self.endpoints.get(resource).copied()
    }

    /// A new full device list from the resource's plugin (upstream
    /// `genericDeviceUpdateCallback`). A repeated id keeps its last occurrence; the number
    /// of such duplicates is returned.
    pub fn update_devices(&mut self, resource: &str, devices: &[Device]) -> usize {
        let table = self.resources.entry(resource.to_owned()).or_default();
        let duplicates = table.replace_devices(devices, &self.numa_ids);
        let table = &self.resources[resource];
        tracing::debug!(
            resource,
            total = devices.len(),
            healthy = table.healthy.len(),
            duplicates,
            "processed device updates"
        );
        duplicates
    }

    /// Whether the resource is a device-plugin resource: registered, or allocated before
    /// (upstream `isDevicePluginResource`).
    pub fn is_device_plugin_resource(&self, resource: &str) -> bool {
        self.resources
            .get(resource)
            .is_some_and(|r| r.has_healthy || r.has_allocated)
    }

    /// Whether a plugin registered the resource (upstream: `healthyDevices` has it).
    pub fn is_registered(&self, resource: &str) -> bool {
        self.resources.get(resource).is_some_and(|r| r.has_healthy)
    }

    /// Resources with registered devices, sorted.
    pub fn resources(&self) -> Vec<String> {
        self.resources
            .iter()
            .filter(|(_, r)| r.has_healthy || r.has_unhealthy)
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn ids(&self, resource: &str, set: impl Fn(&ResourceDevices) -> &BitSet) -> BTreeSet<String> {
        self.resources
            .get(resource)
            .map(|r| r.ids_of(set(r)).into_iter().collect())
            .unwrap_or_default()
    }

    /// Every device of the plugin's last list, healthy or not (upstream `allDevices`).
    pub fn all_devices(&self, resource: &str) -> Vec<Device> {
        self.resources
            .get(resource)
            .map(ResourceDevices::listed_devices)
            .unwrap_or_default()
    }

    /// Healthy device ids.
    pub fn healthy_devices(&self, resource: &str) -> BTreeSet<String> {
        self.ids(resource, |r| &r.healthy)
    }

    /// Unhealthy device ids.
    pub fn unhealthy_devices(&self, resource: &str) -> BTreeSet<String> {
        self.ids(resource, |r| &r.unhealthy)
    }

    /// Allocated (or reserved) device ids.
    pub fn allocated_devices(&self, resource: &str) -> BTreeSet<String> {
        self.ids(resource, |r| &r.allocated)
    }

    /// Whether the allocated map has an entry for the resource (upstream: a key of
    /// `allocatedDevices`, possibly with an empty set).
    pub fn has_allocated_entry(&self, resource: &str) -> bool {
        self.resources
            .get(resource)
            .is_some_and(|r| r.has_allocated)
    }

    /// Healthy minus allocated (upstream `getAvailableDevices`).
    pub fn available_devices(&self, resource: &str) -> BTreeSet<String> {
        self.resources
            .get(resource)
            .map(|r| {
                r.ids_of(&r.healthy.difference(&r.allocated))
                    .into_iter()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether some device of the resource has a NUMA node (upstream
    /// `deviceHasTopologyAlignment`).
    pub fn device_has_topology_alignment(&self, resource: &str) -> bool {
        self.resources
            .get(resource)
            .is_some_and(|r| r.topology_aligned)
    }

    /// The allocations.
    pub fn pod_devices(&self) -> &PodDevices {
        &self.pod_devices
    }

    /// Recompute the allocated sets from the pod allocations (entries with a response) and
    /// the reservations in flight (upstream `allocatedDevices = podDevices.devices()`).
    pub fn regenerate_allocated(&mut self) {
        let mut allocated = self.pod_devices.devices();
        for (resource, devices) in self.reservations.values() {
            allocated
                .entry(resource.clone())
                .or_default()
                .extend(devices.iter().cloned());
        }
        for table in self.resources.values_mut() {
            table.allocated.clear();
            table.has_allocated = false;
        }
        for (resource, devices) in allocated {
            let table = self.resource_mut(&resource);
            table.has_allocated = true;
            for id in &devices {
                let i = table.intern(id);
                table.allocated.insert(i);
            }
        }
    }

    /// Free the devices of pods that are not active any more (upstream
    /// `UpdateAllocatedDevices`, once sources are ready). Returns the pods removed.
    pub fn remove_inactive_pods(&mut self, active: &BTreeSet<String>) -> Vec<String> {
        let stale: Vec<String> = self
            .pod_devices
            .pods()
            .into_iter()
            .filter(|uid| !active.contains(uid))
            .collect();
        if stale.is_empty() {
            return stale;
        }
        tracing::debug!(pods = %stale.iter().map(String::as_str).collect::<Vec<_>>().join(","), "freeing devices of inactive pods");
        self.pod_devices.delete(&stale);
        self.regenerate_allocated();
        stale
    }

    /// Forget one pod's allocations at once (corral's release of a failed admission).
    pub fn remove_pod(&mut self, pod_uid: &str) {
        self.end_admission(pod_uid);
        self.pod_devices.delete([&pod_uid.to_owned()]);
        self.devices_to_reuse.remove(pod_uid);
        self.regenerate_allocated();
    }

    /// Forget one container's allocations (corral's release of a container that joined
    /// its pod, when the join failed): its devices are free again, and no later
    /// container of the pod reuses them.
    pub fn remove_container(&mut self, pod_uid: &str, container: &str) {
        if let Some(reuse) = self.devices_to_reuse.get_mut(pod_uid) {
            self.pod_devices
                .remove_container_resources(pod_uid, container, reuse);
        }
        self.pod_devices.delete_container(pod_uid, container);
        self.regenerate_allocated();
    }

    /// Upstream `GetCapacity` at `now`: resources whose endpoint stopped more than `grace`
    /// ago (or that lost their endpoint) are removed and reported in
    /// [`Capacity::removed`]; the others report healthy (allocatable) and healthy plus
    /// unhealthy (capacity) counts.
    pub fn capacity(&mut self, now: Instant, grace: Duration) -> Capacity {
        let mut out = Capacity::default();
        let mut removed = BTreeSet::new();
        let names: Vec<String> = self.resources.keys().cloned().collect();
        for name in names {
            let expired = self
                .endpoints
                .get(&name)
                .is_none_or(|e| e.grace_expired(now, grace));
            let table = self.resources.get_mut(&name).expect("listed above");
            if expired {
                let sets = [
                    (&mut table.has_healthy, &mut table.healthy),
                    (&mut table.has_unhealthy, &mut table.unhealthy),
                ];
                for (listed, set) in sets {
                    if *listed {
                        *listed = false;
                        set.clear();
                        removed.insert(name.clone());
                    }
                }
            } else {
                let count = |set: &BitSet| i64::try_from(set.len()).unwrap_or(i64::MAX);
                if table.has_healthy {
                    let n = count(&table.healthy);
                    out.capacity.insert(name.clone(), n);
                    out.allocatable.insert(name.clone(), n);
                }
                if table.has_unhealthy {
                    *out.capacity.entry(name.clone()).or_default() += count(&table.unhealthy);
                }
            }
            if expired && removed.contains(&name) {
                self.endpoints.remove(&name);
            }
        }
        out.removed = removed.into_iter().collect();
        out
    }

    /// Devices the pod's init containers left for reuse, per resource.
    pub fn reusable_devices(&self, pod_uid: &str) -> Option<&BTreeMap<String, BTreeSet<String>>> {
        self.devices_to_reuse.get(pod_uid)
    }

    /// Start an allocation for `pod_uid` (upstream `Allocate`'s preamble): make sure it has
    /// a reuse entry, and drop every other pod's.
    pub fn begin_pod(&mut self, pod_uid: &str) {
        self.devices_to_reuse.retain(|uid, _| uid == pod_uid);
        self.devices_to_reuse.entry(pod_uid.to_owned()).or_default();
    }

    /// After a container's allocation: the devices of a container whose `reuse` is
    /// [`DeviceReuse::LaterContainers`] become reusable by the next containers; the others'
    /// are not reusable. The container's devices are those it holds and those reserved for
    /// it in the admission in flight.
    pub fn finish_container(&mut self, pod_uid: &str, container: &str, reuse: DeviceReuse) {
        let reusable_after = reuse == DeviceReuse::LaterContainers;
        let mut reuse = self.devices_to_reuse.remove(pod_uid).unwrap_or_default();
        if reusable_after {
            self.pod_devices
                .add_container_resources(pod_uid, container, &mut reuse);
            for (resource, ids) in self.held_for(pod_uid, container) {
                reuse
                    .entry(resource.clone())
                    .or_default()
                    .extend(ids.iter().cloned());
            }
        } else {
            self.pod_devices
                .remove_container_resources(pod_uid, container, &mut reuse);
            for (resource, ids) in self.held_for(pod_uid, container) {
                reuse
                    .entry(resource.clone())
                    .or_default()
                    .retain(|id| !ids.contains(id));
            }
        }
        self.devices_to_reuse.insert(pod_uid.to_owned(), reuse);
    }

    /// Reserve devices outside any container (they count as allocated until released), e.g.
    /// to replay a recorded state.
    pub fn reserve(&mut self, resource: &str, devices: &[String]) -> Reservation {
        let table = self.resource_mut(resource);
        table.has_allocated = true;
        for id in devices {
            let i = table.intern(id);
            table.allocated.insert(i);
        }
        self.new_reservation(resource, devices.to_vec())
    }

    pub(crate) fn new_reservation(&mut self, resource: &str, devices: Vec<String>) -> Reservation {
        let id = self.next_reservation;
        self.next_reservation += 1;
        self.reservations
            .insert(id, (resource.to_owned(), devices.clone()));
        Reservation {
            id,
            resource: resource.to_owned(),
            devices,
        }
    }

    /// Give reserved devices back.
    pub fn release(&mut self, reservation: &Reservation) {
        if self.reservations.remove(&reservation.id).is_some() {
            self.regenerate_allocated();
        }
    }

    /// Record an allocation directly (e.g. to rebuild a recorded state). Only entries with
    /// a response count as allocated, as upstream.
    pub fn record_allocation(
        &mut self,
        pod_uid: &str,
        container: &str,
        resource: &str,
        allocation: crate::ContainerAllocation,
    ) {
        self.pod_devices
            .insert(pod_uid, container, resource, allocation);
        self.regenerate_allocated();
    }

    /// Number of reservations in flight.
    pub fn reservations_in_flight(&self) -> usize {
        self.reservations.len()
    }
}
