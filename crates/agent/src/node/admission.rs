//! Admitting and releasing pods: the kubelet's admission sequence made all-or-nothing, and
//! its undo. Decisions run under the node's decision lock on the blocking pool; device
//! plugins and DRA drivers answer outside it; one admission or release per pod at a time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::{Result, anyhow};
use corral_topology::Pod;
use corral_topology::topologymanager::{PodAdmitResult, PodGrants, UNEXPECTED_ADMISSION_ERROR};
use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::{ResourceClaim as K8sResourceClaim, ResourceSlice};

use super::decision::Undo;
use super::dra_devices::DeviceHints;
use super::{
    Admission, AdmitError, AdmittedPod, Affinity, Holding, Node, PodRecord, dra_claim, pod_claims,
    pod_ref,
};
use crate::manifest::pod_from_manifest;

/// Upstream's reason for a pod with pod-level resources while `PodLevelResources` is off.
const POD_LEVEL_RESOURCES_NOT_SUPPORTED: &str = "PodLevelResourcesNotSupported";

impl Node {
    /// [`admit_with_slices`](Self::admit_with_slices) without ResourceSlices (tests).
    #[cfg(test)]
    pub(crate) async fn admit(
        self: &Arc<Self>,
        manifest: K8sPod,
        claims: Vec<K8sResourceClaim>,
    ) -> Result<Admission, AdmitError> {
        self.admit_with_slices(manifest, claims, Vec::new()).await
    }

    /// Admit a pod: the kubelet's admission sequence, all-or-nothing. A pod already
    /// admitted (same uid) answers what it holds, or, asking for other resources, is a
    /// resize (see `resize`); a second admission of a pod whose
    /// admission is under way waits for it. Admissions of different pods run their
    /// decisions one at a time, but not while a device plugin or a DRA driver answers.
    /// `slices` are the ResourceSlices that place the claims' devices on NUMA nodes: such
    /// devices steer the pod's CPUs and memory (`dra_devices`).
    ///
    /// The answer comes once what the admission wrote is durable (one journal commit).
    /// The admission runs to its end in a task of its own, also when the caller stops
    /// waiting: a decision is never cut between its reservation and its plugins' answer,
    /// its undo or its commit.
    pub(crate) async fn admit_with_slices(
        self: &Arc<Self>,
        manifest: K8sPod,
        claims: Vec<K8sResourceClaim>,
        slices: Vec<ResourceSlice>,
    ) -> Result<Admission, AdmitError> {
        let node = Arc::clone(self);
        tokio::spawn(async move {
            let answer = node.admit_uncommitted(manifest, claims, &slices).await;
            node.commit().await?;
            answer
        })
        .await
        .unwrap_or_else(|err| Err(anyhow!("the admission task failed: {err}").into()))
    }

