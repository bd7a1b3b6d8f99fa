//! `admit --dry-run`: what an admission would answer — the allocation, or the refusal and
//! its explanation — changing nothing. The decision is the real one, taken under the
//! decision lock like any other, with the CPU and memory managers in a trial (nothing
//! written, nothing counted) and the topology manager counting nowhere; before the lock is
//! let go it is given back exactly (the managers as the trial found them, the device
//! reservations cancelled, the affinities removed). Device plugins may be asked for their
//! preferred allocation (a question, as a real admission asks it), never to `Allocate`;
//! DRA claims are not prepared; nothing reaches the journal, a checkpoint, a pod record,
//! the NodeResourceTopology or a metric.

use std::sync::Arc;

use anyhow::{Result, anyhow};
use corral_topology::Pod;
use corral_topology::topologymanager::PodAdmitResult;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::{ResourceClaim as K8sResourceClaim, ResourceSlice};

use super::admission::approximate_message;
use super::decision::Undo;
use super::dra_devices::DeviceHints;
use super::explain::Explanation;
use super::{Admission, AdmitError, AdmittedPod, Node, dra_claim};
use crate::manifest::pod_from_manifest;

/// What a dry run's refused answer says of a pod already admitted with other resources.
const DRY_RUN_OF_A_RESIZE: &str = "DryRunOfResize";

/// A trial under way: dropped, it gives the decision back and ends the managers' trials.
struct Trial<'a> {
    node: &'a Node,
    pod: &'a Pod,
    cpu: Option<corral_cpumgr::CpuTrial>,
    memory: Option<corral_memmgr::MemorySnapshot>,
}

impl Drop for Trial<'_> {
    fn drop(&mut self) {
        self.node.undo_decision(self.pod, Undo::Pod);
        if let Some(cpu) = self.cpu.take() {
            self.node.cpu.end_trial(cpu);
        }
        if let Some(memory) = self.memory.take() {
            self.node.memory.end_trial(memory);
        }
    }
}

/// One tried decision.
enum Tried {
    /// A provider needs an answer from a device plugin first.
    Deferred,
    /// The answer.
    Answered(Admission),
}

impl Node {
    /// What admitting `manifest` would answer now, changing nothing (see the module doc).
    /// A pod already admitted answers what it holds, as an admission does; one asking for
    /// other resources (a resize) is not tried.
    pub(crate) async fn admit_dry_run(
        self: &Arc<Self>,
        manifest: K8sPod,
        claims: Vec<K8sResourceClaim>,
        slices: Vec<ResourceSlice>,
    ) -> Result<Admission, AdmitError> {
        let node = Arc::clone(self);
        // To its end, as an admission: a device question is never left half asked.
        tokio::spawn(async move { node.dry_run(manifest, claims, slices).await })
            .await
            .unwrap_or_else(|err| Err(anyhow!("the dry run task failed: {err}").into()))
    }

    async fn dry_run(
        self: &Arc<Self>,
        mut manifest: K8sPod,
        claims: Vec<K8sResourceClaim>,
        slices: Vec<ResourceSlice>,
    ) -> Result<Admission, AdmitError> {
        let pod = pod_from_manifest(&manifest, &self.limits)?;
        manifest.metadata.uid = Some(pod.uid.clone());
        claims
            .iter()
            .map(dra_claim)
            .collect::<Result<Vec<_>>>()
            .map_err(AdmitError::InvalidClaim)?;
        if pod.has_pod_level_resources() && !self.pod_level_resources {
            return Ok(Admission::Rejected {
                reason: "PodLevelResourcesNotSupported".to_owned(),
                message: "PodLevelResources feature gate is disabled".to_owned(),
                explanation: None,
            });
        }
        let _pod_lock = self.pod_locks.lock(&pod.uid).await;
        if let Some(held) = self.pods.get(&pod.uid) {
            if super::resize::resized(&held.pod, &pod) {
                return Ok(Admission::Rejected {
                    reason: DRY_RUN_OF_A_RESIZE.to_owned(),
                    message: format!(
                        "pod {} is admitted and asks for other resources now: a dry run does not try a resize",
                        pod.uid
                    ),
                    explanation: None,
                });
            }
            return Ok(Admission::Admitted(self.settled_view(&pod.uid).await?));
        }
        let _device_hints = DeviceHints::give(&self.dra_devices, &pod, &claims, &slices);
        self.devices.wait_for_plugins(&pod).await;
        let answer = self.tried(&pod, &manifest, &claims).await;
        self.devices.end_admission(&pod.uid);
        answer
    }

