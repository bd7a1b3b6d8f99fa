//! [`Shared`]: what the facade, the plugin tasks and the background writer share — the
//! core state under a std lock (so hints and bookkeeping need no runtime), the plugin hub,
//! the checkpoint writer, the node's pods — and the manager's side of the plugin seam
//! ([`ClientHandler`]): plugin reports become state changes, a checkpoint and a wake-up of
//! whoever waits.
//!
//! **Lock order:** a stream's turn to apply a device list (the hub's async, first come
//! first served lock), then the hub's plugins, then the hub's registrations in flight,
//! then the checkpoint writer's serial lock, then the state; none is held across an
//! `await`. The checkpoint writer's bookkeeping and the hub's running streams are leaves:
//! nothing is locked while they are held. The std locks of this order are
//! [`Ordered`](crate::locks::Ordered): debug builds check the order on every acquisition.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_checkpoint::StateFile;
use tokio_util::sync::CancellationToken;

use crate::changes::Changes;
use crate::checkpoint_writer::CheckpointWriter;
use crate::config::DeviceManagerConfig;
use crate::device::{Device, PluginOptions};
use crate::hub::{ClientHandler, Hub};
use crate::locks::{Ordered, OrderedGuard, Rank};
use crate::observer::ObserverSlot;
use crate::pods::PodSources;
use crate::state::DeviceState;
use crate::tasks::Tasks;

/// State shared by the facade, the registration server and the plugin tasks.
pub(crate) struct Shared {
    pub(crate) config: DeviceManagerConfig,
    state: Arc<Ordered<DeviceState>>,
    pub(crate) checkpoints: Arc<CheckpointWriter>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) pods: PodSources,
    pub(crate) changes: Changes,
    pub(crate) tasks: Arc<Tasks>,
    pub(crate) observer: Arc<ObserverSlot>,
    /// Decisions that took a plugin's preferred allocation for an earlier question (see
    /// `MAX_QUESTIONS_PER_RESOURCE`).
    pub(crate) stale_answers: std::sync::atomic::AtomicU64,
    /// Cancels the registration server and the background writer.
    pub(crate) shutdown: Mutex<Option<CancellationToken>>,
}

impl Shared {
    /// A stopped manager's shared state for `config`, keeping its checkpoint in `file`.
    pub(crate) fn new(config: DeviceManagerConfig, file: StateFile) -> Shared {
        let state = Arc::new(Ordered::new(
            Rank::State,
            DeviceState::new(config.numa_nodes.clone()).with_numa_ids(config.numa_ids.clone()),
        ));
        let tasks = Arc::new(Tasks::default());
        let observer = Arc::new(ObserverSlot::default());
        Shared {
            checkpoints: Arc::new(CheckpointWriter::new(file, Arc::clone(&state))),
            hub: Arc::new(Hub::new(
                config.clone(),
                Arc::clone(&tasks),
                Arc::clone(&observer),
            )),
            config,
            state,
            pods: PodSources::default(),
            changes: Changes::default(),
            tasks,
            observer,
            stale_answers: Default::default(),
            shutdown: Mutex::new(None),
        }
    }

    /// The core state, locked.
    pub(crate) fn state(&self) -> OrderedGuard<'_, DeviceState> {
        self.state.lock()
    }

    /// Free devices of pods that are no longer active (upstream `UpdateAllocatedDevices`):
    /// only once sources are ready and the active pods are known.
    pub(crate) fn update_allocated_devices(&self) {
        let Some(active) = self.pods.active_when_ready() else {
            return;
        };
        let removed = self.state().remove_inactive_pods(&active);
        if !removed.is_empty() {
            self.checkpoints.write_or_log();
        }
    }

    /// Wait until the resource's plugin is connected and listed its devices, at most
    /// `timeout`; true when it is.
    pub(crate) async fn wait_for_plugin(&self, resource: &str, timeout: Duration) -> bool {
        self.changes
            .wait_for(timeout, || self.hub.plugin_ready(resource))
            .await
    }

    /// The state changed: checkpoint it (in the background while running) and wake waiters.
    fn changed(&self) {
        self.checkpoints.request();
        self.changes.bump();
    }

    /// `resource`'s devices changed: tell the observer (outside the state's lock).
    fn devices_changed(&self, resource: &str) {
        if let Some(observer) = self.observer.get() {
            observer.devices_changed(resource);
        }
    }
}

impl ClientHandler for Shared {
    fn plugin_connected(&self, resource: &str, options: PluginOptions) {
        self.state().plugin_connected(resource, options);
        self.changes.bump();
        self.devices_changed(resource);
    }

    /// All the plugin's devices become unhealthy at once and its grace period starts.
    fn plugin_disconnected(&self, resource: &str) {
        self.state().plugin_disconnected(resource, Instant::now());
        self.changed();
        self.devices_changed(resource);
    }

    fn plugin_list_and_watch_receive(&self, resource: &str, devices: &[Device]) {
        {
            let mut state = self.state();
            let duplicates = state.update_devices(resource, devices);
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
        self.changed();
        self.devices_changed(resource);
    }
}
