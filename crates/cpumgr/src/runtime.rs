//! The manager's edges to the rest of the node: [`ContainerRuntime`] (push a container's
//! cpuset; the agent adapts it to CRI `UpdateContainerResources`) and [`PodSource`] (active
//! pods and their statuses, upstream's `activePods` and `PodStatusProvider`), plus what
//! reconciliation reports.

use corral_topology::{CpuSet, Pod};

/// A container runtime's failure: the runtime's own error (a gRPC status, a socket error, or
/// a message), shown as it is, its causes reachable through `source`.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RuntimeError(Box<dyn std::error::Error + Send + Sync>);

impl RuntimeError {
    /// The runtime's error (anything that is an error, or a message).
    ///
    /// ```
    /// let err = corral_cpumgr::RuntimeError::new("container not found");
    /// assert_eq!(err.to_string(), "container not found");
    /// ```
    pub fn new(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> RuntimeError {
        RuntimeError(err.into())
    }
}

/// A container's CFS quota, as the CPU manager wants it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CfsQuota {
    /// Leave the quota the container was created with.
    #[default]
    Unchanged,
    /// No quota (CRI `CpuQuota` -1, cgroup v2 `cpu.max` "max"): a container with exclusive
    /// CPUs under `DisableCPUQuotaWithExclusiveCPUs` (upstream `calculateLinuxResources`
    /// with `disableCPUQuota`), so it is never throttled on CPUs that are its own.
    Unlimited,
}

/// Whether containers with exclusive CPUs run without a CFS quota (upstream's
/// `DisableCPUQuotaWithExclusiveCPUs` gate: beta and on by default since v1.33).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CpuQuotaPolicy {
    /// Quota from the container's CPU limit, exclusive CPUs or not (the gate off).
    Enforce,
    /// No quota for containers with exclusive CPUs (the gate on, v1.36's default).
    #[default]
    UnlimitedForExclusiveCpus,
}

/// The container runtime, as far as the CPU manager needs it. Its call waits on I/O (a CRI
/// or NRI round trip), so it is async: [`CpuManager::reconcile_once`] awaits it with no
/// lock held, and a caller bounds it as it sees fit.
///
/// [`CpuManager::reconcile_once`]: crate::CpuManager::reconcile_once
#[async_trait::async_trait]
pub trait ContainerRuntime: Send + Sync {
    /// Restrict the running container `container_id` to `cpus`, with `quota`.
    async fn update_container_cpuset(
        &self,
        container_id: &str,
        cpus: &CpuSet,
        quota: CfsQuota,
    ) -> Result<(), RuntimeError>;
}

/// A container's state in its pod status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContainerState {
    /// Not started yet (or waiting to restart).
    Waiting,
    /// Running.
    Running,
    /// Exited.
    Terminated,
    /// No state reported.
    Unknown,
}

/// One container's status (upstream `v1.ContainerStatus`, the fields reconcile reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStatus {
    /// Container name.
    pub name: String,
    /// `<type>://<id>` as the kubelet reports it (`""` before the container exists).
    pub container_id: String,
    /// Its state.
    pub state: ContainerState,
}

/// A pod's container statuses (upstream `v1.PodStatus`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodStatus {
    /// Init containers' statuses.
    pub init_container_statuses: Vec<ContainerStatus>,
    /// App containers' statuses.
    pub container_statuses: Vec<ContainerStatus>,
}

impl PodStatus {
    fn all(&self) -> impl Iterator<Item = &ContainerStatus> {
        self.init_container_statuses
            .iter()
            .chain(&self.container_statuses)
    }

    /// Upstream `findContainerIDByName`: the id part of `<type>://<id>`.
    ///
    /// ```
    /// use corral_cpumgr::{ContainerIdError, ContainerState, ContainerStatus, PodStatus};
    ///
    /// let status = |id: &str| ContainerStatus {
    ///     name: "app".into(),
    ///     container_id: id.into(),
    ///     state: ContainerState::Running,
    /// };
    /// let pod = PodStatus { container_statuses: vec![status("containerd://abc")], ..PodStatus::default() };
    /// assert_eq!(pod.container_id("app"), Ok("abc".to_owned()));
    /// assert!(matches!(pod.container_id("db"), Err(ContainerIdError::NotFound { .. })));
    /// let pod = PodStatus { container_statuses: vec![status("abc")], ..PodStatus::default() };
    /// assert_eq!(pod.container_id("app").unwrap_err().to_string(), "invalid container ID: \"abc\"");
    /// ```
    pub fn container_id(&self, name: &str) -> Result<String, ContainerIdError> {
        let Some(status) = self
            .all()
            .find(|s| s.name == name && !s.container_id.is_empty())
        else {
            return Err(ContainerIdError::NotFound {
                name: name.to_owned(),
            });
        };
        match status.container_id.split_once("://") {
            Some((_, id)) => Ok(id.to_owned()),
            None => Err(ContainerIdError::Invalid {
                id: status.container_id.clone(),
            }),
        }
    }

    /// Upstream `findContainerStatusByName`.
    pub fn container_status(&self, name: &str) -> Option<&ContainerStatus> {
        self.all().find(|s| s.name == name)
    }
}

/// Why [`PodStatus::container_id`] has no id (upstream `findContainerIDByName`'s errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContainerIdError {
    /// No status of that name with an id.
    #[error(
        "unable to find ID for container with name {name} in pod status (it may not be running)"
    )]
    NotFound {
        /// The container name.
        name: String,
    },
    /// The id is not `<type>://<id>`.
    #[error("invalid container ID: {id:?}")]
    Invalid {
        /// The id as reported.
        id: String,
    },
}

/// The pods the manager works for.
pub trait PodSource: Send + Sync {
    /// The active pods (upstream `ActivePodsFunc`).
    fn active_pods(&self) -> Vec<Pod>;
    /// The pod's status, if known (upstream `PodStatusProvider.GetPodStatus`).
    fn pod_status(&self, pod_uid: &str) -> Option<PodStatus>;
    /// Whether every pod source is ready, so stale state may be removed (upstream
    /// `SourcesReady.AllReady`).
    fn all_ready(&self) -> bool {
        true
    }
    /// corral: a number that changes whenever the active pods (or their containers) change,
    /// or `None` (the default) when the source cannot tell. With a generation, the manager
    /// sweeps stale state once per (generation, pending pod) instead of on every call, which
    /// makes admitting a pod linear in its containers; the outcome is the same, because
    /// between two sweeps only the pending pod gains assignments.
    fn generation(&self) -> Option<u64> {
        None
    }
}

/// One container a reconcile pass looked at (upstream `reconciledContainer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconciledContainer {
    /// Pod name.
    pub pod_name: String,
    /// Container name (`""` when the pod had no status).
    pub container_name: String,
    /// Container id (`""` when unknown).
    pub container_id: String,
}

/// What one reconcile pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Containers whose cpuset is as the state says.
    pub success: Vec<ReconciledContainer>,
    /// Containers skipped or whose update failed.
    pub failure: Vec<ReconciledContainer>,
    /// corral: init containers whose unreused CPUs went back to the shared pool.
    pub released_init_containers: Vec<ReconciledContainer>,
}
