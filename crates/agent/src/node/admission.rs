//! Admitting and releasing pods: the kubelet's admission sequence made all-or-nothing, and
//! its undo. Decisions run under the node's decision lock on the blocking pool; device
//! plugins and DRA drivers answer outside it; one admission or release per pod at a time.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use corral_topology::Pod;
use corral_topology::topologymanager::{
    AllocationError, PodAdmitResult, UNEXPECTED_ADMISSION_ERROR,
};
use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;

use super::{
    Admission, AdmitError, AdmittedPod, Affinity, Holding, Node, PodRecord, dra_claim, pod_claims,
    pod_ref, restore_check,
};
use crate::manifest::pod_from_manifest;

/// Upstream's reason for a pod with pod-level resources while `PodLevelResources` is off.
const POD_LEVEL_RESOURCES_NOT_SUPPORTED: &str = "PodLevelResourcesNotSupported";

impl Node {
    /// Admit a pod: the kubelet's admission sequence, all-or-nothing. A pod already
    /// admitted (same uid) answers what it holds, or, asking for other resources, is a
    /// resize (see `resize`); a second admission of a pod whose
    /// admission is under way waits for it. Admissions of different pods run their
    /// decisions one at a time, but not while a device plugin or a DRA driver answers.
    ///
    /// The answer comes once what the admission wrote is durable (one journal commit).
    pub(crate) async fn admit(
        self: &Arc<Self>,
        manifest: K8sPod,
        claims: Vec<K8sResourceClaim>,
    ) -> Result<Admission, AdmitError> {
        let answer = self.admit_uncommitted(manifest, claims).await;
        self.commit().await?;
        answer
    }

    async fn admit_uncommitted(
        self: &Arc<Self>,
        mut manifest: K8sPod,
        claims: Vec<K8sResourceClaim>,
    ) -> Result<Admission, AdmitError> {
        let pod = pod_from_manifest(&manifest, &self.limits)?;
        manifest.metadata.uid = Some(pod.uid.clone());
        let dra_claims = claims
            .iter()
            .map(dra_claim)
            .collect::<Result<Vec<_>>>()
            .map_err(AdmitError::InvalidClaim)?;
        if pod.has_pod_level_resources() && !self.pod_level_resources {
            // Upstream `isPodLevelResourcesSupported` (lifecycle admission).
            return Ok(Admission::Rejected {
                reason: POD_LEVEL_RESOURCES_NOT_SUPPORTED.to_owned(),
                message: "PodLevelResources feature gate is disabled".to_owned(),
            });
        }
        let _pod_lock = self.pod_locks.lock(&pod.uid).await;
        if let Some(held) = self.pods.get(&pod.uid) {
            if let Some(refused) = self.resize(&held, &pod, &manifest, &claims)? {
                return Ok(refused);
            }
            return Ok(Admission::Admitted(self.view(&pod.uid)?));
        }
        let result = match self.decide(&pod, Undo::Pod).await {
            Ok(result) => result,
            Err(err) => {
                self.release_managers(&pod, false).await;
                return Err(anyhow!("the topology manager's admission panicked: {err}").into());
            }
        };
        approximate_note(&pod, None, &result);
        if !result.admit {
            // `decide` gave back what the managers took.
            tracing::info!(pod = pod_ref(&pod), podUID = %pod.uid, reason = %result.reason, detail = %result.message, "pod rejected");
            return Ok(Admission::Rejected {
                reason: result.reason,
                message: approximate_message(result.message, result.approximate),
            });
        }
        if !pod.resource_claims.is_empty() {
            let started = std::time::Instant::now();
            let prepared = match pod_claims(&pod) {
                Ok(claims) => self.dra.prepare_resources(&claims, &dra_claims).await,
                Err(err) => Err(*err),
            };
            self.observe_dra("PrepareResources", started, prepared.is_err());
            if let Err(err) = prepared {
                let err = crate::error_text::error_chain(&err);
                tracing::info!(pod = pod_ref(&pod), podUID = %pod.uid, err = %err, "preparing claims failed; pod rejected");
                self.release_managers(&pod, true).await;
                return Ok(Admission::Rejected {
                    reason: UNEXPECTED_ADMISSION_ERROR.to_owned(),
                    message: format!("Allocate failed due to {err}, which is unexpected"),
                });
            }
        }
        let record = match self.record_of(&pod, &manifest, &claims) {
            Ok(record) => PodRecord {
                approximate: result.approximate,
                ..record
            },
            Err(err) => {
                self.release_managers(&pod, true).await;
                return Err(err.into());
            }
        };
        let uid = pod.uid.clone();
        let admitted = AdmittedPod {
            record,
            pod: pod.clone(),
        };
        if let Err(err) = self.pods.update(&uid, |entry| *entry = Some(admitted)) {
            self.release_managers(&pod, true).await;
            return Err(err
                .context("persisting the admitted pod; the admission was undone")
                .into());
        }
        tracing::info!(pod = pod_ref(&pod), podUID = %uid, "pod admitted");
        Ok(Admission::Admitted(self.view(&uid)?))
    }

