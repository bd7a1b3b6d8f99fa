//! Before a container starts (upstream `GetDeviceRunContainerOptions` and
//! `callPreStartContainerIfNeeded`): `PreStartContainer` where plugins ask for it, a
//! re-allocation for a container the manager has no record of, and the merged run options.

use corral_topology::{Container, NumaMask, Pod};

use crate::error::{AllocateError, DeviceManagerError};
use crate::run_options::RunContainerOptions;
use crate::shared::Shared;

impl Shared {
    /// Upstream `GetDeviceRunContainerOptions`: call `PreStartContainer` where plugins ask
    /// for it, re-allocate a container the manager has no record of (a race on node
    /// restart), and return the merged run options (`None` when the container holds
    /// nothing).
    pub(crate) async fn run_container_options(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<Option<RunContainerOptions>, DeviceManagerError> {
        let requests = self.state().container_device_requests(container);
        let mut reallocate = false;
        for (resource, n) in requests {
            if n == 0 {
                continue;
            }
            self.pre_start(pod, container, &resource).await?;
            if !self.pods.is_active(&pod.uid) {
                continue;
            }
            if self
                .state()
                .pod_devices()
                .get(&pod.uid, &container.name, &resource)
                .is_none()
            {
                reallocate = true;
            }
        }
        if reallocate {
            self.allocate(pod, container, affinity).await?;
        }
        Ok(self
            .state()
            .pod_devices()
            .container(&pod.uid, &container.name)
            .map(RunContainerOptions::merge))
    }

    /// `PreStartContainer` for one resource of the container, if its plugin asks for it.
    async fn pre_start(
        &self,
        pod: &Pod,
        container: &Container,
        resource: &str,
    ) -> Result<(), AllocateError> {
        let (endpoint, devices) = {
            let state = self.state();
            let devices =
                state
                    .pod_devices()
                    .container_devices(&pod.uid, &container.name, resource);
            (state.endpoint(resource), devices)
        };
        let Some(endpoint) = endpoint else {
            return Err(AllocateError::EndpointNotFound {
                resource: resource.to_owned(),
            });
        };
        if !endpoint.options.is_some_and(|o| o.pre_start_required) {
            return Ok(());
        }
        let Some(devices) = devices else {
            return Err(AllocateError::NoDevicesForPreStart {
                pod_uid: pod.uid.clone(),
                container: container.name.clone(),
                resource: resource.to_owned(),
            });
        };
        let devices: Vec<String> = devices.into_iter().collect();
        let client = self
            .hub
            .client(resource)
            .ok_or_else(|| AllocateError::PreStart {
                resource: resource.to_owned(),
                message: "the plugin's endpoint has been stopped".to_owned(),
            })?;
        client
            .pre_start_container(&devices)
            .await
            .map_err(|err| AllocateError::PreStart {
                resource: resource.to_owned(),
                message: err.full_message(),
            })
    }
}
