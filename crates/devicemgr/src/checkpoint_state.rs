//! Conversion between [`DeviceState`] and `kubelet_internal_checkpoint`
//! ([`DeviceManagerCheckpoint`]), and the allocate-response bytes stored in it.
//!
//! The kubelet stores each container's `ContainerAllocateResponse` as gogo-protobuf bytes;
//! corral-proto (the only crate that knows protobuf) writes and reads them
//! ([`encode_allocate_response`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use corral_checkpoint::{DeviceManagerCheckpoint, PodDevicesEntry};
use corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse;
use corral_proto::deviceplugin::v1beta1::checkpoint_bytes::decode_allocate_response;
pub use corral_proto::deviceplugin::v1beta1::checkpoint_bytes::encode_allocate_response;
use corral_topology::Pod;

use crate::error::{DeviceOwner, DoubleAssignment};
use crate::pod_devices::{ContainerAllocation, NumaDeviceIds};
use crate::state::{DeviceState, EndpointInfo};

impl DeviceState {
    /// The checkpoint of this state (upstream `writeCheckpoint`'s data): allocations that
    /// have a response, and the healthy devices of every registered resource. Sorted.
    pub fn to_checkpoint(&self) -> DeviceManagerCheckpoint {
        let entries: Vec<PodDevicesEntry> = self
            .pod_devices
            .entries()
            .filter_map(|(pod, container, resource, allocation)| {
                let response = allocation.response.as_ref()?;
                Some(PodDevicesEntry {
                    pod_uid: pod.to_owned(),
                    container_name: container.to_owned(),
                    resource_name: resource.to_owned(),
                    device_ids: Some(
                        allocation
                            .devices
                            .iter()
                            .map(|(numa, ids)| (*numa, Some(ids.clone())))
                            .collect(),
                    ),
                    alloc_resp: Some(encode_allocate_response(response)),
                })
            })
            .collect();
        let registered = self
            .resources
            .iter()
            .filter(|(_, table)| table.has_healthy)
            .map(|(name, table)| (name.clone(), Some(table.ids_of(&table.healthy))))
            .collect();
        DeviceManagerCheckpoint {
            pod_device_entries: (!entries.is_empty()).then_some(entries),
            registered_devices: Some(registered),
        }
    }

    /// Restore a checkpoint read from `path` (upstream `readCheckpoint`): allocations come
    /// back, and every registered resource comes back with a stopped endpoint (capacity 0
    /// until its plugin registers again; dropped after the grace period counted from `now`).
    ///
    /// Allocations come back whether or not their resource's plugin has registered, and
    /// whether or not the resource is among the checkpoint's registered ones, as upstream:
    /// their devices count as allocated, so when the plugin registers (again) no other pod
    /// receives them, until their pod is removed.
    ///
    /// An entry whose response does not decode keeps its devices allocated, with empty run
    /// options, and is logged as an error (upstream drops the entry, freeing devices a
    /// running container still uses).
    ///
    /// Unlike upstream, a checkpoint that gives a device of a resource to two pods is
    /// refused ([`DoubleAssignment`]) and the state is left unchanged: both pods would keep
    /// it. Nothing is known here about the pods' containers, so two containers of one pod
    /// may share a device (it may be an init container's device reused by a later
    /// container); [`restore_checkpoint_with_pods`](Self::restore_checkpoint_with_pods)
    /// checks that too.
    pub fn restore_checkpoint(
        &mut self,
        checkpoint: &DeviceManagerCheckpoint,
        path: &Path,
        now: Instant,
    ) -> Result<(), Box<DoubleAssignment>> {
        self.restore_checkpoint_with_pods(checkpoint, path, now, &|_| None)
    }

    /// [`restore_checkpoint`](Self::restore_checkpoint), knowing the specs of (some of) the
    /// checkpoint's pods through `pod_spec` (by uid). Within a known pod a device may be
    /// held by several of its non-restartable init containers and at most one other
    /// container — upstream's reusable devices: an init container's devices go to the
    /// containers after it, a sidecar's or app container's to nobody — so any other sharing
    /// is a [`DoubleAssignment`] too. Within a pod `pod_spec` does not know, sharing is
    /// accepted, as in [`restore_checkpoint`](Self::restore_checkpoint).
    pub fn restore_checkpoint_with_pods(
        &mut self,
        checkpoint: &DeviceManagerCheckpoint,
        path: &Path,
        now: Instant,
        pod_spec: &dyn Fn(&str) -> Option<Pod>,
    ) -> Result<(), Box<DoubleAssignment>> {
        check_owners(checkpoint, path, pod_spec)?;
        let mut restored = Vec::new();
        for entry in checkpoint.pod_device_entries.iter().flatten() {
            let bytes = entry.alloc_resp.as_deref().unwrap_or_default();
            let response = decode_allocate_response(bytes).unwrap_or_else(|err| {
                tracing::error!(path = %path.display(), pod = %entry.pod_uid,
                    container = %entry.container_name, resource = %entry.resource_name, %err,
                    "checkpoint entry has an undecodable AllocResp; its devices stay allocated with empty run options");
                ContainerAllocateResponse::default()
            });
            let devices: NumaDeviceIds = entry
                .device_ids
                .iter()
                .flatten()
                .map(|(numa, ids)| (*numa, ids.clone().unwrap_or_default()))
                .collect();
            restored.push((entry, devices, response));
        }
        for (entry, devices, response) in restored {
            tracing::debug!(pod = %entry.pod_uid, container = %entry.container_name,
                resource = %entry.resource_name, "restored allocation from checkpoint");
            self.pod_devices.insert(
                &entry.pod_uid,
                &entry.container_name,
                &entry.resource_name,
                ContainerAllocation {
                    devices,
                    response: Some(response),
                },
            );
        }
        self.regenerate_allocated();
        let registered: BTreeMap<_, _> = checkpoint.registered_devices.clone().unwrap_or_default();
        for resource in registered.keys() {
            let table = self.resource_mut(resource);
            table.has_healthy = true;
            table.healthy.clear();
            table.has_unhealthy = true;
            table.unhealthy.clear();
            self.endpoints.insert(
                resource.clone(),
                EndpointInfo {
                    options: None,
                    stopped_at: Some(now),
                },
            );
        }
        Ok(())
    }
}

