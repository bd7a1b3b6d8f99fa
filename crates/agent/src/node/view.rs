//! What each container of an admitted pod holds, read from the managers: its cpuset
//! (exclusive or the shared pool), NUMA affinity, memory blocks and DRA CDI devices.

use std::collections::BTreeMap;

use corral_cpumgr::CfsQuota;
use corral_topology::ContainerKind;
use serde::Serialize;

use super::resource_status::ResourceStatusView;
use super::{AdmittedPod, Node, pod_claims};

/// One container's holdings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ContainerView {
    /// Container name.
    pub(crate) name: String,
    /// `init`, `sidecar` or `app`.
    pub(crate) kind: &'static str,
    /// Its cpuset: exclusive CPUs, or the shared pool.
    pub(crate) cpuset: String,
    /// Whether `cpuset` is exclusive.
    pub(crate) exclusive_cpus: bool,
    /// Whether the container runs without a CFS quota (exclusive CPUs with
    /// `DisableCPUQuotaWithExclusiveCPUs`).
    pub(crate) cpu_quota_disabled: bool,
    /// The topology manager's NUMA affinity (empty: none).
    pub(crate) numa_affinity: Vec<usize>,
    /// Device-plugin devices: resource → NUMA node → device ids.
    pub(crate) devices: BTreeMap<String, BTreeMap<i64, Vec<String>>>,
    /// Environment from the device plugins' Allocate answers.
    pub(crate) envs: BTreeMap<String, String>,
    /// Mounts from the device plugins' Allocate answers.
    pub(crate) mounts: Vec<MountView>,
    /// Device nodes from the device plugins' Allocate answers.
    pub(crate) device_nodes: Vec<DeviceNodeView>,
    /// The DRA claims it uses, with their prepared devices.
    pub(crate) claims: Vec<ClaimView>,
    /// DRA CDI devices.
    pub(crate) cdi_devices: Vec<String>,
    /// The health of what it holds (`allocatedResourcesStatus`; app containers only).
    pub(crate) allocated_resources_status: Vec<ResourceStatusView>,
    /// Annotations for the runtime.
    pub(crate) annotations: BTreeMap<String, String>,
    /// The container id once started.
    pub(crate) container_id: String,
    /// Memory and huge pages the memory manager pinned to NUMA nodes.
    pub(crate) memory: Vec<MemoryView>,
}

/// Bytes of one memory type on a set of NUMA nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct MemoryView {
    /// `memory` or `hugepages-<size>`.
    pub(crate) resource: String,
    /// Bytes.
    pub(crate) size: u64,
    /// The NUMA nodes.
    pub(crate) numa_affinity: Vec<usize>,
}

/// One prepared device of a DRA claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ClaimDeviceView {
    /// The DRA driver.
    pub(crate) driver: String,
    /// The device's pool.
    pub(crate) pool: String,
    /// The device's name in the pool.
    pub(crate) device: String,
    /// Its CDI device ids.
    pub(crate) cdi_devices: Vec<String>,
    /// Which share of the device, for a shared device (`Device.share_id`, KEP-5075).
    pub(crate) share_id: Option<String>,
}

/// A mount a device plugin asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct MountView {
    /// Path in the container.
    pub(crate) container_path: String,
    /// Path on the host.
    pub(crate) host_path: String,
    /// Read-only.
    pub(crate) read_only: bool,
}

/// A device node a device plugin asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct DeviceNodeView {
    /// Path in the container.
    pub(crate) container_path: String,
    /// Path on the host.
    pub(crate) host_path: String,
    /// cgroup permissions (`rwm`).
    pub(crate) permissions: String,
}

/// A DRA claim a container uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ClaimView {
    /// The ResourceClaim's name.
    pub(crate) name: String,
    /// Its namespace.
    pub(crate) namespace: String,
    /// Its prepared devices.
    pub(crate) devices: Vec<ClaimDeviceView>,
}

/// One pod's holdings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PodView {
    /// `metadata.uid`.
    pub(crate) uid: String,
    /// `metadata.namespace`.
    pub(crate) namespace: String,
    /// `metadata.name`.
    pub(crate) name: String,
    /// Init containers then app containers.
    pub(crate) containers: Vec<ContainerView>,
    /// A decision for the pod ran out of the topology manager's search budget.
    pub(crate) approximate: bool,
}

impl PodView {
    /// Whether the pod holds a container called `name`.
    pub(crate) fn has_container(&self, name: &str) -> bool {
        self.containers.iter().any(|c| c.name == name)
    }
}

