//! The plugin registry ([`PluginRegistry`], upstream `pluginmanager` + the DRA
//! registration handler): watches a registration directory for plugin sockets by polling,
//! runs the pluginregistration v1 handshake (`GetInfo`, judge, `NotifyRegistrationStatus`
//! with the verdict and reason), keeps the accepted plugins in a [`PluginStore`], and is
//! the manager's [`DriverClients`].
//!
//! A socket that disappears deregisters its plugin; a socket replaced by a new file (a
//! driver restarting under the same name) is deregistered and registered again. A rejected
//! or unreachable socket is retried with exponential backoff, as upstream's reconciler
//! does.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use corral_proto::pluginregistration::v1::{
    InfoRequest, PLUGINS_REGISTRY_PATH, PluginInfo, RegistrationStatus,
    registration_client::RegistrationClient,
};
use corral_proto::tonic;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::DraPluginClient;
use super::registration::validate_plugin_info;
use super::store::PluginStore;
use crate::claim::ClaimRef;
use crate::driver::{DriverClients, PrepareResults, UnprepareResults};
use crate::error::DriverCallError;

/// Registry settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryConfig {
    /// The directory plugins put their registration sockets in (upstream:
    /// `/var/lib/kubelet/plugins_registry`).
    pub dir: PathBuf,
    /// How often the directory is scanned.
    pub poll_interval: Duration,
    /// Deadline of each registration RPC and of dialing a plugin (upstream: 1 s).
    pub registration_timeout: Duration,
    /// Deadline of NodePrepareResources / NodeUnprepareResources (upstream: 45 s).
    pub call_timeout: Duration,
    /// First wait before retrying a rejected or unreachable socket; doubles up to
    /// `retry_max`.
    pub retry_initial: Duration,
    /// Longest wait between retries.
    pub retry_max: Duration,
}

impl RegistryConfig {
    /// Defaults for watching `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        RegistryConfig {
            dir: dir.into(),
            poll_interval: Duration::from_millis(200),
            registration_timeout: Duration::from_secs(1),
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

/// Identity of a socket file: a re-created socket is a new plugin instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    ctime: i64,
    ctime_nsec: i64,
}

#[derive(Debug, Clone)]
enum SocketState {
    Registered {
        driver: String,
    },
    Rejected {
        retry_at: Instant,
        backoff: Duration,
    },
}

#[derive(Debug, Clone)]
struct Tracked {
    id: FileId,
    state: SocketState,
}

/// The outcome of one registration handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistrationEvent {
    /// A plugin was accepted.
    Registered {
        /// Registration socket.
        socket: PathBuf,
        /// Driver name.
        driver: String,
    },
    /// A plugin was refused (or could not be asked).
    Rejected {
        /// Registration socket.
        socket: PathBuf,
        /// Why.
        reason: String,
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
    sockets: tokio::sync::Mutex<BTreeMap<PathBuf, Tracked>>,
    events: tokio::sync::broadcast::Sender<RegistrationEvent>,
}

impl PluginRegistry {
    /// A registry with no plugins; call [`watch`](Self::watch) or
    /// [`sync_once`](Self::sync_once) to find some.
    pub fn new(config: RegistryConfig) -> Arc<Self> {
        Arc::new(PluginRegistry {
            config,
            store: PluginStore::new(),
            sockets: tokio::sync::Mutex::new(BTreeMap::new()),
            events: tokio::sync::broadcast::channel(256).0,
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

    /// The plugin to call for `driver`.
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

    fn emit(&self, event: RegistrationEvent) {
        // Nobody listening is fine.
        let _ = self.events.send(event);
    }

    /// Scan the directory in a background task every `poll_interval` until the returned
    /// handle is stopped or dropped. Must be called inside a tokio runtime.
    pub fn watch(self: &Arc<Self>) -> RegistryWatcher {
        let token = CancellationToken::new();
        let registry = Arc::clone(self);
        let stop = token.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(registry.config.poll_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = registry.sync_once() => {}
                }
            }
        });
        RegistryWatcher {
            token,
            task: Some(task),
        }
    }

