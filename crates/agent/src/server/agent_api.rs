//! `corral.v1.Agent`: the admission API over the agent socket, answered by the [`Node`].

use std::sync::Arc;

use corral_proto::corral::v1 as api;
use corral_proto::corral::v1::agent_server::Agent;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use tonic::{Request, Response, Status};

use crate::node::{Admission, AdmitError, Node, PodView};

mod numa_wire;

/// The admission API's service.
#[derive(Debug, Clone)]
pub(crate) struct AgentService {
    node: Arc<Node>,
}

impl AgentService {
    /// Serve `node`.
    pub(crate) fn new(node: Arc<Node>) -> Self {
        Self { node }
    }
}

fn internal(err: anyhow::Error) -> Status {
    Status::internal(crate::error_text::anyhow_chain(&err))
}

/// A pod's holdings on the wire.
pub(crate) fn allocation(view: PodView) -> api::PodAllocation {
    api::PodAllocation {
        approximate: view.approximate,
        uid: view.uid,
        namespace: view.namespace,
        name: view.name,
        containers: view
            .containers
            .into_iter()
            .map(|c| api::ContainerAllocation {
                name: c.name,
                kind: c.kind.to_owned(),
                cpuset: c.cpuset,
                exclusive_cpus: c.exclusive_cpus,
                cpu_quota_disabled: c.cpu_quota_disabled,
                allocated_resources_status: c
                    .allocated_resources_status
                    .into_iter()
                    .map(|status| api::ResourceStatus {
                        name: status.name,
                        resources: status
                            .resources
                            .into_iter()
                            .map(|r| api::ResourceHealth {
                                resource_id: r.resource_id,
                                health: r.health.to_owned(),
                                message: r.message.unwrap_or_default(),
                            })
                            .collect(),
                    })
                    .collect(),
                devices: c
                    .devices
                    .into_iter()
                    .map(|(resource, per_numa)| api::ResourceDevices {
                        resource,
                        device_ids: device_ids(&per_numa),
                    })
                    .collect(),
                numa_affinity: c.numa_affinity.into_iter().map(|n| n as i64).collect(),
                memory: c
                    .memory
                    .into_iter()
                    .map(|m| api::MemoryBlock {
                        r#type: m.resource,
                        size: m.size,
                        numa_affinity: m.numa_affinity.into_iter().map(|n| n as i64).collect(),
                    })
                    .collect(),
                run_options: Some(api::RunOptions {
                    envs: c.envs.into_iter().collect(),
                    mounts: c
                        .mounts
                        .into_iter()
                        .map(|m| api::Mount {
                            container_path: m.container_path,
                            host_path: m.host_path,
                            read_only: m.read_only,
                        })
                        .collect(),
                    devices: c
                        .device_nodes
                        .into_iter()
                        .map(|d| api::DeviceNode {
                            container_path: d.container_path,
                            host_path: d.host_path,
                            permissions: d.permissions,
                        })
                        .collect(),
                    annotations: c.annotations.into_iter().collect(),
                    cdi_devices: c.cdi_devices,
                }),
                container_id: c.container_id,
            })
            .collect(),
    }
}

/// The distinct device ids of a resource's per-NUMA listing, sorted.
pub(crate) fn device_ids(per_numa: &std::collections::BTreeMap<i64, Vec<String>>) -> Vec<String> {
    let ids: std::collections::BTreeSet<&String> = per_numa.values().flatten().collect();
    ids.into_iter().cloned().collect()
}

/// Each JSON document of a repeated `field`, read by `read`; the first that does not read is
/// an `InvalidArgument` naming it (`field[i]: why`).
fn documents<T, E: std::fmt::Display>(
    field: &str,
    list: &[Vec<u8>],
    read: impl Fn(serde_json::Value) -> Result<T, E>,
) -> Result<Vec<T>, Status> {
    list.iter()
        .enumerate()
        .map(|(i, bytes)| {
            let invalid = |why: String| Status::invalid_argument(format!("{field}[{i}]: {why}"));
            let document: serde_json::Value =
                serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
            read(document).map_err(|e| invalid(e.to_string()))
        })
        .collect()
}

