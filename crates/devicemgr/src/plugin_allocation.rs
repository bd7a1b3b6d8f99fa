//! Allocation against the plugins (upstream `Allocate`, `allocateContainerResources`,
//! `devicesToAllocate` with `GetPreferredAllocation`), in two steps:
//!
//! 1. **Reserve** (synchronous, no I/O; in the topology manager's decision): devices are
//!    chosen and reserved in the core. A choice that needs the plugin's preferred
//!    allocation is not made: the question is noted and the decision deferred.
//! 2. **Ask** and **realize** (async, after the decision, outside every lock, each call
//!    under a deadline): the noted questions are put to the plugins (then the pod is
//!    decided again with the answers), and the reserved devices are given to the plugins'
//!    `Allocate` and committed — or everything taken for the pod is given back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

use corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse;
use corral_topology::topologymanager::Grant;
use corral_topology::{Container, NumaMask, Pod};

use crate::allocation::{AllocationRequest, ToAllocate};
use crate::error::{AllocateError, DeviceManagerError};
use crate::shared::Shared;
use crate::state::{DeviceReuse, Reservation};

/// What [`Shared::reserve`] did for a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reserved {
    /// Its devices are reserved (or it needs none): the devices newly reserved.
    Done(Box<Grant>),
    /// A plugin must be asked its preferred allocation first; nothing was taken.
    Asking,
}

