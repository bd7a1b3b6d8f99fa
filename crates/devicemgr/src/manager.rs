//! [`DeviceManager`]: the async facade over [`DeviceState`] — it serves registration,
//! runs one client task per plugin, checkpoints after every change, and allocates with
//! every plugin RPC outside its lock and under a deadline.
//!
//! **Lock order:** the live-endpoint map, then the registrations in flight, then the state;
//! none is held across an `await`. Checkpoint writes are serialized by their own lock and take a snapshot of the
//! state, so a slow disk never blocks admission.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Instant;

use corral_checkpoint::{
    Checkpoint, CheckpointError, CheckpointStore, DEVICE_MANAGER_FILE, DeviceManagerCheckpoint,
    DeviceManagerCheckpointV1,
};
use corral_proto::deviceplugin::v1beta1::{
    ListAndWatchResponse, registration_server::RegistrationServer,
};
use corral_proto::uds::{self, SocketOptions, UdsListener};
use corral_topology::{
    AffinityStore, AllocationError, Container, HintProvider, NumaMask, Pod, ProviderHints,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::endpoint::PluginClient;
use crate::observer::DeviceManagerObserver;
use crate::registration::{RegistrationHandler, RegistrationService};
use crate::{
    AllocateError, AllocationRequest, Capacity, ContainerAllocation, Device, DeviceManagerConfig,
    DeviceManagerError, DeviceState, RunContainerOptions, ToAllocate,
};

/// Returns the uids of the pods that are active on the node (upstream `ActivePodsFunc`).
pub type ActivePods = Arc<dyn Fn() -> BTreeSet<String> + Send + Sync>;

/// Returns the spec of a pod the node admitted, by uid (`None` when unknown). The
/// checkpoint restore uses it to tell upstream's init-container device reuse from a device
/// given to two containers of one pod.
pub type PodSpecs = Arc<dyn Fn(&str) -> Option<Pod> + Send + Sync>;

/// What [`DeviceManager::start`] needs to know about the node.
#[derive(Clone)]
pub struct StartOptions {
    /// The active pods; stale pods' devices are freed against it. `None`: never free.
    pub active_pods: Option<ActivePods>,
    /// Whether all pod sources are ready (upstream `sourcesReady.AllReady()`); set it later
    /// with [`DeviceManager::set_sources_ready`].
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

/// A connected plugin and the task consuming its stream.
struct LiveEndpoint {
    client: PluginClient,
    /// The endpoint's file name in the plugin directory (what identifies a plugin for
    /// [`DeviceManagerConfig::max_resources_per_plugin`]).
    endpoint: String,
    generation: u64,
    cancel: CancellationToken,
    /// The plugin sent at least one device list.
    listed: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent, so a poisoned lock is usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// State shared by the facade, the registration server and the endpoint tasks.
pub(crate) struct Shared {
    config: DeviceManagerConfig,
    state: Mutex<DeviceState>,
    live: Mutex<BTreeMap<String, LiveEndpoint>>,
    /// Registrations being dialed: id → (resource, endpoint). They count against the caps.
    registering: Mutex<BTreeMap<u64, (String, String)>>,
    next_registration: AtomicU64,
    store: CheckpointStore,
    checkpoint_lock: Mutex<()>,
    /// Wakes the background checkpoint writer; repeated requests coalesce.
    checkpoint_wanted: tokio::sync::Notify,
    checkpoint_writer: AtomicBool,
    next_generation: AtomicU64,
    changes: watch::Sender<u64>,
    active_pods: RwLock<Option<ActivePods>>,
    sources_ready: AtomicBool,
    running: RwLock<BTreeSet<(String, String)>>,
    shutdown: Mutex<Option<CancellationToken>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    runtime: Mutex<Option<tokio::runtime::Handle>>,
    observer: RwLock<Option<Arc<dyn DeviceManagerObserver>>>,
    pod_specs: RwLock<Option<PodSpecs>>,
}

impl Shared {
    /// The observer, if one is set.
    pub(crate) fn observer(&self) -> Option<Arc<dyn DeviceManagerObserver>> {
        self.observer
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn bump(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(tokio::spawn(task));
    }

    /// Write `kubelet_internal_checkpoint` from a snapshot of the state.
    fn write_checkpoint(&self) -> Result<(), CheckpointError> {
        let _serial = lock(&self.checkpoint_lock);
        let snapshot = lock(&self.state).to_checkpoint();
        self.store.create(DEVICE_MANAGER_FILE, &snapshot)
    }

    async fn write_checkpoint_async(self: &Arc<Self>) -> Result<(), CheckpointError> {
        let shared = Arc::clone(self);
        match tokio::task::spawn_blocking(move || shared.write_checkpoint()).await {
            Ok(result) => result,
            Err(join) => Err(CheckpointError::Io {
                op: "write checkpoint",
                path: self.store.dir().join(DEVICE_MANAGER_FILE),
                source: std::io::Error::other(join.to_string()),
            }),
        }
    }

    /// Ask the background writer for a checkpoint: a plugin flooding lists causes at most
    /// one write in flight and one pending, never a write per list on a runtime thread.
    fn request_checkpoint(&self) {
        if self.checkpoint_writer.load(Ordering::Acquire) {
            self.checkpoint_wanted.notify_one();
        } else {
            self.checkpoint_or_log();
        }
    }

    fn start_checkpoint_writer(self: &Arc<Self>, stop: CancellationToken) {
        let shared = Arc::clone(self);
        self.checkpoint_writer.store(true, Ordering::Release);
        self.spawn(async move {
            loop {
                tokio::select! {
                    () = shared.checkpoint_wanted.notified() => {}
                    () = stop.cancelled() => break,
                }
                if let Err(err) = shared.write_checkpoint_async().await {
                    tracing::error!(%err, "writing device manager checkpoint failed");
                }
            }
            shared.checkpoint_writer.store(false, Ordering::Release);
            shared.checkpoint_or_log();
        });
    }

    fn checkpoint_or_log(&self) {
        if let Err(err) = self.write_checkpoint() {
            tracing::error!(%err, "writing device manager checkpoint failed");
        }
    }

    /// Take a place for registering `resource` at `endpoint` under the caps on resources
    /// per plugin and in total; registered resources and registrations in flight count,
    /// and a resource already registered keeps its place (a re-registration replaces it).
    /// The place is held until the returned slot is dropped; by then the resource is live
    /// (and counted as such) or the registration failed.
    pub(crate) fn reserve_registration(
        self: &Arc<Self>,
        resource: &str,
        endpoint: &str,
    ) -> Result<RegistrationSlot, RegistrationLimit> {
        let live = lock(&self.live);
        let mut registering = lock(&self.registering);
        let mut owners: BTreeMap<&str, &str> = live
            .iter()
            .map(|(r, e)| (r.as_str(), e.endpoint.as_str()))
            .collect();
        for (r, e) in registering.values() {
            owners.insert(r, e);
        }
        let before = owners.len();
        let of_plugin = owners.values().filter(|e| **e == endpoint).count();
        let new_to_plugin = owners.get(resource) != Some(&endpoint);
        owners.insert(resource, endpoint);
        let max = self.config.max_resources_per_plugin;
        if new_to_plugin && of_plugin >= max {
            return Err(RegistrationLimit::PerPlugin {
                resource: resource.to_owned(),
                endpoint: endpoint.to_owned(),
                registered: of_plugin,
                max,
            });
        }
        let max = self.config.max_resources;
        if owners.len() > before && before >= max {
            return Err(RegistrationLimit::Total {
                resource: resource.to_owned(),
                registered: before,
                max,
            });
        }
        let id = self.next_registration.fetch_add(1, Ordering::Relaxed);
        registering.insert(id, (resource.to_owned(), endpoint.to_owned()));
        Ok(RegistrationSlot {
            shared: Arc::clone(self),
            id,
        })
    }

    /// Dial a registering plugin, read its options, make it the resource's endpoint
    /// (stopping any previous one) and start consuming its stream.
    pub(crate) async fn connect_plugin(
        self: &Arc<Self>,
        resource: &str,
        endpoint: &str,
    ) -> Result<(), String> {
        let socket = self.config.plugin_dir.join(endpoint);
        let client = PluginClient::connect(resource, &socket, &self.config).await?;
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        {
            let mut live = lock(&self.live);
            let previous = live.insert(
                resource.to_owned(),
                LiveEndpoint {
                    client: client.clone(),
                    endpoint: endpoint.to_owned(),
                    generation,
                    cancel: cancel.clone(),
                    listed: false,
                },
            );
            if let Some(previous) = previous {
                tracing::info!(resource, old = %previous.client.socket.display(),
                    new = %socket.display(), "device plugin re-registered; replacing its endpoint");
                previous.cancel.cancel();
            }
            lock(&self.state).plugin_connected(resource, client.options);
        }
        tracing::info!(resource, socket = %socket.display(),
            pre_start_required = client.options.pre_start_required,
            preferred_allocation = client.options.get_preferred_allocation_available,
            "device plugin connected");
        self.bump();
        let shared = Arc::clone(self);
        self.spawn(async move {
            let poll = shared.config.socket_poll_interval;
            let why = client
                .watch(&cancel, poll, |list| {
                    shared.on_list(&client.resource, generation, &list)
                })
                .await;
            if let Some(why) = why {
                shared.on_stream_end(&client.resource, generation, &why);
            }
        });
        Ok(())
    }

    /// A device list from the plugin of `generation`.
    fn on_list(&self, resource: &str, generation: u64, list: &ListAndWatchResponse) {
        let max = self.config.max_devices_per_plugin;
        if list.devices.len() > max {
            tracing::error!(
                resource,
                devices = list.devices.len(),
                max,
                "device plugin sent more devices than allowed; list ignored"
            );
            return;
        }
        let devices: Vec<Device> = list.devices.iter().map(Device::from).collect();
        {
            let mut live = lock(&self.live);
            let Some(endpoint) = live
                .get_mut(resource)
                .filter(|e| e.generation == generation)
            else {
                return;
            };
            endpoint.listed = true;
            let mut state = lock(&self.state);
            let duplicates = state.update_devices(resource, &devices);
            if duplicates > 0 {
                tracing::warn!(
                    resource,
                    duplicates,
                    "device plugin listed ids more than once; the last occurrence counts"
                );
            }
            let foreign = devices
                .iter()
                .flat_map(|d| d.numa_nodes.iter().flatten())
                .filter(|&&id| !state.has_numa_node(id))
                .count();
            if foreign > 0 {
                tracing::warn!(
                    resource,
                    foreign,
                    "device plugin reports NUMA nodes this machine lacks"
                );
            }
        }
        self.request_checkpoint();
        self.bump();
    }

    /// The stream of the plugin of `generation` ended: unless a newer plugin replaced it,
    /// its devices become unhealthy at once and its grace period starts.
    fn on_stream_end(&self, resource: &str, generation: u64, why: &str) {
        {
            let mut live = lock(&self.live);
            if live
                .get(resource)
                .is_none_or(|e| e.generation != generation)
            {
                return;
            }
            live.remove(resource);
            lock(&self.state).plugin_disconnected(resource, Instant::now());
        }
        tracing::warn!(resource, reason = why, "device plugin endpoint stopped");
        self.request_checkpoint();
        self.bump();
    }

    fn plugin_ready(&self, resource: &str) -> bool {
        lock(&self.live).get(resource).is_some_and(|e| e.listed)
    }

    fn live_client(&self, resource: &str) -> Option<PluginClient> {
        lock(&self.live).get(resource).map(|e| e.client.clone())
    }

    fn update_allocated_devices(&self) {
        if !self.sources_ready.load(Ordering::Acquire) {
            return;
        }
        let active = self
            .active_pods
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(active) = active else {
            return;
        };
        let active = active();
        let removed = lock(&self.state).remove_inactive_pods(&active);
        if !removed.is_empty() {
            self.checkpoint_or_log();
        }
    }

    fn already_running(&self, pod: &Pod, container: &Container) -> bool {
        if self.sources_ready.load(Ordering::Acquire) {
            return false;
        }
        let running = self.running.read().unwrap_or_else(PoisonError::into_inner);
        if running.contains(&(pod.uid.clone(), container.name.clone())) {
            return true;
        }
        // A finished init container of a pod that runs needs nothing (upstream #124345).
        let finished_init = pod
            .init_containers
            .iter()
            .any(|c| c.name == container.name && !c.is_restartable());
        finished_init && running.iter().any(|(uid, _)| *uid == pod.uid)
    }

    async fn wait_for_plugin(&self, resource: &str) -> bool {
        let mut changes = self.changes.subscribe();
        let deadline = tokio::time::Instant::now() + self.config.registration_wait;
        loop {
            if self.plugin_ready(resource) {
                return true;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => return self.plugin_ready(resource),
            }
        }
    }
}

/// The manager as the registration server sees it.
struct Registrations(Arc<Shared>);

impl RegistrationHandler for Registrations {
    type Slot = RegistrationSlot;

    fn reserve(&self, resource: &str, endpoint: &str) -> Result<RegistrationSlot, String> {
        self.0
            .reserve_registration(resource, endpoint)
            .map_err(|refused| refused.to_string())
    }

    fn registered(&self, resource: &str) {
        if let Some(observer) = self.0.observer() {
            observer.plugin_registered(resource);
        }
    }

    async fn connect(&self, resource: &str, endpoint: &str) -> Result<(), String> {
        Shared::connect_plugin(&self.0, resource, endpoint).await
    }
}

/// A place taken under the registration caps while a plugin is dialed; given back on drop.
pub(crate) struct RegistrationSlot {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for RegistrationSlot {
    fn drop(&mut self) {
        lock(&self.shared.registering).remove(&self.id);
    }
}

/// A registration refused because it would pass a cap of [`DeviceManagerConfig`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RegistrationLimit {
    /// The plugin (endpoint) has as many resources registered as it may.
    #[error(
        "cannot register resource {resource:?}: plugin endpoint {endpoint:?} already has {registered} resources registered, the most one plugin may have (max_resources_per_plugin = {max})"
    )]
    PerPlugin {
        resource: String,
        endpoint: String,
        registered: usize,
        max: usize,
    },
    /// All plugins together have as many resources registered as they may.
    #[error(
        "cannot register resource {resource:?}: {registered} resources are registered, the most the device manager accepts (max_resources = {max})"
    )]
    Total {
        resource: String,
        registered: usize,
        max: usize,
    },
}

