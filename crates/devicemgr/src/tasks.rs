//! [`Tasks`]: the background tasks of a running manager (registration server, checkpoint
//! writer, one stream consumer per plugin), joined with a bound at stop.

use std::sync::Mutex;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::locks::lock;

/// How long [`Tasks::join`] waits for each task.
const JOIN_WAIT: Duration = Duration::from_secs(5);

/// Spawned tasks; finished ones are forgotten as new ones start.
#[derive(Default)]
pub(crate) struct Tasks(Mutex<Vec<JoinHandle<()>>>);

impl Tasks {
    /// Spawn `task` on the current runtime and keep its handle.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = lock(&self.0);
        tasks.retain(|t| !t.is_finished());
        tasks.push(tokio::spawn(task));
    }

    /// Wait for every task spawned so far, at most [`JOIN_WAIT`] each.
    pub(crate) async fn join(&self) {
        let tasks = std::mem::take(&mut *lock(&self.0));
        for task in tasks {
            let _ = tokio::time::timeout(JOIN_WAIT, task).await;
        }
    }
}
