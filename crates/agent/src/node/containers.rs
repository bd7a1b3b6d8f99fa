//! Admitting a pod one container at a time, for front doors that see containers as they
//! are created (NRI) rather than whole pods (the admission API, the kubelet): the first
//! container admits the pod as [`Node::admit_with_slices`] does; each later one runs the same topology
//! admission on the pod as it stands now, a pod of that container alone, and joins the
//! admitted pod. A rejected container leaves the pod and every other container as they
//! were.

use std::sync::Arc;

use anyhow::anyhow;
use corral_topology::Pod;
use corral_topology::topologymanager::PodAdmitResult;
use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::container_events::StartedContainer;
use super::{Admission, AdmitError, Node, pod_ref};
use crate::manifest::pod_from_manifest;

impl Node {
    /// Admits the one container of `manifest` (a pod manifest with exactly one container)
    /// into its pod: the pod is admitted with it when new; a container the pod already
    /// holds answers what it holds. The answer comes once it is durable.
    #[cfg(test)]
    pub(crate) async fn admit_container(
        self: &Arc<Self>,
        manifest: K8sPod,
    ) -> Result<Admission, AdmitError> {
        let answer = self.admit_container_started(manifest, None).await;
        self.commit().await?;
        answer
    }

    /// Admits the one container of `manifest` (a pod manifest with exactly one container)
    /// into its pod — the pod with it when new; a container the pod already holds answers
    /// what it holds — and once admitted records it as started with `started`'s id ([`Self::container_started`]),
    /// without the commit: the caller's (one per NRI event, however many containers it
    /// admits), or the journal flusher's within its interval. Runs to its end in a task of
    /// its own, as an admission.
    pub(crate) async fn admit_container_started(
        self: &Arc<Self>,
        manifest: K8sPod,
        started: Option<StartedContainer>,
    ) -> Result<Admission, AdmitError> {
        let node = Arc::clone(self);
        tokio::spawn(async move {
            let answer = node.admit_container_uncommitted(manifest).await;
            if let (Ok(Admission::Admitted(_)), Some(c)) = (&answer, started) {
                node.container_started_uncommitted(&c.pod_uid, &c.name, &c.id)
                    .await?;
            }
            answer
        })
        .await
        .unwrap_or_else(|err| Err(anyhow!("the admission task failed: {err}").into()))
    }

    async fn admit_container_uncommitted(
        self: &Arc<Self>,
        manifest: K8sPod,
    ) -> Result<Admission, AdmitError> {
        let pod = pod_from_manifest(&manifest, &self.limits)?;
        let [container] = pod.containers.as_slice() else {
            return Err(anyhow!("admit_container takes a pod of one container").into());
        };
        let name = container.name.clone();
        if self.pods.get(&pod.uid).is_none() {
            let admitted = self
                .admit_uncommitted(manifest.clone(), Vec::new(), &[])
                .await?;
            // Another container of the pod may have admitted it first.
            match &admitted {
                Admission::Admitted(view) if !view.has_container(&name) => {}
                _ => return Ok(admitted),
            }
        }
        let _pod_lock = self.pod_locks.lock(&pod.uid).await;
        let Some(admitted) = self.pods.get(&pod.uid) else {
            return Err(anyhow!(
                "pod {} was released while its container was admitted",
                pod.uid
            )
            .into());
        };
        if admitted.pod.container(&name).is_some() {
            if !admitted.record.removed_containers.contains(&name) {
                return Ok(Admission::Admitted(self.settled_view(&pod.uid).await?));
            }
            // What it held went back (its pod's sandbox stopped, and the runtime creates
            // it again): it is admitted again, as a container joining the pod.
            self.forget_container(&pod.uid, &name)?;
        }
        self.release_finished_containers(&pod.uid).await?;
        let (result, explanation) = match self.decide(&pod, super::decision::Undo::Container).await
        {
            Ok(verdict) => verdict,
            Err(err) => {
                self.release_container(&pod).await;
                return Err(anyhow!("the topology manager's admission panicked: {err}").into());
            }
        };
        super::admission::approximate_note(&pod, Some(&name), &result);
        if !result.admit {
            // `decide` gave back what the managers took for the container.
            let why = explanation.as_ref().map(ToString::to_string);
            tracing::info!(pod = pod_ref(&pod), podUID = %pod.uid, container = %name, reason = %result.reason, detail = %result.message, explanation = why, "container rejected");
            return Ok(Admission::Rejected {
                reason: result.reason,
                message: super::admission::approximate_message(result.message, result.approximate),
                explanation,
            });
        }
        if let Err(err) = self.join(&pod, &manifest, &result) {
            self.release_container(&pod).await;
            return Err(err
                .context("persisting the admitted container; its admission was undone")
                .into());
        }
        tracing::info!(pod = pod_ref(&pod), podUID = %pod.uid, container = %name, "container admitted");
        Ok(Admission::Admitted(self.settled_view(&pod.uid).await?))
    }

