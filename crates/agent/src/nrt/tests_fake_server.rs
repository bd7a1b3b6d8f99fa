//! Test support: [`FakeServer`], a scripted API server behind [`NrtApi`] holding one object
//! with resourceVersions and optimistic concurrency, and [`Harness`], a started node with a
//! publisher writing to it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_nrt::NodeResourceTopology;
use tokio::sync::{Notify, watch};

use super::accounting::Accounting;
use super::api::{ApiError, NrtApi};
use super::publisher::{Publisher, PublisherStats};
use crate::node::Node;
use crate::node::tests::{WAIT, fixture, open_on, pod};

/// A 2-NUMA fixture, 8 CPUs a node.
pub(super) const MACHINE: &str = "32em64t-2n8c+dax+nvme+mic+dimms";

/// What the scripted server does with the next call.
#[derive(Debug)]
pub(super) enum Scripted {
    /// Answer with this error.
    Fail(fn() -> ApiError),
    /// Wait until `release` is notified, then behave normally.
    Hold,
    /// Behave normally, but answer with the copy changed by this (what is stored is not).
    Twist(fn(&mut NodeResourceTopology)),
    /// A write answered as if stored, and not stored (a write the server then "lost").
    Lose,
}

/// An API server holding one object, with resourceVersions and optimistic concurrency.
pub(super) struct FakeServer {
    pub(super) object: Mutex<Option<NodeResourceTopology>>,
    version: Mutex<u64>,
    script: Mutex<VecDeque<Scripted>>,
    pub(super) release: Notify,
    /// While true, every call hangs (then fails as a timed-out call does).
    pub(super) hang: watch::Sender<bool>,
    writes: Mutex<u64>,
    /// Every call received (get, create, replace), scripted or not.
    calls: AtomicU64,
    /// When each call was received.
    call_times: Mutex<Vec<Instant>>,
    /// When each write was stored.
    write_times: Mutex<Vec<Instant>>,
}

impl Default for FakeServer {
    fn default() -> Self {
        Self {
            object: Mutex::default(),
            version: Mutex::default(),
            script: Mutex::default(),
            release: Notify::new(),
            hang: watch::channel(false).0,
            writes: Mutex::default(),
            calls: AtomicU64::default(),
            call_times: Mutex::default(),
            write_times: Mutex::default(),
        }
    }
}

impl FakeServer {
    pub(super) fn object(&self) -> Option<NodeResourceTopology> {
        self.object.lock().unwrap().clone()
    }

    pub(super) fn script(&self, steps: impl IntoIterator<Item = Scripted>) {
        self.script.lock().unwrap().extend(steps);
    }

    /// Calls received so far.
    pub(super) fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// When each call so far was received.
    pub(super) fn call_times(&self) -> Vec<Instant> {
        self.call_times.lock().unwrap().clone()
    }

    /// When each write so far was stored.
    pub(super) fn write_times(&self) -> Vec<Instant> {
        self.write_times.lock().unwrap().clone()
    }

    /// Someone else changes the object (bumping its version).
    pub(super) fn tamper(&self, change: impl FnOnce(&mut NodeResourceTopology)) {
        let mut object = self.object.lock().unwrap();
        let object = object.as_mut().expect("an object to tamper with");
        change(object);
        let mut version = self.version.lock().unwrap();
        *version += 1;
        object.metadata.resource_version = Some(version.to_string());
    }

    /// The scripted step for this call, after any hang or hold; `Err` when it fails.
    async fn before_call(&self, write: bool) -> Result<Option<Scripted>, ApiError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.call_times.lock().unwrap().push(Instant::now());
        if *self.hang.borrow() {
            let mut hang = self.hang.subscribe();
            let _ = hang.wait_for(|h| !*h).await;
            return Err(ApiError::Timeout(Duration::from_secs(10)));
        }
        let step = {
            let mut script = self.script.lock().unwrap();
            // A `Lose` waits for a write.
            if !write && matches!(script.front(), Some(Scripted::Lose)) {
                None
            } else {
                script.pop_front()
            }
        };
        match step {
            Some(Scripted::Fail(error)) => Err(error()),
            Some(Scripted::Hold) => {
                self.release.notified().await;
                Ok(None)
            }
            other => Ok(other),
        }
    }

    fn store(&self, nrt: &NodeResourceTopology, step: Option<Scripted>) -> NodeResourceTopology {
        let mut version = self.version.lock().unwrap();
        *version += 1;
        let mut stored = nrt.clone();
        stored.metadata.resource_version = Some(version.to_string());
        if !matches!(step, Some(Scripted::Lose)) {
            *self.object.lock().unwrap() = Some(stored.clone());
            *self.writes.lock().unwrap() += 1;
            self.write_times.lock().unwrap().push(Instant::now());
        }
        twisted(stored, step)
    }
}

