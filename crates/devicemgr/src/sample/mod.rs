//! [`SamplePlugin`]: a fake device plugin serving N devices on a unix socket, for tests and
//! demos (`corral run --demo-devices N`). It places devices on NUMA nodes as configured,
//! changes health on command, answers `GetPreferredAllocation` (preferring the highest
//! ids, so tests can tell its choice from the manager's), records `Allocate` and
//! `PreStartContainer`, and misbehaves on command ([`FailureMode`]).
//!
//! ```
//! use corral_devicemgr::sample::{SampleConfig, SamplePlugin};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let config = SampleConfig::new("example.com/fake", dir.path().join("fake.sock"), 4, &[0, 1]);
//! let plugin = SamplePlugin::start(config).await?;
//! assert!(plugin.set_health("fake-1", false));
//! assert!(!plugin.devices()[1].healthy);
//! plugin.stop().await;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use corral_proto::deviceplugin::v1beta1::{
    AllocateRequest, AllocateResponse, CdiDevice, ContainerAllocateResponse,
    ContainerPreferredAllocationResponse, DevicePluginOptions, DeviceSpec, Empty,
    ListAndWatchResponse, Mount, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse, RegisterRequest, VERSION,
    device_plugin_server::{DevicePlugin, DevicePluginServer},
    registration_client::RegistrationClient,
};
use corral_proto::uds::{self, SocketOptions, UdsError, UdsListener};
use tokio::sync::watch;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::Device;

/// How the plugin misbehaves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureMode {
    /// Behaves.
    #[default]
    None,
    /// `Allocate` never answers.
    HangAllocate,
    /// `Allocate` fails with an internal error.
    FailAllocate,
    /// `Allocate` answers without a container response.
    EmptyAllocate,
    /// `GetDevicePluginOptions` never answers.
    HangOptions,
    /// `GetPreferredAllocation` never answers.
    HangPreferred,
    /// `PreStartContainer` never answers.
    HangPreStart,
    /// `ListAndWatch` opens but never sends a list.
    HangListAndWatch,
    /// `ListAndWatch` sends its list over and over, as fast as it can.
    FloodLists,
}

/// What the sample plugin serves.
#[derive(Debug, Clone)]
pub struct SampleConfig {
    /// The extended resource name.
    pub resource: String,
    /// The socket to serve on.
    pub socket: PathBuf,
    /// The devices, in list order.
    pub devices: Vec<Device>,
    /// Ask for `PreStartContainer`.
    pub pre_start_required: bool,
    /// Offer `GetPreferredAllocation`.
    pub preferred_allocation: bool,
    /// How it misbehaves.
    pub failure: FailureMode,
}

impl SampleConfig {
    /// `count` healthy devices named `<last resource segment>-<i>`, device `i` on NUMA node
    /// `numa_nodes[i % len]` (no topology when `numa_nodes` is empty).
    pub fn new(
        resource: &str,
        socket: impl Into<PathBuf>,
        count: usize,
        numa_nodes: &[i64],
    ) -> SampleConfig {
        let base = resource.rsplit('/').next().unwrap_or(resource);
        let devices = (0..count)
            .map(|i| {
                let numa = (!numa_nodes.is_empty()).then(|| vec![numa_nodes[i % numa_nodes.len()]]);
                Device::new(format!("{base}-{i}"), numa)
            })
            .collect();
        SampleConfig {
            resource: resource.to_owned(),
            socket: socket.into(),
            devices,
            pre_start_required: false,
            preferred_allocation: false,
            failure: FailureMode::None,
        }
    }
}

/// Calls the plugin received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calls {
    /// Device ids of every `Allocate` container request.
    pub allocate: Vec<Vec<String>>,
    /// Device ids of every `PreStartContainer` request.
    pub pre_start: Vec<Vec<String>>,
    /// Number of `GetPreferredAllocation` calls.
    pub preferred: usize,
}

struct Inner {
    config: SampleConfig,
    devices: watch::Sender<Vec<Device>>,
    failure: Mutex<FailureMode>,
    calls: Mutex<Calls>,
    /// Device lists handed to `ListAndWatch` streams.
    lists_sent: std::sync::atomic::AtomicUsize,
    stop: CancellationToken,
    crash: CancellationToken,
}