/// The device manager: registration server, plugin endpoints, allocation and checkpoint.
///
/// Cloning gives another handle to the same manager.
#[derive(Clone)]
pub struct DeviceManager {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for DeviceManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceManager")
            .field("plugin_dir", &self.shared.config.plugin_dir)
            .finish_non_exhaustive()
    }
}

/// Read `kubelet_internal_checkpoint` in the current or the pre-1.20 format.
fn read_checkpoint(
    store: &CheckpointStore,
) -> Result<Option<DeviceManagerCheckpoint>, CheckpointError> {
    let bytes = match store.read_bytes(DEVICE_MANAGER_FILE) {
        Ok(bytes) => bytes,
        Err(CheckpointError::NotFound { .. }) => return Ok(None),
        Err(err) => return Err(err),
    };
    let path = store.path_of(DEVICE_MANAGER_FILE)?;
    match DeviceManagerCheckpoint::decode(&bytes) {
        Ok(current) => Ok(Some(current)),
        Err(current_err) => match DeviceManagerCheckpointV1::decode(&bytes) {
            Ok(legacy) => {
                tracing::info!(path = %path.display(), "read a pre-1.20 device manager checkpoint");
                Ok(Some(legacy.to_current()))
            }
            Err(legacy_err)
                if legacy_err.is_checksum_mismatch() && !current_err.is_checksum_mismatch() =>
            {
                Err(legacy_err.with_path(&path))
            }
            Err(_) => Err(current_err.with_path(&path)),
        },
    }
}

