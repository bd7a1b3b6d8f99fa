//! The node as an NRI plugin: the runtime's container events become admissions and
//! releases through the same [`Node`] as the admission API, and each answer carries the
//! cpuset the CPU manager decided.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use corral_cpumgr::CfsQuota;
use corral_proto::nri::NriStatus;
use corral_proto::nri::api::{self, Event, EventMask};
use corral_proto::nri::plugin::NriPlugin;

use super::link::NriLink;
use super::pod::{NriPodError, QosClass, container_manifest, pod_resized};
use super::pod_resources::container_devices;
use super::updates::{Cpuset, OnFailure, cpu_resources, cpuset_update};
use super::validate;
use crate::config::{NriSettings, PinnedCpusets};
use crate::node::{Admission, AdmitError, INFEASIBLE, Node, StartedContainer};

/// The events corral acts on (a runtime older than NRI v0.10 gets no `UpdatePodSandbox`:
/// corral_proto subscribes only to what the runtime knows).
pub(crate) const EVENTS: &[Event] = &[
    Event::CreateContainer,
    Event::UpdateContainer,
    Event::StopContainer,
    Event::RemoveContainer,
    Event::StopPodSandbox,
    Event::RemovePodSandbox,
    Event::UpdatePodSandbox,
];

/// corral's [`NriPlugin`].
pub(crate) struct NodePlugin {
    node: Arc<Node>,
    /// The kubelet's podresources socket.
    pod_resources: PathBuf,
    /// Whether other plugins' changes of pinned cpusets are rejected.
    pinned_cpusets: PinnedCpusets,
    /// The name the runtime knows corral by (`<index>-<name>`), as `owners` name plugins.
    runtime_name: String,
    /// Told when a Synchronize is answered (the probes read it).
    link: Option<NriLink>,
}

impl NodePlugin {
    pub(crate) fn new(node: Arc<Node>, settings: &NriSettings) -> Self {
        let plugin = &settings.plugin;
        NodePlugin {
            node,
            pod_resources: settings.kubelet_pod_resources.clone(),
            pinned_cpusets: settings.pinned_cpusets,
            runtime_name: format!("{}-{}", plugin.index, plugin.name),
            link: None,
        }
    }

    /// The same plugin, telling `link` when it has synchronized with the runtime.
    pub(crate) fn with_link(mut self, link: NriLink) -> Self {
        self.link = Some(link);
        self
    }

    /// Records the devices the kubelet gave a container of a Guaranteed pod (`qos`), so
    /// its CPUs align with them; a kubelet that cannot be asked leaves the container
    /// unaligned (logged).
    async fn record_kubelet_devices(
        &self,
        pod: &api::PodSandbox,
        container: &api::Container,
        qos: QosClass,
    ) {
        let Some(devices) = self.node.kubelet_devices() else {
            return;
        };
        if qos != QosClass::Guaranteed {
            return;
        }
        let (namespace, name) = (&pod.namespace, &pod.name);
        match container_devices(&self.pod_resources, namespace, name, &container.name).await {
            Ok(found) => devices.set(&pod.uid, &container.name, found),
            Err(err) => {
                let err = crate::error_text::error_chain(&err);
                tracing::warn!(pod = %format!("{namespace}/{name}"), container = %container.name, err = %err, "the kubelet's devices are unknown: CPUs not aligned with them");
            }
        }
    }

    /// Admits `container` of `pod` and records its id; what the admission gave it (the
    /// cpuset it runs with), or `None` for a container that is not a kubelet pod's (left
    /// alone).
    async fn admit(
        &self,
        pod: &api::PodSandbox,
        container: &api::Container,
    ) -> Result<Option<Admitted>, NriStatus> {
        let (manifest, qos) = match container_manifest(pod, container) {
            Ok(derived) => derived,
            Err(NriPodError::NotKubelet { .. }) => return Ok(None),
            Err(err) => return Err(NriStatus::new(NriStatus::INVALID_ARGUMENT, err.to_string())),
        };
        self.record_kubelet_devices(pod, container, qos).await;
        // Admitted and recorded with its id to the end even when the runtime's connection
        // ends and this handler is dropped (an admitted container without its id could not
        // be found by its removal); durable with the event's commit.
        let started = StartedContainer {
            pod_uid: pod.uid.clone(),
            name: container.name.clone(),
            id: container.id.clone(),
        };
        let admitted = self
            .node
            .admit_container_started(manifest, Some(started))
            .await;
        let view = match admitted {
            Ok(Admission::Admitted(view)) => view,
            Ok(Admission::Rejected {
                reason,
                message,
                explanation,
            }) => {
                // The runtime shows the text (kubectl describe: CreateContainerError).
                let why = match explanation {
                    Some(explanation) => format!("{reason}: {message} ({explanation})"),
                    None => format!("{reason}: {message}"),
                };
                return Err(NriStatus::new(NriStatus::UNKNOWN, why));
            }
            Err(AdmitError::InvalidPod(err)) => {
                let why = crate::error_text::error_chain(&err);
                return Err(NriStatus::new(NriStatus::INVALID_ARGUMENT, why));
            }
            Err(err) => {
                let why = crate::error_text::error_chain(&err);
                return Err(NriStatus::new(NriStatus::UNKNOWN, why));
            }
        };
        let Some(given) = view
            .containers
            .into_iter()
            .find(|c| c.name == container.name)
        else {
            let why = format!(
                "the admission of pod {} has no container {:?}",
                pod.uid, container.name
            );
            return Err(NriStatus::new(NriStatus::UNKNOWN, why));
        };
        let mems: BTreeSet<usize> = given
            .memory
            .iter()
            .flat_map(|block| block.numa_affinity.iter().copied())
            .collect();
        let mems: Vec<String> = mems.iter().map(usize::to_string).collect();
        let quota = if given.cpu_quota_disabled {
            CfsQuota::Unlimited
        } else {
            CfsQuota::Unchanged
        };
        Ok(Some(Admitted {
            cpuset: Cpuset {
                cpus: given.cpuset,
                mems: mems.join(","),
                quota,
            },
            exclusive: given.exclusive_cpus,
        }))
    }

