//! The state journal as the agent runs it: every kubelet-format state file
//! (`cpu_manager_state`, `memory_manager_state`, `dra_manager_state`,
//! `device-plugins/kubelet_internal_checkpoint`) and every pod record (`corral/pods/`) is
//! written through one [`Journal`] at `corral/state.journal`, so an admission — however many
//! files it rewrote — costs one fsync, shared with concurrent admissions (group commit).
//! Admissions, releases and container admissions commit before they answer; other writes
//! (a container started or removed, a plugin's device list) are committed within
//! [`FLUSH_INTERVAL`] by [`Node::spawn_journal_flusher`].
//!
//! At start the journal is replayed before any manager reads its file: after a crash the
//! files are the state of the last commit, so every answered admission is there and nothing
//! half-done is (see `corral_checkpoint::journal`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::{Context, Result};
use corral_checkpoint::{
    CPU_MANAGER_FILE, DEVICE_MANAGER_FILE, DRA_MANAGER_FILE, Journal, JournalOptions,
    MEMORY_MANAGER_FILE, Managed,
};

use super::Node;
use crate::config::Layout;

/// The longest a write outside an admission or release waits for its commit.
pub(crate) const FLUSH_INTERVAL: Duration = Duration::from_millis(50);

/// Open (replaying) the journal over the layout's state files.
pub(super) fn open(layout: &Layout) -> Result<Arc<Journal>> {
    let state = layout.state_dir();
    let managed = [
        Managed::File(state.join(CPU_MANAGER_FILE)),
        Managed::File(state.join(MEMORY_MANAGER_FILE)),
        Managed::File(state.join(DRA_MANAGER_FILE)),
        Managed::File(layout.device_plugins_dir().join(DEVICE_MANAGER_FILE)),
        Managed::Dir(layout.pods_dir()),
    ];
    let path = layout.journal_path();
    let (journal, recovery) = Journal::open(&path, &managed, JournalOptions::default())
        .with_context(|| format!("replaying the state journal {}", path.display()))?;
    if let Some(torn) = &recovery.torn_tail {
        tracing::warn!(journal = %path.display(), %torn,
            "the state journal ends in a commit cut short (a crash during a commit that was never answered); replayed up to it");
    }
    for file in &recovery.restored {
        tracing::warn!(file = %file.display(),
            "state file restored from the journal (a write that was never committed, or a file changed behind corral's back)");
    }
    for file in &recovery.removed {
        tracing::warn!(file = %file.display(),
            "state file removed: the journal does not have it (written by an admission that was never committed)");
    }
    tracing::info!(journal = %path.display(), replayed = recovery.replayed,
        records = recovery.records, "state journal open");
    Ok(Arc::new(journal))
}

impl Node {
    /// Make every write so far durable (one fsync, shared with concurrent callers); cheap
    /// when nothing is pending.
    pub(crate) async fn commit(&self) -> Result<()> {
        if !self.journal.has_pending() {
            return Ok(());
        }
        let journal = Arc::clone(&self.journal);
        tokio::task::spawn_blocking(move || journal.commit())
            .await
            .context("the journal commit task failed")?
            .context("committing the state journal")
    }

    /// A clean stop: commit, make every state file durable on its own and remove the
    /// journal, so the files alone are the state (a kubelet may take them over; a journal
    /// left by a crash would overrule its writes at corral's next start).
    pub(crate) fn retire_journal(&self) -> Result<()> {
        self.journal.retire().context("retiring the state journal")
    }

    /// Commit whatever is pending every [`FLUSH_INTERVAL`] until the node is dropped.
    pub(crate) fn spawn_journal_flusher(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let node: Weak<Node> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(FLUSH_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(node) = node.upgrade() else { return };
                if let Err(err) = node.commit().await {
                    tracing::error!(error = format!("{err:#}"), "state journal commit failed");
                }
            }
        })
    }
}

impl Drop for Node {
    /// What is staged is committed when the node goes away (a clean stop, a test that
    /// reopens the state); a kill leaves it to the next replay, which undoes it. A node
    /// that never started (its state was refused) has nothing to commit.
    fn drop(&mut self) {
        if self.journal.has_pending()
            && let Err(err) = self.journal.commit()
        {
            tracing::error!(error = %err, "the last state journal commit failed");
        }
    }
}
