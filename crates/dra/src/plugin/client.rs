//! A registered plugin's DRAPlugin client ([`DraPluginClient`], upstream `DRAPlugin`):
//! NodePrepareResources / NodeUnprepareResources on the chosen service version, each call
//! bounded by a deadline (sent to the plugin as `grpc-timeout` and enforced locally).
//!
//! The client speaks v1 only; a plugin that serves v1beta1 is reached through
//! `corral_proto::dra::v1beta1::V1Beta1ClientWrapper`, which converts at the wire (upstream
//! does the same). A new service version is one more [`Stub`] variant.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_proto::dra::{v1, v1beta1};
use corral_proto::tonic::{self, transport::Channel};

use super::service::{DraService, HealthService};
use crate::claim::ClaimRef;
use crate::claim_info::PreparedDevice;
use crate::driver::{DriverClaimError, PrepareResults, UnprepareResults};
use crate::error::DriverCallError;

/// How to call one plugin of a driver.
#[derive(Debug, Clone)]
pub struct DraPluginClient {
    driver: String,
    endpoint: PathBuf,
    service: DraService,
    channel: Channel,
    timeout: Duration,
    health: Option<HealthService>,
}

impl DraPluginClient {
    /// A client over an established channel.
    pub fn new(
        driver: impl Into<String>,
        endpoint: impl Into<PathBuf>,
        service: DraService,
        channel: Channel,
        timeout: Duration,
    ) -> Self {
        DraPluginClient {
            driver: driver.into(),
            endpoint: endpoint.into(),
            service,
            channel,
            timeout,
            health: None,
        }
    }

    /// The same client, advertising `health` (what the plugin listed in
    /// `supported_versions`; `None`: it serves no health stream).
    pub fn with_health(mut self, health: Option<HealthService>) -> Self {
        self.health = health;
        self
    }

    /// The DRAResourceHealth service the plugin advertised, if any.
    pub fn health_service(&self) -> Option<HealthService> {
        self.health
    }

    /// The plugin's gRPC channel (cheap to clone), for the health stream.
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// Dial `endpoint` (waiting at most `timeout`) and build a client.
    pub async fn connect(
        driver: impl Into<String>,
        endpoint: impl Into<PathBuf>,
        service: DraService,
        timeout: Duration,
    ) -> Result<Self, DriverCallError> {
        let endpoint = endpoint.into();
        let channel = corral_proto::uds::connect(&endpoint, timeout)
            .await
            .map_err(|e| DriverCallError::Connect(Box::new(e)))?;
        Ok(Self::new(driver, endpoint, service, channel, timeout))
    }

    /// The driver name.
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// The DRAPlugin socket.
    pub fn endpoint(&self) -> &Path {
        &self.endpoint
    }

    /// The service version in use.
    pub fn service(&self) -> DraService {
        self.service
    }

    /// Whether the plugin's DRAPlugin socket accepts a connection now (corral's stand-in
    /// for upstream's tracked gRPC connection state; see
    /// [`PluginStore::get_connected`](super::store::PluginStore::get_connected)). Bounded by
    /// the per-call deadline.
    pub async fn is_connected(&self) -> bool {
        matches!(
            tokio::time::timeout(
                self.timeout,
                tokio::net::UnixStream::connect(&self.endpoint)
            )
            .await,
            Ok(Ok(_))
        )
    }

    /// The per-call deadline.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(self.timeout);
        request
    }

    async fn bounded<F, T>(&self, call: F) -> Result<T, DriverCallError>
    where
        F: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(DriverCallError::DeadlineExceeded(self.timeout)),
            // The deadline also travels as `grpc-timeout`: the server (tonic answers
            // `CANCELLED` "Timeout expired") may give up first.
            Ok(Err(status))
                if status.code() == tonic::Code::DeadlineExceeded
                    || started.elapsed() >= self.timeout =>
            {
                Err(DriverCallError::DeadlineExceeded(self.timeout))
            }
            Ok(Err(status)) => Err(status.into()),
            Ok(Ok(response)) => Ok(response.into_inner()),
        }
    }

    /// The stub of the chosen service version, spoken to in v1.
    fn stub(&self) -> Stub {
        let channel = self.channel.clone();
        match self.service {
            DraService::V1 => Stub::V1(v1::dra_plugin_client::DraPluginClient::new(channel)),
            DraService::V1Beta1 => Stub::V1Beta1(v1beta1::V1Beta1ClientWrapper::new(
                v1beta1::dra_plugin_client::DraPluginClient::new(channel),
            )),
        }
    }

    /// NodePrepareResources for a batch of claims.
    pub async fn node_prepare_resources(
        &self,
        claims: &[ClaimRef],
    ) -> Result<PrepareResults, DriverCallError> {
        let request = self.request(v1::NodePrepareResourcesRequest {
            claims: claims.iter().map(v1::Claim::from).collect(),
        });
        let response = self
            .bounded(self.stub().node_prepare_resources(request))
            .await?;
        Ok(outcomes(response.claims, |r| {
            let devices = r.devices.into_iter().map(PreparedDevice::from).collect();
            (r.error, devices)
        }))
    }

    /// NodeUnprepareResources for a batch of claims.
    pub async fn node_unprepare_resources(
        &self,
        claims: &[ClaimRef],
    ) -> Result<UnprepareResults, DriverCallError> {
        let request = self.request(v1::NodeUnprepareResourcesRequest {
            claims: claims.iter().map(v1::Claim::from).collect(),
        });
        let response = self
            .bounded(self.stub().node_unprepare_resources(request))
            .await?;
        Ok(outcomes(response.claims, |r| (r.error, ())))
    }
}

/// Per claim uid, the driver's error when it set one, else the value: `split` gives both
/// of one claim's answer.
fn outcomes<R, T>(
    answers: HashMap<String, R>,
    split: impl Fn(R) -> (String, T),
) -> BTreeMap<String, Result<T, DriverClaimError>> {
    answers
        .into_iter()
        .map(|(uid, answer)| {
            let (error, value) = split(answer);
            (
                uid,
                if error.is_empty() {
                    Ok(value)
                } else {
                    Err(error.into())
                },
            )
        })
        .collect()
}

/// A DRAPlugin client of one service version that takes and gives v1 messages; versions
/// other than v1 are adapted by corral-proto's wrappers.
enum Stub {
    V1(v1::dra_plugin_client::DraPluginClient<Channel>),
    V1Beta1(v1beta1::V1Beta1ClientWrapper<Channel>),
}

/// Each RPC of the stub: the same call on whichever client the plugin's version needs.
macro_rules! stub_rpcs {
    ($($rpc:ident: $request:ident -> $response:ident;)+) => {
        impl Stub {$(
            async fn $rpc(
                &mut self,
                request: tonic::Request<v1::$request>,
            ) -> Result<tonic::Response<v1::$response>, tonic::Status> {
                match self {
                    Stub::V1(client) => client.$rpc(request).await,
                    Stub::V1Beta1(client) => client.$rpc(request).await,
                }
            }
        )+}
    };
}

stub_rpcs! {
    node_prepare_resources: NodePrepareResourcesRequest -> NodePrepareResourcesResponse;
    node_unprepare_resources: NodeUnprepareResourcesRequest -> NodeUnprepareResourcesResponse;
}
