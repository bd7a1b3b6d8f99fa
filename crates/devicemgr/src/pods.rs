//! What the manager knows of the node's pods (upstream `activePods`, `sourcesReady` and the
//! container map of running containers at start): [`StartOptions`] as the caller gives it,
//! [`PodSources`] as the manager keeps it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use corral_topology::{Container, Pod};

use crate::locks::{read, write};

/// Returns the uids of the pods that are active on the node (upstream `ActivePodsFunc`).
pub type ActivePods = Arc<dyn Fn() -> BTreeSet<String> + Send + Sync>;

/// Returns the spec of a pod the node admitted, by uid (`None` when unknown). The
/// checkpoint restore uses it to tell upstream's init-container device reuse from a device
/// given to two containers of one pod.
pub type PodSpecs = Arc<dyn Fn(&str) -> Option<Pod> + Send + Sync>;

/// What [`DeviceManager::start`](crate::DeviceManager::start) needs to know about the node.
#[derive(Clone)]
pub struct StartOptions {
    /// The active pods; stale pods' devices are freed against it. `None`: never free.
    pub active_pods: Option<ActivePods>,
    /// Whether all pod sources are ready (upstream `sourcesReady.AllReady()`); set it later
    /// with [`DeviceManager::set_sources_ready`](crate::DeviceManager::set_sources_ready).
    pub sources_ready: bool,
    /// `(pod uid, container name)` of the containers the runtime reported running at
    /// start (upstream's container map and running set): while sources are not ready, they
    /// keep their devices without allocation, and so do the finished init containers of
    /// their pods.
    pub running_containers: BTreeSet<(String, String)>,
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            active_pods: None,
            sources_ready: true,
            running_containers: BTreeSet::new(),
        }
    }
}

impl std::fmt::Debug for StartOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartOptions")
            .field("active_pods", &self.active_pods.is_some())
            .field("sources_ready", &self.sources_ready)
            .field("running_containers", &self.running_containers)
            .finish()
    }
}

/// The node's pods as the manager sees them.
pub(crate) struct PodSources {
    active_pods: RwLock<Option<ActivePods>>,
    sources_ready: AtomicBool,
    running: RwLock<BTreeSet<(String, String)>>,
    pod_specs: RwLock<Option<PodSpecs>>,
}

impl Default for PodSources {
    fn default() -> Self {
        PodSources {
            active_pods: RwLock::new(None),
            sources_ready: AtomicBool::new(true),
            running: RwLock::new(BTreeSet::new()),
            pod_specs: RwLock::new(None),
        }
    }
}

impl PodSources {
    /// Take what [`StartOptions`] says.
    pub(crate) fn start(&self, options: StartOptions) {
        *write(&self.active_pods) = options.active_pods;
        self.set_sources_ready(options.sources_ready);
        *write(&self.running) = options.running_containers;
    }

    /// Whether all pod sources are ready.
    pub(crate) fn set_sources_ready(&self, ready: bool) {
        self.sources_ready.store(ready, Ordering::Release);
    }

    /// The uids of the active pods, when they are to be trusted (sources ready and a
    /// lookup given): what stale pods' devices are freed against.
    pub(crate) fn active_when_ready(&self) -> Option<BTreeSet<String>> {
        if !self.sources_ready.load(Ordering::Acquire) {
            return None;
        }
        let active = read(&self.active_pods).clone()?;
        Some(active())
    }

    /// Whether the pod is active (true when no lookup was given).
    pub(crate) fn is_active(&self, pod_uid: &str) -> bool {
        read(&self.active_pods)
            .clone()
            .is_none_or(|active| active().contains(pod_uid))
    }

    /// Whether the container ran before the manager started and keeps its devices without
    /// allocation: only while sources are not ready, for a container reported running or
    /// a finished init container of a pod that runs (upstream #124345).
    pub(crate) fn already_running(&self, pod: &Pod, container: &Container) -> bool {
        if self.sources_ready.load(Ordering::Acquire) {
            return false;
        }
        let running = read(&self.running);
        if running.contains(&(pod.uid.clone(), container.name.clone())) {
            return true;
        }
        let finished_init = pod
            .init_containers
            .iter()
            .any(|c| c.name == container.name && !c.is_restartable());
        finished_init && running.iter().any(|(uid, _)| *uid == pod.uid)
    }

    /// Replace the pod-spec lookup.
    pub(crate) fn set_pod_specs(&self, specs: PodSpecs) {
        *write(&self.pod_specs) = Some(specs);
    }

    /// The pod-spec lookup, if one was given.
    pub(crate) fn pod_specs(&self) -> Option<PodSpecs> {
        read(&self.pod_specs).clone()
    }
}
