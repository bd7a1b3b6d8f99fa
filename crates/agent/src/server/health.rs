//! [`Probes`]: what `/healthz` (liveness) and `/readyz` (readiness) answer on the metrics
//! address.
//!
//! `/healthz` is 503, naming why, while any of these lasts:
//! - the state journal cannot commit (a full disk, a lost directory: `Node::state_trouble`);
//! - a decision has held the decision lock for longer than [`WEDGED_AFTER`] (decisions are
//!   bounded by their search budget to well under a second, so this is a wedged manager);
//! - in NRI mode, corral has not been synchronized with the runtime for longer than
//!   `nriDisconnectedGracePeriod` (counted from the start, or from the lost connection).
//!
//! While the state is being restored it is 200 (`restoring state`): a liveness probe must
//! not kill a restore. `/readyz` is 503 until the state is restored and, in NRI mode, the
//! runtime's first Synchronize is answered, and whenever `/healthz` is not 200.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::metrics::ExtraFamilies;
use super::nri::{LinkStatus, NriLink};
use crate::config::GoDuration;
use crate::node::Node;

/// How long a decision may hold the decision lock before `/healthz` calls the node wedged.
pub(crate) const WEDGED_AFTER: Duration = Duration::from_secs(60);

/// What the probes and `/metrics` read; the node arrives once its state is restored.
pub(crate) struct Probes {
    node: OnceLock<(Arc<Node>, ExtraFamilies)>,
    nri: Option<(NriLink, Duration)>,
    wedged_after: Duration,
}

/// A probe's answer: `Ok` with its body, or why not.
pub(crate) type ProbeAnswer = Result<&'static str, ProbeFailure>;

/// Why a probe is not 200: every trouble found, a line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub(crate) struct ProbeFailure(Vec<String>);

impl Probes {
    /// Probes for an agent still restoring its state; `nri`: the NRI link and its
    /// `nriDisconnectedGracePeriod`, in NRI mode.
    pub(crate) fn new(nri: Option<(NriLink, Duration)>) -> Probes {
        Probes {
            node: OnceLock::new(),
            nri,
            wedged_after: WEDGED_AFTER,
        }
    }

    /// The same, calling the node wedged after `after` (tests).
    #[cfg(test)]
    pub(crate) fn wedged_after(mut self, after: Duration) -> Probes {
        self.wedged_after = after;
        self
    }

    /// The state is restored: from now on the probes and `/metrics` read `node`, and
    /// `/metrics` adds `extra`'s families.
    pub(crate) fn restored(&self, node: Arc<Node>, extra: ExtraFamilies) {
        let _ = self.node.set((node, extra));
    }

    /// The restored node and the families beside it (`None` while restoring).
    pub(crate) fn node(&self) -> Option<&(Arc<Node>, ExtraFamilies)> {
        self.node.get()
    }

    /// `/healthz`.
    pub(crate) fn health(&self) -> ProbeAnswer {
        let mut troubles = Vec::new();
        if let Some((node, _)) = self.node.get() {
            if let Some(trouble) = node.state_trouble() {
                troubles.push(format!("state journal: {trouble}"));
            }
            if let Some(held) = node.decision_held_for()
                && held > self.wedged_after
            {
                troubles.push(format!(
                    "a decision has held the decision lock for {} (wedged)",
                    GoDuration(whole_seconds(held))
                ));
            }
        }
        if let Some((link, grace)) = &self.nri
            && let LinkStatus::Unsynchronized { for_, ever } = link.status()
            && for_ > *grace
        {
            let since = if ever { "lost" } else { "started" };
            troubles.push(format!(
                "NRI: not synchronized with the runtime for {} (since corral {since}; nriDisconnectedGracePeriod {})",
                GoDuration(whole_seconds(for_)),
                GoDuration(*grace)
            ));
        }
        match (troubles.is_empty(), self.node.get().is_some()) {
            (true, true) => Ok("ok"),
            (true, false) => Ok("restoring state"),
            (false, _) => Err(ProbeFailure(troubles)),
        }
    }

    /// `/readyz`.
    pub(crate) fn readiness(&self) -> ProbeAnswer {
        if self.node.get().is_none() {
            return Err(ProbeFailure(vec!["restoring state".to_owned()]));
        }
        if let Some((link, _)) = &self.nri
            && let LinkStatus::Unsynchronized { ever: false, .. } = link.status()
        {
            return Err(ProbeFailure(vec![
                "NRI: waiting for the runtime's first Synchronize".to_owned(),
            ]));
        }
        self.health().map(|_| "ok")
    }
}

/// `duration` to the second below (probe messages need no more).
fn whole_seconds(duration: Duration) -> Duration {
    Duration::from_secs(duration.as_secs())
}
