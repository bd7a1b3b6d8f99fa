//! Allocation against the plugins (upstream `Allocate`, `allocateContainerResources`,
//! `devicesToAllocate` with `GetPreferredAllocation`): devices are chosen and reserved in
//! the core under the lock, the plugin is asked outside it with a deadline, and the answer
//! is committed — or everything taken for the container is given back.

use std::collections::BTreeSet;
use std::time::Instant;

use corral_topology::{Container, NumaMask, Pod};

use crate::allocation::{AllocationRequest, ToAllocate};
use crate::error::{AllocateError, DeviceManagerError};
use crate::shared::Shared;
use crate::state::DeviceReuse;

impl Shared {
    /// Allocate for a container that asks nothing of device plugins — bookkeeping only,
    /// no plugin, no runtime — and return true; false (doing nothing) when it asks
    /// something, which needs [`allocate`](Self::allocate).
    pub(crate) fn allocate_without_plugins(&self, pod: &Pod, container: &Container) -> bool {
        let mut state = self.state();
        if !state.container_device_requests(container).is_empty() {
            return false;
        }
        state.begin_pod(&pod.uid);
        state.finish_container(
            &pod.uid,
            &container.name,
            DeviceReuse::after(pod, &container.name),
        );
        true
    }

    /// Allocate the container's device-plugin resources (upstream `Allocate`), aligned
    /// with `affinity`. On any error, everything taken for the container is given back.
    pub(crate) async fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<(), DeviceManagerError> {
        self.state().begin_pod(&pod.uid);
        self.allocate_container_resources(pod, container, affinity)
            .await?;
        self.state().finish_container(
            &pod.uid,
            &container.name,
            DeviceReuse::after(pod, &container.name),
        );
        Ok(())
    }

    async fn allocate_container_resources(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<(), DeviceManagerError> {
        let requests = self.state().container_device_requests(container);
        if requests.is_empty() {
            return Ok(());
        }
        self.update_allocated_devices();
        let running = self.pods.already_running(pod, container);
        let mut committed: Vec<String> = Vec::new();
        let give_back = |committed: &[String]| {
            let mut state = self.state();
            for resource in committed {
                state.uncommit(&pod.uid, &container.name, resource);
            }
        };
        for (resource, needed) in &requests {
            let result = self
                .allocate_resource(pod, container, resource, *needed, affinity, running)
                .await;
            match result {
                Ok(true) => committed.push(resource.clone()),
                Ok(false) => {}
                Err(err) => {
                    give_back(&committed);
                    if !committed.is_empty() {
                        self.checkpoints.write_or_log();
                    }
                    tracing::warn!(pod = %pod.uid, container = %container.name, resource, %err,
                        "device allocation failed; everything taken for the container was given back");
                    return Err(err.into());
                }
            }
        }
        if !committed.is_empty()
            && let Err(err) = self.checkpoints.write_async().await
        {
            give_back(&committed);
            self.checkpoints.write_or_log();
            return Err(err.into());
        }
        Ok(())
    }

    /// Whether allocating `resource` should wait for (or fail for want of) its plugin.
    fn waits_for_plugin(&self, resource: &str, running: bool) -> bool {
        !running && !self.hub.plugin_ready(resource) && !self.config.registration_wait.is_zero()
    }

    /// One resource of one container: choose (asking the plugin's preference if it offers
    /// one), call `Allocate`, record. `Ok(true)` when something was recorded.
    async fn allocate_resource(
        &self,
        pod: &Pod,
        container: &Container,
        resource: &str,
        needed: usize,
        affinity: Option<NumaMask>,
        running: bool,
    ) -> Result<bool, AllocateError> {
        if self.waits_for_plugin(resource, running) {
            tracing::info!(resource, pod = %pod.uid, container = %container.name,
                wait = ?self.config.registration_wait, "waiting for the resource's device plugin to register");
            self.wait_for_plugin(resource, self.config.registration_wait)
                .await;
        }
        let mut preferred: Option<BTreeSet<String>> = None;
        let reservation = loop {
            let outcome = {
                let mut state = self.state();
                let reusable = state
                    .reusable_devices(&pod.uid)
                    .and_then(|r| r.get(resource))
                    .cloned();
                let request = AllocationRequest {
                    pod_uid: &pod.uid,
                    container: &container.name,
                    resource,
                    required: needed,
                    reusable: reusable.as_ref(),
                    affinity,
                    already_running: running,
                };
                state.devices_to_allocate(&request, preferred.as_ref())
            };
            match outcome {
                Err(
                    AllocateError::Unregistered { .. } | AllocateError::NoHealthyDevices { .. },
                ) if self.waits_for_plugin(resource, running) => {
                    return Err(AllocateError::PluginNotRegistered {
                        resource: resource.to_owned(),
                        pod_uid: pod.uid.clone(),
                        container: container.name.clone(),
                        waited: self.config.registration_wait,
                    });
                }
                Err(err) => return Err(err),
                Ok(ToAllocate::Nothing) => return Ok(false),
                Ok(ToAllocate::Devices(reservation)) => break reservation,
                Ok(ToAllocate::AskPlugin(ask)) => {
                    if preferred.is_some() {
                        return Err(AllocateError::Shortfall {
                            required: needed,
                            got: 0,
                        });
                    }
                    let client = self.hub.client(resource).ok_or_else(|| {
                        AllocateError::EndpointNotFound {
                            resource: resource.to_owned(),
                        }
                    })?;
                    let answer = client.preferred_allocation(&ask).await.map_err(|err| {
                        AllocateError::PreferredAllocation {
                            resource: resource.to_owned(),
                            message: err.full_message(),
                        }
                    })?;
                    preferred = Some(answer);
                }
            }
        };
        let release = |err: AllocateError| {
            self.state().release(&reservation);
            Err(err)
        };
        let Some(client) = self.hub.client(resource) else {
            return release(AllocateError::UnknownPlugin {
                resource: resource.to_owned(),
            });
        };
        let started = Instant::now();
        let answer = client.allocate(&reservation.devices).await;
        let elapsed = started.elapsed();
        tracing::debug!(resource, ?elapsed, "device plugin Allocate returned");
        if let Some(observer) = self.observer.get() {
            observer.allocate_rpc_finished(resource, elapsed);
        }
        match answer {
            Ok(Some(response)) => {
                self.state()
                    .commit(&reservation, &pod.uid, &container.name, response);
                tracing::info!(resource, pod = %pod.uid, container = %container.name,
                    devices = %reservation.devices.join(","), "allocated devices");
                Ok(true)
            }
            Ok(None) => release(AllocateError::NoContainerResponse {
                resource: resource.to_owned(),
            }),
            Err(err) => release(AllocateError::AllocateRpc {
                resource: resource.to_owned(),
                pod_uid: pod.uid.clone(),
                container: container.name.clone(),
                message: err.full_message(),
            }),
        }
    }
}
