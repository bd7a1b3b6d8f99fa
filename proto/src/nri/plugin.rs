//! The plugin's end of an NRI connection (upstream `pkg/stub`): dial the runtime, serve the
//! `Plugin` service through an [`NriPlugin`], register, and call the runtime's
//! `UpdateContainers` when containers must change outside an event.
//!
//! It speaks to runtimes of NRI v0.6 to v0.12: the plugin's subscription is cut to the
//! events the runtime knows ([`super::version`]), so a plugin that handles v0.10's events
//! still registers with a v0.8 runtime, which would drop it otherwise; v0.12's dedicated
//! RPCs of the events older runtimes send through `StateChange` reach
//! [`NriPlugin::state_change`] alike.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tokio::net::UnixStream;

use super::api::{self, EventMask};
use super::decode_cost::{TOP_LEVEL, decode_cost};
use super::error::{NriError, NriStatus};
use super::mux::{Mux, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use super::ttrpc::{self, Client, decode_request as decode};
use super::version::{NriVersion, runtime_nri_version};

/// The environment variable a runtime that launches a plugin names it in.
pub const PLUGIN_NAME_ENV: &str = "NRI_PLUGIN_NAME";
/// The environment variable a runtime that launches a plugin gives its index in.
pub const PLUGIN_INDEX_ENV: &str = "NRI_PLUGIN_IDX";
/// The environment variable a runtime that launches a plugin passes its connection's file
/// descriptor number in.
pub const PLUGIN_SOCKET_ENV: &str = "NRI_PLUGIN_SOCKET";

/// The runtime's NRI socket by default.
pub const DEFAULT_SOCKET: &str = "/var/run/nri/nri.sock";
/// How long registration may take by default (upstream's default registration timeout).
pub const DEFAULT_REGISTRATION_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a call to the runtime may take by default (upstream's default request timeout).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// What the parts of one synchronization the runtime split may take decoded together
/// ([`decode_cost`]): about two full parts of realistic pods (a node of a thousand or more
/// pods). More is refused `ResourceExhausted`, so a runtime sending parts without end cannot
/// hold the plugin's memory.
pub const MAX_SYNC_BYTES: u64 = 96 << 20;

/// Who the plugin is and where the runtime listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    /// The plugin's name.
    pub name: String,
    /// Its two-digit index: the runtime calls plugins in index order.
    pub index: String,
    /// The runtime's NRI socket.
    pub socket: PathBuf,
    /// How long `RegisterPlugin` may take.
    pub registration_timeout: Duration,
    /// How long any other call to the runtime may take (the runtime's `Configure` can
    /// change it).
    pub request_timeout: Duration,
}

impl PluginConfig {
    /// `name` with `index` on [`DEFAULT_SOCKET`], default timeouts. The index is two
    /// digits (`"00"`–`"99"`); the name is not empty and has no `/`, `-` prefix or NUL.
    pub fn new(name: &str, index: &str) -> Result<Self, NriError> {
        let invalid = |what, value: &str, why| NriError::InvalidConfig {
            what,
            value: value.to_owned(),
            why,
        };
        if index.len() != 2 || !index.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid("index", index, "two decimal digits, 00 to 99"));
        }
        if name.is_empty() || name.contains(['/', '\0']) {
            return Err(invalid("name", name, "a non-empty name without '/' or NUL"));
        }
        Ok(PluginConfig {
            name: name.to_owned(),
            index: index.to_owned(),
            socket: PathBuf::from(DEFAULT_SOCKET),
            registration_timeout: DEFAULT_REGISTRATION_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        })
    }
}

