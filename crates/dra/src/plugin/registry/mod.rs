//! The plugin registry ([`PluginRegistry`], upstream `pluginmanager` + the DRA
//! registration handler): watches a registration directory for plugin sockets by polling,
//! runs the pluginregistration v1 handshake (`GetInfo`, judge, `NotifyRegistrationStatus`
//! with the verdict and reason), keeps the accepted plugins in a [`PluginStore`], and is
//! the manager's [`DriverClients`].
//!
//! Each socket is probed in its own task, as upstream's operation executor runs one
//! goroutine per socket: a socket that accepts and never answers costs only its own probe,
//! never another socket's registration. A probe reaches its verdict within
//! [`probe_timeout`](RegistryConfig::probe_timeout) and tells the plugin within one
//! `registration_timeout` more; a socket is never probed again while its probe runs; at
//! most [`max_concurrent_probes`](RegistryConfig::max_concurrent_probes) run at once.
//!
//! A socket that disappears deregisters its plugin; a socket replaced by a new file (a
//! driver restarting under the same name) is deregistered and registered again. A rejected
//! or unreachable socket is retried with exponential backoff, as upstream's reconciler
//! does, not on every scan.

mod probe;
mod sockets;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use corral_proto::pluginregistration::v1::PLUGINS_REGISTRY_PATH;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::DraPluginClient;
use super::error::RegistrationError;
use super::observer::PluginObserver;
use super::store::PluginStore;
use crate::claim::ClaimRef;
use crate::driver::{DriverClients, PrepareResults, UnprepareResults};
use crate::error::DriverCallError;
use sockets::{FileId, Job, Sockets, Tracked, scan};

/// Registry settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryConfig {
    /// The directory plugins put their registration sockets in (upstream:
    /// `/var/lib/kubelet/plugins_registry`).
    pub dir: PathBuf,
    /// How often the directory is scanned (default 200 ms). A new socket's probe starts at
    /// the first scan that sees it.
    pub poll_interval: Duration,
    /// Deadline of each step of a registration handshake: dialing the registration socket,
    /// `GetInfo`, dialing the plugin's DRAPlugin endpoint, `NotifyRegistrationStatus`
    /// (default 1 s; upstream: 1 s for `GetInfo`).
    pub registration_timeout: Duration,
    /// Deadline of one socket's whole handshake up to the verdict (dial, `GetInfo`,
    /// judging, dialing the endpoint), default 5 s. Telling the plugin the verdict takes at
    /// most one `registration_timeout` more. Sockets are probed concurrently, so a socket
    /// that never answers delays nobody else's registration. Upstream has no overall
    /// deadline (its dial alone may take 10 s).
    pub probe_timeout: Duration,
    /// Most handshakes running at once (default 64; 0 counts as 1). Further due sockets
    /// wait for a free slot at a later scan. Sockets never probed before are served first,
    /// and retries of failed sockets never hold more than half the slots (rounded up), so
    /// sockets that keep failing cannot crowd out a driver that just started. Upstream has
    /// no bound.
    pub max_concurrent_probes: usize,
    /// Deadline of NodePrepareResources / NodeUnprepareResources (upstream: 45 s).
    pub call_timeout: Duration,
    /// First wait before retrying a rejected or unreachable socket (default 500 ms);
    /// doubles after each further failure up to `retry_max`.
    pub retry_initial: Duration,
    /// Longest wait between retries (default 120 s).
    pub retry_max: Duration,
}

impl RegistryConfig {
    /// Defaults for watching `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        RegistryConfig {
            dir: dir.into(),
            poll_interval: Duration::from_millis(200),
            registration_timeout: Duration::from_secs(1),
            probe_timeout: Duration::from_secs(5),
            max_concurrent_probes: 64,
            call_timeout: Duration::from_secs(45),
            retry_initial: Duration::from_millis(500),
            retry_max: Duration::from_secs(120),
        }
    }

    /// Defaults for the kubelet's registration directory.
    pub fn kubelet() -> Self {
        Self::new(PLUGINS_REGISTRY_PATH)
    }
}

/// The outcome of one registration handshake.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RegistrationEvent {
    /// A plugin was accepted.
    Registered {
        /// Registration socket.
        socket: PathBuf,
        /// Driver name.
        driver: String,
    },
    /// A plugin was refused (or could not be asked); the socket is retried after a backoff.
    Rejected {
        /// Registration socket.
        socket: PathBuf,
        /// Why ([`RegistrationError::reason`] is the text sent to the plugin).
        error: Arc<RegistrationError>,
    },
    /// A plugin's socket went away.
    Deregistered {
        /// Registration socket.
        socket: PathBuf,
        /// Driver name.
        driver: String,
    },
}

