//! The sample driver's DRAResourceHealth service (`v1` and/or `v1alpha1`): each
//! `NodeWatchResources` stream gets the current report at once and every later one, as
//! drivers built on upstream's helper send complete lists.

use std::sync::Arc;

use corral_proto::dra_health::{v1, v1alpha1};
use corral_proto::tonic::{self, Request, Response, Status};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::health::DeviceHealthStatus;

/// One device in the sample driver's health report (its pool is the driver's pool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleDeviceHealth {
    /// Device name.
    pub device: String,
    /// Its health.
    pub health: DeviceHealthStatus,
    /// `health_check_timeout_seconds` (0: the kubelet's default).
    pub timeout_seconds: i64,
    /// `message` (empty: none).
    pub message: String,
}

impl SampleDeviceHealth {
    /// `device` with `health`, no timeout, no message.
    pub fn new(device: impl Into<String>, health: DeviceHealthStatus) -> Self {
        SampleDeviceHealth {
            device: device.into(),
            health,
            timeout_seconds: 0,
            message: String::new(),
        }
    }
}

pub(crate) struct Health {
    pub(crate) reports: watch::Receiver<Vec<SampleDeviceHealth>>,
    pub(crate) pool: String,
    pub(crate) stop: CancellationToken,
}

fn status(health: DeviceHealthStatus) -> i32 {
    match health {
        DeviceHealthStatus::Healthy => 1,
        DeviceHealthStatus::Unhealthy => 2,
        DeviceHealthStatus::Unknown => 0,
    }
}

macro_rules! health_service {
    ($version:ident) => {
        #[tonic::async_trait]
        impl $version::dra_resource_health_server::DraResourceHealth for Health {
            type NodeWatchResourcesStream =
                ReceiverStream<Result<$version::NodeWatchResourcesResponse, Status>>;

            async fn node_watch_resources(
                &self,
                _request: Request<$version::NodeWatchResourcesRequest>,
            ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
                let (tx, rx) = mpsc::channel(4);
                let mut reports = self.reports.clone();
                let pool = self.pool.clone();
                let stop = self.stop.clone();
                tokio::spawn(async move {
                    loop {
                        let response = $version::NodeWatchResourcesResponse {
                            devices: reports
                                .borrow_and_update()
                                .iter()
                                .map(|d| $version::DeviceHealth {
                                    device: Some($version::DeviceIdentifier {
                                        pool_name: pool.clone(),
                                        device_name: d.device.clone(),
                                    }),
                                    health: status(d.health),
                                    last_updated_time: std::time::SystemTime::now()
                                        .duration_since(std::time::UNIX_EPOCH)
                                        .map_or(0, |t| t.as_secs() as i64),
                                    health_check_timeout_seconds: d.timeout_seconds,
                                    message: d.message.clone(),
                                })
                                .collect(),
                        };
                        if tx.send(Ok(response)).await.is_err() {
                            return;
                        }
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tx.closed() => return,
                            changed = reports.changed() => if changed.is_err() { return },
                        }
                    }
                });
                Ok(Response::new(ReceiverStream::new(rx)))
            }
        }
    };
}

health_service!(v1);
health_service!(v1alpha1);

/// The servers for the versions the driver serves.
pub(crate) fn servers(
    health: &Arc<Health>,
    serve_v1: bool,
    serve_v1alpha1: bool,
) -> (
    Option<v1::dra_resource_health_server::DraResourceHealthServer<Health>>,
    Option<v1alpha1::dra_resource_health_server::DraResourceHealthServer<Health>>,
) {
    let clone = || Health {
        reports: health.reports.clone(),
        pool: health.pool.clone(),
        stop: health.stop.clone(),
    };
    (
        serve_v1.then(|| v1::dra_resource_health_server::DraResourceHealthServer::new(clone())),
        serve_v1alpha1
            .then(|| v1alpha1::dra_resource_health_server::DraResourceHealthServer::new(clone())),
    )
}