impl Shared {
    /// Wait (at most the registration wait, outside every lock) for the plugins of the
    /// containers' device-plugin resources that are not ready yet, so that its decision finds
    /// them registered (upstream waits inside `Allocate`).
    pub(crate) async fn wait_for_plugins<'c>(
        &self,
        pod: &Pod,
        containers: impl IntoIterator<Item = &'c Container>,
    ) {
        let mut waiting: BTreeMap<String, ()> = BTreeMap::new();
        for container in containers {
            let running = self.pods.already_running(pod, container);
            // Read with the state lock, which is released before the hub's is taken (the
            // hub calls into the state with its own lock held: that is the order).
            let requests = self.state().container_device_requests(container);
            for resource in requests.into_keys() {
                if self.waits_for_plugin(&resource, running) {
                    waiting.insert(resource, ());
                }
            }
        }
        let deadline = tokio::time::Instant::now() + self.config.registration_wait;
        for resource in waiting.into_keys() {
            tracing::info!(resource, pod = %pod.uid, wait = ?self.config.registration_wait,
                "waiting for the resource's device plugin to register");
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            self.wait_for_plugin(&resource, left).await;
        }
    }

    /// Whether allocating `resource` should wait for (or fail for want of) its plugin.
    fn waits_for_plugin(&self, resource: &str, running: bool) -> bool {
        !running && !self.hub.plugin_ready(resource) && !self.config.registration_wait.is_zero()
    }

    /// Reserve the container's devices, aligned with `affinity` (the decision's part of
    /// upstream `Allocate`). On an error or [`Reserved::Asking`], nothing stays reserved
    /// for the container.
    pub(crate) fn reserve(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<Reserved, AllocateError> {
        let requests = self.state().container_device_requests(container);
        if !requests.is_empty() {
            self.update_allocated_devices();
        }
        let running = self.pods.already_running(pod, container);
        // Asked before the state lock is taken: the hub's lock comes first (see
        // `wait_for_plugins`).
        let waits: BTreeSet<&str> = requests
            .keys()
            .map(String::as_str)
            .filter(|resource| self.waits_for_plugin(resource, running))
            .collect();
        let mut state = self.state();
        state.save_reuse(&pod.uid);
        state.begin_pod(&pod.uid);
        let mut reserved: Vec<Reservation> = Vec::new();
        let mut asking = false;
        for (resource, needed) in &requests {
            let reusable = state
                .reusable_devices(&pod.uid)
                .and_then(|r| r.get(resource))
                .cloned();
            let request = AllocationRequest {
                pod_uid: &pod.uid,
                container: &container.name,
                resource,
                required: *needed,
                reusable: reusable.as_ref(),
                affinity,
                already_running: running,
            };
            let mut outcome = state.devices_to_allocate(&request, None);
            if let Ok(ToAllocate::AskPlugin(ask)) = &outcome {
                match state.answer_to(&pod.uid, &container.name, ask) {
                    Some((answer, exact)) => {
                        if !exact {
                            self.stale_answers.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(pod = %pod.uid, container = %container.name, resource,
                                asked = crate::MAX_QUESTIONS_PER_RESOURCE,
                                "the plugin's preferred allocation was for an earlier state each time it was asked; its last answer is taken");
                        }
                        outcome = state.devices_to_allocate(&request, Some(&answer));
                    }
                    None => {
                        state.put_question(&pod.uid, &container.name, ask.clone());
                        asking = true;
                        continue;
                    }
                }
            }
            let failed = match outcome {
                Ok(ToAllocate::Nothing) => continue,
                Ok(ToAllocate::Devices(reservation)) => {
                    reserved.push(reservation);
                    continue;
                }
                Ok(ToAllocate::AskPlugin(_)) => AllocateError::Shortfall {
                    required: *needed,
                    got: 0,
                },
                Err(
                    AllocateError::Unregistered { .. } | AllocateError::NoHealthyDevices { .. },
                ) if waits.contains(resource.as_str()) => AllocateError::PluginNotRegistered {
                    resource: resource.clone(),
                    pod_uid: pod.uid.clone(),
                    container: container.name.clone(),
                    waited: self.config.registration_wait,
                },
                Err(err) => err,
            };
            for reservation in &reserved {
                state.release(reservation);
            }
            tracing::warn!(pod = %pod.uid, container = %container.name, resource, err = %failed,
                "device allocation failed; everything taken for the container was given back");
            return Err(failed);
        }
        if asking {
            for reservation in &reserved {
                state.release(reservation);
            }
            return Ok(Reserved::Asking);
        }
        let mut granted = Grant::default();
        for reservation in reserved {
            tracing::debug!(resource = reservation.resource, pod = %pod.uid, container = %container.name,
                devices = %reservation.devices.join(","), "devices reserved");
            granted.merge(Grant::devices(&reservation.resource, &reservation.devices));
            state.hold(&pod.uid, &container.name, reservation);
        }
        state.finish_container(
            &pod.uid,
            &container.name,
            DeviceReuse::after(pod, &container.name),
        );
        Ok(Reserved::Done(Box::new(granted)))
    }

    /// Put the questions the pod's last decision noted to their plugins
    /// (`GetPreferredAllocation`) and keep the answers for its next decision. A deferred
    /// decision that noted no question is an error (so a caller's loop always ends).
    pub(crate) async fn ask_plugins(&self, pod_uid: &str) -> Result<(), AllocateError> {
        let questions = self.state().take_questions(pod_uid);
        if questions.is_empty() {
            return Err(AllocateError::NoQuestion {
                pod_uid: pod_uid.to_owned(),
            });
        }
        for (container, ask) in questions {
            let resource = ask.resource.clone();
            let client =
                self.hub
                    .client(&resource)
                    .ok_or_else(|| AllocateError::EndpointNotFound {
                        resource: resource.clone(),
                    })?;
            let answer = client.preferred_allocation(&ask).await.map_err(|err| {
                AllocateError::PreferredAllocation {
                    resource: resource.clone(),
                    message: err.full_message(),
                }
            })?;
            self.state().put_answer(pod_uid, &container, ask, answer);
        }
        Ok(())
    }

    /// Give the pod's reserved devices to their plugins' `Allocate`, container by
    /// container, commit the answers and checkpoint once. On any error, everything this
    /// call committed and everything still reserved for the pod is given back first.
    pub(crate) async fn realize(&self, pod_uid: &str) -> Result<(), DeviceManagerError> {
        let reserved = self.state().take_reserved(pod_uid);
        let mut committed: Vec<(&str, &str)> = Vec::new();
        let give_back = |committed: &[(&str, &str)], rest: &[(String, Reservation)]| {
            let mut state = self.state();
            for (container, resource) in committed {
                state.uncommit(pod_uid, container, resource);
            }
            for (_, reservation) in rest {
                state.release(reservation);
            }
        };
        for (i, (container, reservation)) in reserved.iter().enumerate() {
            match self.allocate_rpc(pod_uid, container, reservation).await {
                Ok(response) => {
                    self.state()
                        .commit(reservation, pod_uid, container, response);
                    tracing::info!(resource = reservation.resource, pod = pod_uid, container,
                        devices = %reservation.devices.join(","), "allocated devices");
                    committed.push((container, &reservation.resource));
                }
                Err(err) => {
                    give_back(&committed, &reserved[i..]);
                    if !committed.is_empty() {
                        self.checkpoints.write_or_log();
                    }
                    tracing::warn!(pod = pod_uid, container, resource = reservation.resource, %err,
                        "device allocation failed; everything taken for the pod was given back");
                    return Err(err.into());
                }
            }
        }
        if !committed.is_empty()
            && let Err(err) = self.checkpoints.write_async().await
        {
            give_back(&committed, &[]);
            self.checkpoints.write_or_log();
            return Err(err.into());
        }
        Ok(())
    }

    /// One plugin `Allocate` call for a reservation, timed for the observer.
    async fn allocate_rpc(
        &self,
        pod_uid: &str,
        container: &str,
        reservation: &Reservation,
    ) -> Result<ContainerAllocateResponse, AllocateError> {
        let resource = reservation.resource.as_str();
        let Some(client) = self.hub.client(resource) else {
            return Err(AllocateError::UnknownPlugin {
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
            Ok(Some(response)) => Ok(response),
            Ok(None) => Err(AllocateError::NoContainerResponse {
                resource: resource.to_owned(),
            }),
            Err(err) => Err(AllocateError::AllocateRpc {
                resource: resource.to_owned(),
                pod_uid: pod_uid.to_owned(),
                container: container.to_owned(),
                message: err.full_message(),
            }),
        }
    }

    /// Reserve, ask and realize one container, outside any decision (upstream `Allocate`
    /// for one container): the choice is redone with the plugins' answers until it needs
    /// no more of them (each question is put at most [`MAX_QUESTIONS_PER_RESOURCE`]
    /// times). On any error, everything taken for the container is given back.
    ///
    /// [`MAX_QUESTIONS_PER_RESOURCE`]: crate::MAX_QUESTIONS_PER_RESOURCE
    pub(crate) async fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<(), DeviceManagerError> {
        self.wait_for_plugins(pod, [container]).await;
        let done = async {
            while self.reserve(pod, container, affinity)? == Reserved::Asking {
                self.ask_plugins(&pod.uid).await?;
            }
            self.realize(&pod.uid).await
        }
        .await;
        self.state().end_admission(&pod.uid);
        done
    }
}
