//! A registered plugin's DRAPlugin client ([`DraPluginClient`], upstream `DRAPlugin`):
//! NodePrepareResources / NodeUnprepareResources on the chosen service version, each call
//! bounded by a deadline (sent to the plugin as `grpc-timeout` and enforced locally).

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_proto::dra::{v1, v1beta1};
use corral_proto::tonic::{self, transport::Channel};

use super::service::DraService;
use crate::claim::ClaimRef;
use crate::claim_info::PreparedDevice;
use crate::driver::{PrepareResults, UnprepareResults};
use crate::error::DriverCallError;

/// How to call one plugin of a driver.
#[derive(Debug, Clone)]
pub struct DraPluginClient {
    driver: String,
    endpoint: PathBuf,
    service: DraService,
    channel: Channel,
    timeout: Duration,
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
        }
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
            .map_err(|e| DriverCallError::Connect(e.to_string()))?;
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

    /// NodePrepareResources for a batch of claims.
    pub async fn node_prepare_resources(
        &self,
        claims: &[ClaimRef],
    ) -> Result<PrepareResults, DriverCallError> {
        match self.service {
            DraService::V1 => {
                let mut client = v1::dra_plugin_client::DraPluginClient::new(self.channel.clone());
                let request = v1::NodePrepareResourcesRequest {
                    claims: claims.iter().map(claim_v1).collect(),
                };
                let response = self
                    .bounded(client.node_prepare_resources(self.request(request)))
                    .await?;
                Ok(prepare_results(
                    response
                        .claims
                        .into_iter()
                        .map(|(uid, r)| (uid, r.error, r.devices)),
                    device_v1,
                ))
            }
            DraService::V1Beta1 => {
                let mut client =
                    v1beta1::dra_plugin_client::DraPluginClient::new(self.channel.clone());
                let request = v1beta1::NodePrepareResourcesRequest {
                    claims: claims.iter().map(claim_v1beta1).collect(),
                };
                let response = self
                    .bounded(client.node_prepare_resources(self.request(request)))
                    .await?;
                Ok(prepare_results(
                    response
                        .claims
                        .into_iter()
                        .map(|(uid, r)| (uid, r.error, r.devices)),
                    device_v1beta1,
                ))
            }
        }
    }

    /// NodeUnprepareResources for a batch of claims.
    pub async fn node_unprepare_resources(
        &self,
        claims: &[ClaimRef],
    ) -> Result<UnprepareResults, DriverCallError> {
        let to_result = |error: String| if error.is_empty() { Ok(()) } else { Err(error) };
        match self.service {
            DraService::V1 => {
                let mut client = v1::dra_plugin_client::DraPluginClient::new(self.channel.clone());
                let request = v1::NodeUnprepareResourcesRequest {
                    claims: claims.iter().map(claim_v1).collect(),
                };
                let response = self
                    .bounded(client.node_unprepare_resources(self.request(request)))
                    .await?;
                Ok(response
                    .claims
                    .into_iter()
                    .map(|(uid, r)| (uid, to_result(r.error)))
                    .collect())
            }
            DraService::V1Beta1 => {
                let mut client =
                    v1beta1::dra_plugin_client::DraPluginClient::new(self.channel.clone());
                let request = v1beta1::NodeUnprepareResourcesRequest {
                    claims: claims.iter().map(claim_v1beta1).collect(),
                };
                let response = self
                    .bounded(client.node_unprepare_resources(self.request(request)))
                    .await?;
                Ok(response
                    .claims
                    .into_iter()
                    .map(|(uid, r)| (uid, to_result(r.error)))
                    .collect())
            }
        }
    }
}

fn claim_v1(c: &ClaimRef) -> v1::Claim {
    v1::Claim {
        namespace: c.namespace.clone(),
        uid: c.uid.clone(),
        name: c.name.clone(),
    }
}

fn claim_v1beta1(c: &ClaimRef) -> v1beta1::Claim {
    v1beta1::Claim {
        namespace: c.namespace.clone(),
        uid: c.uid.clone(),
        name: c.name.clone(),
    }
}

/// Per claim uid: the devices (converted with `device`), or the driver's error when it set one.
fn prepare_results<D>(
    claims: impl Iterator<Item = (String, String, Vec<D>)>,
    device: fn(D) -> PreparedDevice,
) -> PrepareResults {
    claims
        .map(|(uid, error, devices)| {
            let result = if error.is_empty() {
                Ok(devices.into_iter().map(device).collect())
            } else {
                Err(error)
            };
            (uid, result)
        })
        .collect()
}

fn device_v1(d: v1::Device) -> PreparedDevice {
    PreparedDevice {
        request_names: d.request_names,
        pool_name: d.pool_name,
        device_name: d.device_name,
        cdi_device_ids: d.cdi_device_ids,
    }
}

fn device_v1beta1(d: v1beta1::Device) -> PreparedDevice {
    PreparedDevice {
        request_names: d.request_names,
        pool_name: d.pool_name,
        device_name: d.device_name,
        cdi_device_ids: d.cdi_device_ids,
    }
}
