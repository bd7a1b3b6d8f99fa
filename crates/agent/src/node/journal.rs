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

use std::path::{Path, PathBuf};
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
    let root = layout.root();
    let relative = |path: PathBuf| -> Result<PathBuf> {
        path.strip_prefix(root)
            .map(Path::to_path_buf)
            .with_context(|| format!("{} is outside the root {}", path.display(), root.display()))
    };
    let state = layout.state_dir();
    let managed = [
        Managed::File(relative(state.join(CPU_MANAGER_FILE))?),
        Managed::File(relative(state.join(MEMORY_MANAGER_FILE))?),
        Managed::File(relative(state.join(DRA_MANAGER_FILE))?),
        Managed::File(relative(
            layout.device_plugins_dir().join(DEVICE_MANAGER_FILE),
        )?),
        Managed::Dir(relative(layout.pods_dir())?),
    ];
    let path = layout.journal_path();
    let (journal, recovery) = Journal::open(
        root,
        relative(path.clone())?,
        &managed,
        JournalOptions::default(),
    )
    .with_context(|| format!("replaying the state journal {}", path.display()))?;
    if let Some(torn) = &recovery.torn_tail {
        tracing::warn!(journal = %path.display(), %torn,
            "the state journal ends in a commit cut short (a crash during a commit that was never answered); replayed up to the commit before it");
    }
    if recovery.mark_without_journal {
        tracing::warn!(journal = %path.display(),
            "the state journal is missing but its mark is not (a clean stop cut short, or the journal moved aside): the state files are taken as they are");
    }
    for file in &recovery.restored {
        tracing::warn!(file = %file.display(),
            "state file brought up to the journal (a commit not yet written to it when corral stopped, or the file changed behind corral's back)");
    }
    for file in &recovery.removed {
        tracing::warn!(file = %file.display(),
            "state file removed: the journal does not have it (a removal not yet done when corral stopped, or a file made behind corral's back)");
    }
    tracing::info!(journal = %path.display(), replayed = recovery.replayed,
        records = recovery.records, last_commit = recovery.last_commit, "state journal open");
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
            .context(
                "the state journal could not make the answer durable, so none is given: the \
                 decision is kept and becomes durable with the next commit (retry the request)",
            )?;
        self.changes.bump();
        Ok(())
    }

    /// A clean stop: commit, make every state file durable on its own and remove the
    /// journal, so the files alone are the state (a kubelet may take them over; a journal
    /// left by a crash would overrule its writes at corral's next start).
    pub(crate) fn retire_journal(&self) -> Result<()> {
        self.journal.retire().context("retiring the state journal")
    }

    /// The fsync and fdatasync calls the state journal made since the node opened it.
    pub(crate) fn state_syncs(&self) -> u64 {
        self.journal.syncs()
    }

    /// Why the node cannot make its state durable (or its state files lag behind the
    /// journal), while that lasts: `/healthz` reports it.
    pub(crate) fn state_trouble(&self) -> Option<String> {
        self.journal.trouble()
    }

    /// Commit whatever is pending every [`FLUSH_INTERVAL`] until the node is dropped. A
    /// failing journal (a full disk) is logged once when the episode starts and once when
    /// it ends; meanwhile every commit retries (the flusher's, and each admission's).
    pub(crate) fn spawn_journal_flusher(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let node: Weak<Node> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(FLUSH_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing = false;
            loop {
                tick.tick().await;
                let Some(node) = node.upgrade() else { return };
                let committed = node.commit().await;
                match (committed, node.state_trouble()) {
                    (Err(err), _) if !failing => {
                        failing = true;
                        tracing::error!(
                            error = format!("{err:#}"),
                            "state journal commit failed: admissions and releases fail until a commit succeeds (retried every {FLUSH_INTERVAL:?})"
                        );
                    }
                    (Ok(()), None) if failing => {
                        failing = false;
                        tracing::info!("state journal commits again: everything staged is durable");
                    }
                    (Ok(()), Some(trouble)) if !failing => {
                        failing = true;
                        tracing::error!(%trouble, "state files lag behind the state journal");
                    }
                    _ => {}
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
