//! A device plugin for the node's tests, served over a real unix socket and registered
//! with the node's device manager, whose `GetPreferredAllocation` or `Allocate` waits
//! until the test opens its gate.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_proto::deviceplugin::v1beta1::{
    AllocateRequest, AllocateResponse, ContainerAllocateResponse,
    ContainerPreferredAllocationResponse, Device as ApiDevice, DevicePluginOptions, Empty,
    ListAndWatchResponse, NumaNode, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse, RegisterRequest, TopologyInfo,
    VERSION,
    device_plugin_server::{DevicePlugin, DevicePluginServer},
    registration_client::RegistrationClient,
};
use corral_proto::uds::{self, SocketOptions, UdsListener};
use tonic::codegen::tokio_stream::{self, Stream, StreamExt};
use tonic::{Request, Response, Status};

use super::Node;
use super::tests::WAIT;

pub(crate) const GPU: &str = "example.com/gpu";

/// Which plugin call waits for the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    Preferred,
    Allocate,
}

/// What the gated plugin shares with the test.
struct Gate {
    held: Held,
    /// `GetPreferredAllocation` requests received (their available and must-include ids).
    questions: Mutex<Vec<(Vec<String>, Vec<String>)>>,
    /// `Allocate` requests received (their device ids).
    allocations: Mutex<Vec<Vec<String>>>,
    /// The held call answers once this is true.
    open: tokio::sync::watch::Sender<bool>,
    /// `Allocate` fails instead of answering.
    allocate_fails: bool,
}

impl Gate {
    /// Wait (bounded: a test that never opens the gate fails rather than hangs).
    async fn pass(&self, call: Held) -> Result<(), Status> {
        if call != self.held {
            return Ok(());
        }
        let mut open = self.open.subscribe();
        match tokio::time::timeout(WAIT, open.wait_for(|open| *open)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(Status::deadline_exceeded("the gate was never opened")),
        }
    }
}

#[derive(Clone)]
struct GatedService {
    gate: Arc<Gate>,
    devices: Vec<ApiDevice>,
}