fn twisted(mut answer: NodeResourceTopology, step: Option<Scripted>) -> NodeResourceTopology {
    if let Some(Scripted::Twist(change)) = step {
        change(&mut answer);
    }
    answer
}

#[async_trait::async_trait]
impl NrtApi for Arc<FakeServer> {
    async fn get(&self, _name: &str) -> Result<Option<NodeResourceTopology>, ApiError> {
        let step = self.before_call(false).await?;
        Ok(self.object().map(|object| twisted(object, step)))
    }

    async fn create(&self, nrt: &NodeResourceTopology) -> Result<NodeResourceTopology, ApiError> {
        let step = self.before_call(true).await?;
        if self.object().is_some() {
            return Err(ApiError::Conflict);
        }
        Ok(self.store(nrt, step))
    }

    async fn replace(&self, nrt: &NodeResourceTopology) -> Result<NodeResourceTopology, ApiError> {
        let step = self.before_call(true).await?;
        let current = self.object().ok_or(ApiError::NotFound)?;
        if current.metadata.resource_version != nrt.metadata.resource_version {
            return Err(ApiError::Conflict);
        }
        Ok(self.store(nrt, step))
    }
}

/// A started node (static CPU policy, CPU 0 reserved, `single-numa-node`) and a publisher
/// for it on `server`, resyncing every `resync`.
pub(super) struct Harness {
    _dir: tempfile::TempDir,
    pub(super) node: Arc<Node>,
    pub(super) accounting: Accounting,
    pub(super) server: Arc<FakeServer>,
    pub(super) stats: Arc<PublisherStats>,
    pub(super) stop: watch::Sender<bool>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl Harness {
    pub(super) async fn start(resync: Duration) -> Self {
        Self::start_with(resync, Arc::new(FakeServer::default())).await
    }

    pub(super) async fn start_with(resync: Duration, server: Arc<FakeServer>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::node::tests::config(dir.path(), "single-numa-node", &[]);
        let node = open_on(&config, &fixture(MACHINE), &Default::default()).await;
        let accounting = Accounting::new("worker-1", &config.cpu_manager);
        Self::publish(dir, node, accounting, resync, server)
    }

    /// A publisher of `node` (kept in `dir`) on `server`, resyncing every `resync`.
    pub(super) fn publish(
        dir: tempfile::TempDir,
        node: Arc<Node>,
        accounting: Accounting,
        resync: Duration,
        server: Arc<FakeServer>,
    ) -> Self {
        let publisher = Publisher::new(Arc::clone(&server), accounting.clone(), resync)
            .with_backoff(Duration::from_millis(10), Duration::from_millis(200));
        let stats = publisher.stats();
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(publisher.run(Arc::clone(&node), async move {
            let _ = stopped.wait_for(|s| *s).await;
        }));
        Self {
            _dir: dir,
            node,
            accounting,
            server,
            stats,
            stop,
            task,
        }
    }

    /// Wait until the server's object says what the node holds.
    pub(super) async fn converged(&self) -> NodeResourceTopology {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let want = self.accounting.take(&self.node);
            if let Some(have) = self.server.object()
                && have.same_content(&want)
            {
                return have;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server's object never matched the node's state: {:?}",
                self.server.object()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(super) async fn admit(&self, uid: &str, cpus: &[u32]) {
        let answer = tokio::time::timeout(WAIT, self.node.admit(pod(uid, cpus), vec![]))
            .await
            .expect("the admission waits for nothing the API server does")
            .unwrap();
        assert!(
            matches!(answer, crate::node::Admission::Admitted(_)),
            "{answer:?}"
        );
    }

    /// Stop the publisher without releasing the server's hang or hold: it must end anyway.
    pub(super) async fn stop_now(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the publisher waits for a call in flight before it stops")
            .unwrap();
    }

    pub(super) async fn stop(self) {
        self.server.release.notify_one();
        self.server.hang.send_replace(false);
        let _ = self.stop.send(true);
        tokio::time::timeout(WAIT, self.task)
            .await
            .unwrap()
            .unwrap();
    }
}
