//! [`CheckpointWriter`]: writes `kubelet_internal_checkpoint` from a snapshot of the state.
//! Writes are serialized by their own lock, so a slow disk never blocks admission; while
//! the manager runs, the writes a plugin's device lists ask for go through one background
//! task, coalesced (at most one in flight and one pending).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use corral_checkpoint::{CheckpointError, CheckpointStore, DEVICE_MANAGER_FILE};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::locks::lock;
use crate::state::DeviceState;
use crate::tasks::Tasks;

/// The checkpoint file of one manager and who writes it.
pub(crate) struct CheckpointWriter {
    store: CheckpointStore,
    state: Arc<Mutex<DeviceState>>,
    /// Serializes writes (each takes its own snapshot).
    serial: Mutex<()>,
    /// Wakes the background writer; repeated requests coalesce.
    wanted: Notify,
    /// Whether the background writer runs.
    background: AtomicBool,
}

impl CheckpointWriter {
    /// A writer of `state` into `store`.
    pub(crate) fn new(store: CheckpointStore, state: Arc<Mutex<DeviceState>>) -> CheckpointWriter {
        CheckpointWriter {
            store,
            state,
            serial: Mutex::new(()),
            wanted: Notify::new(),
            background: AtomicBool::new(false),
        }
    }

    /// The checkpoint directory.
    pub(crate) fn store(&self) -> &CheckpointStore {
        &self.store
    }

    /// Write the checkpoint now, on this thread.
    pub(crate) fn write(&self) -> Result<(), CheckpointError> {
        let _serial = lock(&self.serial);
        let snapshot = lock(&self.state).to_checkpoint();
        self.store.create(DEVICE_MANAGER_FILE, &snapshot)
    }

    /// [`write`](Self::write), logging a failure.
    pub(crate) fn write_or_log(&self) {
        if let Err(err) = self.write() {
            tracing::error!(%err, "writing device manager checkpoint failed");
        }
    }

    /// Write the checkpoint on the blocking pool.
    pub(crate) async fn write_async(self: &Arc<Self>) -> Result<(), CheckpointError> {
        let writer = Arc::clone(self);
        match tokio::task::spawn_blocking(move || writer.write()).await {
            Ok(result) => result,
            Err(join) => Err(CheckpointError::Io {
                op: "write checkpoint",
                path: self.store.dir().join(DEVICE_MANAGER_FILE),
                source: std::io::Error::other(join.to_string()),
            }),
        }
    }

    /// Ask for a checkpoint: through the background writer while it runs (a plugin flooding
    /// lists causes at most one write in flight and one pending, never a write per list on
    /// a runtime thread), at once otherwise.
    pub(crate) fn request(&self) {
        if self.background.load(Ordering::Acquire) {
            self.wanted.notify_one();
        } else {
            self.write_or_log();
        }
    }

    /// Run the background writer on `tasks` until `stop`, then write once more.
    pub(crate) fn start(self: &Arc<Self>, tasks: &Tasks, stop: CancellationToken) {
        let writer = Arc::clone(self);
        self.background.store(true, Ordering::Release);
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = writer.wanted.notified() => {}
                    () = stop.cancelled() => break,
                }
                if let Err(err) = writer.write_async().await {
                    tracing::error!(%err, "writing device manager checkpoint failed");
                }
            }
            writer.background.store(false, Ordering::Release);
            writer.write_or_log();
        });
    }
}
