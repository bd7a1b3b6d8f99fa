//! The runtime's end of an NRI connection (what containerd's and CRI-O's NRI adaptation
//! does): accept a plugin's trunk, wait for its registration, then call its `Plugin`
//! service. For tests and for runtimes written in Rust.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prost::Message;
use tokio::net::UnixStream;
use tokio::sync::oneshot;

use super::api::{self, EventMask};
use super::error::{NriError, NriStatus};
use super::mux::{Mux, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN};
use super::ttrpc::{self, Client, decode_request as decode};

/// What a runtime does when a plugin asks for unsolicited container updates.
#[tonic::async_trait]
pub trait UpdateHandler: Send + Sync + 'static {
    /// Applies `request`; answers the updates that failed.
    async fn update_containers(
        &self,
        request: api::UpdateContainersRequest,
    ) -> Result<api::UpdateContainersResponse, NriStatus>;
}

/// An [`UpdateHandler`] that applies nothing and reports no failure: for runtimes (and
/// tests) that do not take unsolicited updates.
#[derive(Debug, Clone, Copy, Default)]
pub struct IgnoreUpdates;

#[tonic::async_trait]
impl UpdateHandler for IgnoreUpdates {
    async fn update_containers(
        &self,
        _: api::UpdateContainersRequest,
    ) -> Result<api::UpdateContainersResponse, NriStatus> {
        Ok(api::UpdateContainersResponse::default())
    }
}

/// One plugin, as the runtime sees it.
#[derive(Debug)]
pub struct PluginConnection {
    mux: Mux,
    plugin: Client,
    registration: Option<oneshot::Receiver<api::RegisterPluginRequest>>,
    timeout: Duration,
}

impl PluginConnection {
    /// Serves the runtime's side on `trunk` (updates go to `updates`); calls to the plugin
    /// are bounded by `request_timeout`.
    pub fn accept(
        trunk: UnixStream,
        updates: Arc<dyn UpdateHandler>,
        request_timeout: Duration,
    ) -> Result<PluginConnection, NriError> {
        let mux = Mux::new(trunk);
        let (registered, registration) = oneshot::channel();
        let service = Arc::new(RuntimeService {
            registered: Mutex::new(Some(registered)),
            updates,
        });
        let conn = mux.open(RUNTIME_SERVICE_CONN)?;
        tokio::spawn(ttrpc::serve(conn, api::RUNTIME_SERVICE, service));
        let plugin = Client::new(mux.open(PLUGIN_SERVICE_CONN)?, api::PLUGIN_SERVICE);
        mux.unblock();
        Ok(PluginConnection {
            mux,
            plugin,
            registration: Some(registration),
            timeout: request_timeout,
        })
    }

    /// The next plugin that connects to `listener` (waiting at most `timeout`), served as
    /// [`PluginConnection::accept`] serves it.
    pub async fn next(
        listener: &tokio::net::UnixListener,
        updates: Arc<dyn UpdateHandler>,
        timeout: Duration,
    ) -> Result<PluginConnection, NriError> {
        let accepted = tokio::time::timeout(timeout, listener.accept()).await;
        let (trunk, _) = accepted.map_err(|_| NriError::Timeout {
            method: "accept".into(),
            timeout,
        })??;
        PluginConnection::accept(trunk, updates, timeout)
    }

    /// Waits for the plugin's `RegisterPlugin`, at most `timeout`.
    pub async fn registration(
        &mut self,
        timeout: Duration,
    ) -> Result<api::RegisterPluginRequest, NriError> {
        let waiting = self.registration.take().ok_or(NriError::Closed)?;
        let registered = tokio::select! {
            registered = tokio::time::timeout(timeout, waiting) => registered,
            () = self.mux.closed() => return Err(self.mux.close_reason()),
        };
        registered
            .map_err(|_| NriError::Timeout {
                method: "RegisterPlugin".into(),
                timeout,
            })?
            .map_err(|_| NriError::Closed)
    }

    /// Calls the plugin's `method` (`Configure`, `CreateContainer`, …).
    pub async fn call<Req: Message, Resp: Message + Default>(
        &self,
        method: &str,
        request: &Req,
    ) -> Result<Resp, NriError> {
        self.plugin.call(method, request, self.timeout).await
    }

    /// Configures the plugin as a runtime that knows the events `knows` does (upstream's
    /// `plugin.configure`; [`EventMask::V0_8`] for a v0.8 runtime, [`EventMask::V0_10`] for
    /// v0.10 to v0.12): answers the events it subscribed to, all of `knows` for none. A
    /// subscription to an event the runtime does not know fails, and the connection is
    /// closed, as upstream drops such a plugin ("invalid plugin events").
    pub async fn configure(
        &self,
        request: &api::ConfigureRequest,
        knows: EventMask,
    ) -> Result<EventMask, NriError> {
        let configured: api::ConfigureResponse = self.call("Configure", request).await?;
        let events = EventMask::from_bits(configured.events);
        if events.bits() == 0 {
            return Ok(knows);
        }
        let unknown = events.difference(knows);
        if unknown.bits() != 0 {
            self.close();
            return Err(NriError::Protocol(format!(
                "invalid plugin events: {:#x}",
                unknown.bits()
            )));
        }
        Ok(events)
    }

    /// Closes the connection, as a runtime that goes away.
    pub fn close(&self) {
        self.mux.close();
    }

    /// Resolves when the connection is closed.
    pub async fn closed(&self) {
        self.mux.closed().await;
    }
}

struct RuntimeService {
    registered: Mutex<Option<oneshot::Sender<api::RegisterPluginRequest>>>,
    updates: Arc<dyn UpdateHandler>,
}

#[tonic::async_trait]
impl ttrpc::Service for RuntimeService {
    async fn call(&self, method: &str, payload: Vec<u8>) -> Result<Vec<u8>, NriStatus> {
        match method {
            "RegisterPlugin" => {
                let request: api::RegisterPluginRequest = decode(&payload)?;
                let waiter = self
                    .registered
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                let Some(waiter) = waiter else {
                    let why = "the plugin is already registered";
                    return Err(NriStatus::new(NriStatus::INVALID_ARGUMENT, why));
                };
                let _ = waiter.send(request);
                Ok(api::Empty {}.encode_to_vec())
            }
            "UpdateContainers" => {
                let request = decode(&payload)?;
                Ok(self
                    .updates
                    .update_containers(request)
                    .await?
                    .encode_to_vec())
            }
            other => {
                let why = format!("the Runtime service has no method {other}");
                Err(NriStatus::new(NriStatus::UNIMPLEMENTED, why))
            }
        }
    }
}