impl Inner {
    fn failure(&self) -> FailureMode {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn hang(&self) -> Status {
        tokio::select! {
            () = self.stop.cancelled() => {}
            () = self.crash.cancelled() => {}
        }
        Status::unavailable("sample plugin stopped")
    }
}

#[derive(Clone)]
struct Service(Arc<Inner>);

type ListStream = Pin<Box<dyn Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

fn list(devices: &[Device]) -> ListAndWatchResponse {
    ListAndWatchResponse {
        devices: devices.iter().map(Device::to_proto).collect(),
    }
}

#[tonic::async_trait]
impl DevicePlugin for Service {
    type ListAndWatchStream = ListStream;

    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        if self.0.failure() == FailureMode::HangOptions {
            return Err(self.0.hang().await);
        }
        Ok(Response::new(DevicePluginOptions {
            pre_start_required: self.0.config.pre_start_required,
            get_preferred_allocation_available: self.0.config.preferred_allocation,
        }))
    }

    async fn list_and_watch(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let inner = Arc::clone(&self.0);
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut devices = inner.devices.subscribe();
            let failure = inner.failure();
            let mut first = failure != FailureMode::HangListAndWatch;
            loop {
                if first || failure == FailureMode::FloodLists {
                    let current = list(&devices.borrow_and_update());
                    tokio::select! {
                        sent = tx.send(Ok(current)) => {
                            if sent.is_err() { return }
                            inner.lists_sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                        () = inner.stop.cancelled() => return,
                        () = inner.crash.cancelled() => {
                            let _ = tx.send(Err(Status::unavailable("sample plugin crashed"))).await;
                            return;
                        }
                    }
                    first = false;
                    if failure == FailureMode::FloodLists {
                        continue;
                    }
                }
                tokio::select! {
                    changed = devices.changed() => {
                        if changed.is_err() { return }
                        first = failure != FailureMode::HangListAndWatch;
                    }
                    () = tx.closed() => return,
                    () = inner.stop.cancelled() => return,
                    () = inner.crash.cancelled() => {
                        let _ = tx.send(Err(Status::unavailable("sample plugin crashed"))).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        self.0.calls().preferred += 1;
        if self.0.failure() == FailureMode::HangPreferred {
            return Err(self.0.hang().await);
        }
        let container_responses = request
            .into_inner()
            .container_requests
            .into_iter()
            .map(|r| {
                let size = usize::try_from(r.allocation_size).unwrap_or(0);
                let mut chosen = r.must_include_device_i_ds.clone();
                let mut rest: Vec<String> = r
                    .available_device_i_ds
                    .into_iter()
                    .filter(|id| !chosen.contains(id))
                    .collect();
                rest.sort();
                while chosen.len() < size {
                    let Some(id) = rest.pop() else { break };
                    chosen.push(id);
                }
                ContainerPreferredAllocationResponse {
                    device_i_ds: chosen,
                }
            })
            .collect();
        let response = PreferredAllocationResponse {
            container_responses,
        };
        Ok(Response::new(response))
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let request = request.into_inner();
        self.0.calls().allocate.extend(
            request
                .container_requests
                .iter()
                .map(|r| r.devices_ids.clone()),
        );
        match self.0.failure() {
            FailureMode::HangAllocate => return Err(self.0.hang().await),
            FailureMode::FailAllocate => {
                return Err(Status::internal("sample plugin refuses to allocate"));
            }
            FailureMode::EmptyAllocate => return Ok(Response::new(AllocateResponse::default())),
            _ => {}
        }
        let resource = &self.0.config.resource;
        let container_responses = request
            .container_requests
            .into_iter()
            .map(|r| {
                let ids = r.devices_ids;
                ContainerAllocateResponse {
                    envs: [("SAMPLE_DEVICES".to_owned(), ids.join(","))].into(),
                    mounts: vec![Mount {
                        container_path: "/var/run/sample".into(),
                        host_path: "/run/sample".into(),
                        read_only: true,
                    }],
                    devices: ids
                        .iter()
                        .map(|id| DeviceSpec {
                            container_path: format!("/dev/{id}"),
                            host_path: format!("/dev/sample/{id}"),
                            permissions: "rw".into(),
                        })
                        .collect(),
                    annotations: [("corral.dev/sample-resource".to_owned(), resource.clone())]
                        .into(),
                    cdi_devices: ids
                        .iter()
                        .map(|id| CdiDevice {
                            name: format!("corral.dev/sample={id}"),
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(Response::new(AllocateResponse {
            container_responses,
        }))
    }

    async fn pre_start_container(
        &self,
        request: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        self.0
            .calls()
            .pre_start
            .push(request.into_inner().devices_ids);
        if self.0.failure() == FailureMode::HangPreStart {
            return Err(self.0.hang().await);
        }
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

/// A running sample plugin. Dropping it without [`stop`](Self::stop) or
/// [`crash`](Self::crash) stops it too.
pub struct SamplePlugin {
    inner: Arc<Inner>,
    server: Option<tokio::task::JoinHandle<Result<(), UdsError>>>,
}

impl std::fmt::Debug for SamplePlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamplePlugin")
            .field("resource", &self.inner.config.resource)
            .field("socket", &self.inner.config.socket)
            .finish_non_exhaustive()
    }
}

impl SamplePlugin {
    /// Serve `config` on its socket.
    pub async fn start(config: SampleConfig) -> Result<SamplePlugin, UdsError> {
        let listener = UdsListener::bind(&config.socket, &SocketOptions::default())?;
        let (devices, _) = watch::channel(config.devices.clone());
        let inner = Arc::new(Inner {
            failure: Mutex::new(config.failure),
            config,
            devices,
            calls: Mutex::new(Calls::default()),
            lists_sent: std::sync::atomic::AtomicUsize::new(0),
            stop: CancellationToken::new(),
            crash: CancellationToken::new(),
        });
        let router = tonic::transport::Server::builder().add_service(
            DevicePluginServer::new(Service(Arc::clone(&inner)))
                .max_encoding_message_size(usize::MAX),
        );
        let stop = inner.stop.clone();
        let crash = inner.crash.clone();
        let server = tokio::spawn(uds::serve(
            router,
            listener,
            async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = crash.cancelled() => {}
                }
            },
            Duration::from_millis(500),
        ));
        Ok(SamplePlugin {
            inner,
            server: Some(server),
        })
    }

    /// The resource name.
    pub fn resource(&self) -> &str {
        &self.inner.config.resource
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.inner.config.socket
    }

    /// Register with the registration server at `kubelet_socket`; the endpoint sent is the
    /// socket's file name.
    pub async fn register(&self, kubelet_socket: &Path) -> Result<(), Status> {
        let endpoint = self
            .inner
            .config
            .socket
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let channel = uds::connect(kubelet_socket, Duration::from_secs(10))
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        RegistrationClient::new(channel)
            .register(RegisterRequest {
                version: VERSION.into(),
                endpoint,
                resource_name: self.inner.config.resource.clone(),
                options: Some(DevicePluginOptions {
                    pre_start_required: self.inner.config.pre_start_required,
                    get_preferred_allocation_available: self.inner.config.preferred_allocation,
                }),
            })
            .await
            .map(|_| ())
    }

    /// Set one device's health; false when there is no such device. Streams send the new
    /// list at once.
    pub fn set_health(&self, id: &str, healthy: bool) -> bool {
        let mut found = false;
        self.inner.devices.send_modify(|devices| {
            for device in devices.iter_mut().filter(|d| d.id == id) {
                device.healthy = healthy;
                found = true;
            }
        });
        found
    }

    /// Replace the device list (any list, including lies: duplicate ids, foreign NUMA ids).
    pub fn set_devices(&self, devices: Vec<Device>) {
        self.inner.devices.send_replace(devices);
    }

    /// The current device list.
    pub fn devices(&self) -> Vec<Device> {
        self.inner.devices.borrow().clone()
    }

    /// Change how the plugin misbehaves (streams already open keep their mode).
    pub fn set_failure(&self, mode: FailureMode) {
        *self
            .inner
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = mode;
    }

    /// How many device lists the plugin's `ListAndWatch` streams have sent so far (handed
    /// to the stream, in order: a list sent reaches the manager before any list after it).
    pub fn lists_sent(&self) -> usize {
        self.inner
            .lists_sent
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The calls received so far.
    pub fn calls(&self) -> Calls {
        self.inner.calls().clone()
    }

    /// Stop gracefully: streams end, the socket is removed.
    pub async fn stop(mut self) {
        self.inner.stop.cancel();
        self.join().await;
    }

    /// Die abruptly: streams fail, the socket is removed, nothing is answered any more.
    pub async fn crash(mut self) {
        self.inner.crash.cancel();
        self.join().await;
    }

    async fn join(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
    }
}

impl Drop for SamplePlugin {
    fn drop(&mut self) {
        self.inner.stop.cancel();
    }
}