    pub(super) async fn admit_uncommitted(
        self: &Arc<Self>,
        mut manifest: K8sPod,
        claims: Vec<K8sResourceClaim>,
        slices: &[ResourceSlice],
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
                explanation: None,
            });
        }
        let _pod_lock = self.pod_locks.lock(&pod.uid).await;
        let _device_hints = DeviceHints::give(&self.dra_devices, &pod, &claims, slices);
        if let Some(held) = self.pods.get(&pod.uid) {
            if let Some(refused) = self.resize(&held, &pod, &manifest, &claims)? {
                return Ok(refused);
            }
            return Ok(Admission::Admitted(self.settled_view(&pod.uid).await?));
        }
        let pod_level = self.pod_level_managed && pod.has_pod_level_resources();
        let cpu_refusals = self
            .cpu
            .metrics()
            .pinning_errors_total
            .load(Ordering::Relaxed);
        let (result, explanation) = match self.decide(&pod, Undo::Pod).await {
            Ok(verdict) => verdict,
            Err(err) => {
                self.release_managers(&pod).await;
                return Err(anyhow!("the topology manager's admission panicked: {err}").into());
            }
        };
        approximate_note(&pod, None, &result);
        if self
            .cpu
            .metrics()
            .pinning_errors_total
            .load(Ordering::Relaxed)
            > cpu_refusals
        {
            self.resource_metrics.cpu_refused(pod_level);
        }
        if !result.admit {
            // `decide` gave back what the managers took.
            let why = explanation.as_ref().map(ToString::to_string);
            tracing::info!(pod = pod_ref(&pod), podUID = %pod.uid, reason = %result.reason, detail = %result.message, explanation = why, "pod rejected");
            return Ok(Admission::Rejected {
                reason: result.reason,
                message: approximate_message(result.message, result.approximate),
                explanation,
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
                self.release_pod(&pod).await;
                return Ok(Admission::Rejected {
                    reason: UNEXPECTED_ADMISSION_ERROR.to_owned(),
                    message: format!("Allocate failed due to {err}, which is unexpected"),
                    explanation: None,
                });
            }
        }
        let record = match self.record_of(&pod, &manifest, &claims, &result.grants) {
            Ok(record) => PodRecord {
                approximate: result.approximate,
                ..record
            },
            Err(err) => {
                self.release_pod(&pod).await;
                return Err(err.into());
            }
        };
        let uid = pod.uid.clone();
        let admitted = AdmittedPod {
            record,
            pod: pod.clone(),
        };
        if let Err(err) = self.pods.update(&uid, |entry| *entry = Some(admitted)) {
            self.release_pod(&pod).await;
            return Err(err
                .context("persisting the admitted pod; the admission was undone")
                .into());
        }
        self.resource_metrics
            .admitted(&pod, &result.grants, pod_level);
        tracing::info!(pod = pod_ref(&pod), podUID = %uid, "pod admitted");
        Ok(Admission::Admitted(self.settled_view(&uid).await?))
    }

    /// What the pod's file records: its manifests, its containers' affinities and what the
    /// managers gave each container (`grants`, as the decision answered them).
    pub(super) fn record_of(
        &self,
        pod: &Pod,
        manifest: &K8sPod,
        claims: &[K8sResourceClaim],
        grants: &PodGrants,
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
            let holding = grants
                .get(&c.name)
                .map(|grant| Holding::granted(kind, grant))
                .unwrap_or_default();
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

    /// Release everything `pod` (no longer admitted nor being admitted) holds: what the
    /// managers gave its containers (see [`Self::release_managers`]) and its prepared
    /// claims, the drivers called outside the decision lock.
    async fn release_pod(self: &Arc<Self>, pod: &Pod) {
        self.release_managers(pod).await;
        self.unprepare_claims(pod).await;
    }

    /// Release what the managers gave `pod`'s containers (no longer admitted nor being
    /// admitted), its affinities and its devices, under the decision lock.
    async fn release_managers(self: &Arc<Self>, pod: &Pod) {
        self.pods.end_admitting(&pod.uid);
        let pod_uid = pod.uid.as_str();
        let releasing = pod.clone();
        let released = self
            .with_decision_lock(move |node| node.release_pod_from_managers(&releasing))
            .await;
        if let Err(err) = released {
            tracing::error!(pod = pod_ref(pod), podUID = pod_uid, err = %err, "releasing the pod panicked");
        }
    }

    /// Unprepare `pod`'s claims, if it may have any prepared (errors are logged).
    async fn unprepare_claims(&self, pod: &Pod) {
        let pod_uid = pod.uid.as_str();
        if !pod.resource_claims.is_empty()
            || self.dra.pod_might_need_to_unprepare_resources(pod_uid)
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
    /// admitted nor being admitted): exactly what its containers hold — CPUs, memory,
    /// affinities, and devices (only when it holds some, so the device checkpoint is not
    /// rewritten for pods that never touched it).
    pub(super) fn release_pod_from_managers(&self, pod: &Pod) {
        let uid = pod.uid.as_str();
        let holds_devices = pod
            .all_containers()
            .any(|(_, c)| !self.devices.container_devices(uid, &c.name).is_empty());
        self.release_containers_from_managers(pod);
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
        let (node, uid) = (Arc::clone(self), pod_uid.to_owned());
        // To its end, as an admission.
        tokio::spawn(async move {
            let released = node.release_uncommitted(&uid).await;
            node.commit().await?;
            released
        })
        .await
        .unwrap_or_else(|err| Err(anyhow!("the release task failed: {err}")))
    }

    async fn release_uncommitted(self: &Arc<Self>, pod_uid: &str) -> Result<bool> {
        let _pod_lock = self.pod_locks.lock(pod_uid).await;
        let removed = self.pods.update(pod_uid, Option::take)?;
        let known = removed.is_some();
        let pod = removed.map(|p| p.pod).unwrap_or_else(|| Pod {
            uid: pod_uid.to_owned(),
            ..Pod::default()
        });
        self.release_pod(&pod).await;
        if let Some(devices) = &self.kubelet_devices {
            devices.remove_pod(pod_uid);
        }
        if known {
            tracing::info!(pod = pod_ref(&pod), podUID = pod_uid, "pod released");
        }
        Ok(known)
    }

    /// Release every admitted pod not in `active`; returns their uids once the releases
    /// are durable (one commit for all of them).
    pub(crate) async fn sync_active(self: &Arc<Self>, active: &[String]) -> Result<Vec<String>> {
        let released = self.sync_active_uncommitted(active).await?;
        self.commit().await?;
        Ok(released)
    }

    /// [`Self::sync_active`] without its commit (each release runs to its end in a task of
    /// its own, as [`Self::release`]).
    pub(crate) async fn sync_active_uncommitted(
        self: &Arc<Self>,
        active: &[String],
    ) -> Result<Vec<String>> {
        let stale: Vec<String> = self
            .pods
            .uids()
            .into_iter()
            .filter(|uid| !active.contains(uid))
            .collect();
        for uid in &stale {
            let (node, uid) = (Arc::clone(self), uid.clone());
            tokio::spawn(async move { node.release_uncommitted(&uid).await })
                .await
                .unwrap_or_else(|err| Err(anyhow!("the release task failed: {err}")))?;
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
