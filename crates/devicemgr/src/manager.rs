//! [`DeviceManager`]: the facade over the device manager's parts — the core
//! [`DeviceState`](crate::DeviceState) (read synchronously, no runtime needed), the plugin
//! [`Hub`](crate::hub::Hub) behind the
//! registration server, the checkpoint writer, allocation against the plugins
//! (`plugin_allocation`) and pre-start (`pre_start`). Plugin RPCs run outside every lock
//! and under a deadline.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_checkpoint::{CheckpointStore, DEVICE_MANAGER_FILE, StateFile};
use corral_proto::deviceplugin::v1beta1::registration_server::RegistrationServer;
use corral_proto::uds::{self, SocketOptions, UdsListener};
use corral_topology::{
    AffinityStore, AllocationError, Container, HintProvider, NumaMask, Pod, ProviderHints,
    topologymanager::{Grant, ProviderHintSets},
};
use tokio_util::sync::CancellationToken;

use crate::checkpoint_legacy::read_checkpoint;
use crate::config::DeviceManagerConfig;
use crate::device::{Device, ResourceInventory};
use crate::error::DeviceManagerError;
use crate::hub::HubRegistrations;
use crate::locks::lock;
use crate::observer::DeviceManagerObserver;
use crate::plugin_allocation::Reserved;
use crate::plugin_dir;
use crate::pod_devices::ContainerAllocation;
use crate::pods::{PodSpecs, StartOptions};
use crate::registration::RegistrationService;
use crate::run_options::RunContainerOptions;
use crate::shared::Shared;
use crate::state::Capacity;
#[cfg(feature = "test-util")]
use crate::state::DeviceState;

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

impl DeviceManager {
    /// A manager for `config`; opens (creating) its checkpoint directory. Nothing is
    /// served until [`start`](Self::start).
    pub fn new(config: DeviceManagerConfig) -> Result<DeviceManager, DeviceManagerError> {
        let store = CheckpointStore::open(&config.checkpoint_dir)?;
        let file = StateFile::in_store(&store, DEVICE_MANAGER_FILE)?;
        Ok(Self::with_state_file(config, file))
    }

    /// A manager for `config` keeping `kubelet_internal_checkpoint` in `file` (normally
    /// that file in `config.checkpoint_dir`, for instance through a store whose writes a
    /// [`Journal`](corral_checkpoint::Journal) makes durable).
    pub fn with_state_file(config: DeviceManagerConfig, file: StateFile) -> DeviceManager {
        DeviceManager {
            shared: Arc::new(Shared::new(config, file)),
        }
    }

    /// Report registrations and Allocate latencies to `observer` (replacing any earlier one).
    pub fn set_observer(&self, observer: Arc<dyn DeviceManagerObserver>) {
        self.shared.observer.set(observer);
    }

    /// Let [`start`](Self::start) check the checkpoint against the specs of the pods the
    /// node admitted (replacing any earlier lookup): two containers of one known pod may
    /// then share a device only as upstream's init-container reuse. Without it, devices
    /// shared inside one pod are accepted and only a device of two pods is refused.
    pub fn set_pod_specs(&self, specs: PodSpecs) {
        self.shared.pods.set_pod_specs(specs);
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
        shared.pods.start(options);
        self.restore()?;
        plugin_dir::cleanup(&shared.config)?;
        let listener = UdsListener::bind(
            shared.config.kubelet_socket(),
            &SocketOptions {
                dir_mode: 0o750,
                socket_mode: 0o600,
            },
        )?;
        let token = CancellationToken::new();
        *lock(&shared.shutdown) = Some(token.clone());
        shared.checkpoints.start(&shared.tasks, token.clone());
        let registrations = HubRegistrations {
            hub: Arc::clone(&shared.hub),
            handler: Arc::clone(shared),
        };
        let router = tonic::transport::Server::builder().add_service(RegistrationServer::new(
            RegistrationService {
                handler: Arc::new(registrations),
            },
        ));
        let serve_options = shared.config.registration_server;
        shared.tasks.spawn(async move {
            if let Err(err) =
                uds::serve_with(router, listener, token.cancelled_owned(), serve_options).await
            {
                tracing::error!(%err, "device plugin registration server failed");
            }
        });
        tracing::info!(socket = %shared.config.kubelet_socket().display(), "device plugin registration server started");
        Ok(())
    }