pub(super) fn pod_view(node: &Node, admitted: &AdmittedPod) -> PodView {
    let pod = &admitted.pod;
    let claims = pod_claims(pod).ok();
    let containers = pod
        .all_containers()
        .map(|(kind, container)| {
            let exclusive = node.cpu.exclusive_cpus(&pod.uid, &container.name);
            let cpuset = node.cpu.cpu_affinity(&pod.uid, &container.name);
            let affinity = node.topology.affinity(&pod.uid, &container.name);
            let dra = claims
                .as_ref()
                .filter(|_| !container.claims.is_empty())
                .and_then(|claims| node.dra.get_resources(claims, container).ok())
                .unwrap_or_default();
            let allocations = node.devices.container_devices(&pod.uid, &container.name);
            let mut envs = BTreeMap::new();
            let mut mounts = Vec::new();
            let mut device_nodes = Vec::new();
            let mut annotations = dra.annotations;
            let mut cdi_devices = Vec::new();
            // Merged in resource order; a later resource does not override an earlier
            // one's value (as upstream's deviceRunContainerOptions).
            for response in allocations.values().filter_map(|a| a.response.as_ref()) {
                for (key, value) in &response.envs {
                    envs.entry(key.clone()).or_insert_with(|| value.clone());
                }
                for (key, value) in &response.annotations {
                    annotations
                        .entry(key.clone())
                        .or_insert_with(|| value.clone());
                }
                for m in &response.mounts {
                    if !mounts
                        .iter()
                        .any(|x: &MountView| x.container_path == m.container_path)
                    {
                        mounts.push(MountView {
                            container_path: m.container_path.clone(),
                            host_path: m.host_path.clone(),
                            read_only: m.read_only,
                        });
                    }
                }
                for d in &response.devices {
                    if !device_nodes
                        .iter()
                        .any(|x: &DeviceNodeView| x.host_path == d.host_path)
                    {
                        device_nodes.push(DeviceNodeView {
                            container_path: d.container_path.clone(),
                            host_path: d.host_path.clone(),
                            permissions: d.permissions.clone(),
                        });
                    }
                }
                for c in &response.cdi_devices {
                    if !cdi_devices.contains(&c.name) {
                        cdi_devices.push(c.name.clone());
                    }
                }
            }
            for c in dra.cdi_devices {
                if !cdi_devices.contains(&c) {
                    cdi_devices.push(c);
                }
            }
            ContainerView {
                name: container.name.clone(),
                kind: match kind {
                    ContainerKind::Init => "init",
                    ContainerKind::Sidecar => "sidecar",
                    ContainerKind::App => "app",
                },
                cpuset: cpuset.to_string(),
                exclusive_cpus: !exclusive.is_empty(),
                cpu_quota_disabled: node.cpu.cfs_quota(&pod.uid, &container.name)
                    == CfsQuota::Unlimited,
                numa_affinity: affinity
                    .numa_affinity
                    .map(|mask| node.os_numa_ids(mask))
                    .unwrap_or_default(),
                devices: allocations
                    .into_iter()
                    .map(|(resource, allocation)| (resource, allocation.devices))
                    .collect(),
                envs,
                mounts,
                device_nodes,
                claims: claims
                    .as_ref()
                    .filter(|_| !container.claims.is_empty())
                    .and_then(|claims| node.dra.container_claim_infos(claims, container).ok())
                    .unwrap_or_default()
                    .iter()
                    .map(|info| ClaimView {
                        name: info.name().to_owned(),
                        namespace: info.namespace().to_owned(),
                        devices: info
                            .drivers()
                            .flat_map(|driver| {
                                info.devices(driver)
                                    .into_iter()
                                    .map(move |d| ClaimDeviceView {
                                        driver: driver.to_owned(),
                                        pool: d.pool_name,
                                        device: d.device_name,
                                        cdi_devices: d.cdi_device_ids,
                                        share_id: d.share_id,
                                    })
                            })
                            .collect(),
                    })
                    .collect(),
                cdi_devices,
                allocated_resources_status: if kind == ContainerKind::App {
                    node.allocated_resources_status(&pod.uid, claims.as_ref(), container)
                } else {
                    Vec::new()
                },
                annotations,
                container_id: admitted
                    .record
                    .container_ids
                    .get(&container.name)
                    .cloned()
                    .unwrap_or_default(),
                memory: node
                    .memory
                    .container_memory(&pod.uid, &container.name)
                    .into_iter()
                    .map(|block| MemoryView {
                        resource: block.resource,
                        size: block.size,
                        numa_affinity: block.numa_affinity,
                    })
                    .collect(),
            }
        })
        .collect();
    PodView {
        uid: pod.uid.clone(),
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        containers,
        approximate: admitted.record.approximate,
    }
}