    /// Marks `pod` in flight and decides it: the topology manager's admission (hints,
    /// merge, allocation; the device manager only reserves) under the decision lock on the
    /// blocking pool, then, outside the lock, the device plugins' part. A decision the
    /// topology manager refused is given back (`undo`) before the lock is: no other
    /// decision ever sees a refused pod's holdings, so decisions are those of a serial
    /// order. A decision deferred for a plugin's preferred allocation is given back, the
    /// plugins are asked, and the pod is decided again (each question at most
    /// `MAX_QUESTIONS_PER_RESOURCE` times). An admitted decision is realized by the
    /// plugins' `Allocate`; if that fails, the decision is given back and the pod refused
    /// as upstream refuses a failed `Allocate`.
    pub(super) async fn decide(
        self: &Arc<Self>,
        pod: &Pod,
        undo: Undo,
    ) -> Result<PodAdmitResult, tokio::task::JoinError> {
        self.devices.wait_for_plugins(pod).await;
        let decided = self.decide_with_plugins(pod, undo).await;
        self.devices.end_admission(&pod.uid);
        decided
    }

    async fn decide_with_plugins(
        self: &Arc<Self>,
        pod: &Pod,
        undo: Undo,
    ) -> Result<PodAdmitResult, tokio::task::JoinError> {
        let result = loop {
            let result = self.decide_once(pod, undo).await?;
            if !result.deferred {
                break result;
            }
            if let Err(err) = self.devices.ask_plugins(&pod.uid).await {
                return Ok(self.devices_refused(err));
            }
        };
        if !result.admit {
            return Ok(result);
        }
        if let Err(err) = self.devices.realize(&pod.uid).await {
            self.give_back(pod, undo).await?;
            return Ok(self.devices_refused(err));
        }
        Ok(result)
    }

    /// One decision under the lock; a refused or deferred one is given back before the
    /// lock is.
    async fn decide_once(
        self: &Arc<Self>,
        pod: &Pod,
        undo: Undo,
    ) -> Result<PodAdmitResult, tokio::task::JoinError> {
        self.pods.begin_admitting(pod);
        let node = Arc::clone(self);
        let admitting = pod.clone();
        let decision = self.decisions.acquire().await;
        tokio::task::spawn_blocking(move || {
            let _decision = decision;
            let result = node.topology.admit(&admitting);
            if !result.admit {
                node.undo_decision(&admitting, undo);
            }
            result
        })
        .await
    }

    /// Give back an admitted decision whose plugins failed, under the decision lock.
    async fn give_back(
        self: &Arc<Self>,
        pod: &Pod,
        undo: Undo,
    ) -> Result<(), tokio::task::JoinError> {
        let node = Arc::clone(self);
        let pod = pod.clone();
        let decision = self.decisions.acquire().await;
        tokio::task::spawn_blocking(move || {
            let _decision = decision;
            node.undo_decision(&pod, undo);
        })
        .await
    }

    /// What a decision that does not stand gives back, with the decision lock held.
    fn undo_decision(&self, pod: &Pod, undo: Undo) {
        self.pods.end_admitting(&pod.uid);
        self.devices.cancel_reserved(&pod.uid);
        match undo {
            Undo::Pod => self.release_pod_from_managers(pod),
            Undo::Container => self.release_container_from_managers(pod),
        }
    }

    /// The rejection of a pod whose device plugins failed (upstream: an `Allocate` error
    /// in the topology manager's admission), counted as the topology manager counts it.
    fn devices_refused(&self, err: corral_devicemgr::DeviceManagerError) -> PodAdmitResult {
        self.topology
            .metrics()
            .admission_errors_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        PodAdmitResult::from_allocation_error(&AllocationError::unexpected(err))
    }

    /// What the pod's file records: its manifests, its containers' affinities and what the
    /// managers gave each container.
    pub(super) fn record_of(
        &self,
        pod: &Pod,
        manifest: &K8sPod,
        claims: &[K8sResourceClaim],
    ) -> Result<PodRecord> {
        let mut affinities = BTreeMap::new();
        let mut holdings = BTreeMap::new();
        for (kind, c) in pod.all_containers() {
            let hint = self.topology.affinity(&pod.uid, &c.name);
            let numa = hint.numa_affinity.map(|mask| self.os_numa_ids(mask));
            affinities.insert(
                c.name.clone(),
                Affinity {
                    numa,
                    preferred: hint.preferred,
                },
            );
            let holding = restore_check::holding_of(self, pod, kind, c);
            if holding != Holding::default() {
                holdings.insert(c.name.clone(), holding);
            }
        }
        Ok(PodRecord {
            pod: serde_json::to_value(manifest)?,
            claims: claims
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<_, _>>()?,
            container_ids: BTreeMap::new(),
            affinities,
            holdings: Some(holdings),
            removed_containers: Default::default(),
            approximate: false,
        })
    }

