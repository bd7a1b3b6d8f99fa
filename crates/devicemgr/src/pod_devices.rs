//! [`PodDevices`]: which devices each pod's containers hold, per resource and NUMA node,
//! with the plugin's allocate response (upstream `podDevices`), kept in sorted maps so
//! every walk is deterministic.

use std::collections::{BTreeMap, BTreeSet};

use corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse;

/// NUMA node id (`-1`: the device has no topology) → device ids.
pub type NumaDeviceIds = BTreeMap<i64, Vec<String>>;

/// The devices of one resource held by one container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerAllocation {
    /// Device ids by NUMA node; a device on several nodes is listed under each.
    pub devices: NumaDeviceIds,
    /// The plugin's answer to `Allocate` (`None` only for entries that never got one).
    pub response: Option<ContainerAllocateResponse>,
}

impl ContainerAllocation {
    /// The device ids, without duplicates.
    pub fn device_ids(&self) -> BTreeSet<String> {
        self.devices.values().flatten().cloned().collect()
    }
}

/// resource → allocation.
pub type ResourceAllocations = BTreeMap<String, ContainerAllocation>;

/// pod uid → container name → resource → allocation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodDevices {
    pods: BTreeMap<String, BTreeMap<String, ResourceAllocations>>,
}

impl PodDevices {
    /// No allocations.
    pub fn new() -> PodDevices {
        PodDevices::default()
    }

    /// Uids of pods holding anything.
    pub fn pods(&self) -> BTreeSet<String> {
        self.pods.keys().cloned().collect()
    }

    /// Whether the pod holds anything.
    pub fn has_pod(&self, pod_uid: &str) -> bool {
        self.pods.contains_key(pod_uid)
    }

    /// Record (or replace) a container's allocation of a resource.
    pub fn insert(
        &mut self,
        pod_uid: &str,
        container: &str,
        resource: &str,
        allocation: ContainerAllocation,
    ) {
        self.pods
            .entry(pod_uid.to_owned())
            .or_default()
            .entry(container.to_owned())
            .or_default()
            .insert(resource.to_owned(), allocation);
    }

    /// Remove a container's allocation of a resource, dropping empty parents.
    pub fn remove(&mut self, pod_uid: &str, container: &str, resource: &str) {
        if let Some(containers) = self.pods.get_mut(pod_uid) {
            if let Some(resources) = containers.get_mut(container) {
                resources.remove(resource);
                if resources.is_empty() {
                    containers.remove(container);
                }
            }
            if containers.is_empty() {
                self.pods.remove(pod_uid);
            }
        }
    }