type ListStream = Pin<Box<dyn Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for GatedService {
    type ListAndWatchStream = ListStream;

    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(options()))
    }

    async fn list_and_watch(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let list = ListAndWatchResponse {
            devices: self.devices.clone(),
        };
        let stream = tokio_stream::once(Ok(list)).chain(tokio_stream::pending());
        Ok(Response::new(Box::pin(stream)))
    }

    /// Prefers the last of the available ids (upstream's own order would take the first).
    async fn get_preferred_allocation(
        &self,
        request: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let mut container_responses = Vec::new();
        for ask in request.into_inner().container_requests {
            self.gate.questions.lock().unwrap().push((
                ask.available_device_i_ds.clone(),
                ask.must_include_device_i_ds.clone(),
            ));
            let size = usize::try_from(ask.allocation_size).unwrap_or(0);
            let mut ids = ask.must_include_device_i_ds.clone();
            for id in ask.available_device_i_ds.iter().rev() {
                if ids.len() >= size {
                    break;
                }
                if !ids.contains(id) {
                    ids.push(id.clone());
                }
            }
            container_responses.push(ContainerPreferredAllocationResponse { device_i_ds: ids });
        }
        self.gate.pass(Held::Preferred).await?;
        Ok(Response::new(PreferredAllocationResponse {
            container_responses,
        }))
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let requests = request.into_inner().container_requests;
        for r in &requests {
            self.gate
                .allocations
                .lock()
                .unwrap()
                .push(r.devices_ids.clone());
        }
        self.gate.pass(Held::Allocate).await?;
        if self.gate.allocate_fails {
            return Err(Status::internal("the test says no"));
        }
        Ok(Response::new(AllocateResponse {
            container_responses: requests
                .iter()
                .map(|_| ContainerAllocateResponse::default())
                .collect(),
        }))
    }

    async fn pre_start_container(
        &self,
        _: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

fn options() -> DevicePluginOptions {
    DevicePluginOptions {
        get_preferred_allocation_available: true,
        ..DevicePluginOptions::default()
    }
}

/// A running gated plugin; dropping it opens the gate and stops its server.
pub(crate) struct GatedPlugin {
    gate: Arc<Gate>,
    served: Served,
}

impl GatedPlugin {
    /// Serve `GPU`, device `gpu-i` on NUMA node `numa[i]`, holding `held`, and register
    /// with `node`.
    pub(crate) async fn start(
        node: &Arc<Node>,
        numa: &[i64],
        held: Held,
        allocate_fails: bool,
    ) -> Self {
        Self::start_as(node, "gated.sock", GPU, numa, held, allocate_fails).await
    }

    /// [`GatedPlugin::start`] on `socket` for `resource`.
    pub(crate) async fn start_as(
        node: &Arc<Node>,
        socket: &str,
        resource: &str,
        numa: &[i64],
        held: Held,
        allocate_fails: bool,
    ) -> Self {
        let devices = numa
            .iter()
            .enumerate()
            .map(|(i, &id)| ApiDevice {
                id: format!("gpu-{i}"),
                health: "Healthy".to_owned(),
                topology: Some(TopologyInfo {
                    nodes: vec![NumaNode { id }],
                }),
            })
            .collect();
        let gate = Arc::new(Gate {
            held,
            questions: Mutex::default(),
            allocations: Mutex::default(),
            open: tokio::sync::watch::channel(false).0,
            allocate_fails,
        });
        let service = GatedService {
            gate: Arc::clone(&gate),
            devices,
        };
        let served = Served::start(node, socket, resource, options(), service).await;
        GatedPlugin { gate, served }
    }

    pub(super) fn questions(&self) -> Vec<(Vec<String>, Vec<String>)> {
        self.gate.questions.lock().unwrap().clone()
    }

    pub(super) fn allocations(&self) -> Vec<Vec<String>> {
        self.gate.allocations.lock().unwrap().clone()
    }

    /// Until the held call has been received.
    pub(super) async fn until_held(&self) {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let reached = match self.gate.held {
                Held::Preferred => !self.questions().is_empty(),
                Held::Allocate => !self.allocations().is_empty(),
            };
            if reached {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the plugin was never called"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(crate) fn open(&self) {
        self.gate.open.send_replace(true);
    }

    pub(crate) async fn stop(mut self) {
        self.open();
        self.served.stop().await;
    }
}

impl Drop for GatedPlugin {
    fn drop(&mut self) {
        self.open();
    }
}

/// A device plugin's server on `<plugin dir>/<socket>`, registered with a node; stopped
/// (gracefully, bounded) by [`Served::stop`], aborted when dropped.
pub(crate) struct Served {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
}

impl Served {
    /// Serve `service` on `<plugin dir>/<socket>`, register it with `node` for `resource`
    /// with `options`, and wait until its devices are listed.
    pub(crate) async fn start<S: DevicePlugin>(
        node: &Arc<Node>,
        socket: &str,
        resource: &str,
        options: DevicePluginOptions,
        service: S,
    ) -> Served {
        let path = node.devices().config().plugin_dir.join(socket);
        let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
        let router =
            tonic::transport::Server::builder().add_service(DevicePluginServer::new(service));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            let _ = uds::serve(router, listener, stopped, Duration::from_millis(200)).await;
        });
        let channel = uds::connect(node.devices().socket_path(), WAIT)
            .await
            .unwrap();
        RegistrationClient::new(channel)
            .register(RegisterRequest {
                version: VERSION.into(),
                endpoint: socket.to_owned(),
                resource_name: resource.to_owned(),
                options: Some(options),
            })
            .await
            .unwrap();
        assert!(node.devices().wait_for_plugin(resource, WAIT).await);
        Served {
            stop: Some(stop),
            server,
        }
    }

    /// Kill the server at once (a plugin that crashes).
    pub(super) fn abort(&self) {
        self.server.abort();
    }

    /// Stop serving (bounded).
    pub(crate) async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(WAIT, &mut self.server).await;
        self.server.abort();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.server.abort();
    }
}