impl DeviceManager {
    /// A manager for `config`; opens (creating) its checkpoint directory. Nothing is
    /// served until [`start`](Self::start).
    pub fn new(config: DeviceManagerConfig) -> Result<DeviceManager, DeviceManagerError> {
        let store = CheckpointStore::open(&config.checkpoint_dir)?;
        let (changes, _) = watch::channel(0);
        Ok(DeviceManager {
            shared: Arc::new(Shared {
                state: Mutex::new(
                    DeviceState::new(config.numa_nodes.clone())
                        .with_numa_ids(config.numa_ids.clone()),
                ),
                config,
                live: Mutex::new(BTreeMap::new()),
                registering: Mutex::new(BTreeMap::new()),
                next_registration: AtomicU64::new(0),
                store,
                checkpoint_lock: Mutex::new(()),
                checkpoint_wanted: tokio::sync::Notify::new(),
                checkpoint_writer: AtomicBool::new(false),
                next_generation: AtomicU64::new(1),
                changes,
                active_pods: RwLock::new(None),
                sources_ready: AtomicBool::new(true),
                running: RwLock::new(BTreeSet::new()),
                shutdown: Mutex::new(None),
                tasks: Mutex::new(Vec::new()),
                runtime: Mutex::new(None),
                observer: RwLock::new(None),
                pod_specs: RwLock::new(None),
            }),
        })
    }

