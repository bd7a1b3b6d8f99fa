//! The publisher: keeps the node's NodeResourceTopology on the API server equal to what the
//! managers hold. It wakes on the node's [`StateChanges`](crate::node::StateChanges) (a burst
//! within [`COALESCE`] is one write, and writes after changes are [`MIN_WRITE_INTERVAL`]
//! apart) and every resync period (the server's copy is read and
//! rewritten if anyone changed it), writes only when the content differs from what the server
//! has, and retries failures with a doubling backoff that honours `Retry-After`.
//!
//! It is never on the admission path: admissions only bump a counter, and a dead or slow API
//! server delays nothing but the next write. Each episode of failures is logged once when it
//! starts and once when it ends (with the count of failed attempts and the last error).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use corral_nrt::NodeResourceTopology;
use tokio::time::Instant;

use super::accounting::Accounting;
use super::api::{ApiError, NrtApi};
use crate::exposition::{Family, Kind, Series, Value};
use crate::node::Node;

/// How long after a change the publisher waits for more before it writes.
pub(crate) const COALESCE: Duration = Duration::from_millis(100);
/// The shortest time between two writes after changes: a state that keeps changing (a
/// flapping device plugin, a stream of admissions) costs the API server one write a second,
/// as resource-topology-exporter's rate limit.
pub(crate) const MIN_WRITE_INTERVAL: Duration = Duration::from_secs(1);
/// The first retry's delay after a failure; it doubles up to [`MAX_BACKOFF`].
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest delay between retries (a `Retry-After` is honoured up to [`MAX_RETRY_AFTER`]).
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// How much further than [`MAX_BACKOFF`] retries of a 4xx refusal (not 404, 409 or 429)
/// back off: 64 s by default.
pub(crate) const CLIENT_ERROR_BACKOFF_FACTOR: u32 = 8;
/// The longest `Retry-After` honoured.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Conflicts retried at once with the fresh object before the attempt counts as failed.
const CONFLICT_RETRIES: usize = 3;

/// What the publisher did, for metrics and tests.
#[derive(Debug, Default)]
pub(crate) struct PublisherStats {
    /// Creates and replaces the server accepted.
    pub(crate) writes: AtomicU64,
    /// Attempts that failed (each retry counts).
    pub(crate) failures: AtomicU64,
    /// Reads of the server's copy.
    pub(crate) reads: AtomicU64,
    /// Episodes of failures (each logged once when it starts, once when it ends).
    pub(crate) episodes: AtomicU64,
}

impl PublisherStats {
    /// Accepted writes so far.
    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Failed attempts so far.
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// corral's `corral_node_resource_topology_*` counters.
    pub(crate) fn families(&self) -> Vec<Family> {
        let counter = |name: &str, help: &str, value: &AtomicU64| Family {
            name: format!("corral_node_resource_topology_{name}_total"),
            help: help.to_owned(),
            kind: Kind::Counter,
            series: vec![Series::plain(Value::Number(
                value.load(Ordering::Relaxed) as f64
            ))],
        };
        vec![
            counter(
                "writes",
                "NodeResourceTopology creates and replaces the API server accepted",
                &self.writes,
            ),
            counter(
                "write_failures",
                "NodeResourceTopology calls that failed (each retry counts)",
                &self.failures,
            ),
            counter(
                "reads",
                "Reads of the API server's NodeResourceTopology (at start, on resync, after a conflict or a failure)",
                &self.reads,
            ),
        ]
    }
}

/// Publishes one node's NodeResourceTopology through `A`.
pub(crate) struct Publisher<A> {
    api: A,
    accounting: Accounting,
    resync_period: Duration,
    /// The first retry's delay and the longest.
    backoff: (Duration, Duration),
    stats: Arc<PublisherStats>,
    /// The server's copy as last read or written (its `resourceVersion` included).
    server: Option<NodeResourceTopology>,
    /// The last error of the episode of failures under way (its first was logged).
    failing: Option<String>,
    /// Failed attempts in the episode under way.
    failures_in_episode: u64,
}

impl<A: NrtApi> Publisher<A> {
    /// A publisher of `accounting`'s object through `api`.
    pub(crate) fn new(api: A, accounting: Accounting, resync_period: Duration) -> Self {
        Self {
            api,
            accounting,
            resync_period,
            backoff: (FIRST_BACKOFF, MAX_BACKOFF),
            stats: Arc::default(),
            server: None,
            failing: None,
            failures_in_episode: 0,
        }
    }

