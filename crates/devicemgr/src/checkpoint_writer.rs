//! [`CheckpointWriter`]: writes `kubelet_internal_checkpoint` from a snapshot of the state.
//! Writes are serialized by their own lock, so a slow disk never blocks admission; while
//! the manager runs, the writes a plugin's device lists ask for go through one background
//! task, coalesced (at most one in flight and one pending), and
//! [`flushed`](CheckpointWriter::flushed) waits until none is left.

use std::sync::{Arc, Mutex};

use corral_checkpoint::{CheckpointError, StateFile};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::locks::{Ordered, Rank, lock};
use crate::state::DeviceState;
use crate::tasks::Tasks;

/// The background writer's bookkeeping.
#[derive(Debug, Default)]
struct Background {
    /// The background writer runs (otherwise a request writes at once).
    running: bool,
    /// A write was asked of the background writer that it has not started yet.
    pending: bool,
}

/// The checkpoint file of one manager and who writes it.
pub(crate) struct CheckpointWriter {
    file: StateFile,
    state: Arc<Ordered<DeviceState>>,
    /// Serializes writes (each takes its own snapshot).
    serial: Ordered<()>,
    /// Wakes the background writer; repeated requests coalesce.
    wanted: Notify,
    /// Whether the background writer runs, and what it has left to do.
    background: Mutex<Background>,
    /// Whether a background write is pending or under way (what [`Self::flushed`] waits
    /// out).
    busy: watch::Sender<bool>,
}

impl CheckpointWriter {
    /// A writer of `state` into `file`.
    pub(crate) fn new(file: StateFile, state: Arc<Ordered<DeviceState>>) -> CheckpointWriter {
        CheckpointWriter {
            file,
            state,
            serial: Ordered::new(Rank::CheckpointSerial, ()),
            wanted: Notify::new(),
            background: Mutex::new(Background::default()),
            busy: watch::Sender::new(false),
        }
    }

    /// The checkpoint file.
    pub(crate) fn file(&self) -> &StateFile {
        &self.file
    }

    /// Write the checkpoint now, on this thread.
    pub(crate) fn write(&self) -> Result<(), CheckpointError> {
        let _serial = self.serial.lock();
        let snapshot = self.state.lock().to_checkpoint();
        self.file.stage_checkpoint(&snapshot)
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
                path: self.file.to_string().into(),
                source: std::io::Error::other(join.to_string()),
            }),
        }
    }

    /// Ask for a checkpoint: through the background writer while it runs (a plugin flooding
    /// lists causes at most one write in flight and one pending, never a write per list on
    /// a runtime thread), at once otherwise.
    pub(crate) fn request(&self) {
        {
            let mut background = lock(&self.background);
            if background.running {
                background.pending = true;
                self.busy.send_replace(true);
                drop(background);
                self.wanted.notify_one();
                return;
            }
        }
        self.write_or_log();
    }

    /// Wait until every write asked of the background writer before this call is written
    /// (or failed, which is logged) and none is pending.
    pub(crate) async fn flushed(&self) {
        let mut busy = self.busy.subscribe();
        let _ = busy.wait_for(|busy| !busy).await;
    }

    /// Run the background writer on `tasks` until `stop`, then write once more.
    pub(crate) fn start(self: &Arc<Self>, tasks: &Tasks, stop: CancellationToken) {
        let writer = Arc::clone(self);
        lock(&self.background).running = true;
        tasks.spawn(async move {
            // However the task ends (even dropped with its runtime), nothing is left busy.
            let _idle = Idle(Arc::clone(&writer));
            loop {
                tokio::select! {
                    () = writer.wanted.notified() => {}
                    () = stop.cancelled() => break,
                }
                if !writer.begin_background_write() {
                    continue;
                }
                if let Err(err) = writer.write_async().await {
                    tracing::error!(%err, "writing device manager checkpoint failed");
                }
                writer.end_background_write();
            }
            lock(&writer.background).running = false;
            writer.write_or_log();
        });
    }

    /// Take the pending request for a write; false when there is none.
    fn begin_background_write(&self) -> bool {
        let mut background = lock(&self.background);
        if !background.pending {
            return false;
        }
        background.pending = false;
        true
    }

    /// A background write is done: idle unless another was asked for meanwhile.
    fn end_background_write(&self) {
        // Under the lock, so that a request made meanwhile is not marked done.
        let background = lock(&self.background);
        if !background.pending {
            self.busy.send_replace(false);
        }
    }
}

/// Marks the background writer stopped and idle when dropped: later requests write at once,
/// and [`CheckpointWriter::flushed`] waits for nothing.
struct Idle(Arc<CheckpointWriter>);

impl Drop for Idle {
    fn drop(&mut self) {
        *lock(&self.0.background) = Background::default();
        self.0.busy.send_replace(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Device, PluginOptions};
    use corral_checkpoint::DEVICE_MANAGER_FILE;

    /// On a current-thread runtime the background writer runs only when the test awaits,
    /// so what is written when depends on no clock.
    #[tokio::test]
    async fn flushed_waits_for_the_background_writes_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let state = Arc::new(Ordered::new(Rank::State, DeviceState::new(vec![0])));
        let store = corral_checkpoint::CheckpointStore::open(dir.path()).unwrap();
        let file = StateFile::in_store(&store, DEVICE_MANAGER_FILE).unwrap();
        let writer = Arc::new(CheckpointWriter::new(file, Arc::clone(&state)));
        let (tasks, stop) = (Tasks::default(), CancellationToken::new());
        writer.start(&tasks, stop.clone());
        let path = dir.path().join(DEVICE_MANAGER_FILE);
        writer.flushed().await;
        assert!(!path.exists(), "nothing was asked for");

        {
            let mut state = state.lock();
            state.plugin_connected("example.com/r", PluginOptions::default());
            state.update_devices("example.com/r", &[Device::new("dev-0", None)]);
        }
        writer.request();
        assert!(!path.exists(), "written in the background");
        writer.flushed().await;
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("dev-0"), "{text}");

        // Once flushed, nothing more is written unless asked for.
        std::fs::remove_file(&path).unwrap();
        writer.flushed().await;
        tokio::task::yield_now().await;
        assert!(!path.exists());
        stop.cancel();
        tasks.join().await;
    }
}
