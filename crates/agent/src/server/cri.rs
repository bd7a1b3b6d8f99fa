//! The CPU manager's [`ContainerRuntime`] over CRI: each cpuset push is one
//! `RuntimeService/UpdateContainerResources` call on `containerRuntimeEndpoint`, with a
//! deadline, awaited by the reconcile loop.

use std::path::PathBuf;
use std::time::Duration;

use corral_cpumgr::{CfsQuota, ContainerRuntime, RuntimeError};
use corral_proto::cri::v1 as cri;
use corral_proto::cri::v1::runtime_service_client::RuntimeServiceClient;
use corral_topology::CpuSet;

/// How long one CRI call may take (dial included).
pub(crate) const CRI_DEADLINE: Duration = Duration::from_secs(2);

/// A CRI runtime on a unix socket.
#[derive(Debug)]
pub(crate) struct CriRuntime {
    socket: PathBuf,
}

impl CriRuntime {
    /// Calls go to `socket`.
    pub(crate) fn new(socket: PathBuf) -> Self {
        Self { socket }
    }
}

#[corral_cpumgr::async_trait]
impl ContainerRuntime for CriRuntime {
    async fn update_container_cpuset(
        &self,
        container_id: &str,
        cpus: &CpuSet,
        quota: CfsQuota,
    ) -> Result<(), RuntimeError> {
        // 0 leaves the quota as it is; -1 lifts it (`calculateLinuxResources` with
        // `disableCPUQuota`).
        let cpu_quota = match quota {
            CfsQuota::Unlimited => -1,
            _ => 0,
        };
        let request = cri::UpdateContainerResourcesRequest {
            container_id: container_id.to_owned(),
            linux: Some(cri::LinuxContainerResources {
                cpuset_cpus: cpus.to_string(),
                cpu_quota,
                ..cri::LinuxContainerResources::default()
            }),
            ..cri::UpdateContainerResourcesRequest::default()
        };
        let socket = self.socket.clone();
        let call = async move {
            let channel = corral_proto::uds::connect(&socket, CRI_DEADLINE)
                .await
                .map_err(RuntimeError::new)?;
            RuntimeServiceClient::new(channel)
                .update_container_resources(request)
                .await
                .map_err(|status| {
                    RuntimeError::new(format!("UpdateContainerResources: {}", status.message()))
                })?;
            Ok(())
        };
        tokio::time::timeout(CRI_DEADLINE, call)
            .await
            .unwrap_or_else(|_| {
                Err(RuntimeError::new(format!(
                    "UpdateContainerResources for {container_id} did not answer within {CRI_DEADLINE:?}"
                )))
            })
    }
}