/// What a plugin does on the runtime's events. Every method but [`NriPlugin::configure`]
/// has a default that changes nothing; a method's error fails the runtime's request with
/// that status (for `CreateContainer`, the container is not created).
#[tonic::async_trait]
pub trait NriPlugin: Send + Sync + 'static {
    /// The runtime's configuration; answers the events to subscribe to.
    async fn configure(&self, request: api::ConfigureRequest) -> Result<EventMask, NriStatus>;

    /// The pods and containers that exist when the plugin connects (a synchronization the
    /// runtime sends in parts arrives here whole).
    async fn synchronize(
        &self,
        _request: api::SynchronizeRequest,
    ) -> Result<api::SynchronizeResponse, NriStatus> {
        Ok(api::SynchronizeResponse::default())
    }

    /// A container is being created.
    async fn create_container(
        &self,
        _request: api::CreateContainerRequest,
    ) -> Result<api::CreateContainerResponse, NriStatus> {
        Ok(api::CreateContainerResponse::default())
    }

    /// A container's resources are being updated.
    async fn update_container(
        &self,
        _request: api::UpdateContainerRequest,
    ) -> Result<api::UpdateContainerResponse, NriStatus> {
        Ok(api::UpdateContainerResponse::default())
    }

    /// A container is being stopped.
    async fn stop_container(
        &self,
        _request: api::StopContainerRequest,
    ) -> Result<api::StopContainerResponse, NriStatus> {
        Ok(api::StopContainerResponse::default())
    }

    /// Any other subscribed event (pod sandbox lifecycle, container start, removal…),
    /// whether the runtime sent it through `StateChange` or, from v0.12, its dedicated RPC
    /// (`RunPodSandbox`, `RemoveContainer`, …).
    async fn state_change(&self, _event: api::StateChangeEvent) -> Result<(), NriStatus> {
        Ok(())
    }

    /// A pod's resources are being updated (NRI v0.10: the kubelet's
    /// `UpdatePodSandboxResources`, an in-place pod resize). An error fails the update.
    async fn update_pod_sandbox(
        &self,
        _request: api::UpdatePodSandboxRequest,
    ) -> Result<(), NriStatus> {
        Ok(())
    }

    /// Every plugin's adjustment of a container being created, to accept or reject (NRI
    /// v0.10). A rejection fails the container's creation; the default accepts.
    async fn validate_container_adjustment(
        &self,
        _request: api::ValidateContainerAdjustmentRequest,
    ) -> Result<api::ValidateContainerAdjustmentResponse, NriStatus> {
        Ok(api::ValidateContainerAdjustmentResponse::default())
    }

    /// The runtime is shutting the plugin down.
    async fn shutdown(&self) {}
}

/// A connected plugin, not yet registered: [`PluginStub::run`] registers and serves.
#[derive(Debug)]
pub struct PluginStub {
    config: PluginConfig,
    mux: Mux,
    runtime: RuntimeClient,
}

impl PluginStub {
    /// Dials `config.socket` and multiplexes the connection.
    pub async fn connect(config: PluginConfig) -> Result<PluginStub, NriError> {
        let trunk = UnixStream::connect(&config.socket)
            .await
            .map_err(|source| NriError::Connect {
                path: config.socket.clone(),
                source,
            })?;
        Self::over(trunk, config)
    }

    /// A plugin the runtime launched (from its plugin directory): its name, index and
    /// connection come from [`PLUGIN_NAME_ENV`], [`PLUGIN_INDEX_ENV`] and
    /// [`PLUGIN_SOCKET_ENV`] (the number of an inherited socket file descriptor). `None`
    /// when the runtime did not launch this process (no [`PLUGIN_SOCKET_ENV`]).
    pub fn from_runtime_env() -> Result<Option<PluginStub>, NriError> {
        let Ok(fd) = std::env::var(PLUGIN_SOCKET_ENV) else {
            return Ok(None);
        };
        let invalid = |what, value: &str, why| NriError::InvalidConfig {
            what,
            value: value.to_owned(),
            why,
        };
        let name = std::env::var(PLUGIN_NAME_ENV).unwrap_or_default();
        let index = std::env::var(PLUGIN_INDEX_ENV).unwrap_or_default();
        let config = PluginConfig::new(&name, &index)?;
        let fd: i32 =
            fd.parse().ok().filter(|&fd| fd > 2).ok_or_else(|| {
                invalid("socket", &fd, "an inherited file descriptor number above 2")
            })?;
        let trunk = inherited_socket(fd)?;
        trunk.set_nonblocking(true)?;
        Self::over(UnixStream::from_std(trunk)?, config).map(Some)
    }

    /// A plugin on an already connected trunk (a socket the runtime handed over, or one
    /// end of a socket pair in tests).
    pub fn over(trunk: UnixStream, config: PluginConfig) -> Result<PluginStub, NriError> {
        let mux = Mux::new(trunk);
        let client = Client::new(mux.open(RUNTIME_SERVICE_CONN)?, api::RUNTIME_SERVICE);
        let runtime = RuntimeClient {
            client,
            timeout: Arc::new(RequestTimeout::new(config.request_timeout)),
        };
        Ok(PluginStub {
            config,
            mux,
            runtime,
        })
    }