/// DRA plugins registered through a registration directory.
#[derive(Debug)]
pub struct PluginRegistry {
    config: RegistryConfig,
    store: PluginStore,
    sockets: Mutex<Sockets>,
    /// One permit per running probe.
    slots: Arc<Semaphore>,
    /// One more permit per running retry of a failed socket.
    retry_slots: Arc<Semaphore>,
    events: tokio::sync::broadcast::Sender<RegistrationEvent>,
    observer: OnceLock<Arc<dyn PluginObserver>>,
}

impl PluginRegistry {
    /// A registry with no plugins; call [`watch`](Self::watch) or
    /// [`sync_once`](Self::sync_once) to find some.
    pub fn new(config: RegistryConfig) -> Arc<Self> {
        let slots = config
            .max_concurrent_probes
            .clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(PluginRegistry {
            config,
            store: PluginStore::new(),
            sockets: Mutex::new(Sockets::default()),
            slots: Arc::new(Semaphore::new(slots)),
            retry_slots: Arc::new(Semaphore::new(slots.div_ceil(2))),
            events: tokio::sync::broadcast::channel(256).0,
            observer: OnceLock::new(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    /// The registered plugins.
    pub fn store(&self) -> &PluginStore {
        &self.store
    }

    /// The newest plugin registered for `driver` (calls go to the newest *connected* one:
    /// [`PluginStore::get_connected`]).
    pub fn plugin(&self, driver: &str) -> Option<DraPluginClient> {
        self.store.get(driver)
    }

    /// Registered driver names, sorted.
    pub fn drivers(&self) -> Vec<String> {
        self.store.drivers()
    }

    /// Registration events from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<RegistrationEvent> {
        self.events.subscribe()
    }

    /// Tell `observer` which plugin is the newest of each driver from now on, starting with
    /// the drivers registered already. Only one observer can be set; a second is refused
    /// and returned.
    pub fn set_observer(
        &self,
        observer: Arc<dyn PluginObserver>,
    ) -> Result<(), Arc<dyn PluginObserver>> {
        let _sockets = self.sockets();
        self.observer.set(Arc::clone(&observer))?;
        for driver in self.store.drivers() {
            observer.newest_changed(&driver, self.store.get(&driver).as_ref());
        }
        Ok(())
    }

    /// Tell the observer (if any) about `driver`'s newest plugin; called with the sockets
    /// lock held, after every change to the store.
    fn notify(&self, driver: &str) {
        if let Some(observer) = self.observer.get() {
            observer.newest_changed(driver, self.store.get(driver).as_ref());
        }
    }

    fn emit(&self, event: RegistrationEvent) {
        // Nobody listening is fine.
        let _ = self.events.send(event);
    }

    fn sockets(&self) -> MutexGuard<'_, Sockets> {
        self.sockets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Scan the directory in a background task every `poll_interval` until the returned
    /// handle is stopped or dropped, probing due sockets concurrently without waiting for
    /// them; stopping the watcher also ends the probes it started. Must be called inside a
    /// tokio runtime.
    pub fn watch(self: &Arc<Self>) -> RegistryWatcher {
        let token = CancellationToken::new();
        let registry = Arc::clone(self);
        let stop = token.clone();
        let task = tokio::spawn(async move {
            let mut probes = JoinSet::new();
            let mut tick = tokio::time::interval(registry.config.poll_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => break,
                    Some(done) = probes.join_next(), if !probes.is_empty() => log_panic(done),
                    _ = tick.tick() => registry.start_probes(&mut probes),
                }
            }
            probes.shutdown().await;
        });
        RegistryWatcher {
            token,
            task: Some(task),
        }
    }

    /// One reconcile pass: deregister vanished or replaced sockets, then probe (concurrently)
    /// new sockets and failed ones whose backoff expired, and wait until those probes end,
    /// each within [`probe_timeout`](RegistryConfig::probe_timeout) plus one
    /// `registration_timeout`. Sockets whose probe is already running (started by a
    /// [`watch`](Self::watch)er) are not probed again nor waited for.
    pub async fn sync_once(self: &Arc<Self>) {
        let mut probes = JoinSet::new();
        self.start_probes(&mut probes);
        while let Some(done) = probes.join_next().await {
            log_panic(done);
        }
    }

    /// Scan, deregister what went away, and spawn a probe for each due socket a slot is
    /// free for.
    fn start_probes(self: &Arc<Self>, probes: &mut JoinSet<()>) {
        let found = scan(&self.config.dir);
        let jobs = {
            let mut sockets = self.sockets();
            self.forget_gone(&mut sockets, &found);
            for (path, id) in found {
                if !sockets.tracked.contains_key(&path) {
                    let found = sockets.next();
                    sockets.tracked.insert(
                        path,
                        Tracked {
                            id,
                            found,
                            driver: None,
                            probe: None,
                            failures: 0,
                            backoff: Duration::ZERO,
                            retry_at: Instant::now(),
                        },
                    );
                }
            }
            self.take_due(&mut sockets)
        };
        for job in jobs {
            probes.spawn(Arc::clone(self).probe(job));
        }
    }

    /// Drop sockets that vanished or were replaced, deregistering their plugins. A probe
    /// still running for such a socket finds its entry gone and registers nothing.
    fn forget_gone(&self, sockets: &mut Sockets, found: &BTreeMap<PathBuf, FileId>) {
        let gone: Vec<PathBuf> = sockets
            .tracked
            .iter()
            .filter(|(path, t)| found.get(*path) != Some(&t.id))
            .map(|(path, _)| path.clone())
            .collect();
        for path in gone {
            let Some(Tracked {
                driver: Some(driver),
                ..
            }) = sockets.tracked.remove(&path)
            else {
                continue;
            };
            self.store.remove_by_socket(&path);
            self.notify(&driver);
            tracing::info!(driver = %driver, socket = %path.display(), "DRA plugin deregistered");
            self.emit(RegistrationEvent::Deregistered {
                socket: path,
                driver,
            });
        }
    }

    /// Mark due sockets as probing, as far as slots allow: never-probed sockets first (in
    /// discovery order), then retries (earliest first) within the retry slots.
    fn take_due(&self, sockets: &mut Sockets) -> Vec<Job> {
        let now = Instant::now();
        let mut due: Vec<(bool, Instant, u64, PathBuf)> = sockets
            .tracked
            .iter()
            .filter(|(_, t)| t.due(now))
            .map(|(path, t)| {
                let retry = t.failures > 0;
                (
                    retry,
                    if retry { t.retry_at } else { now },
                    t.found,
                    path.clone(),
                )
            })
            .collect();
        due.sort();
        let mut jobs = Vec::new();
        for (retry, _, _, socket) in due {
            let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
                break;
            };
            let retry_slot = if retry {
                let Ok(permit) = Arc::clone(&self.retry_slots).try_acquire_owned() else {
                    break;
                };
                Some(permit)
            } else {
                None
            };
            let probe = sockets.next();
            if let Some(t) = sockets.tracked.get_mut(&socket) {
                t.probe = Some(probe);
            }
            jobs.push(Job {
                socket,
                probe,
                _slot: slot,
                _retry_slot: retry_slot,
            });
        }
        jobs
    }
}

fn log_panic(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done
        && e.is_panic()
    {
        tracing::error!(error = %e, "a DRA plugin registration probe panicked");
    }
}

/// The background scan started by [`PluginRegistry::watch`]; dropping it stops the scan.
#[derive(Debug)]
pub struct RegistryWatcher {
    token: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RegistryWatcher {
    /// Stop scanning and wait for the task to end.
    pub async fn stop(mut self) {
        self.token.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RegistryWatcher {
    fn drop(&mut self) {
        self.token.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl PluginRegistry {
    /// The plugin to call for `driver` (the newest connected instance, else the newest:
    /// [`PluginStore::get_connected`]), or why there is none.
    async fn registered(&self, driver: &str) -> Result<DraPluginClient, DriverCallError> {
        self.store
            .get_connected(driver)
            .await
            .ok_or(DriverCallError::NotRegistered)
    }
}

impl DriverClients for PluginRegistry {
    fn is_registered(&self, driver: &str) -> bool {
        self.store.get(driver).is_some()
    }

    async fn node_prepare_resources(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> Result<PrepareResults, DriverCallError> {
        self.registered(driver)
            .await?
            .node_prepare_resources(claims)
            .await
    }

    async fn node_unprepare_resources(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> Result<UnprepareResults, DriverCallError> {
        self.registered(driver)
            .await?
            .node_unprepare_resources(claims)
            .await
    }
}
