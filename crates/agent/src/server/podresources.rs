//! The podresources v1 API (List, GetAllocatableResources, Get), served read-only from the
//! managers' state as a kubelet serves it (`server_v1.go`, v1.36). Only admitted pods are
//! reported: a released (terminated, removed) pod holds nothing (upstream #119423, the
//! kubelet's `GetActivePods`). Each pod lists its sidecars (restartable init containers)
//! then its app containers; run-to-completion init containers are not reported. A pod
//! managed at pod level also reports its whole CPU set and memory (`PodResources.cpu_ids`
//! and `memory`, v1.37's fields 4 and 5; empty otherwise, as v1.36 leaves them).

use std::sync::Arc;

use corral_proto::podresources::v1 as api;
use corral_proto::podresources::v1::pod_resources_lister_server::PodResourcesLister;
use tonic::{Request, Response, Status};

use crate::node::{Node, PodView};

/// The podresources service.
#[derive(Debug, Clone)]
pub(crate) struct PodResourcesService {
    node: Arc<Node>,
}

impl PodResourcesService {
    /// Serve `node`.
    pub(crate) fn new(node: Arc<Node>) -> Self {
        Self { node }
    }
}

/// A pod's resources as podresources reports them, read from `node` (settled: see
/// [`Node::settled`]).
fn pod_resources(node: &Node, view: &PodView) -> api::PodResources {
    api::PodResources {
        name: view.name.clone(),
        namespace: view.namespace.clone(),
        cpu_ids: node
            .cpu()
            .pod_cpus(&view.uid)
            .iter()
            .map(|cpu| cpu as i64)
            .collect(),
        memory: node
            .memory()
            .pod_memory(&view.uid)
            .iter()
            .map(|b| memory_of(&b.resource, b.size, &b.numa_affinity))
            .collect(),
        containers: view
            .containers
            .iter()
            .filter(|c| c.kind != "init")
            .map(|c| api::ContainerResources {
                name: c.name.clone(),
                cpu_ids: node
                    .cpu()
                    .exclusive_cpus(&view.uid, &c.name)
                    .iter()
                    .map(|cpu| cpu as i64)
                    .collect(),
                devices: c
                    .devices
                    .iter()
                    .flat_map(|(resource, per_numa)| {
                        // One entry per NUMA node, as the kubelet reports devices.
                        per_numa.iter().map(|(numa, ids)| api::ContainerDevices {
                            resource_name: resource.clone(),
                            device_ids: ids.clone(),
                            topology: (*numa >= 0).then(|| api::TopologyInfo {
                                nodes: vec![api::NumaNode { id: *numa }],
                            }),
                        })
                    })
                    .collect(),
                dynamic_resources: c
                    .claims
                    .iter()
                    .map(|claim| api::DynamicResource {
                        claim_name: claim.name.clone(),
                        claim_namespace: claim.namespace.clone(),
                        claim_resources: claim
                            .devices
                            .iter()
                            .map(|d| api::ClaimResource {
                                cdi_devices: d
                                    .cdi_devices
                                    .iter()
                                    .map(|name| api::CdiDevice { name: name.clone() })
                                    .collect(),
                                driver_name: d.driver.clone(),
                                pool_name: d.pool.clone(),
                                device_name: d.device.clone(),
                                share_id: d.share_id.clone(),
                            })
                            .collect(),
                    })
                    .collect(),
                memory: c
                    .memory
                    .iter()
                    .map(|m| memory_of(&m.resource, m.size, &m.numa_affinity))
                    .collect(),
            })
            .collect(),
    }
}

/// A memory block as podresources reports it (`ContainerMemory`).
fn memory_of(resource: &str, size: u64, numa: &[usize]) -> api::ContainerMemory {
    api::ContainerMemory {
        memory_type: resource.to_owned(),
        size,
        topology: Some(api::TopologyInfo {
            nodes: numa
                .iter()
                .map(|&id| api::NumaNode { id: id as i64 })
                .collect(),
        }),
    }
}

#[tonic::async_trait]
impl PodResourcesLister for PodResourcesService {
    async fn list(
        &self,
        _: Request<api::ListPodResourcesRequest>,
    ) -> Result<Response<api::ListPodResourcesResponse>, Status> {
        // Settled: never what a decision under way holds before it stands or is given back.
        let pod_resources = self
            .node
            .settled(|node| {
                node.views()
                    .iter()
                    .map(|view| pod_resources(node, view))
                    .collect()
            })
            .await
            .map_err(|err| Status::internal(format!("{err:#}")))?;
        Ok(Response::new(api::ListPodResourcesResponse {
            pod_resources,
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<api::AllocatableResourcesRequest>,
    ) -> Result<Response<api::AllocatableResourcesResponse>, Status> {
        Ok(Response::new(api::AllocatableResourcesResponse {
            cpu_ids: self
                .node
                .cpu()
                .allocatable_cpus()
                .iter()
                .map(|cpu| cpu as i64)
                .collect(),
            devices: self
                .node
                .devices()
                .allocatable_devices()
                .into_iter()
                .flat_map(|(resource, devices)| {
                    devices.into_iter().map(move |d| api::ContainerDevices {
                        resource_name: resource.clone(),
                        topology: d.numa_nodes.as_ref().map(|nodes| api::TopologyInfo {
                            nodes: nodes.iter().map(|id| api::NumaNode { id: *id }).collect(),
                        }),
                        device_ids: vec![d.id],
                    })
                })
                .collect(),
            memory: self
                .node
                .memory()
                .allocatable_memory()
                .iter()
                .map(|b| memory_of(&b.resource, b.size, &b.numa_affinity))
                .collect(),
        }))
    }

    async fn get(
        &self,
        request: Request<api::GetPodResourcesRequest>,
    ) -> Result<Response<api::GetPodResourcesResponse>, Status> {
        let r = request.into_inner();
        let (name, namespace) = (r.pod_name.clone(), r.pod_namespace.clone());
        let found = self
            .node
            .settled(move |node| {
                node.views()
                    .into_iter()
                    .find(|v| v.name == name && v.namespace == namespace)
                    .map(|view| pod_resources(node, &view))
            })
            .await
            .map_err(|err| Status::internal(format!("{err:#}")))?;
        // Upstream returns a plain error, which gRPC sends as UNKNOWN.
        let found = found.ok_or_else(|| {
            Status::unknown(format!(
                "pod {} in namespace {} not found",
                r.pod_name, r.pod_namespace
            ))
        })?;
        Ok(Response::new(api::GetPodResourcesResponse {
            pod_resources: Some(found),
        }))
    }
}

#[cfg(test)]
mod tests;
