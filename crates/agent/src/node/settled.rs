//! Reading the node as decisions leave it. A decision changes the managers under the
//! [`DecisionLock`](super::locks::DecisionLock) and, when it does not stand (a refusal, a
//! deferral, every `admit --dry-run` trial), gives its changes back before it lets go: in
//! between, the managers hold CPUs, memory and devices no pod holds. A reader outside the
//! lock could see them — and publish them (the NodeResourceTopology), serve them
//! (`corral status`, podresources) or count them (`/metrics`). The readers that answer
//! the outside world read here instead: under the decision lock, on the blocking pool, as
//! one more short turn in the line of decisions (decisions are bounded, so the wait is).
//! `/healthz` and `/readyz` never read here: they must answer while a decision is wedged.

use std::sync::Arc;

use anyhow::{Result, anyhow};

use super::numa_resources::NumaNodeResources;
use super::{Node, PodView};

impl Node {
    /// Run `read` on the node with the decision lock held (first come, first served with
    /// the decisions): it sees no decision half taken or half given back.
    pub(crate) async fn settled<T: Send + 'static>(
        self: &Arc<Self>,
        read: impl FnOnce(&Node) -> T + Send + 'static,
    ) -> Result<T> {
        self.with_decision_lock(read)
            .await
            .map_err(|err| anyhow!("a read of the node's settled state failed: {err}"))
    }

    /// What admitted pod `pod_uid` holds, settled (see [`Node::view`]).
    pub(crate) async fn settled_view(self: &Arc<Self>, pod_uid: &str) -> Result<PodView> {
        let uid = pod_uid.to_owned();
        self.settled(move |node| node.view(&uid)).await?
    }

    /// What every admitted pod holds, settled (see [`Node::views`]).
    pub(crate) async fn settled_views(self: &Arc<Self>) -> Result<Vec<PodView>> {
        self.settled(Node::views).await
    }

    /// Each NUMA node's resources, settled (see [`Node::numa_resources`]).
    pub(crate) async fn settled_numa_resources(self: &Arc<Self>) -> Result<Vec<NumaNodeResources>> {
        self.settled(Node::numa_resources).await
    }
}

/// A test-only pause inside a decision that does not stand, after its changes and before
/// they are given back (the decision lock held): what a reader racing it could see.
#[cfg(test)]
pub(crate) mod pause {
    use std::collections::BTreeMap;
    use std::sync::mpsc;
    use std::sync::{Mutex, PoisonError};
    use std::time::Duration;

    /// How long a paused decision waits at most to be let go.
    const HELD_AT_MOST: Duration = Duration::from_secs(60);

    type Armed = (tokio::sync::oneshot::Sender<()>, mpsc::Receiver<()>);

    static ARMED: Mutex<BTreeMap<String, Armed>> = Mutex::new(BTreeMap::new());

    /// Pods whose next decision that does not stand panics at the pause point.
    static PANICS: Mutex<BTreeMap<String, ()>> = Mutex::new(BTreeMap::new());

    /// Make the next decision of pod `uid` that does not stand panic before its undo.
    pub(crate) fn arm_panic(uid: &str) {
        PANICS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.to_owned(), ());
    }

    /// The next decision of pod `uid` that does not stand, paused before its undo.
    pub(crate) struct Paused {
        reached: Option<tokio::sync::oneshot::Receiver<()>>,
        go: mpsc::Sender<()>,
    }

    /// Pause the next decision of pod `uid` that does not stand.
    pub(crate) fn arm(uid: &str) -> Paused {
        let (reached_tx, reached) = tokio::sync::oneshot::channel();
        let (go, go_rx) = mpsc::channel();
        ARMED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.to_owned(), (reached_tx, go_rx));
        Paused {
            reached: Some(reached),
            go,
        }
    }

    impl Paused {
        /// Wait (at most 60 s) until the decision is paused, its changes made.
        pub(crate) async fn reached(&mut self) {
            let reached = self.reached.take().expect("waited for twice");
            tokio::time::timeout(HELD_AT_MOST, reached)
                .await
                .expect("the decision was never paused")
                .expect("the pause was dropped");
        }

        /// Let the decision give its changes back.
        pub(crate) fn go(self) {
            let _ = self.go.send(());
        }
    }

    /// Where a decision of `uid` that does not stand pauses, if armed (lock held).
    pub(in crate::node) fn point(uid: &str) {
        let panics = PANICS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
        assert!(
            panics.is_none(),
            "a test-armed panic in the decision of {uid}"
        );
        let armed = ARMED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
        if let Some((reached, go)) = armed {
            let _ = reached.send(());
            let _ = go.recv_timeout(HELD_AT_MOST);
        }
    }
}
