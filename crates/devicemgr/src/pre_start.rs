//! Before a container starts (upstream `GetDeviceRunContainerOptions` and
//! `callPreStartContainerIfNeeded`): `PreStartContainer` where plugins ask for it, a
//! re-allocation for a container the manager has no record of, and the merged run options.

use std::collections::BTreeSet;

use corral_topology::{Container, NumaMask, Pod};

use crate::error::{AllocateError, DeviceManagerError};
use crate::pod_devices::ResourceAllocations;
use crate::run_options::RunContainerOptions;
use crate::shared::Shared;

impl Shared {
    /// Upstream `GetDeviceRunContainerOptions`: call `PreStartContainer` where plugins ask
    /// for it, re-allocate a container the manager has no record of (a race on node
    /// restart), and return the merged run options (`None` when the container holds
    /// nothing). The resources of `dra_backed` are the container's extended resources DRA
    /// satisfies (KEP-5004): they get none of this, and whatever the device-plugin state
    /// holds under their names for the container gives no run options (upstream PR
    /// #141426).
    pub(crate) async fn run_container_options(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
        dra_backed: &BTreeSet<String>,
    ) -> Result<Option<RunContainerOptions>, DeviceManagerError> {
        let requests = self.state().container_device_requests(container);
        let mut reallocate = false;
        for (resource, n) in requests {
            if n == 0 || dra_backed.contains(&resource) {
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
            self.allocate_beside_dra(pod, container, affinity, dra_backed)
                .await?;
        }
        let state = self.state();
        let Some(held) = state.pod_devices().container(&pod.uid, &container.name) else {
            return Ok(None);
        };
        let of_plugins: ResourceAllocations = held
            .iter()
            .filter(|(resource, _)| !dra_backed.contains(*resource))
            .map(|(resource, allocation)| (resource.clone(), allocation.clone()))
            .collect();
        Ok((!of_plugins.is_empty()).then(|| RunContainerOptions::merge(&of_plugins)))
    }

    /// The re-allocation of [`run_container_options`](Self::run_container_options): the
    /// container's device-plugin resources only.
    async fn allocate_beside_dra(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
        dra_backed: &BTreeSet<String>,
    ) -> Result<(), DeviceManagerError> {
        if dra_backed.is_empty() {
            return self.allocate(pod, container, affinity).await;
        }
        let mut of_plugins = container.clone();
        for resources in [
            &mut of_plugins.resources.limits.extended,
            &mut of_plugins.resources.requests.extended,
        ] {
            resources.retain(|resource, _| !dra_backed.contains(resource));
        }
        self.allocate(pod, &of_plugins, affinity).await
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