    /// Report registrations and Allocate latencies to `observer` (replacing any earlier one).
    pub fn set_observer(&self, observer: Arc<dyn DeviceManagerObserver>) {
        *self
            .shared
            .observer
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(observer);
    }

    /// Let [`start`](Self::start) check the checkpoint against the specs of the pods the
    /// node admitted (replacing any earlier lookup): two containers of one known pod may
    /// then share a device only as upstream's init-container reuse. Without it, devices
    /// shared inside one pod are accepted and only a device of two pods is refused.
    pub fn set_pod_specs(&self, specs: PodSpecs) {
        *self
            .shared
            .pod_specs
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(specs);
    }

    /// The configuration.
    pub fn config(&self) -> &DeviceManagerConfig {
        &self.shared.config
    }

    /// The registration socket path.
    pub fn socket_path(&self) -> PathBuf {
        self.shared.config.kubelet_socket()
    }

    /// Start (upstream `Start`): restore the checkpoint — a corrupt one, or one that gives a
    /// device to two owners ([`DeviceManagerError::DoubleAssignment`]), is an error, never
    /// skipped — remove stale sockets from the plugin directory, and serve `kubelet.sock`.
    ///
    /// Allocations whose plugin has not registered (yet) come back and keep their devices,
    /// as upstream; admission of new pods needing the resource waits for the plugin (see
    /// [`DeviceManagerConfig::registration_wait`]).
    pub async fn start(&self, options: StartOptions) -> Result<(), DeviceManagerError> {
        let shared = &self.shared;
        *shared
            .active_pods
            .write()
            .unwrap_or_else(PoisonError::into_inner) = options.active_pods;
        shared
            .sources_ready
            .store(options.sources_ready, Ordering::Release);
        *shared
            .running
            .write()
            .unwrap_or_else(PoisonError::into_inner) = options.running_containers;
        *lock(&shared.runtime) = Some(tokio::runtime::Handle::current());

        if let Some(checkpoint) = read_checkpoint(&shared.store)? {
            let path = shared.store.path_of(DEVICE_MANAGER_FILE)?;
            let specs = shared
                .pod_specs
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let spec_of = |uid: &str| specs.as_ref().and_then(|specs| specs(uid));
            // Restored outside the lock: the pod-spec lookup is the caller's code.
            let mut restored = lock(&shared.state).clone();
            restored.restore_checkpoint_with_pods(&checkpoint, &path, Instant::now(), &spec_of)?;
            *lock(&shared.state) = restored;
            tracing::info!(path = %path.display(), "restored device allocations from checkpoint");
        }
        self.cleanup_plugin_dir()?;
        let listener = UdsListener::bind(
            shared.config.kubelet_socket(),
            &SocketOptions {
                dir_mode: 0o750,
                socket_mode: 0o600,
            },
        )?;
        let token = CancellationToken::new();
        *lock(&shared.shutdown) = Some(token.clone());
        shared.start_checkpoint_writer(token.clone());
        let router = tonic::transport::Server::builder().add_service(RegistrationServer::new(
            RegistrationService {
                handler: Arc::new(Registrations(Arc::clone(shared))),
            },
        ));
        let serve_options = shared.config.registration_server;
        shared.spawn(async move {
            if let Err(err) =
                uds::serve_with(router, listener, token.cancelled_owned(), serve_options).await
            {
                tracing::error!(%err, "device plugin registration server failed");
            }
        });
        tracing::info!(socket = %shared.config.kubelet_socket().display(), "device plugin registration server started");
        Ok(())
    }