    /// Release whatever the managers hold for `pod` (no longer admitted nor being
    /// admitted): CPU assignments of pods neither admitted nor being admitted, the pod's
    /// affinities, its devices, and (with `claims`) its prepared claims. The managers'
    /// part runs under the decision lock; DRA drivers are called outside it.
    async fn release_managers(self: &Arc<Self>, pod: &Pod, claims: bool) {
        self.pods.end_admitting(&pod.uid);
        let pod_uid = pod.uid.as_str();
        let node = Arc::clone(self);
        let releasing = pod.clone();
        let decision = self.decisions.acquire().await;
        let released = tokio::task::spawn_blocking(move || {
            let _decision = decision;
            node.release_pod_from_managers(&releasing);
        })
        .await;
        if let Err(err) = released {
            tracing::error!(pod = pod_ref(pod), podUID = pod_uid, err = %err, "releasing the pod panicked");
        }
        if claims
            && (!pod.resource_claims.is_empty()
                || self.dra.pod_might_need_to_unprepare_resources(pod_uid))
        {
            let started = std::time::Instant::now();
            let unprepared = self.dra.unprepare_resources(pod_uid).await;
            self.observe_dra("UnprepareResources", started, unprepared.is_err());
            if let Err(err) = unprepared {
                tracing::error!(pod = pod_ref(pod), podUID = pod_uid, err = %err, "unpreparing claims failed");
            }
        }
    }

    /// The managers' part of a release, with the decision lock held (`pod` is neither
    /// admitted nor being admitted): CPU and memory assignments of pods neither admitted
    /// nor being admitted, the pod's affinities, and its devices (only when it holds some,
    /// so the device checkpoint is not rewritten for pods that never touched it).
    fn release_pod_from_managers(&self, pod: &Pod) {
        let uid = pod.uid.as_str();
        let holds_devices = pod
            .all_containers()
            .any(|(_, c)| !self.devices.container_devices(uid, &c.name).is_empty());
        let active = corral_cpumgr::PodSource::active_pods(self.pods.as_ref());
        if let Err(err) = self.cpu.remove_stale_state(&active, None) {
            tracing::error!(pod = pod_ref(pod), podUID = uid, err = %err, "releasing CPUs failed");
        }
        if let Err(err) = self.memory.remove_stale_state(&active) {
            tracing::error!(pod = pod_ref(pod), podUID = uid, err = %err, "releasing memory failed");
        }
        self.topology.store().remove_pod(uid);
        if holds_devices && let Err(err) = self.devices.remove_pod(uid) {
            tracing::error!(pod = pod_ref(pod), podUID = uid, err = %err, "releasing devices failed");
        }
    }

    fn observe_dra(&self, operation: &str, started: std::time::Instant, error: bool) {
        self.dra_durations.observe(
            &[operation, if error { "true" } else { "false" }],
            started.elapsed().as_secs_f64(),
        );
    }

    /// Release everything `pod_uid` holds; `false` when the pod was not admitted. The
    /// answer comes once the release is durable.
    pub(crate) async fn release(self: &Arc<Self>, pod_uid: &str) -> Result<bool> {
        let released = self.release_uncommitted(pod_uid).await;
        self.commit().await?;
        released
    }

    async fn release_uncommitted(self: &Arc<Self>, pod_uid: &str) -> Result<bool> {
        let _pod_lock = self.pod_locks.lock(pod_uid).await;
        let removed = self.pods.update(pod_uid, Option::take)?;
        let known = removed.is_some();
        let pod = removed.map(|p| p.pod).unwrap_or_else(|| Pod {
            uid: pod_uid.to_owned(),
            ..Pod::default()
        });
        self.release_managers(&pod, true).await;
        if let Some(devices) = &self.kubelet_devices {
            devices.remove_pod(pod_uid);
        }
        if known {
            tracing::info!(pod = pod_ref(&pod), podUID = pod_uid, "pod released");
        }
        Ok(known)
    }

    /// Release every admitted pod not in `active`; returns their uids.
    pub(crate) async fn sync_active(self: &Arc<Self>, active: &[String]) -> Result<Vec<String>> {
        let stale: Vec<String> = self
            .pods
            .uids()
            .into_iter()
            .filter(|uid| !active.contains(uid))
            .collect();
        for uid in &stale {
            self.release(uid).await?;
        }
        Ok(stale)
    }
}

/// What a decision's search budget running out adds to a rejection's message (upstream's
/// message stays its start).
pub(super) fn approximate_message(message: String, approximate: bool) -> String {
    if approximate {
        format!("{message} (approximate: the decision ran out of its search budget)")
    } else {
        message
    }
}

/// The log line of a decision that ran out of its search budget (`container`: a
/// container admitted on its own).
pub(super) fn approximate_note(pod: &Pod, container: Option<&str>, result: &PodAdmitResult) {
    if result.approximate {
        tracing::warn!(
            pod = pod_ref(pod),
            podUID = %pod.uid,
            container = container.unwrap_or(""),
            admitted = result.admit,
            steps = corral_topology::topologymanager::DECISION_STEPS,
            "the decision ran out of its search budget: its NUMA affinities or CPU choice are the best found, not proven to be upstream's"
        );
    }
}

/// What a decision the topology manager refused gives back before the decision lock is
/// released (see `Node::decide`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Undo {
    /// The whole pod (an admission of a pod).
    Pod,
    /// The pod's new container only; its admitted pod keeps what it holds (NRI).
    Container,
}