    /// Restore `kubelet_internal_checkpoint`, if there is one, checked against the pod
    /// specs given with [`set_pod_specs`](Self::set_pod_specs).
    fn restore(&self) -> Result<(), DeviceManagerError> {
        let shared = &self.shared;
        let file = shared.checkpoints.file();
        let Some(checkpoint) = read_checkpoint(file)? else {
            return Ok(());
        };
        let path = std::path::PathBuf::from(file.to_string());
        let specs = shared.pods.pod_specs();
        let spec_of = |uid: &str| specs.as_ref().and_then(|specs| specs(uid));
        // Restored outside the lock: the pod-spec lookup is the caller's code.
        let mut restored = shared.state().clone();
        restored.restore_checkpoint_with_pods(&checkpoint, &path, Instant::now(), &spec_of)?;
        *shared.state() = restored;
        tracing::info!(path = %path.display(), "restored device allocations from checkpoint");
        Ok(())
    }

    /// Stop serving and disconnect every plugin; waits (bounded) for the tasks to end.
    pub async fn stop(&self) {
        if let Some(token) = lock(&self.shared.shutdown).take() {
            token.cancel();
        }
        self.shared.hub.disconnect_all();
        self.shared.tasks.join().await;
    }

    /// Wait until the background work already set off has finished: the streams of
    /// plugins that were replaced or have stopped have ended (with their last report), and
    /// every checkpoint write asked for so far is done. Writes that plugins' device lists
    /// and disconnections ask for are made by a background writer (coalesced, so a
    /// flooding plugin costs at most one write in flight); call this when
    /// `kubelet_internal_checkpoint` must reflect every report received so far — before
    /// reading, copying or removing the file, or before a planned restart. Work that starts
    /// after the call (a plugin's next list) is not waited for; nor is there a deadline
    /// (wrap the call in a timeout where one is needed).
    pub async fn settled(&self) {
        self.shared.hub.retired_streams_ended().await;
        self.shared.checkpoints.flushed().await;
    }

    /// Whether all pod sources are ready (upstream `sourcesReady`).
    pub fn set_sources_ready(&self, ready: bool) {
        self.shared.pods.set_sources_ready(ready);
    }

    /// Read-only access to the core state (for tests; feature `test-util`).
    #[cfg(feature = "test-util")]
    #[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
    pub fn with_state<R>(&self, f: impl FnOnce(&DeviceState) -> R) -> R {
        f(&self.shared.state())
    }

    /// Wait until `condition` holds on the state, at most `timeout`; true when it does
    /// (for tests; feature `test-util`).
    #[cfg(feature = "test-util")]
    #[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
    pub async fn wait_until(
        &self,
        timeout: Duration,
        condition: impl Fn(&DeviceState) -> bool,
    ) -> bool {
        let shared = &self.shared;
        shared
            .changes
            .wait_for(timeout, || condition(&shared.state()))
            .await
    }

    /// Whether the resource's plugin is connected and has listed its devices.
    pub fn plugin_ready(&self, resource: &str) -> bool {
        self.shared.hub.plugin_ready(resource)
    }

    /// Wait until the resource's plugin is connected and listed its devices, at most
    /// `timeout`; true when it is.
    pub async fn wait_for_plugin(&self, resource: &str, timeout: Duration) -> bool {
        self.shared.wait_for_plugin(resource, timeout).await
    }

    /// Free devices of pods that are no longer active (upstream `UpdateAllocatedDevices`).
    pub fn update_allocated_devices(&self) {
        self.shared.update_allocated_devices();
    }

    /// Upstream `GetCapacity`: capacity and allocatable per live resource, and the
    /// resources dropped now because their grace period expired.
    pub fn capacity(&self) -> Capacity {
        let capacity = self
            .shared
            .state()
            .capacity(Instant::now(), self.shared.config.endpoint_stop_grace);
        if !capacity.removed.is_empty() {
            tracing::info!(removed = %capacity.removed.join(","), "dropped resources of stopped device plugins");
            self.shared.checkpoints.write_or_log();
        }
        capacity
    }

    /// Upstream `ShouldResetExtendedResourceCapacity`: true when there is no
    /// `kubelet_internal_checkpoint` (the node was likely recreated). Upstream asks whether
    /// the directory lists any file at all, which a socket or a stray file answers too.
    pub fn should_reset_extended_resource_capacity(&self) -> bool {
        matches!(self.shared.checkpoints.file().load(), Ok(None))
    }