    /// Forget pods.
    pub fn delete<'a>(&mut self, pod_uids: impl IntoIterator<Item = &'a String>) {
        for uid in pod_uids {
            self.pods.remove(uid);
        }
    }

    /// Remove one container's allocations (and its pod when it held nothing else).
    pub fn delete_container(&mut self, pod_uid: &str, container: &str) {
        if let Some(containers) = self.pods.get_mut(pod_uid) {
            containers.remove(container);
            if containers.is_empty() {
                self.pods.remove(pod_uid);
            }
        }
    }

    /// The allocation of one container and resource.
    pub fn get(
        &self,
        pod_uid: &str,
        container: &str,
        resource: &str,
    ) -> Option<&ContainerAllocation> {
        self.pods.get(pod_uid)?.get(container)?.get(resource)
    }

    /// Every resource a container holds.
    pub fn container(&self, pod_uid: &str, container: &str) -> Option<&ResourceAllocations> {
        self.pods.get(pod_uid)?.get(container)
    }

    /// Upstream `containerDevices`: the container's device ids of a resource, `None` when
    /// there is no entry.
    pub fn container_devices(
        &self,
        pod_uid: &str,
        container: &str,
        resource: &str,
    ) -> Option<BTreeSet<String>> {
        self.get(pod_uid, container, resource)
            .map(ContainerAllocation::device_ids)
    }

    /// Upstream `podDevices`: the union over the pod's containers.
    pub fn pod_devices(&self, pod_uid: &str, resource: &str) -> BTreeSet<String> {
        self.pods
            .get(pod_uid)
            .into_iter()
            .flat_map(|c| c.values())
            .filter_map(|r| r.get(resource))
            .flat_map(|a| a.devices.values().flatten().cloned())
            .collect()
    }

    /// Upstream `devices()`: per resource, the devices of entries that have a response
    /// (every resource with an entry gets a set, possibly empty).
    pub fn devices(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (resource, allocation) in self.entries().map(|(_, _, r, a)| (r, a)) {
            let set = out.entry(resource.to_owned()).or_default();
            if allocation.response.is_some() {
                set.extend(allocation.devices.values().flatten().cloned());
            }
        }
        out
    }

    /// Every `(pod uid, container, resource, allocation)`, sorted.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, &str, &ContainerAllocation)> {
        self.pods.iter().flat_map(|(pod, containers)| {
            containers.iter().flat_map(move |(container, resources)| {
                resources.iter().map(move |(resource, a)| {
                    (pod.as_str(), container.as_str(), resource.as_str(), a)
                })
            })
        })
    }

    /// The device ids the container holds, per resource.
    fn held_by<'a>(
        &'a self,
        pod_uid: &str,
        container: &str,
    ) -> impl Iterator<Item = (&'a String, BTreeSet<String>)> + 'a {
        let held = self.container(pod_uid, container).into_iter().flatten();
        held.map(|(resource, allocation)| (resource, allocation.device_ids()))
    }

    /// Upstream `addContainerAllocatedResources`: add the container's devices to `into`.
    pub fn add_container_resources(
        &self,
        pod_uid: &str,
        container: &str,
        into: &mut BTreeMap<String, BTreeSet<String>>,
    ) {
        self.held_by(pod_uid, container)
            .for_each(|(resource, ids)| into.entry(resource.clone()).or_default().extend(ids));
    }

    /// Upstream `removeContainerAllocatedResources`: remove the container's devices from
    /// `from`.
    pub fn remove_container_resources(
        &self,
        pod_uid: &str,
        container: &str,
        from: &mut BTreeMap<String, BTreeSet<String>>,
    ) {
        for (resource, ids) in self.held_by(pod_uid, container) {
            from.entry(resource.clone())
                .or_default()
                .retain(|id| !ids.contains(id));
        }
    }

    /// Number of pods.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    /// Whether no pod holds anything.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(numa: &[(i64, &[&str])], response: bool) -> ContainerAllocation {
        ContainerAllocation {
            devices: numa
                .iter()
                .map(|(n, ids)| (*n, ids.iter().map(|s| (*s).to_owned()).collect()))
                .collect(),
            response: response.then(ContainerAllocateResponse::default),
        }
    }

    #[test]
    fn devices_skip_entries_without_response() {
        // Upstream TestPodDevices-style bookkeeping.
        let mut pd = PodDevices::new();
        pd.insert(
            "p",
            "c1",
            "r",
            alloc(&[(0, &["a"]), (1, &["a", "b"])], true),
        );
        pd.insert("p", "c2", "r", alloc(&[(-1, &["z"])], false));
        let devices = pd.devices();
        assert_eq!(devices["r"], BTreeSet::from(["a".into(), "b".into()]));
        assert_eq!(pd.pod_devices("p", "r").len(), 3);
        assert_eq!(pd.container_devices("p", "c1", "r").unwrap().len(), 2);
        assert_eq!(pd.container_devices("p", "c3", "r"), None);
        let mut reuse = BTreeMap::new();
        pd.add_container_resources("p", "c1", &mut reuse);
        pd.remove_container_resources("p", "c2", &mut reuse);
        assert_eq!(reuse["r"].len(), 2);
        pd.remove("p", "c1", "r");
        pd.remove("p", "c2", "r");
        assert!(pd.is_empty());
    }
}