#[tonic::async_trait]
impl Agent for AgentService {
    async fn admit(
        &self,
        request: Request<api::AdmitRequest>,
    ) -> Result<Response<api::AdmitResponse>, Status> {
        let request = request.into_inner();
        let pod: K8sPod = serde_json::from_slice(&request.pod_json)
            .map_err(|e| Status::invalid_argument(format!("pod_json is not a v1 Pod: {e}")))?;
        // A uid made up here would be unknown to the client, which could then neither
        // release the pod nor retry the call without admitting it twice.
        if pod.metadata.uid.as_deref().is_none_or(str::is_empty) {
            return Err(Status::invalid_argument(
                "pod_json has no metadata.uid: the client assigns one, as the API server does",
            ));
        }
        let claims = documents(
            "resource_claims_json",
            &request.resource_claims_json,
            crate::manifest::claim_from_document,
        )?;
        let slices = documents(
            "resource_slices_json",
            &request.resource_slices_json,
            crate::manifest::slice_from_document,
        )?;
        // Runs to its end even when the client goes away (see `Node::admit`).
        let admission = if request.dry_run {
            self.node.admit_dry_run(pod, claims, slices).await
        } else {
            self.node.admit_with_slices(pod, claims, slices).await
        };
        let admission = admission.map_err(|err| match err {
            AdmitError::Internal(err) => internal(err),
            invalid => Status::invalid_argument(crate::error_text::error_chain(&invalid)),
        });
        let mut answer = match admission? {
            Admission::Admitted(view) => api::AdmitResponse {
                admitted: true,
                allocation: Some(allocation(view)),
                ..api::AdmitResponse::default()
            },
            Admission::Rejected {
                reason,
                message,
                explanation,
            } => api::AdmitResponse {
                admitted: false,
                reason,
                message,
                allocation: None,
                explanation: explanation.map(|e| numa_wire::explanation(*e)),
                dry_run: false,
            },
        };
        answer.dry_run = request.dry_run;
        Ok(Response::new(answer))
    }

    async fn container_started(
        &self,
        request: Request<api::ContainerStartedRequest>,
    ) -> Result<Response<api::ContainerStartedResponse>, Status> {
        let r = request.into_inner();
        self.node
            .container_started(&r.pod_uid, &r.container_name, &r.container_id)
            .await
            .map_err(|e| Status::failed_precondition(format!("{e:#}")))?;
        Ok(Response::new(api::ContainerStartedResponse {}))
    }

    async fn container_removed(
        &self,
        request: Request<api::ContainerRemovedRequest>,
    ) -> Result<Response<api::ContainerRemovedResponse>, Status> {
        let r = request.into_inner();
        self.node
            .container_removed(&r.container_id)
            .await
            .map_err(internal)?;
        Ok(Response::new(api::ContainerRemovedResponse {}))
    }

    async fn pod_removed(
        &self,
        request: Request<api::PodRemovedRequest>,
    ) -> Result<Response<api::PodRemovedResponse>, Status> {
        let uid = request.into_inner().pod_uid;
        if !self.node.release(&uid).await.map_err(internal)? {
            return Err(Status::not_found(format!("pod {uid} was not admitted")));
        }
        Ok(Response::new(api::PodRemovedResponse {}))
    }

    async fn sync_active_pods(
        &self,
        request: Request<api::SyncActivePodsRequest>,
    ) -> Result<Response<api::SyncActivePodsResponse>, Status> {
        let active = request.into_inner().active_pod_uids;
        let released = self.node.sync_active(&active).await.map_err(internal)?;
        Ok(Response::new(api::SyncActivePodsResponse {
            released_pod_uids: released,
        }))
    }

    async fn get_pod(
        &self,
        request: Request<api::GetPodRequest>,
    ) -> Result<Response<api::PodAllocation>, Status> {
        let uid = request.into_inner().pod_uid;
        // Settled: never what a decision under way holds before it stands or is given back.
        let view = self
            .node
            .settled_view(&uid)
            .await
            .map_err(|e| Status::not_found(format!("{e:#}")))?;
        Ok(Response::new(allocation(view)))
    }

    async fn list_pods(
        &self,
        _: Request<api::ListPodsRequest>,
    ) -> Result<Response<api::ListPodsResponse>, Status> {
        Ok(Response::new(api::ListPodsResponse {
            pods: (self.node.settled_views().await)
                .map_err(internal)?
                .into_iter()
                .map(allocation)
                .collect(),
        }))
    }

    async fn list_numa_nodes(
        &self,
        _: Request<api::ListNumaNodesRequest>,
    ) -> Result<Response<api::ListNumaNodesResponse>, Status> {
        let nodes = self.node.settled_numa_resources().await.map_err(internal)?;
        Ok(Response::new(api::ListNumaNodesResponse {
            numa_nodes: nodes.into_iter().map(numa_wire::numa_node).collect(),
        }))
    }
}