    /// Remove sockets left in the plugin directory (upstream `CleanupPluginDirectory`),
    /// except the checkpoint file and a registration socket a live server still answers
    /// on (binding refuses that one).
    fn cleanup_plugin_dir(&self) -> Result<(), DeviceManagerError> {
        use std::os::unix::fs::FileTypeExt;
        let dir = &self.shared.config.plugin_dir;
        let io = |source| DeviceManagerError::PluginDir {
            path: dir.clone(),
            source,
        };
        match std::fs::create_dir_all(dir) {
            Ok(()) => {}
            Err(source) => return Err(io(source)),
        }
        let kubelet_sock = self.shared.config.kubelet_socket();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let path = entry.path();
            if path == kubelet_sock || entry.file_name() == DEVICE_MANAGER_FILE {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_socket()
                && let Err(err) = std::fs::remove_file(&path)
            {
                tracing::warn!(path = %path.display(), %err, "cannot remove stale plugin socket");
            }
        }
        Ok(())
    }

    /// Stop serving and disconnect every plugin; waits (bounded) for the tasks to end.
    pub async fn stop(&self) {
        if let Some(token) = lock(&self.shared.shutdown).take() {
            token.cancel();
        }
        for endpoint in std::mem::take(&mut *lock(&self.shared.live)).into_values() {
            endpoint.cancel.cancel();
        }
        let tasks = std::mem::take(&mut *lock(&self.shared.tasks));
        for task in tasks {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        }
    }

    /// Whether all pod sources are ready (upstream `sourcesReady`).
    pub fn set_sources_ready(&self, ready: bool) {
        self.shared.sources_ready.store(ready, Ordering::Release);
    }