    /// The runtime's service, for unsolicited updates while the plugin runs.
    pub fn runtime(&self) -> RuntimeClient {
        self.runtime.clone()
    }

    /// Serves `plugin` and registers; returns when the runtime closes the connection
    /// (`Ok`) or the connection fails.
    pub async fn run(self, plugin: impl NriPlugin) -> Result<(), NriError> {
        let conn = self.mux.open(PLUGIN_SERVICE_CONN)?;
        let service = Arc::new(PluginService {
            plugin: Arc::new(plugin),
            partial_sync: std::sync::Mutex::new(None),
            request_timeout: Arc::clone(&self.runtime.timeout),
        });
        let served = tokio::spawn(ttrpc::serve(conn, api::PLUGIN_SERVICE, service));
        self.mux.unblock();
        let register = api::RegisterPluginRequest {
            plugin_name: self.config.name.clone(),
            plugin_idx: self.config.index.clone(),
            nri_version: String::new(),
        };
        let registered: Result<api::Empty, _> = self
            .runtime
            .client
            .call(
                "RegisterPlugin",
                &register,
                self.config.registration_timeout,
            )
            .await;
        if let Err(err) = registered {
            self.mux.close();
            served.abort();
            // A runtime may configure the plugin before its answer to RegisterPlugin is
            // written, and go away then: that is the runtime going away, as below.
            return match err {
                NriError::Closed => Ok(()),
                err => Err(err),
            };
        }
        self.mux.closed().await;
        served.abort();
        match self.mux.close_reason() {
            NriError::Closed => Ok(()),
            err => Err(err),
        }
    }
}

/// Takes the socket the runtime passed as file descriptor `fd`, once per process.
#[allow(unsafe_code)]
fn inherited_socket(fd: i32) -> Result<std::os::unix::net::UnixStream, NriError> {
    use std::os::fd::FromRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    static TAKEN: AtomicBool = AtomicBool::new(false);
    if TAKEN.swap(true, Ordering::SeqCst) {
        let why = "the inherited socket was already taken by this process";
        return Err(NriError::InvalidConfig {
            what: "socket",
            value: fd.to_string(),
            why,
        });
    }
    // SAFETY: the runtime passes this descriptor to the plugin process for its NRI
    // connection and nothing else in the process uses it; `TAKEN` makes this the only owner
    // (a second call is refused above), so it is closed exactly once, by the stream.
    let socket = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
    // A descriptor that is not a connected socket is refused rather than used.
    socket.peer_addr().map_err(|err| {
        NriError::Protocol(format!(
            "inherited descriptor {fd} is not a connected unix socket: {err}"
        ))
    })?;
    Ok(socket)
}

/// The runtime's `Runtime` service, as a plugin calls it.
#[derive(Debug, Clone)]
pub struct RuntimeClient {
    client: Client,
    timeout: Arc<RequestTimeout>,
}

/// The request timeout calls to the runtime use: the plugin's, until the runtime's
/// `Configure` names its own (`request_timeout`, v0.8), as upstream's stub adopts it.
#[derive(Debug)]
struct RequestTimeout(std::sync::atomic::AtomicU64);

impl RequestTimeout {
    fn new(timeout: Duration) -> Self {
        RequestTimeout(std::sync::atomic::AtomicU64::new(nanos(timeout)))
    }

    fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Adopts the runtime's timeout, in milliseconds as `ConfigureRequest` carries it. 0
    /// (a v0.6 runtime, which does not send it) or negative keeps the current one, where
    /// upstream's stub would adopt a zero timeout.
    fn adopt(&self, runtime_millis: i64) {
        if let Ok(millis) = u64::try_from(runtime_millis)
            && millis > 0
        {
            let nanos = nanos(Duration::from_millis(millis));
            self.0.store(nanos, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

fn nanos(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX)
}

impl RuntimeClient {
    /// How long a call to the runtime may take now (the runtime's `Configure` can change
    /// it).
    pub fn request_timeout(&self) -> Duration {
        self.timeout.get()
    }

    /// `UpdateContainers`: asks the runtime to change containers outside an event; answers
    /// the updates that failed.
    pub async fn update_containers(
        &self,
        request: &api::UpdateContainersRequest,
    ) -> Result<api::UpdateContainersResponse, NriError> {
        self.client
            .call("UpdateContainers", request, self.timeout.get())
            .await
    }
}

/// The events of `wanted` the runtime of NRI `version` knows: what the plugin subscribes
/// to. A mask of none is upstream's "every event" and is passed on as it is; a plugin that
/// wants only events the runtime does not know is refused (`FailedPrecondition`), where an
/// empty subscription would subscribe it to everything.
fn subscription(wanted: EventMask, version: Option<NriVersion>) -> Result<EventMask, NriStatus> {
    let known = NriVersion::known_events(version);
    let events = wanted.intersection(known);
    let dropped = wanted.difference(known);
    if dropped.bits() != 0 {
        let version = version.map_or_else(|| "unknown".to_owned(), |v| format!("{v:?}"));
        tracing::info!(nri_version = %version, dropped = format!("{:#x}", dropped.bits()), "NRI: the runtime does not know some events; not subscribed to them");
        if events.bits() == 0 {
            let why = format!(
                "the runtime (NRI {version}) knows none of the events the plugin subscribes to ({:#x})",
                wanted.bits()
            );
            return Err(NriStatus::new(NriStatus::FAILED_PRECONDITION, why));
        }
    }
    Ok(events)
}

/// The v0.12 runtime's dedicated RPCs of the events older runtimes send through
/// `StateChange` (upstream funnels them into `StateChange` for a plugin that answers
/// `Unimplemented`, with a deprecation warning).
const DEDICATED_EVENTS: &[&str] = &[
    "RunPodSandbox",
    "PostUpdatePodSandbox",
    "StopPodSandbox",
    "RemovePodSandbox",
    "PostCreateContainer",
    "StartContainer",
    "PostStartContainer",
    "PostUpdateContainer",
    "RemoveContainer",
];

fn is_dedicated_event(method: &str) -> bool {
    DEDICATED_EVENTS.contains(&method)
}

/// The `StateChange` event a dedicated RPC `method` (one of [`DEDICATED_EVENTS`]) carries
/// in `payload`.
fn dedicated_event(method: &str, payload: &[u8]) -> Result<api::StateChangeEvent, NriStatus> {
    use api::Event as E;
    let pod_event = |event: E, pod| api::StateChangeEvent {
        event: event as i32,
        pod,
        container: None,
    };
    let container_event = |event: E, pod, container| api::StateChangeEvent {
        event: event as i32,
        pod,
        container,
    };
    Ok(match method {
        "RunPodSandbox" => {
            let r: api::RunPodSandboxRequest = decode(payload)?;
            pod_event(E::RunPodSandbox, r.pod)
        }
        "PostUpdatePodSandbox" => {
            let r: api::PostUpdatePodSandboxRequest = decode(payload)?;
            pod_event(E::PostUpdatePodSandbox, r.pod)
        }
        "StopPodSandbox" => {
            let r: api::StopPodSandboxRequest = decode(payload)?;
            pod_event(E::StopPodSandbox, r.pod)
        }
        "RemovePodSandbox" => {
            let r: api::RemovePodSandboxRequest = decode(payload)?;
            pod_event(E::RemovePodSandbox, r.pod)
        }
        "PostCreateContainer" => {
            let r: api::PostCreateContainerRequest = decode(payload)?;
            container_event(E::PostCreateContainer, r.pod, r.container)
        }
        "StartContainer" => {
            let r: api::StartContainerRequest = decode(payload)?;
            container_event(E::StartContainer, r.pod, r.container)
        }
        "PostStartContainer" => {
            let r: api::PostStartContainerRequest = decode(payload)?;
            container_event(E::PostStartContainer, r.pod, r.container)
        }
        "PostUpdateContainer" => {
            let r: api::PostUpdateContainerRequest = decode(payload)?;
            container_event(E::PostUpdateContainer, r.pod, r.container)
        }
        "RemoveContainer" => {
            let r: api::RemoveContainerRequest = decode(payload)?;
            container_event(E::RemoveContainer, r.pod, r.container)
        }
        other => {
            let why = format!("{other} is not an event's RPC");
            return Err(NriStatus::new(NriStatus::UNIMPLEMENTED, why));
        }
    })
}

/// An [`NriPlugin`] as the ttrpc `Plugin` service.
struct PluginService<P> {
    plugin: Arc<P>,
    /// The parts of a synchronization the runtime split (`more`), collected until the last
    /// one, so the plugin sees the whole state at once (as upstream's stub does), and what
    /// decoding them may have cost ([`decode_cost`]).
    partial_sync: std::sync::Mutex<Option<(api::SynchronizeRequest, u64)>>,
    /// The timeout of calls to the runtime, which the runtime's `Configure` may set.
    request_timeout: Arc<RequestTimeout>,
}

impl<P> PluginService<P> {
    /// The part in `payload` added to the parts collected so far: `None` while more parts
    /// are to come (then the runtime is answered `more`), else the whole synchronization.
    /// Parts that together may take more than [`MAX_SYNC_BYTES`] decoded are refused (and
    /// forgotten) before the one past it is decoded.
    fn collect_sync(&self, payload: &[u8]) -> Result<Option<api::SynchronizeRequest>, NriStatus> {
        let mut partial = self
            .partial_sync
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held = partial.as_ref().map_or(0, |(_, cost)| *cost);
        let cost = held.saturating_add(decode_cost(payload, TOP_LEVEL));
        if cost > MAX_SYNC_BYTES {
            *partial = None;
            let why = format!(
                "a synchronization in parts would take more than {MAX_SYNC_BYTES} bytes decoded"
            );
            return Err(NriStatus::new(NriStatus::RESOURCE_EXHAUSTED, why));
        }
        let request: api::SynchronizeRequest = decode(payload)?;
        let whole = match partial.take() {
            Some((mut whole, _)) => {
                whole.pods.extend(request.pods);
                whole.containers.extend(request.containers);
                whole.more = request.more;
                whole
            }
            None => request,
        };
        if whole.more {
            *partial = Some((whole, cost));
            return Ok(None);
        }
        Ok(Some(whole))
    }
}

#[tonic::async_trait]
impl<P: NriPlugin> ttrpc::Service for PluginService<P> {
    async fn call(&self, method: &str, payload: Vec<u8>) -> Result<Vec<u8>, NriStatus> {
        let p = &self.plugin;
        let answer = match method {
            "Configure" => {
                let request: api::ConfigureRequest = decode(&payload)?;
                self.request_timeout.adopt(request.request_timeout);
                let version = runtime_nri_version(&request);
                let wanted = p.configure(request).await?;
                api::ConfigureResponse {
                    events: subscription(wanted, version)?.bits(),
                }
                .encode_to_vec()
            }
            "Synchronize" => match self.collect_sync(&payload)? {
                Some(whole) => p.synchronize(whole).await?.encode_to_vec(),
                None => api::SynchronizeResponse {
                    update: Vec::new(),
                    more: true,
                }
                .encode_to_vec(),
            },
            "CreateContainer" => p.create_container(decode(&payload)?).await?.encode_to_vec(),
            "UpdateContainer" => p.update_container(decode(&payload)?).await?.encode_to_vec(),
            "StopContainer" => p.stop_container(decode(&payload)?).await?.encode_to_vec(),
            "StateChange" => {
                p.state_change(decode(&payload)?).await?;
                api::Empty {}.encode_to_vec()
            }
            "UpdatePodSandbox" => {
                p.update_pod_sandbox(decode(&payload)?).await?;
                api::UpdatePodSandboxResponse {}.encode_to_vec()
            }
            "ValidateContainerAdjustment" => p
                .validate_container_adjustment(decode(&payload)?)
                .await?
                .encode_to_vec(),
            dedicated if is_dedicated_event(dedicated) => {
                p.state_change(dedicated_event(dedicated, &payload)?)
                    .await?;
                // Each of these answers an empty message: no bytes.
                Vec::new()
            }
            "Shutdown" => {
                p.shutdown().await;
                api::Empty {}.encode_to_vec()
            }
            other => {
                let why = format!("the Plugin service has no method {other}");
                return Err(NriStatus::new(NriStatus::UNIMPLEMENTED, why));
            }
        };
        Ok(answer)
    }
}
