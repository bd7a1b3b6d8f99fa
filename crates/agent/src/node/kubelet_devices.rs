//! Devices the kubelet already gave a container, as a topology hint provider: in NRI mode
//! the kubelet's device manager allocates devices and corral only aligns CPUs with them.
//! Hints are upstream's for a container whose devices are allocated
//! (`devicemanager/topology_hints.go`, regenerated over the allocated devices only): every
//! NUMA mask that holds all of a resource's devices, preferred when it is exactly their
//! nodes — given to the topology manager as a hint family, never listed. Allocation is the
//! kubelet's: `allocate` does nothing.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use corral_topology::topologymanager::{
    AffinityStore, AllocationError, Grant, HintFamily, HintProvider, HintSet, Preferred,
    ProviderHintSets, ProviderHints, hint_lists,
};
use corral_topology::{Container, NumaIds, NumaMask, Pod};

/// A container's devices: resource name → the NUMA node ids (as the OS numbers them) its
/// devices sit on.
pub(crate) type DeviceNumaNodes = BTreeMap<String, Vec<usize>>;

/// Devices the kubelet allocated, per (pod uid, container name).
#[derive(Debug)]
pub(crate) struct KubeletDevices {
    /// What it is called where a refusal is explained.
    name: &'static str,
    numa_ids: NumaIds,
    by_container: Mutex<BTreeMap<(String, String), DeviceNumaNodes>>,
}

impl KubeletDevices {
    /// Devices called `name` where a refusal is explained (`kubelet devices`, `dra`).
    pub(crate) fn new(name: &'static str, numa_ids: NumaIds) -> Self {
        KubeletDevices {
            name,
            numa_ids,
            by_container: Mutex::default(),
        }
    }

    /// Records what the kubelet gave `container` of `pod_uid` (before its admission).
    pub(crate) fn set(&self, pod_uid: &str, container: &str, devices: DeviceNumaNodes) {
        let key = (pod_uid.to_owned(), container.to_owned());
        self.lock().insert(key, devices);
    }

    /// Forgets the pod's containers.
    pub(crate) fn remove_pod(&self, pod_uid: &str) {
        self.lock().retain(|(uid, _), _| uid != pod_uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), DeviceNumaNodes>> {
        self.by_container
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Per resource, the masks holding all its devices' nodes, as a family (preferred:
    /// exactly their nodes); never a walk over every set of nodes.
    fn hint_sets(&self, devices: &DeviceNumaNodes) -> ProviderHintSets {
        let all: Vec<usize> = (0..self.numa_ids.os_ids().len()).collect();
        let mut hints = BTreeMap::new();
        for (resource, nodes) in devices {
            // Devices without a NUMA node do not constrain anything.
            let Ok(needed) = self.numa_ids.mask_of(nodes.iter().copied()) else {
                continue;
            };
            if nodes.is_empty() {
                continue;
            }
            let family = HintFamily::upward(
                &all,
                NumaMask::from_u64(u64::MAX),
                needed,
                Vec::new(),
                Preferred::Size(needed.count()),
            );
            hints.insert(resource.clone(), Some(HintSet::Family(family)));
        }
        (!hints.is_empty()).then_some(hints)
    }

    fn merged_for_pod(&self, pod: &Pod) -> DeviceNumaNodes {
        let mut merged = DeviceNumaNodes::new();
        for ((uid, _), devices) in self.lock().iter() {
            if *uid == pod.uid {
                for (resource, nodes) in devices {
                    merged.entry(resource.clone()).or_default().extend(nodes);
                }
            }
        }
        merged
    }
}

impl HintProvider for KubeletDevices {
    fn name(&self) -> &str {
        self.name
    }

    /// The list of the family (every mask holding the devices' nodes): exponential in the
    /// nodes, for callers that ask for upstream's list; the topology manager asks
    /// [`hint_sets_for_container`](HintProvider::hint_sets_for_container).
    fn hints_for_container(&self, pod: &Pod, container: &Container) -> ProviderHints {
        hint_lists(&self.hint_sets_for_container(pod, container))
    }

    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints {
        hint_lists(&self.hint_sets_for_pod(pod))
    }

    fn hint_sets_for_container(&self, pod: &Pod, container: &Container) -> ProviderHintSets {
        let key = (pod.uid.clone(), container.name.clone());
        let devices = self.lock().get(&key).cloned()?;
        self.hint_sets(&devices)
    }

    fn hint_sets_for_pod(&self, pod: &Pod) -> ProviderHintSets {
        self.hint_sets(&self.merged_for_pod(pod))
    }

    /// Nothing to allocate: the kubelet gave the devices (they only steer the hints).
    fn allocate(
        &self,
        _: &Pod,
        _: &Container,
        _: &AffinityStore,
    ) -> Result<Grant, AllocationError> {
        Ok(Grant::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(ids: &[usize]) -> Option<NumaMask> {
        Some(NumaMask::new(ids.iter().copied()).unwrap())
    }

    #[test]
    fn hints_are_the_masks_holding_every_device_preferred_when_minimal() {
        let devices = KubeletDevices::new("kubelet devices", NumaIds::new([0, 1, 2]).unwrap());
        let pod = Pod {
            uid: "u".into(),
            ..Pod::default()
        };
        let container = Container::new("c");
        assert_eq!(devices.hints_for_container(&pod, &container), None);
        devices.set("u", "c", BTreeMap::from([("gpu".to_owned(), vec![1])]));
        let hints = devices.hints_for_container(&pod, &container).unwrap();
        let got: Vec<(Option<NumaMask>, bool)> = hints["gpu"]
            .as_ref()
            .unwrap()
            .iter()
            .map(|h| (h.numa_affinity, h.preferred))
            .collect();
        assert_eq!(
            got,
            [
                (mask(&[1]), true),
                (mask(&[0, 1]), false),
                (mask(&[1, 2]), false),
                (mask(&[0, 1, 2]), false)
            ]
        );
        devices.remove_pod("u");
        assert_eq!(devices.hints_for_container(&pod, &container), None);
    }
}