    /// The healthy devices of every registered resource (upstream
    /// `GetAllocatableDevices`).
    pub fn allocatable_devices(&self) -> BTreeMap<String, Vec<Device>> {
        let state = self.shared.state();
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

    /// Every registered resource's devices as its plugin last listed them (with their NUMA
    /// nodes), which of them the manager holds healthy (a disconnected plugin's are not,
    /// whatever its last list said) and which pods hold: what a NodeResourceTopology
    /// publishes per NUMA node, read under one lock.
    pub fn device_inventory(&self) -> BTreeMap<String, ResourceInventory> {
        let state = self.shared.state();
        state
            .resources()
            .into_iter()
            .filter(|r| state.is_registered(r))
            .map(|r| {
                let inventory = ResourceInventory {
                    devices: state.all_devices(&r),
                    healthy: state.healthy_devices(&r),
                    allocated: state.allocated_devices(&r),
                };
                (r, inventory)
            })
            .collect()
    }

    /// The health of an allocated device as upstream's `UpdateAllocatedResourcesStatus`
    /// reports it: what its plugin last said in `ListAndWatch` (`true`: `Healthy`), and
    /// `Healthy` when the plugin no longer lists it (upstream's default for a device it
    /// cannot find).
    pub fn device_healthy(&self, resource: &str, id: &str) -> bool {
        self.shared
            .state()
            .all_devices(resource)
            .iter()
            .find(|d| d.id == id)
            .is_none_or(|d| d.healthy)
    }

    /// The devices a container holds, per resource (upstream `GetDevices`).
    pub fn container_devices(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> BTreeMap<String, ContainerAllocation> {
        self.shared
            .state()
            .pod_devices()
            .container(pod_uid, container)
            .cloned()
            .unwrap_or_default()
    }

    /// Forget everything a pod holds (corral's release of a failed admission) and
    /// checkpoint.
    pub fn remove_pod(&self, pod_uid: &str) -> Result<(), DeviceManagerError> {
        self.shared.state().remove_pod(pod_uid);
        self.shared.checkpoints.write()?;
        Ok(())
    }

    /// Forget what one container holds (corral's release of a container whose joining its
    /// pod failed) and checkpoint.
    pub fn remove_container(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> Result<(), DeviceManagerError> {
        self.shared.state().remove_container(pod_uid, container);
        self.shared.checkpoints.write()?;
        Ok(())
    }

    /// Allocate the container's device-plugin resources (upstream `Allocate`), aligned
    /// with `affinity`, outside any topology decision: reserve, ask the plugins' preferred
    /// allocation where they offer one, and call their `Allocate`. An init container's
    /// devices become reusable by the containers after it. On any error, everything taken
    /// for the container is given back first.
    pub async fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<(), DeviceManagerError> {
        self.shared.allocate(pod, container, affinity).await
    }

    /// Before a topology decision of `pod`: wait (at most the
    /// [registration wait](DeviceManagerConfig::registration_wait)) for the plugins of its
    /// device-plugin resources that have not registered yet, so the decision, which never
    /// waits, finds them.
    pub async fn wait_for_plugins(&self, pod: &Pod) {
        let containers = pod.all_containers().map(|(_, c)| c);
        self.shared.wait_for_plugins(pod, containers).await;
    }

    /// After a topology decision of the pod that came back
    /// [deferred](corral_topology::topologymanager::PodAdmitResult::deferred): put the
    /// questions it noted to the plugins (`GetPreferredAllocation`, under the plugin call
    /// deadline) and keep the answers for the pod's next decision. Call
    /// [`cancel_reserved`](Self::cancel_reserved) before (with the rest of the decision's
    /// undo) and decide the pod again after.
    pub async fn ask_plugins(&self, pod_uid: &str) -> Result<(), DeviceManagerError> {
        Ok(self.shared.ask_plugins(pod_uid).await?)
    }

    /// After a topology decision that admitted the pod: give the devices its decision
    /// reserved to the plugins' `Allocate`, record the answers and checkpoint. On an
    /// error, everything reserved and committed by this call is given back (the caller
    /// undoes the rest of the decision).
    pub async fn realize(&self, pod_uid: &str) -> Result<(), DeviceManagerError> {
        self.shared.realize(pod_uid).await
    }

    /// Give back what the pod's decision reserved and not yet realized (the device part of
    /// undoing a refused or deferred decision); the plugins' answers stay for the pod's
    /// next decision.
    pub fn cancel_reserved(&self, pod_uid: &str) {
        self.shared.state().cancel_reserved(pod_uid);
    }

    /// How many device choices took a plugin's preferred allocation given for an earlier
    /// state, after the question had changed
    /// [`MAX_QUESTIONS_PER_RESOURCE`](crate::MAX_QUESTIONS_PER_RESOURCE) times (each is
    /// also logged).
    pub fn stale_answers_taken(&self) -> u64 {
        self.shared
            .stale_answers
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the pod's decision reserved devices that [`realize`](Self::realize) will
    /// give to their plugins.
    pub fn has_reservations(&self, pod_uid: &str) -> bool {
        self.shared.state().has_reservations(pod_uid)
    }

    /// The pod's admission is over (admitted, refused or abandoned): give back anything
    /// still reserved for it and forget the plugins' answers.
    pub fn end_admission(&self, pod_uid: &str) {
        self.shared.state().end_admission(pod_uid);
    }

    /// Upstream `GetDeviceRunContainerOptions`: call `PreStartContainer` where plugins ask
    /// for it, re-allocate a container the manager has no record of (a race on node
    /// restart), and return the merged run options (`None` when the container holds
    /// nothing). For a container some of whose extended resources DRA satisfies, use
    /// [`run_container_options_beside_dra`](Self::run_container_options_beside_dra).
    pub async fn run_container_options(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<Option<RunContainerOptions>, DeviceManagerError> {
        self.shared
            .run_container_options(pod, container, affinity, &BTreeSet::new())
            .await
    }

    /// [`run_container_options`](Self::run_container_options) for a container whose
    /// extended resources `dra_backed` are satisfied by DRA (KEP-5004: the resources the
    /// pod's `status.extendedResourceClaimStatus.requestMappings` map for this container):
    /// they are left out of every device-plugin step — no `PreStartContainer`, no
    /// re-allocation — and device-plugin state kept under their names for the container (a
    /// name a device plugin served before) gives no run options (upstream PR #141426).
    /// The container's other resources are handled as by `run_container_options`.
    pub async fn run_container_options_beside_dra(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
        dra_backed: &BTreeSet<String>,
    ) -> Result<Option<RunContainerOptions>, DeviceManagerError> {
        self.shared
            .run_container_options(pod, container, affinity, dra_backed)
            .await
    }
}

/// Hints and reservations come from the in-memory state under a std lock: they never
/// block a runtime thread and need no runtime; plugins are called after the decision (see
/// [`DeviceManager::realize`]).
impl HintProvider for DeviceManager {
    fn name(&self) -> &str {
        "device manager"
    }

    /// Container hints (upstream `GetTopologyHints`, after freeing stale pods).
    fn hints_for_container(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.shared.update_allocated_devices();
        Some(self.shared.state().hints_for_container(&pod.uid, container))
    }

    /// Pod hints (upstream `GetPodTopologyHints`, after freeing stale pods).
    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints {
        self.shared.update_allocated_devices();
        Some(self.shared.state().hints_for_pod(pod))
    }

    /// Container hints as families (no walk over every set of NUMA nodes).
    fn hint_sets_for_container(&self, pod: &Pod, container: &Container) -> ProviderHintSets {
        self.shared.update_allocated_devices();
        Some(
            self.shared
                .state()
                .hint_sets_for_container(&pod.uid, container),
        )
    }

    /// Pod hints as families.
    fn hint_sets_for_pod(&self, pod: &Pod) -> ProviderHintSets {
        self.shared.update_allocated_devices();
        Some(self.shared.state().hint_sets_for_pod(pod))
    }

    /// Reserve the container's devices in the decision (no plugin call, no wait, no
    /// runtime needed): the topology manager's admission must be followed by
    /// [`DeviceManager::realize`] when it admits, and by
    /// [`DeviceManager::cancel_reserved`], [`DeviceManager::ask_plugins`] and a new
    /// decision when it comes back
    /// [deferred](corral_topology::topologymanager::PodAdmitResult::deferred) (a plugin's
    /// preferred allocation is needed: [`AllocationError::Deferred`]).
    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        store: &AffinityStore,
    ) -> Result<Grant, AllocationError> {
        let affinity = store.affinity(&pod.uid, &container.name).numa_affinity;
        match self.shared.reserve(pod, container, affinity) {
            Ok(Reserved::Done(granted)) => Ok(*granted),
            Ok(Reserved::Asking) => Err(AllocationError::Deferred),
            Err(err) => Err(AllocationError::unexpected(DeviceManagerError::from(err))),
        }
    }
}
