//! DRA devices as topology hints — where corral does better than the kubelet, whose
//! topology manager ignores DRA devices (kubernetes/website#56761). A device that a
//! ResourceSlice places on a NUMA node (`resource.kubernetes.io/numaNode`, KEP-6072) steers
//! the container that uses it as a device-plugin device would: the hints are those of an
//! already allocated device (every mask holding its node, preferred when exactly it), from
//! the same provider type the NRI mode uses for the kubelet's devices. The scheduler
//! allocated the devices: nothing is allocated here. A pod whose devices no slice places
//! is decided as upstream decides it.

use std::collections::BTreeMap;
use std::sync::Arc;

use corral_topology::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim as K8sResourceClaim, ResourceSlice};

use super::{DeviceNumaNodes, KubeletDevices, pod_claims};
use crate::manifest::claim_numa_nodes;

/// Per container name, the NUMA nodes of its DRA devices, under `claim:<pod claim>` (or
/// `claim:<pod claim>/<request>` for a container that uses one request), as the
/// container's `allocatedResourcesStatus` names them.
pub(super) fn container_device_nodes(
    pod: &Pod,
    claims: &[K8sResourceClaim],
    slices: &[ResourceSlice],
) -> BTreeMap<String, DeviceNumaNodes> {
    let mut by_container = BTreeMap::new();
    if slices.is_empty() || pod.resource_claims.is_empty() {
        return by_container;
    }
    let by_claim = claim_numa_nodes(claims, slices);
    // A pod whose claims cannot be resolved is refused later, when they are prepared.
    let Ok(names) = pod_claims(pod) else {
        return by_container;
    };
    for (_, container) in pod.all_containers() {
        let mut devices = DeviceNumaNodes::new();
        for used in &container.claims {
            let Some(claim_name) = names
                .claims
                .iter()
                .find(|c| c.name == used.name)
                .and_then(|c| c.claim_name.as_ref())
            else {
                continue;
            };
            let Some(placed) = by_claim.get(claim_name) else {
                continue;
            };
            let nodes: Vec<usize> = placed
                .iter()
                .filter(|(request, _)| match &used.request {
                    // A request, or one of its subrequests (`request/sub`).
                    Some(wanted) => {
                        request == wanted
                            || request
                                .strip_prefix(wanted.as_str())
                                .is_some_and(|rest| rest.starts_with('/'))
                    }
                    None => true,
                })
                .map(|(_, numa)| *numa)
                .collect();
            if nodes.is_empty() {
                continue;
            }
            let resource = match &used.request {
                Some(request) => format!("claim:{}/{request}", used.name),
                None => format!("claim:{}", used.name),
            };
            devices.entry(resource).or_default().extend(nodes);
        }
        if !devices.is_empty() {
            by_container.insert(container.name.clone(), devices);
        }
    }
    by_container
}

/// The pod's DRA device hints, given to the provider while it is decided and taken back
/// when this is dropped (on every path out of the admission).
pub(super) struct DeviceHints {
    provider: Arc<KubeletDevices>,
    pod_uid: String,
}

impl DeviceHints {
    pub(super) fn give(
        provider: &Arc<KubeletDevices>,
        pod: &Pod,
        claims: &[K8sResourceClaim],
        slices: &[ResourceSlice],
    ) -> DeviceHints {
        for (container, nodes) in container_device_nodes(pod, claims, slices) {
            tracing::debug!(podUID = %pod.uid, container = %container, devices = ?nodes, "DRA devices placed on NUMA nodes by their ResourceSlices");
            provider.set(&pod.uid, &container, nodes);
        }
        DeviceHints {
            provider: Arc::clone(provider),
            pod_uid: pod.uid.clone(),
        }
    }
}

impl Drop for DeviceHints {
    fn drop(&mut self) {
        self.provider.remove_pod(&self.pod_uid);
    }
}