    /// Before a container new to pod `uid` joins it: the pod's stopped containers give back
    /// what they hold. The kubelet creates a pod's app containers only once every init
    /// container ran, and never creates an init container again while the pod runs, so a
    /// container stopped when a new one comes is an init container that finished (NRI does
    /// not say which containers are init containers): its CPUs and memory are free for the
    /// new one, as the kubelet reuses an init container's CPUs. (An app container that
    /// stopped while its pod's containers were still being created gives back too, and is
    /// admitted again when the runtime creates it again.)
    async fn release_finished_containers(self: &Arc<Self>, uid: &str) -> anyhow::Result<()> {
        let Some(admitted) = self.pods.get(uid) else {
            return Ok(());
        };
        let stopped: Vec<String> = admitted
            .record
            .container_ids
            .values()
            .filter(|id| self.pods.is_stopped(id))
            .cloned()
            .collect();
        if stopped.is_empty() {
            return Ok(());
        }
        self.with_decision_lock(move |node| {
            stopped
                .iter()
                .try_for_each(|id| node.container_removed_now(id))
        })
        .await
        .map_err(|err| anyhow!("the release task failed: {err}"))?
    }

    /// Drops container `name`, which holds nothing any more, from the admitted pod `uid`
    /// (its manifest, affinity, holdings), on disk first.
    fn forget_container(&self, uid: &str, name: &str) -> anyhow::Result<()> {
        self.pods.update(uid, |entry| {
            let Some(admitted) = entry else {
                return Err(anyhow!("pod {uid} is no longer admitted"));
            };
            let record = &mut admitted.record;
            if let Some(containers) = record.pod["spec"]["containers"].as_array_mut() {
                containers.retain(|c| c["name"].as_str() != Some(name));
            }
            record.affinities.remove(name);
            if let Some(holdings) = record.holdings.as_mut() {
                holdings.remove(name);
            }
            record.removed_containers.remove(name);
            record.container_ids.remove(name);
            admitted.pod.containers.retain(|c| c.name != name);
            Ok(())
        })?
    }

    /// Adds the admitted one-container `pod` to the admitted pod of its uid, on disk first,
    /// with what `decided` granted it.
    fn join(&self, pod: &Pod, manifest: &K8sPod, decided: &PodAdmitResult) -> anyhow::Result<()> {
        #[cfg(test)]
        if self
            .fail_next_join
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(anyhow!("injected: the record could not be written"));
        }
        let addition = self.record_of(pod, manifest, &[], &decided.grants)?;
        let approximate = decided.approximate;
        let added = pod.containers.clone();
        self.pods.update(&pod.uid, |entry| {
            let Some(admitted) = entry else {
                return Err(anyhow!("pod {} is no longer admitted", pod.uid));
            };
            let record = &mut admitted.record;
            let containers = record.pod["spec"]["containers"]
                .as_array_mut()
                .ok_or_else(|| anyhow!("the record of pod {} has no containers", pod.uid))?;
            containers.extend(
                addition.pod["spec"]["containers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            );
            record.affinities.extend(addition.affinities);
            record.approximate |= approximate;
            let holdings = record.holdings.get_or_insert_with(Default::default);
            holdings.extend(addition.holdings.unwrap_or_default());
            admitted.pod.containers.extend(added);
            Ok(())
        })?
    }

    /// Gives back what the managers took for the one-container `pod` that was not
    /// admitted; the rest of its pod keeps what it holds.
    async fn release_container(self: &Arc<Self>, pod: &Pod) {
        self.pods.end_admitting(&pod.uid);
        let releasing = pod.clone();
        let released = self
            .with_decision_lock(move |node| {
                node.release_containers_from_managers(&releasing);
                // Devices too: the decision realized them before the join failed.
                for container in &releasing.containers {
                    let (uid, name) = (&releasing.uid, &container.name);
                    if let Err(err) = node.devices.remove_container(uid, name) {
                        tracing::error!(pod = pod_ref(&releasing), podUID = %uid, container = %name, err = %err, "releasing devices failed");
                    }
                }
            })
            .await;
        if let Err(err) = released {
            tracing::error!(pod = pod_ref(pod), podUID = %pod.uid, err = %err, "releasing the container panicked");
        }
    }

    /// With the decision lock held: the CPUs and memory the containers of `pod` (a whole
    /// pod, or the one container of [`Self::release_container`]) hold, exactly, and
    /// nothing of its other containers.
    pub(super) fn release_containers_from_managers(&self, pod: &Pod) {
        if let Err(err) = self.memory.remove_pod_containers(pod) {
            tracing::error!(pod = pod_ref(pod), podUID = %pod.uid, err = %err, "releasing memory failed");
        }
        if let Err(err) = self.cpu.remove_pod_containers(pod) {
            tracing::error!(pod = pod_ref(pod), podUID = %pod.uid, err = %err, "releasing CPUs failed");
        }
    }
}