    /// Retries from `first`, doubling up to `max` (tests shorten them).
    #[cfg(test)]
    pub(crate) fn with_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff = (first, max);
        self
    }

    /// The counters (shared: read them while it runs).
    pub(crate) fn stats(&self) -> Arc<PublisherStats> {
        Arc::clone(&self.stats)
    }

    /// Publish until `stop` completes.
    pub(crate) async fn run(
        mut self,
        node: Arc<Node>,
        stop: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        let mut changes = node.changes().subscribe();
        let (first_backoff, max_backoff) = self.backoff;
        let mut backoff = first_backoff;
        // The first pass reads the server's copy (a restart finds its own object).
        let mut resync_due = Instant::now();
        let mut retry_at: Option<Instant> = None;
        // No write after a change before this (a write after a resync counts too).
        let mut not_before = Instant::now();
        let mut dirty = true;
        loop {
            let now = Instant::now();
            // A retry's wait (backoff or `Retry-After`) holds off the resync too: a resync
            // period shorter than it must not turn into calls at the resync's pace.
            let due = retry_at.is_none_or(|at| at <= now)
                && (dirty && not_before <= now || resync_due <= now);
            if due {
                changes.borrow_and_update();
                let resync = resync_due <= now;
                // Settled: a dry run's trial or a refusal under way is never published.
                let taken = tokio::select! {
                    () = &mut stop => return,
                    taken = self.accounting.take_settled(&node) => taken,
                };
                let desired = match taken {
                    Ok(desired) => desired,
                    Err(err) => {
                        tracing::error!(err = %format!("{err:#}"), "reading the node for its NodeResourceTopology failed");
                        retry_at = Some(Instant::now() + backoff);
                        continue;
                    }
                };
                let writes = self.stats.writes();
                // A stop does not wait for the server: the call in flight is dropped (written
                // or not, the next start reads the server's copy first).
                let published = tokio::select! {
                    () = &mut stop => return,
                    published = self.publish(desired, resync) => published,
                };
                if self.stats.writes() != writes {
                    not_before = Instant::now() + MIN_WRITE_INTERVAL;
                }
                match published {
                    Ok(()) => {
                        self.episode_ended();
                        dirty = false;
                        retry_at = None;
                        backoff = first_backoff;
                        if resync {
                            resync_due = Instant::now() + self.resync_period;
                        }
                    }
                    Err(err) => {
                        self.stats.failures.fetch_add(1, Ordering::Relaxed);
                        let wait = match &err {
                            ApiError::TooManyRequests {
                                retry_after: Some(after),
                            } => (*after).min(MAX_RETRY_AFTER).max(backoff),
                            _ => backoff,
                        };
                        self.episode_failed(&err, wait);
                        dirty = true;
                        retry_at = Some(Instant::now() + wait);
                        // A failed resync is retried as a write; the next resync is a period on.
                        if resync {
                            resync_due = Instant::now() + self.resync_period;
                        }
                        // A refusal that will not change by itself (403: RBAC missing, 422:
                        // the CRD's schema) backs off eight times further: about once a
                        // minute, as the exporters retry, not every few seconds per node.
                        let cap = match &err {
                            ApiError::Status { status, .. } if (400..500).contains(status) => {
                                max_backoff * CLIENT_ERROR_BACKOFF_FACTOR
                            }
                            _ => max_backoff,
                        };
                        backoff = (backoff * 2).min(cap);
                    }
                }
                continue;
            }
            let next = if dirty {
                not_before.min(resync_due)
            } else {
                resync_due
            };
            let wake_at = retry_at.map_or(next, |at| at.max(next));
            tokio::select! {
                () = &mut stop => return,
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    dirty = true;
                    // Gather the rest of a burst into the same write.
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(COALESCE) => {}
                    }
                }
                () = tokio::time::sleep_until(wake_at) => {}
            }
        }
    }

    /// Make the server's object say what `desired` says: read it when its copy is not known
    /// (or on `resync`), create it when missing, replace it when it differs.
    async fn publish(
        &mut self,
        desired: NodeResourceTopology,
        resync: bool,
    ) -> Result<(), ApiError> {
        if resync || self.server.is_none() {
            self.read().await?;
        }
        for _ in 0..CONFLICT_RETRIES {
            let result = match &self.server {
                // An answer naming another object (a misrouting proxy, a hostile server)
                // is not ours however alike: `same_content` ignores the name.
                Some(server)
                    if server.metadata.name == desired.metadata.name
                        && server.same_content(&desired) =>
                {
                    return Ok(());
                }
                Some(server) => {
                    let mut update = desired.clone();
                    update.metadata.resource_version = server.metadata.resource_version.clone();
                    self.api.replace(&update).await
                }
                None => self.api.create(&desired).await,
            };
            match result {
                Ok(written) => {
                    self.stats.writes.fetch_add(1, Ordering::Relaxed);
                    self.server = Some(written);
                    return Ok(());
                }
                Err(ApiError::Conflict | ApiError::NotFound) => self.read().await?,
                Err(err) => {
                    // Unknown whether it was written: read again before the next attempt.
                    self.server = None;
                    return Err(err);
                }
            }
        }
        Err(ApiError::Conflict)
    }

    async fn read(&mut self) -> Result<(), ApiError> {
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        self.server = None;
        self.server = self.api.get(self.accounting.node_name()).await?;
        Ok(())
    }

    fn episode_failed(&mut self, err: &ApiError, retry_in: Duration) {
        self.failures_in_episode += 1;
        if self.failing.is_none() {
            self.stats.episodes.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                node = self.accounting.node_name(),
                error = %crate::error_text::error_chain(err),
                ?retry_in,
                "cannot publish the NodeResourceTopology; retrying with backoff (logged again when it is published)"
            );
        }
        self.failing = Some(crate::error_text::error_chain(err));
    }

    fn episode_ended(&mut self) {
        if let Some(last_error) = self.failing.take() {
            tracing::info!(
                node = self.accounting.node_name(),
                failed_attempts = self.failures_in_episode,
                %last_error,
                "NodeResourceTopology published again"
            );
        }
        self.failures_in_episode = 0;
    }
}