    /// One reconcile pass: deregister vanished or replaced sockets, register new ones,
    /// retry rejected ones whose backoff expired.
    pub async fn sync_once(&self) {
        let found = scan(&self.config.dir);
        let mut sockets = self.sockets.lock().await;
        let gone: Vec<PathBuf> = sockets
            .iter()
            .filter(|(path, t)| found.get(*path) != Some(&t.id))
            .map(|(path, _)| path.clone())
            .collect();
        for path in gone {
            if let Some(Tracked {
                state: SocketState::Registered { driver },
                ..
            }) = sockets.remove(&path)
            {
                self.store.remove_by_socket(&path);
                tracing::info!(driver = %driver, socket = %path.display(), "DRA plugin deregistered");
                self.emit(RegistrationEvent::Deregistered {
                    socket: path.clone(),
                    driver,
                });
            }
        }
        let now = Instant::now();
        for (path, id) in found {
            let backoff = match sockets.get(&path) {
                None => self.config.retry_initial,
                Some(Tracked {
                    state: SocketState::Rejected { retry_at, backoff },
                    ..
                }) if *retry_at <= now => (*backoff * 2).min(self.config.retry_max),
                Some(_) => continue,
            };
            let state = match self.register(&path).await {
                Ok(driver) => SocketState::Registered { driver },
                Err(reason) => {
                    tracing::warn!(socket = %path.display(), reason = %reason, retry_in = ?backoff, "DRA plugin registration failed");
                    self.emit(RegistrationEvent::Rejected {
                        socket: path.clone(),
                        reason,
                    });
                    SocketState::Rejected {
                        retry_at: Instant::now() + backoff,
                        backoff,
                    }
                }
            };
            sockets.insert(path, Tracked { id, state });
        }
    }

    /// The handshake with one registration socket; the driver name when accepted.
    async fn register(&self, socket: &Path) -> Result<String, String> {
        let timeout = self.config.registration_timeout;
        let channel = corral_proto::uds::connect(socket, timeout)
            .await
            .map_err(|e| {
                format!(
                    "RegisterPlugin error -- dial failed at socket {}, err: {e}",
                    socket.display()
                )
            })?;
        let mut client = RegistrationClient::new(channel);
        let info = call(timeout, client.get_info(bounded(InfoRequest {}, timeout)))
            .await
            .map_err(|e| {
                format!(
                    "RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket {}, err: {e}",
                    socket.display()
                )
            })?;
        let verdict = self.accept(socket, &info).await;
        let status = RegistrationStatus {
            plugin_registered: verdict.is_ok(),
            error: verdict.as_ref().err().cloned().unwrap_or_default(),
        };
        let notified = call(
            timeout,
            client.notify_registration_status(bounded(status, timeout)),
        )
        .await;
        match (&verdict, notified) {
            (Ok(driver), Err(e)) => {
                // Registered all the same, as upstream: the plugin is usable.
                tracing::warn!(driver = %driver, socket = %socket.display(), error = %e,
                    "cannot send the registration status to the DRA plugin");
            }
            (Err(_), Err(e)) => {
                tracing::debug!(socket = %socket.display(), error = %e, "cannot send the rejection to the plugin");
            }
            _ => {}
        }
        verdict
    }

    /// Judge the plugin and, if it passes, dial its endpoint and store it.
    async fn accept(&self, socket: &Path, info: &PluginInfo) -> Result<String, String> {
        let accepted = validate_plugin_info(info, socket)?;
        let client = DraPluginClient::connect(
            &accepted.driver,
            &accepted.endpoint,
            accepted.service,
            self.config.call_timeout,
        )
        .await
        .map_err(|e| {
            format!(
                "RegisterPlugin error -- plugin registration failed with err: DRA driver {} endpoint {}: {e}",
                accepted.driver,
                accepted.endpoint.display()
            )
        })?;
        self.store.add(socket, client).map_err(|e| {
            format!("RegisterPlugin error -- plugin registration failed with err: {e}")
        })?;
        tracing::info!(driver = %accepted.driver, endpoint = %accepted.endpoint.display(),
            service = %accepted.service, "DRA plugin registered");
        self.emit(RegistrationEvent::Registered {
            socket: socket.to_path_buf(),
            driver: accepted.driver.clone(),
        });
        Ok(accepted.driver)
    }
}

fn bounded<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

async fn call<T>(
    timeout: Duration,
    future: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(timeout, future).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), status.message())),
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

/// Sockets under `dir` (recursively, not following symlinks, skipping names that start
/// with `.`, as upstream's plugin watcher).
fn scan(dir: &Path) -> BTreeMap<PathBuf, FileId> {
    let mut out = BTreeMap::new();
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_socket() {
                out.insert(
                    path,
                    FileId {
                        dev: meta.dev(),
                        ino: meta.ino(),
                        ctime: meta.ctime(),
                        ctime_nsec: meta.ctime_nsec(),
                    },
                );
            } else if meta.is_dir() && depth < 8 {
                pending.push((path, depth + 1));
            }
        }
    }
    out
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

impl DriverClients for PluginRegistry {
    fn is_registered(&self, driver: &str) -> bool {
        self.store.get(driver).is_some()
    }

    async fn node_prepare_resources(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> Result<PrepareResults, DriverCallError> {
        let plugin = self
            .store
            .get(driver)
            .ok_or(DriverCallError::NotRegistered)?;
        plugin.node_prepare_resources(claims).await
    }

    async fn node_unprepare_resources(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> Result<UnprepareResults, DriverCallError> {
        let plugin = self
            .store
            .get(driver)
            .ok_or(DriverCallError::NotRegistered)?;
        plugin.node_unprepare_resources(claims).await
    }
}