    async fn tried(
        self: &Arc<Self>,
        pod: &Pod,
        manifest: &K8sPod,
        claims: &[K8sResourceClaim],
    ) -> Result<Admission, AdmitError> {
        loop {
            let (trying, manifest, claims) = (pod.clone(), manifest.clone(), claims.to_vec());
            let tried = self
                .with_decision_lock(move |node| node.try_decision(&trying, &manifest, &claims))
                .await
                .map_err(|err| anyhow!("the topology manager's dry run panicked: {err}"))?;
            match tried? {
                Tried::Answered(answer) => return Ok(answer),
                Tried::Deferred => {
                    if let Err(err) = self.devices.ask_plugins(&pod.uid).await {
                        return Ok(Admission::Rejected {
                            reason: corral_topology::topologymanager::UNEXPECTED_ADMISSION_ERROR
                                .to_owned(),
                            message: format!(
                                "Allocate failed due to {}, which is unexpected",
                                crate::error_text::error_chain(&err)
                            ),
                            explanation: None,
                        });
                    }
                }
            }
        }
    }

    /// One decision in a trial, with the decision lock held, given back before it is let
    /// go: the managers end as they began.
    fn try_decision(
        &self,
        pod: &Pod,
        manifest: &K8sPod,
        claims: &[K8sResourceClaim],
    ) -> Result<Tried> {
        self.pods.begin_admitting(pod);
        // Given back when dropped, a panic's unwinding included: a trial left open would
        // leave the managers writing and counting nothing for every later decision.
        let trial = Trial {
            node: self,
            pod,
            cpu: Some(self.cpu.begin_trial()),
            memory: Some(self.memory.begin_trial()),
        };
        let result = self.topology.admit_uncounted(pod);
        let answer = self.answer_of(pod, manifest, claims, &result);
        #[cfg(test)]
        super::settled::pause::point(&pod.uid);
        drop(trial);
        if result.deferred {
            return Ok(Tried::Deferred);
        }
        answer.map(Tried::Answered)
    }

    /// The answer of a tried decision, before it is given back: the view of what it
    /// granted (devices as reserved, no plugin's `Allocate` answer, no claim prepared), or
    /// the refusal and why.
    fn answer_of(
        &self,
        pod: &Pod,
        manifest: &K8sPod,
        claims: &[K8sResourceClaim],
        result: &PodAdmitResult,
    ) -> Result<Admission> {
        if !result.admit {
            let explanation = match &result.rejected_hints {
                Some(hints) if !result.deferred => {
                    Some(Box::new(self.explain(pod, hints)) as Box<Explanation>)
                }
                _ => None,
            };
            return Ok(Admission::Rejected {
                reason: result.reason.clone(),
                message: approximate_message(result.message.clone(), result.approximate),
                explanation,
            });
        }
        let mut record = self.record_of(pod, manifest, claims, &result.grants)?;
        record.approximate = result.approximate;
        let tried = AdmittedPod {
            record,
            pod: pod.clone(),
        };
        let mut view = super::view::pod_view(self, &tried);
        for container in &mut view.containers {
            let Some(grant) = result.grants.get(&container.name) else {
                continue;
            };
            for (resource, ids) in &grant.devices {
                // Reserved, not yet allocated: no NUMA node known here (`-1`).
                container
                    .devices
                    .entry(resource.clone())
                    .or_insert_with(|| [(-1, ids.iter().cloned().collect())].into());
            }
        }
        Ok(Admission::Admitted(view))
    }
}
