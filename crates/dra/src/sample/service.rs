//! The sample driver's gRPC services: pluginregistration v1 `Registration` on the
//! registration socket, DRAPlugin v1 and v1beta1 on the plugin socket.

use std::collections::HashMap;
use std::sync::Arc;

use corral_proto::dra::{v1, v1beta1};
use corral_proto::pluginregistration::v1 as reg;
use corral_proto::tonic::{self, Request, Response, Status};
use tokio_util::sync::CancellationToken;

use super::control::{Behavior, Call, Control, locked};

#[derive(Debug, Clone)]
pub(crate) struct Registration {
    pub(crate) info: reg::PluginInfo,
    pub(crate) control: Arc<Control>,
}

#[tonic::async_trait]
impl reg::registration_server::Registration for Registration {
    async fn get_info(
        &self,
        _: Request<reg::InfoRequest>,
    ) -> Result<Response<reg::PluginInfo>, Status> {
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        tracing::info!(registered = status.plugin_registered, error = %status.error, "sample DRA driver: registration status");
        locked(&self.control.statuses).push((status.plugin_registered, status.error));
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

/// One prepared claim, version-neutral.
pub(crate) type Outcome = Result<Vec<crate::PreparedDevice>, String>;

#[derive(Debug, Clone)]
pub(crate) struct Plugin {
    pub(crate) control: Arc<Control>,
    pub(crate) cdi_kind: String,
    pub(crate) pool: String,
    pub(crate) stop: CancellationToken,
}

impl Plugin {
    async fn behave(
        &self,
        method: &'static str,
        version: &'static str,
        uids: Vec<String>,
    ) -> Result<Behavior, Status> {
        locked(&self.control.calls).push(Call {
            method,
            version,
            claim_uids: uids,
        });
        let behavior = locked(&self.control.behavior).clone();
        match behavior {
            Behavior::Hang => {
                self.stop.cancelled().await;
                Err(Status::unavailable("sample DRA driver stopped"))
            }
            Behavior::FailCall(message) => Err(Status::internal(message)),
            other => Ok(other),
        }
    }

    async fn prepare(
        &self,
        version: &'static str,
        uids: Vec<String>,
    ) -> Result<Vec<(String, Outcome)>, Status> {
        let behavior = self
            .behave("NodePrepareResources", version, uids.clone())
            .await?;
        Ok(uids
            .into_iter()
            .map(|uid| {
                let outcome = match &behavior {
                    Behavior::FailClaims(message) => Err(message.clone()),
                    _ => {
                        let devices = self.control.devices_for(&self.cdi_kind, &self.pool, &uid);
                        locked(&self.control.prepared).insert(uid.clone(), devices.clone());
                        Ok(devices)
                    }
                };
                (uid, outcome)
            })
            .collect())
    }

    async fn unprepare(
        &self,
        version: &'static str,
        uids: Vec<String>,
    ) -> Result<Vec<(String, String)>, Status> {
        let behavior = self
            .behave("NodeUnprepareResources", version, uids.clone())
            .await?;
        Ok(uids
            .into_iter()
            .map(|uid| match &behavior {
                Behavior::FailClaims(message) => (uid, message.clone()),
                _ => {
                    locked(&self.control.prepared).remove(&uid);
                    (uid, String::new())
                }
            })
            .collect())
    }
}

#[tonic::async_trait]
impl v1::dra_plugin_server::DraPlugin for Plugin {
    async fn node_prepare_resources(
        &self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        let uids = request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| c.uid)
            .collect();
        let claims: HashMap<_, _> = self
            .prepare("v1", uids)
            .await?
            .into_iter()
            .map(|(uid, outcome)| {
                let response = match outcome {
                    Ok(devices) => v1::NodePrepareResourceResponse {
                        devices: devices
                            .into_iter()
                            .map(|d| v1::Device {
                                request_names: d.request_names,
                                pool_name: d.pool_name,
                                device_name: d.device_name,
                                cdi_device_ids: d.cdi_device_ids,
                                share_id: None,
                            })
                            .collect(),
                        error: String::new(),
                    },
                    Err(error) => v1::NodePrepareResourceResponse {
                        devices: vec![],
                        error,
                    },
                };
                (uid, response)
            })
            .collect();
        Ok(Response::new(v1::NodePrepareResourcesResponse { claims }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        let uids = request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| c.uid)
            .collect();
        let claims = self
            .unprepare("v1", uids)
            .await?
            .into_iter()
            .map(|(uid, error)| (uid, v1::NodeUnprepareResourceResponse { error }))
            .collect();
        Ok(Response::new(v1::NodeUnprepareResourcesResponse { claims }))
    }
}

#[tonic::async_trait]
impl v1beta1::dra_plugin_server::DraPlugin for Plugin {
    async fn node_prepare_resources(
        &self,
        request: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        let uids = request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| c.uid)
            .collect();
        let claims: HashMap<_, _> = self
            .prepare("v1beta1", uids)
            .await?
            .into_iter()
            .map(|(uid, outcome)| {
                let response = match outcome {
                    Ok(devices) => v1beta1::NodePrepareResourceResponse {
                        devices: devices
                            .into_iter()
                            .map(|d| v1beta1::Device {
                                request_names: d.request_names,
                                pool_name: d.pool_name,
                                device_name: d.device_name,
                                cdi_device_ids: d.cdi_device_ids,
                            })
                            .collect(),
                        error: String::new(),
                    },
                    Err(error) => v1beta1::NodePrepareResourceResponse {
                        devices: vec![],
                        error,
                    },
                };
                (uid, response)
            })
            .collect();
        Ok(Response::new(v1beta1::NodePrepareResourcesResponse {
            claims,
        }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodeUnprepareResourcesResponse>, Status> {
        let uids = request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| c.uid)
            .collect();
        let claims = self
            .unprepare("v1beta1", uids)
            .await?
            .into_iter()
            .map(|(uid, error)| (uid, v1beta1::NodeUnprepareResourceResponse { error }))
            .collect();
        Ok(Response::new(v1beta1::NodeUnprepareResourcesResponse {
            claims,
        }))
    }
}
