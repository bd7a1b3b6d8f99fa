//! The sample driver's gRPC services: pluginregistration v1 `Registration` on the
//! registration socket, DRAPlugin on the plugin socket — implemented once in v1; v1beta1
//! is served through `corral_proto::dra::v1beta1::V1ServerWrapper`, as upstream's
//! `kubeletplugin` helper serves it.

use std::collections::HashMap;
use std::sync::Arc;

use corral_proto::dra::v1;
use corral_proto::pluginregistration::v1 as reg;
use corral_proto::tonic::{self, Request, Response, Status};
use tokio_util::sync::CancellationToken;

use super::control::{Behavior, Call, Control, ShareIds, locked};

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

/// The DRAPlugin service as served on one API version (`version` is what [`Call`]s record).
#[derive(Debug, Clone)]
pub(crate) struct Plugin {
    pub(crate) control: Arc<Control>,
    pub(crate) cdi_kind: String,
    pub(crate) pool: String,
    pub(crate) share_ids: ShareIds,
    pub(crate) stop: CancellationToken,
    pub(crate) version: &'static str,
}

impl Plugin {
    /// Record the call, then answer each claim: `serve` it when the driver works normally,
    /// or `fail` it with the configured per-claim error.
    async fn answer<T>(
        &self,
        method: &'static str,
        claims: Vec<v1::Claim>,
        serve: impl Fn(&str) -> T + Send,
        fail: impl Fn(String) -> T + Send,
    ) -> Result<HashMap<String, T>, Status> {
        locked(&self.control.calls).push(Call {
            method,
            version: self.version,
            claim_uids: claims.iter().map(|c| c.uid.clone()).collect(),
        });
        let behavior = locked(&self.control.behavior).clone();
        match &behavior {
            Behavior::Hang => {
                self.stop.cancelled().await;
                return Err(Status::unavailable("sample DRA driver stopped"));
            }
            Behavior::FailCall(message) => return Err(Status::internal(message.clone())),
            _ => {}
        }
        let mut answers: HashMap<String, T> = claims
            .into_iter()
            .filter(|claim| !matches!(&behavior, Behavior::SkipClaims(skip) if skip.contains(&claim.uid)))
            .map(|claim| {
                let answer = match &behavior {
                    Behavior::FailClaims(message) => fail(message.clone()),
                    _ => serve(&claim.uid),
                };
                (claim.uid, answer)
            })
            .collect();
        if let Behavior::AnswerUnknownClaim(uid) = &behavior {
            answers.insert(uid.clone(), serve(uid));
        }
        Ok(answers)
    }
}

#[tonic::async_trait]
impl v1::dra_plugin_server::DraPlugin for Plugin {
    async fn node_prepare_resources(
        &self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        let serve = |uid: &str| {
            let devices =
                self.control
                    .devices_for(&self.cdi_kind, &self.pool, &self.share_ids, uid);
            locked(&self.control.prepared).insert(uid.to_owned(), devices.clone());
            v1::NodePrepareResourceResponse {
                devices: devices.into_iter().map(v1::Device::from).collect(),
                error: String::new(),
            }
        };
        let fail = |error| v1::NodePrepareResourceResponse {
            devices: vec![],
            error,
        };
        let claims = request.into_inner().claims;
        let claims = self
            .answer("NodePrepareResources", claims, serve, fail)
            .await?;
        Ok(Response::new(v1::NodePrepareResourcesResponse { claims }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        let serve = |uid: &str| {
            locked(&self.control.prepared).remove(uid);
            v1::NodeUnprepareResourceResponse {
                error: String::new(),
            }
        };
        let fail = |error| v1::NodeUnprepareResourceResponse { error };
        let claims = request.into_inner().claims;
        let claims = self
            .answer("NodeUnprepareResources", claims, serve, fail)
            .await?;
        Ok(Response::new(v1::NodeUnprepareResourcesResponse { claims }))
    }
}