    /// Read-only access to the core state.
    pub fn with_state<R>(&self, f: impl FnOnce(&DeviceState) -> R) -> R {
        f(&lock(&self.shared.state))
    }

    /// Whether the resource's plugin is connected and has listed its devices.
    pub fn plugin_ready(&self, resource: &str) -> bool {
        self.shared.plugin_ready(resource)
    }

    /// Wait until the resource's plugin is connected and listed its devices, at most
    /// `timeout`; true when it is.
    pub async fn wait_for_plugin(&self, resource: &str, timeout: std::time::Duration) -> bool {
        let mut changes = self.shared.changes.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.shared.plugin_ready(resource) {
                return true;
            }
            if !matches!(
                tokio::time::timeout_at(deadline, changes.changed()).await,
                Ok(Ok(()))
            ) {
                return self.shared.plugin_ready(resource);
            }
        }
    }

    /// Wait until `condition` holds on the state, at most `timeout`; true when it does.
    pub async fn wait_until(
        &self,
        timeout: std::time::Duration,
        condition: impl Fn(&DeviceState) -> bool,
    ) -> bool {
        let mut changes = self.shared.changes.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.with_state(&condition) {
                return true;
            }
            if !matches!(
                tokio::time::timeout_at(deadline, changes.changed()).await,
                Ok(Ok(()))
            ) {
                return self.with_state(&condition);
            }
        }
    }

    /// Free devices of pods that are no longer active (upstream `UpdateAllocatedDevices`).
    pub fn update_allocated_devices(&self) {
        self.shared.update_allocated_devices();
    }

    /// Upstream `GetCapacity`: capacity and allocatable per live resource, and the
    /// resources dropped now because their grace period expired.
    pub fn capacity(&self) -> Capacity {
        let capacity = lock(&self.shared.state)
            .capacity(Instant::now(), self.shared.config.endpoint_stop_grace);
        if !capacity.removed.is_empty() {
            tracing::info!(removed = %capacity.removed.join(","), "dropped resources of stopped device plugins");
            self.shared.checkpoint_or_log();
        }
        capacity
    }

    /// Upstream `ShouldResetExtendedResourceCapacity`: true when there is no
    /// `kubelet_internal_checkpoint` (the node was likely recreated). Upstream asks whether
    /// the directory lists any file at all, which a socket or a stray file answers too.
    pub fn should_reset_extended_resource_capacity(&self) -> bool {
        self.shared
            .store
            .path_of(DEVICE_MANAGER_FILE)
            .is_ok_and(|path| !path.exists())
    }

    /// The healthy devices of every registered resource (upstream
    /// `GetAllocatableDevices`).
    pub fn allocatable_devices(&self) -> BTreeMap<String, Vec<Device>> {
        let state = lock(&self.shared.state);
        state
            .resources()
            .into_iter()
            .filter(|r| state.is_registered(r))
            .map(|r| {
                let healthy = state.healthy_devices(&r);
                let devices = state
                    .all_devices(&r)
                    .into_iter()
                    .filter(|d| healthy.contains(&d.id))
                    .collect();
                (r, devices)
            })
            .collect()
    }

    /// The devices a container holds, per resource (upstream `GetDevices`).
    pub fn container_devices(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> BTreeMap<String, ContainerAllocation> {
        lock(&self.shared.state)
            .pod_devices()
            .container(pod_uid, container)
            .cloned()
            .unwrap_or_default()
    }

    /// Forget everything a pod holds (corral's release of a failed admission) and
    /// checkpoint.
    pub fn remove_pod(&self, pod_uid: &str) -> Result<(), DeviceManagerError> {
        lock(&self.shared.state).remove_pod(pod_uid);
        self.shared.write_checkpoint()?;
        Ok(())
    }

    /// Container hints (upstream `GetTopologyHints`, after freeing stale pods).
    pub fn container_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.shared.update_allocated_devices();
        Some(lock(&self.shared.state).container_hints(&pod.uid, container))
    }

    /// Pod hints (upstream `GetPodTopologyHints`, after freeing stale pods).
    pub fn pod_hints(&self, pod: &Pod) -> ProviderHints {
        self.shared.update_allocated_devices();
        Some(lock(&self.shared.state).pod_hints(pod))
    }

    /// Allocate the container's device-plugin resources (upstream `Allocate`), aligned
    /// with `affinity`. An init container's devices become reusable by the containers
    /// after it. On any error, everything taken for the container is given back first.
    pub async fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<(), DeviceManagerError> {
        lock(&self.shared.state).begin_pod(&pod.uid);
        self.allocate_container_resources(pod, container, affinity)
            .await?;
        let init = pod
            .init_containers
            .iter()
            .find(|c| c.name == container.name);
        let reusable_after = init.is_some_and(|c| !c.is_restartable());
        lock(&self.shared.state).finish_container(&pod.uid, &container.name, reusable_after);
        Ok(())
    }

    async fn allocate_container_resources(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<(), DeviceManagerError> {
        let shared = &self.shared;
        let requests = lock(&shared.state).container_device_requests(container);
        if requests.is_empty() {
            return Ok(());
        }
        shared.update_allocated_devices();
        let running = shared.already_running(pod, container);
        let mut committed: Vec<String> = Vec::new();
        let give_back = |committed: &[String]| {
            let mut state = lock(&shared.state);
            for resource in committed {
                state.uncommit(&pod.uid, &container.name, resource);
            }
        };
        for (resource, needed) in &requests {
            let result = self
                .allocate_resource(pod, container, resource, *needed, affinity, running)
                .await;
            match result {
                Ok(true) => committed.push(resource.clone()),
                Ok(false) => {}
                Err(err) => {
                    give_back(&committed);
                    if !committed.is_empty() {
                        shared.checkpoint_or_log();
                    }
                    tracing::warn!(pod = %pod.uid, container = %container.name, resource, %err,
                        "device allocation failed; everything taken for the container was given back");
                    return Err(err.into());
                }
            }
        }
        if !committed.is_empty()
            && let Err(err) = shared.write_checkpoint_async().await
        {
            give_back(&committed);
            shared.checkpoint_or_log();
            return Err(err.into());
        }
        Ok(())
    }

    /// One resource of one container: choose (asking the plugin's preference if it offers
    /// one), call `Allocate`, record. `Ok(true)` when something was recorded.
    async fn allocate_resource(
        &self,
        pod: &Pod,
        container: &Container,
        resource: &str,
        needed: usize,
        affinity: Option<NumaMask>,
        running: bool,
    ) -> Result<bool, AllocateError> {
        let shared = &self.shared;
        if !running && !shared.plugin_ready(resource) && !shared.config.registration_wait.is_zero()
        {
            tracing::info!(resource, pod = %pod.uid, container = %container.name,
                wait = ?shared.config.registration_wait, "waiting for the resource's device plugin to register");
            shared.wait_for_plugin(resource).await;
        }
        let mut preferred: Option<BTreeSet<String>> = None;
        let reservation = loop {
            let outcome = {
                let mut state = lock(&shared.state);
                let reusable = state
                    .reusable_devices(&pod.uid)
                    .and_then(|r| r.get(resource))
                    .cloned();
                let request = AllocationRequest {
                    pod_uid: &pod.uid,
                    container: &container.name,
                    resource,
                    required: needed,
                    reusable: reusable.as_ref(),
                    affinity,
                    already_running: running,
                };
                state.devices_to_allocate(&request, preferred.as_ref())
            };
            match outcome {
                Err(
                    AllocateError::Unregistered { .. } | AllocateError::NoHealthyDevices { .. },
                ) if !running
                    && !shared.plugin_ready(resource)
                    && !shared.config.registration_wait.is_zero() =>
                {
                    return Err(AllocateError::PluginNotRegistered {
                        resource: resource.to_owned(),
                        pod_uid: pod.uid.clone(),
                        container: container.name.clone(),
                        waited: shared.config.registration_wait,
                    });
                }
                Err(err) => return Err(err),
                Ok(ToAllocate::Nothing) => return Ok(false),
                Ok(ToAllocate::Devices(reservation)) => break reservation,
                Ok(ToAllocate::AskPlugin(ask)) => {
                    if preferred.is_some() {
                        return Err(AllocateError::Shortfall {
                            required: needed,
                            got: 0,
                        });
                    }
                    let client = shared.live_client(resource).ok_or_else(|| {
                        AllocateError::EndpointNotFound {
                            resource: resource.to_owned(),
                        }
                    })?;
                    let answer = client.preferred_allocation(&ask).await.map_err(|message| {
                        AllocateError::PreferredAllocation {
                            resource: resource.to_owned(),
                            message,
                        }
                    })?;
                    preferred = Some(answer);
                }
            }
        };
        let release = |err: AllocateError| {
            lock(&shared.state).release(&reservation);
            Err(err)
        };
        let Some(client) = shared.live_client(resource) else {
            return release(AllocateError::UnknownPlugin {
                resource: resource.to_owned(),
            });
        };
        let started = Instant::now();
        let answer = client.allocate(&reservation.devices).await;
        let elapsed = started.elapsed();
        tracing::debug!(resource, ?elapsed, "device plugin Allocate returned");
        if let Some(observer) = shared.observer() {
            observer.allocate_rpc_finished(resource, elapsed);
        }
        match answer {
            Ok(Some(response)) => {
                lock(&shared.state).commit(&reservation, &pod.uid, &container.name, response);
                tracing::info!(resource, pod = %pod.uid, container = %container.name,
                    devices = %reservation.devices.join(","), "allocated devices");
                Ok(true)
            }
            Ok(None) => release(AllocateError::NoContainerResponse {
                resource: resource.to_owned(),
            }),
            Err(message) => release(AllocateError::AllocateRpc {
                resource: resource.to_owned(),
                pod_uid: pod.uid.clone(),
                container: container.name.clone(),
                message,
            }),
        }
    }

    /// Upstream `GetDeviceRunContainerOptions`: call `PreStartContainer` where plugins ask
    /// for it, re-allocate a container the manager has no record of (a race on node
    /// restart), and return the merged run options (`None` when the container holds
    /// nothing).
    pub async fn run_container_options(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<Option<RunContainerOptions>, DeviceManagerError> {
        let shared = &self.shared;
        let requests = lock(&shared.state).container_device_requests(container);
        let mut reallocate = false;
        for (resource, n) in requests {
            if n == 0 {
                continue;
            }
            self.pre_start(pod, container, &resource).await?;
            let active = shared
                .active_pods
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .is_none_or(|active| active().contains(&pod.uid));
            if !active {
                continue;
            }
            if lock(&shared.state)
                .pod_devices()
                .get(&pod.uid, &container.name, &resource)
                .is_none()
            {
                reallocate = true;
            }
        }
        if reallocate {
            self.allocate(pod, container, affinity).await?;
        }
        Ok(lock(&shared.state)
            .pod_devices()
            .container(&pod.uid, &container.name)
            .map(RunContainerOptions::merge))
    }

    async fn pre_start(
        &self,
        pod: &Pod,
        container: &Container,
        resource: &str,
    ) -> Result<(), AllocateError> {
        let (endpoint, devices) = {
            let state = lock(&self.shared.state);
            let devices =
                state
                    .pod_devices()
                    .container_devices(&pod.uid, &container.name, resource);
            (state.endpoint(resource), devices)
        };
        let Some(endpoint) = endpoint else {
            return Err(AllocateError::EndpointNotFound {
                resource: resource.to_owned(),
            });
        };
        if !endpoint.options.is_some_and(|o| o.pre_start_required) {
            return Ok(());
        }
        let Some(devices) = devices else {
            return Err(AllocateError::NoDevicesForPreStart {
                pod_uid: pod.uid.clone(),
                container: container.name.clone(),
                resource: resource.to_owned(),
            });
        };
        let devices: Vec<String> = devices.into_iter().collect();
        let client = self
            .shared
            .live_client(resource)
            .ok_or_else(|| AllocateError::PreStart {
                resource: resource.to_owned(),
                message: "the plugin's endpoint has been stopped".to_owned(),
            })?;
        client
            .pre_start_container(&devices)
            .await
            .map_err(|message| AllocateError::PreStart {
                resource: resource.to_owned(),
                message,
            })
    }

    /// Run `future` to completion from synchronous code: inside a multi-thread runtime via
    /// `block_in_place`, outside any runtime on the runtime the manager started on.
    fn block_on<F: Future>(&self, future: F) -> Result<F::Output, DeviceManagerError> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
                Ok(tokio::task::block_in_place(|| handle.block_on(future)))
            }
            Ok(_) => Err(DeviceManagerError::CannotBlock(
                "called inside a current-thread tokio runtime".to_owned(),
            )),
            Err(_) => {
                let handle = lock(&self.shared.runtime).clone();
                match handle {
                    Some(handle) => Ok(handle.block_on(future)),
                    None => Err(DeviceManagerError::NotRunning),
                }
            }
        }
    }
}

impl HintProvider for DeviceManager {
    fn hints_for_container(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.container_hints(pod, container)
    }

    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints {
        self.pod_hints(pod)
    }

    /// Blocks until the plugins answered (see [`DeviceManager::allocate`]).
    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        store: &AffinityStore,
    ) -> Result<(), AllocationError> {
        let affinity = store.affinity(&pod.uid, &container.name).numa_affinity;
        self.block_on(DeviceManager::allocate(self, pod, container, affinity))
            .and_then(|r| r)
            .map_err(AllocationError::unexpected)
    }
}
