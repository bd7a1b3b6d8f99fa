//! A pod admitted again with other resources: an in-place resize request
//! (`InPlacePodVerticalScaling`). The managers hold what the first admission decided, so a
//! resize they would have to follow is refused with upstream's reason; one they hold nothing
//! for is taken, and the pod's record follows it.
//!
//! v1.36 refuses to resize a Guaranteed pod while the CPU manager's static policy is on
//! (unless `InPlacePodVerticalScalingExclusiveCPUs`, alpha, which corral does not
//! implement) or the memory manager's static policy is (`canResizePod` in
//! `pkg/kubelet/allocation/allocation_manager.go`): `Infeasible`, never re-evaluated.

use corral_memmgr::MemoryPolicy;
use corral_topology::{Pod, QosClass};
use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::ResourceClaim as K8sResourceClaim;

use super::{Admission, AdmitError, AdmittedPod, Node, PodRecord};

/// `v1.PodReasonInfeasible`.
pub(crate) const INFEASIBLE: &str = "Infeasible";
/// Upstream's message for a Guaranteed pod under the static CPU manager policy.
pub(crate) const CPU_STATIC_INFEASIBLE: &str =
    "Resize is infeasible for Guaranteed Pods alongside CPU Manager static policy";
/// Upstream's message for a Guaranteed pod under the static memory manager policy.
pub(crate) const MEMORY_STATIC_INFEASIBLE: &str =
    "Resize is infeasible for Guaranteed Pods alongside Memory Manager static policy";

/// Whether `new` asks for other resources than `held`: pod-level, or of a container both
/// have (a container only one of them has is not a resize: the NRI front door admits a
/// pod container by container).
pub(super) fn resized(held: &Pod, new: &Pod) -> bool {
    held.resources != new.resources
        || new.all_containers().any(|(_, c)| {
            held.container(&c.name)
                .is_some_and(|before| before.resources != c.resources)
        })
}

impl Node {
    /// Upstream's refusal of a resize of `pod`, if any: a Guaranteed pod under a static
    /// CPU or memory manager policy.
    fn infeasible(&self, pod: &Pod) -> Option<&'static str> {
        if pod.qos_class() != QosClass::Guaranteed {
            None
        } else if self.cpu.policy_name() == "static" {
            Some(CPU_STATIC_INFEASIBLE)
        } else if self.memory().policy() == MemoryPolicy::Static {
            Some(MEMORY_STATIC_INFEASIBLE)
        } else {
            None
        }
    }

    /// Whether the runtime may apply `manifest` (a pod of the admitted pod's uid) to its
    /// containers: `Err` with upstream's message when the resize is infeasible. A pod
    /// corral does not hold, or no change, is fine.
    pub(crate) fn check_resize(
        &self,
        manifest: &K8sPod,
    ) -> Result<Result<(), &'static str>, AdmitError> {
        let pod = crate::manifest::pod_from_manifest(manifest, &self.limits)?;
        let Some(held) = self.pods.get(&pod.uid) else {
            return Ok(Ok(()));
        };
        if !resized(&held.pod, &pod) {
            return Ok(Ok(()));
        }
        Ok(self.infeasible(&held.pod).map_or(Ok(()), Err))
    }

    /// Upstream's refusal of any resize of the admitted pod `uid` (a Guaranteed pod under a
    /// static CPU or memory policy), as [`Node::check_resize`] refuses one; `None` when it
    /// may be resized or corral does not hold it. For a front door that sees that a pod is
    /// resized but not its containers' new resources (NRI's `UpdatePodSandbox`).
    pub(crate) fn pod_resize_refusal(&self, uid: &str) -> Option<&'static str> {
        let held = self.pods.get(uid)?;
        self.infeasible(&held.pod)
    }

    /// Answers an admission of the already admitted `held` pod as `pod`: `None` when
    /// nothing changed or the resize was taken (the record now holds `manifest`), else the
    /// refusal.
    pub(super) fn resize(
        &self,
        held: &AdmittedPod,
        pod: &Pod,
        manifest: &K8sPod,
        claims: &[K8sResourceClaim],
    ) -> Result<Option<Admission>, AdmitError> {
        if !resized(&held.pod, pod) {
            return Ok(None);
        }
        if let Some(message) = self.infeasible(pod) {
            tracing::info!(pod = super::pod_ref(pod), podUID = %pod.uid, detail = message, "resize refused");
            return Ok(Some(Admission::Rejected {
                reason: INFEASIBLE.to_owned(),
                message: message.to_owned(),
                explanation: None,
            }));
        }
        // Nothing was granted anew: the pod keeps what it holds, its containers their ids.
        let record = PodRecord {
            holdings: held.record.holdings.clone(),
            container_ids: held.record.container_ids.clone(),
            removed_containers: held.record.removed_containers.clone(),
            approximate: held.record.approximate,
            ..self.record_of(pod, manifest, claims, &Default::default())?
        };
        let resized = AdmittedPod {
            record,
            pod: pod.clone(),
        };
        self.pods
            .update(&pod.uid, |entry| *entry = Some(resized))
            .map_err(|err| err.context("persisting the resized pod"))?;
        tracing::info!(pod = super::pod_ref(pod), podUID = %pod.uid, "pod resized");
        Ok(None)
    }
}
