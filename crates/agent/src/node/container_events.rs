//! Container starts and removals: what the managers hold for a container changes under
//! the decision lock (every change of the managers' state is serialized with the
//! decisions) and after any admission of its pod under way (the pod's lock), and the
//! answer comes once it is durable.

use std::sync::Arc;

use anyhow::{Context, Result, anyhow};

use super::Node;

/// A container a runtime created: its pod, its name and the runtime's id for it.
#[derive(Debug, Clone)]
pub(crate) struct StartedContainer {
    /// The pod's uid.
    pub(crate) pod_uid: String,
    /// The container's name in the pod.
    pub(crate) name: String,
    /// The runtime's container id.
    pub(crate) id: String,
}

impl Node {
    /// A container of an admitted pod started with `container_id`. The managers' part runs
    /// under the decision lock (every change of the managers' state is serialized with the
    /// decisions); the answer comes once it is durable (nothing to commit: no write).
    pub(crate) async fn container_started(
        self: &Arc<Self>,
        pod_uid: &str,
        name: &str,
        container_id: &str,
    ) -> Result<()> {
        self.container_started_uncommitted(pod_uid, name, container_id)
            .await?;
        self.commit().await
    }

    /// [`Self::container_started`] without its commit.
    pub(super) async fn container_started_uncommitted(
        self: &Arc<Self>,
        pod_uid: &str,
        name: &str,
        container_id: &str,
    ) -> Result<()> {
        // After any admission of the pod under way (a container joining it is marked in
        // flight until it joins; the pod's record changes only then).
        let _pod_lock = self.pod_locks.lock(pod_uid).await;
        let (pod_uid, name, container_id) =
            (pod_uid.to_owned(), name.to_owned(), container_id.to_owned());
        self.with_decision_lock(move |node| {
            node.container_started_now(&pod_uid, &name, &container_id)
        })
        .await
        .context("the container start task failed")?
    }

    fn container_started_now(&self, pod_uid: &str, name: &str, container_id: &str) -> Result<()> {
        let known = self.pods.update(pod_uid, |entry| {
            let Some(admitted) = entry else {
                return Err(anyhow!("pod {pod_uid} was not admitted"));
            };
            if admitted.pod.container(name).is_none() {
                return Err(anyhow!("pod {pod_uid} has no container {name:?}"));
            }
            admitted
                .record
                .container_ids
                .insert(name.to_owned(), container_id.to_owned());
            Ok(())
        })?;
        known?;
        self.pods.mark_running(container_id);
        self.cpu.add_container(pod_uid, name, container_id);
        if let Some(admitted) = self.pods.get(pod_uid) {
            self.memory
                .container_started(&admitted.pod, name)
                .context("releasing the memory of finished init containers")?;
        }
        self.topology
            .store()
            .add_container(pod_uid, name, container_id);
        Ok(())
    }

    /// The container `container_id` was removed: its exclusive CPUs and memory go back
    /// (under the decision lock, as [`Self::container_started`]); the answer comes once it
    /// is durable.
    pub(crate) async fn container_removed(self: &Arc<Self>, container_id: &str) -> Result<()> {
        self.container_removed_uncommitted(container_id).await?;
        self.commit().await
    }

    /// [`Self::container_removed`] without its commit (an event that removes several
    /// containers commits once).
    pub(crate) async fn container_removed_uncommitted(
        self: &Arc<Self>,
        container_id: &str,
    ) -> Result<()> {
        // After any admission of its pod under way, as a start.
        let uid = self.pods.pod_of_container(container_id);
        let _pod_lock = match &uid {
            Some(uid) => Some(self.pod_locks.lock(uid).await),
            None => None,
        };
        let container_id = container_id.to_owned();
        self.with_decision_lock(move |node| node.container_removed_now(&container_id))
            .await
            .context("the container removal task failed")?
    }

    pub(super) fn container_removed_now(&self, container_id: &str) -> Result<()> {
        self.cpu.remove_container(container_id)?;
        self.topology.remove_container(container_id);
        let Some(uid) = self.pods.pod_of_container(container_id) else {
            return Ok(());
        };
        let names: Vec<String> = self
            .pods
            .get(&uid)
            .map(|admitted| admitted.record.container_ids)
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, id)| id == container_id)
            .map(|(name, _)| name)
            .collect();
        for name in &names {
            self.memory.remove_container(&uid, name)?;
        }
        self.pods.update(&uid, |entry| {
            if let Some(admitted) = entry {
                admitted
                    .record
                    .container_ids
                    .retain(|_, id| id != container_id);
                admitted.record.removed_containers.extend(names);
            }
        })?;
        Ok(())
    }

    /// The runtime stopped (or removed) the container `container_id` of a pod that goes on
    /// (NRI's StopContainer and RemoveContainer). As the kubelet, whose `PostStopContainer`
    /// only tells the topology manager: what the container holds stays its own while its
    /// pod runs, so a restarted container gets the same CPUs and memory back; it goes when
    /// the pod stops ([`Self::pod_stopped_uncommitted`]) or is released. Writes nothing.
    pub(crate) async fn container_stopped_uncommitted(
        self: &Arc<Self>,
        container_id: &str,
    ) -> Result<()> {
        let Some(uid) = self.pods.pod_of_container(container_id) else {
            return Ok(());
        };
        let _pod_lock = self.pod_locks.lock(&uid).await;
        let container_id = container_id.to_owned();
        self.with_decision_lock(move |node| {
            node.topology.remove_container(&container_id);
            // Nothing to write: the record keeps the id (the runtime tells a restarted
            // agent again), the managers what the container holds.
            node.pods.mark_stopped(&container_id);
        })
        .await
        .context("the container stop task failed")
    }

    /// The runtime stopped pod `uid`'s sandbox (NRI's StopPodSandbox): the pod no longer
    /// runs, so every container's exclusive CPUs and memory go back, exactly what each
    /// holds (the kubelet frees them once the pod is no longer active). The pod stays
    /// admitted until it is released; a container created in it again is admitted again
    /// ([`Self::admit_container_started`]). Without the commit (the event's).
    pub(crate) async fn pod_stopped_uncommitted(self: &Arc<Self>, uid: &str) -> Result<()> {
        let _pod_lock = self.pod_locks.lock(uid).await;
        let uid = uid.to_owned();
        self.with_decision_lock(move |node| node.pod_stopped_now(&uid))
            .await
            .context("the pod stop task failed")?
    }

    fn pod_stopped_now(&self, uid: &str) -> Result<()> {
        let Some(admitted) = self.pods.get(uid) else {
            return Ok(());
        };
        for id in admitted.record.container_ids.values() {
            self.topology.remove_container(id);
        }
        self.memory.remove_pod_containers(&admitted.pod)?;
        self.cpu.remove_pod_containers(&admitted.pod)?;
        let names = admitted.pod.all_containers().map(|(_, c)| c.name.clone());
        let names: Vec<String> = names.collect();
        self.pods.update(uid, |entry| {
            if let Some(admitted) = entry {
                admitted.record.container_ids.clear();
                admitted.record.removed_containers.extend(names);
            }
        })?;
        Ok(())
    }
}