/// Refuse a checkpoint that gives a device to two owners that cannot share it (see
/// [`DeviceState::restore_checkpoint_with_pods`]). Later entries for the same pod,
/// container and resource replace earlier ones, as on restore; a device listed under
/// several NUMA nodes of one entry has one owner.
fn check_owners(
    checkpoint: &DeviceManagerCheckpoint,
    path: &Path,
    pod_spec: &dyn Fn(&str) -> Option<Pod>,
) -> Result<(), Box<DoubleAssignment>> {
    let mut effective: BTreeMap<(&str, &str, &str), &PodDevicesEntry> = BTreeMap::new();
    for entry in checkpoint.pod_device_entries.iter().flatten() {
        let key = (
            entry.resource_name.as_str(),
            entry.pod_uid.as_str(),
            entry.container_name.as_str(),
        );
        effective.insert(key, entry);
    }
    // (resource, device) → owners as (pod, container), sorted.
    let mut owners: BTreeMap<(&str, &str), BTreeSet<(&str, &str)>> = BTreeMap::new();
    for ((resource, pod, container), entry) in &effective {
        for id in entry
            .device_ids
            .iter()
            .flatten()
            .flat_map(|(_, ids)| ids.iter().flatten())
        {
            owners
                .entry((resource, id.as_str()))
                .or_default()
                .insert((pod, container));
        }
    }
    let owner = |(pod, container): (&str, &str)| DeviceOwner {
        pod_uid: pod.to_owned(),
        container: container.to_owned(),
    };
    let conflict = |resource: &str, device: &str, first, second| {
        Box::new(DoubleAssignment {
            path: path.to_path_buf(),
            resource: resource.to_owned(),
            device: device.to_owned(),
            first: owner(first),
            second: owner(second),
        })
    };
    let mut specs: BTreeMap<&str, Option<Pod>> = BTreeMap::new();
    for ((resource, device), holders) in &owners {
        let mut holders = holders.iter().copied();
        let Some(first) = holders.next() else {
            continue;
        };
        let rest: Vec<(&str, &str)> = holders.collect();
        if rest.is_empty() {
            continue;
        }
        if let Some(&other) = rest.iter().find(|(pod, _)| *pod != first.0) {
            return Err(conflict(resource, device, first, other));
        }
        // One pod, several containers: legitimate only as upstream's init-container reuse.
        let Some(spec) = specs.entry(first.0).or_insert_with(|| pod_spec(first.0)) else {
            tracing::debug!(path = %path.display(), resource, device, pod = first.0,
                "containers of one pod share a device (init-container reuse, pod spec unknown)");
            continue;
        };
        let reusing_init = |name: &str| {
            spec.init_containers
                .iter()
                .any(|c| c.name == name && !c.is_restartable())
        };
        let mut keepers = std::iter::once(first)
            .chain(rest)
            .filter(|(_, container)| !reusing_init(container));
        if let (Some(one), Some(other)) = (keepers.next(), keepers.next()) {
            return Err(conflict(resource, device, one, other));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_proto::deviceplugin::v1beta1::{self as api, CdiDevice, DeviceSpec};

    #[test]
    fn maps_are_sorted_and_keep_empty_values() {
        let response = ContainerAllocateResponse {
            envs: [
                ("B".to_owned(), String::new()),
                ("A".to_owned(), "1".to_owned()),
            ]
            .into(),
            mounts: vec![api::Mount {
                container_path: "/c".into(),
                host_path: "/h".into(),
                read_only: true,
            }],
            devices: vec![DeviceSpec {
                container_path: "/dev/x".into(),
                host_path: "/dev/y".into(),
                permissions: "rw".into(),
            }],
            annotations: [("k".to_owned(), "v".to_owned())].into(),
            cdi_devices: vec![CdiDevice {
                name: "v.com/c=0".into(),
            }],
        };
        let bytes = encode_allocate_response(&response);
        // envs A=1 first, then B="" with an explicit empty value (gogo keeps it).
        assert_eq!(&bytes[..7], &[0x0a, 6, 0x0a, 1, b'A', 0x12, 1]);
        assert_eq!(&bytes[8..16], &[0x0a, 5, 0x0a, 1, b'B', 0x12, 0, 0x12]);
        assert_eq!(
            decode_allocate_response(bytes.as_slice()).unwrap(),
            response
        );
        // Deterministic.
        assert_eq!(encode_allocate_response(&response.clone()), bytes);
    }
}