    /// Updates for every container in the shared pool but `except`: the pool as it is now,
    /// settled (never shrunk by a dry run's trial or a refusal under way).
    async fn shared_pool_updates(&self, except: &str) -> Vec<api::ContainerUpdate> {
        let except = except.to_owned();
        self.node
            .settled(move |node| shared_pool_now(node, &except))
            .await
            .unwrap_or_else(|err| {
                tracing::error!(err = %format!("{err:#}"), "reading the shared pool failed: no container updated");
                Vec::new()
            })
    }

    /// The container stopped or went away (durable with the event's [`Self::committed`]).
    async fn stopped(&self, container_id: &str) -> Result<(), NriStatus> {
        self.node
            .container_stopped_uncommitted(container_id)
            .await
            .map_err(|err| status_of(err.as_ref()))
    }

    /// Make what the event changed durable before it is answered: one commit per event,
    /// however many containers or pods it changed (none when it changed nothing).
    async fn committed(&self) -> Result<(), NriStatus> {
        self.node
            .commit()
            .await
            .map_err(|err| status_of(err.as_ref()))
    }
}

/// An internal failure as the runtime is told it.
fn status_of(err: &(dyn std::error::Error + 'static)) -> NriStatus {
    NriStatus::new(NriStatus::UNKNOWN, crate::error_text::error_chain(err))
}

/// What an admission gave a container, as the runtime applies it.
struct Admitted {
    /// The cpuset, memory nodes and CFS quota it runs with.
    cpuset: Cpuset,
    /// Whether its CPUs are its own (the shared pool shrank).
    exclusive: bool,
}

#[tonic::async_trait]
impl NriPlugin for NodePlugin {
    async fn configure(&self, request: api::ConfigureRequest) -> Result<EventMask, NriStatus> {
        let nri = corral_proto::nri::version::runtime_nri_version(&request)
            .map_or_else(|| "unknown".to_owned(), |v| format!("{v:?}"));
        tracing::info!(runtime = %request.runtime_name, version = %request.runtime_version, nri = %nri, "NRI runtime configured corral");
        let mut events = EVENTS.to_vec();
        if self.pinned_cpusets == PinnedCpusets::Guarded {
            events.push(Event::ValidateContainerAdjustment);
        }
        Ok(EventMask::of(&events))
    }

    /// The runtime's pods and containers: containers corral does not know are admitted
    /// (running ones keep running; their cpuset comes as an update), pods the runtime no
    /// longer has are released.
    async fn synchronize(
        &self,
        request: api::SynchronizeRequest,
    ) -> Result<api::SynchronizeResponse, NriStatus> {
        let pods: std::collections::BTreeMap<&str, &api::PodSandbox> =
            request.pods.iter().map(|p| (p.id.as_str(), p)).collect();
        let mut update = Vec::new();
        for container in &request.containers {
            let Some(&pod) = pods.get(container.pod_sandbox_id.as_str()) else {
                continue;
            };
            let state = container.state();
            if state == api::ContainerState::ContainerStopped {
                self.stopped(&container.id).await?;
                continue;
            }
            match self.admit(pod, container).await {
                Ok(Some(admitted)) => update.push(cpuset_update(
                    &container.id,
                    admitted.cpuset,
                    OnFailure::Ignore,
                )),
                Ok(None) => {}
                Err(status) => {
                    tracing::warn!(container = %container.id, err = %status, "a running container could not be admitted; left as it runs");
                }
            }
        }
        // The whole state: corral_proto collects a synchronization sent in parts. A
        // recorded container the runtime no longer has is stopped (it keeps what it holds
        // while its pod runs; no write).
        let present: std::collections::BTreeSet<&str> =
            request.containers.iter().map(|c| c.id.as_str()).collect();
        for admitted in self.node.pods().all() {
            for id in admitted.record.container_ids.values() {
                if !present.contains(id.as_str()) {
                    self.node.pods().mark_stopped(id);
                }
            }
        }
        let active: Vec<String> = request.pods.iter().map(|p| p.uid.clone()).collect();
        let node = Arc::clone(&self.node);
        let synced = tokio::spawn(async move { node.sync_active_uncommitted(&active).await })
            .await
            .unwrap_or_else(|err| Err(anyhow::anyhow!("the synchronization task failed: {err}")));
        let released = synced.map_err(|err| {
            let why = crate::error_text::error_chain(err.as_ref());
            NriStatus::new(NriStatus::UNKNOWN, why)
        })?;
        self.committed().await?;
        if !released.is_empty() {
            tracing::info!(pods = ?released, "pods the runtime no longer has released");
        }
        let ids: std::collections::BTreeSet<String> =
            update.iter().map(|u| u.container_id.clone()).collect();
        let shared = self.shared_pool_updates("").await;
        update.extend(
            shared
                .into_iter()
                .filter(|u| !ids.contains(&u.container_id)),
        );
        if let Some(link) = &self.link {
            link.synchronized();
        }
        tracing::info!(
            pods = request.pods.len(),
            containers = request.containers.len(),
            "NRI: synchronized with the runtime"
        );
        Ok(api::SynchronizeResponse {
            update,
            more: false,
        })
    }

    async fn create_container(
        &self,
        request: api::CreateContainerRequest,
    ) -> Result<api::CreateContainerResponse, NriStatus> {
        let (Some(pod), Some(container)) = (&request.pod, &request.container) else {
            let why = "CreateContainer without its pod or container";
            return Err(NriStatus::new(NriStatus::INVALID_ARGUMENT, why));
        };
        let admitted = self.admit(pod, container).await;
        self.committed().await?;
        let Some(Admitted { cpuset, exclusive }) = admitted? else {
            return Ok(api::CreateContainerResponse::default());
        };
        let adjust = api::ContainerAdjustment {
            linux: Some(api::LinuxContainerAdjustment {
                resources: Some(cpu_resources(cpuset)),
                ..api::LinuxContainerAdjustment::default()
            }),
            ..api::ContainerAdjustment::default()
        };
        // The shared pool shrank: every container in it runs on the smaller pool.
        let update = if exclusive {
            self.shared_pool_updates(&container.id).await
        } else {
            Vec::new()
        };
        Ok(api::CreateContainerResponse {
            adjust: Some(adjust),
            update,
            evict: Vec::new(),
        })
    }

    /// The kubelet resizes a container (`UpdateContainerResources`): refused as upstream
    /// refuses it when corral pinned the pod's resources (`Infeasible`), else let through
    /// with corral's cpuset kept over whatever the update carries.
    async fn update_container(
        &self,
        request: api::UpdateContainerRequest,
    ) -> Result<api::UpdateContainerResponse, NriStatus> {
        let (Some(pod), Some(container)) = (&request.pod, &request.container) else {
            let why = "UpdateContainer without its pod or container";
            return Err(NriStatus::new(NriStatus::INVALID_ARGUMENT, why));
        };
        if self.node.pods().pod_of_container(&container.id).is_none() {
            return Ok(api::UpdateContainerResponse::default());
        }
        let mut updated = container.clone();
        if let Some(linux) = updated.linux.as_mut() {
            linux.resources = request.linux_resources.clone();
        }
        let manifest = match container_manifest(pod, &updated) {
            Ok((manifest, _)) => manifest,
            Err(NriPodError::NotKubelet { .. }) => {
                return Ok(api::UpdateContainerResponse::default());
            }
            Err(err) => return Err(NriStatus::new(NriStatus::INVALID_ARGUMENT, err.to_string())),
        };
        match self.node.check_resize(&manifest) {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                tracing::info!(pod = %format!("{}/{}", pod.namespace, pod.name), container = %container.name, detail = message, "resize refused");
                return Err(NriStatus::new(
                    NriStatus::UNKNOWN,
                    format!("{INFEASIBLE}: {message}"),
                ));
            }
            Err(err) => {
                let why = crate::error_text::error_chain(&err);
                return Err(NriStatus::new(NriStatus::INVALID_ARGUMENT, why));
            }
        }
        // Settled: never the pool as a dry run's trial or a refusal under way left it.
        let (uid, name) = (pod.uid.clone(), container.name.clone());
        let cpuset = self
            .node
            .settled(move |node| Cpuset {
                cpus: node.cpu().cpu_affinity(&uid, &name).to_string(),
                mems: String::new(),
                quota: node.cpu().cfs_quota(&uid, &name),
            })
            .await
            .map_err(|err| NriStatus::new(NriStatus::UNKNOWN, format!("{err:#}")))?;
        Ok(api::UpdateContainerResponse {
            update: vec![cpuset_update(&container.id, cpuset, OnFailure::Ignore)],
            evict: Vec::new(),
        })
    }

    /// The kubelet resizes a pod (`UpdatePodSandboxResources`, NRI v0.10): refused as a
    /// container's resize is (`Infeasible`) when corral pinned the pod's resources and the
    /// pod's CPU, memory or huge page values change; nothing is written.
    async fn update_pod_sandbox(
        &self,
        request: api::UpdatePodSandboxRequest,
    ) -> Result<(), NriStatus> {
        let (Some(pod), Some(after)) = (&request.pod, &request.linux_resources) else {
            return Ok(());
        };
        let before = pod.linux.as_ref().and_then(|l| l.pod_resources.as_ref());
        if !pod_resized(before, after) {
            return Ok(());
        }
        let Some(message) = self.node.pod_resize_refusal(&pod.uid) else {
            return Ok(());
        };
        tracing::info!(pod = %format!("{}/{}", pod.namespace, pod.name), detail = message, "pod resize refused");
        Err(NriStatus::new(
            NriStatus::UNKNOWN,
            format!("{INFEASIBLE}: {message}"),
        ))
    }

    /// Another plugin's change of a pinned container's cpuset is rejected
    /// (`nriGuardPinnedCpusets`, [`validate`]); nothing is written.
    async fn validate_container_adjustment(
        &self,
        request: api::ValidateContainerAdjustmentRequest,
    ) -> Result<api::ValidateContainerAdjustmentResponse, NriStatus> {
        if self.pinned_cpusets == PinnedCpusets::Open {
            return Ok(api::ValidateContainerAdjustmentResponse::default());
        }
        let answer = validate::verdict(&request, &self.runtime_name, |id| {
            validate::pinned(&self.node, id)
        });
        if answer.reject {
            tracing::warn!(reason = %answer.reason, "NRI: another plugin's cpuset change rejected");
        }
        Ok(answer)
    }

    async fn stop_container(
        &self,
        request: api::StopContainerRequest,
    ) -> Result<api::StopContainerResponse, NriStatus> {
        let Some(container) = &request.container else {
            return Ok(api::StopContainerResponse::default());
        };
        // What it holds stays its own while its pod runs (a restart gets it back), so the
        // shared pool does not change.
        self.stopped(&container.id).await?;
        self.committed().await?;
        Ok(api::StopContainerResponse::default())
    }

    async fn state_change(&self, event: api::StateChangeEvent) -> Result<(), NriStatus> {
        match event.event() {
            Event::RemoveContainer => {
                if let Some(container) = &event.container {
                    self.stopped(&container.id).await?;
                    self.committed().await?;
                }
            }
            Event::StopPodSandbox => {
                // Its containers are stopped: their exclusive CPUs and memory go back to
                // the pool (the periodic reconcile pushes the larger pool); the pod stays
                // until removed.
                if let Some(pod) = &event.pod {
                    self.node
                        .pod_stopped_uncommitted(&pod.uid)
                        .await
                        .map_err(|err| status_of(err.as_ref()))?;
                    self.committed().await?;
                }
            }
            Event::RemovePodSandbox => {
                if let Some(pod) = &event.pod {
                    let (node, uid) = (Arc::clone(&self.node), pod.uid.clone());
                    let released = tokio::spawn(async move { node.release(&uid).await })
                        .await
                        .unwrap_or_else(|err| {
                            Err(anyhow::anyhow!("the release task failed: {err}"))
                        });
                    released.map_err(|err| {
                        let why = crate::error_text::error_chain(err.as_ref());
                        NriStatus::new(NriStatus::UNKNOWN, why)
                    })?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Updates for every running container in the shared pool but `except`, read from `node`
/// (with the decision lock held: see [`Node::settled`]).
fn shared_pool_now(node: &Node, except: &str) -> Vec<api::ContainerUpdate> {
    let cpu = node.cpu();
    let mut updates = Vec::new();
    for admitted in node.pods().all() {
        let uid = &admitted.pod.uid;
        for (name, id) in &admitted.record.container_ids {
            let runs = id != except && !node.pods().is_stopped(id);
            if runs && cpu.exclusive_cpus(uid, name).is_empty() {
                let cpuset = Cpuset {
                    cpus: cpu.cpu_affinity(uid, name).to_string(),
                    mems: String::new(),
                    quota: CfsQuota::Unchanged,
                };
                updates.push(cpuset_update(id, cpuset, OnFailure::Ignore));
            }
        }
    }
    updates
}
