//! One socket's registration handshake (upstream: the plugin manager's `RegisterPlugin`
//! operation with the DRA handler): dial, `GetInfo`, judge, dial the plugin's endpoint —
//! each step bounded, the whole within `probe_timeout` — then record the verdict and send
//! it back in `NotifyRegistrationStatus`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use corral_proto::pluginregistration::v1::{
    InfoRequest, RegistrationStatus, registration_client::RegistrationClient,
};
use corral_proto::tonic::{self, transport::Channel};
use tokio::time::Instant;

use super::sockets::Job;
use super::{PluginRegistry, RegistrationEvent};
use crate::plugin::client::DraPluginClient;
use crate::plugin::error::{RegistrationError, RpcError};
use crate::plugin::registration::validate_plugin_info;

impl PluginRegistry {
    /// One socket's probe: handshake, record the verdict, tell the plugin.
    pub(super) async fn probe(self: Arc<Self>, job: Job) {
        let _running = Running {
            registry: &self,
            socket: &job.socket,
            probe: job.probe,
        };
        let deadline = Instant::now() + self.config.probe_timeout;
        let (client, outcome) = self.handshake(&job.socket, deadline).await;
        let Some(verdict) = self.record(&job, outcome) else {
            tracing::debug!(socket = %job.socket.display(), "DRA plugin socket went away during its registration");
            return;
        };
        let Some(mut client) = client else {
            // Not asked anything: nothing to tell.
            return;
        };
        let timeout = self.config.registration_timeout;
        let status = RegistrationStatus {
            plugin_registered: verdict.is_ok(),
            error: verdict
                .as_ref()
                .err()
                .map(|e| e.reason())
                .unwrap_or_default(),
        };
        let notified = call(
            timeout,
            client.notify_registration_status(bounded(status, timeout)),
        )
        .await;
        if let Err(e) = notified {
            match &verdict {
                // Registered all the same, as upstream: the plugin is usable.
                Ok(driver) => {
                    tracing::warn!(driver = %driver, socket = %job.socket.display(), error = %e,
                    "cannot send the registration status to the DRA plugin")
                }
                Err(_) => tracing::debug!(socket = %job.socket.display(), error = %e,
                    "cannot send the rejection to the plugin"),
            }
        }
    }

    /// The handshake with one registration socket up to the verdict, within `deadline`:
    /// the registration client once `GetInfo` answered (to tell the plugin the verdict),
    /// and the plugin's client when it is acceptable.
    async fn handshake(
        &self,
        socket: &Path,
        deadline: Instant,
    ) -> (
        Option<RegistrationClient<Channel>>,
        Result<DraPluginClient, RegistrationError>,
    ) {
        let past_deadline = || RegistrationError::ProbeDeadline {
            socket: socket.to_path_buf(),
            timeout: self.config.probe_timeout,
        };
        let Some(step) = self.step(deadline) else {
            return (None, Err(past_deadline()));
        };
        let channel = match corral_proto::uds::connect(socket, step).await {
            Ok(channel) => channel,
            Err(source) => {
                return (
                    None,
                    Err(RegistrationError::Dial {
                        socket: socket.to_path_buf(),
                        source,
                    }),
                );
            }
        };
        let mut client = RegistrationClient::new(channel);
        let Some(step) = self.step(deadline) else {
            return (None, Err(past_deadline()));
        };
        let info = match call(step, client.get_info(bounded(InfoRequest {}, step))).await {
            Ok(info) => info,
            Err(source) => {
                return (
                    None,
                    Err(RegistrationError::GetInfo {
                        socket: socket.to_path_buf(),
                        source,
                    }),
                );
            }
        };
        let accepted = match validate_plugin_info(&info, socket) {
            Ok(accepted) => accepted,
            Err(e) => return (Some(client), Err(e)),
        };
        let Some(step) = self.step(deadline) else {
            return (Some(client), Err(past_deadline()));
        };
        let plugin = match corral_proto::uds::connect(&accepted.endpoint, step).await {
            Ok(channel) => Ok(DraPluginClient::new(
                accepted.driver,
                accepted.endpoint,
                accepted.service,
                channel,
                self.config.call_timeout,
            )
            .with_health(accepted.health)),
            Err(source) => Err(RegistrationError::EndpointUnreachable {
                driver: accepted.driver,
                endpoint: accepted.endpoint,
                source,
            }),
        };
        (Some(client), plugin)
    }

    /// The time the next handshake step may take: `registration_timeout`, cut to what is
    /// left before `deadline`; `None` once it passed.
    fn step(&self, deadline: Instant) -> Option<Duration> {
        let left = deadline.saturating_duration_since(Instant::now());
        (!left.is_zero()).then(|| left.min(self.config.registration_timeout))
    }

    /// Record a probe's outcome if its socket is still the one it probed: register the
    /// plugin, or count the failure and schedule the retry. `None` when the socket went
    /// away or was replaced meanwhile (nothing is registered then).
    fn record(
        &self,
        job: &Job,
        outcome: Result<DraPluginClient, RegistrationError>,
    ) -> Option<Result<String, Arc<RegistrationError>>> {
        let mut sockets = self.sockets();
        let tracked = sockets
            .tracked
            .get_mut(&job.socket)
            .filter(|t| t.probe == Some(job.probe))?;
        let error = match outcome {
            Ok(plugin) => {
                let driver = plugin.driver().to_owned();
                let endpoint = plugin.endpoint().to_path_buf();
                let service = plugin.service();
                match self.store.add(&job.socket, plugin) {
                    Ok(()) => {
                        self.notify(&driver);
                        tracked.driver = Some(driver.clone());
                        tracked.failures = 0;
                        tracing::info!(driver = %driver, endpoint = %endpoint.display(),
                            service = %service, "DRA plugin registered");
                        self.emit(RegistrationEvent::Registered {
                            socket: job.socket.clone(),
                            driver: driver.clone(),
                        });
                        return Some(Ok(driver));
                    }
                    Err(e) => RegistrationError::from(e),
                }
            }
            Err(e) => e,
        };
        tracked.failures = tracked.failures.saturating_add(1);
        tracked.backoff = if tracked.failures == 1 {
            self.config.retry_initial
        } else {
            (tracked.backoff * 2).min(self.config.retry_max)
        };
        tracked.retry_at = Instant::now() + tracked.backoff;
        let error = Arc::new(error);
        tracing::warn!(socket = %job.socket.display(), reason = %error.reason(),
            retry_in = ?tracked.backoff, "DRA plugin registration failed");
        self.emit(RegistrationEvent::Rejected {
            socket: job.socket.clone(),
            error: Arc::clone(&error),
        });
        Some(Err(error))
    }
}

/// Marks a socket's probe as running; when the probe ends (or is cancelled), the socket may
/// be probed again.
struct Running<'a> {
    registry: &'a PluginRegistry,
    socket: &'a Path,
    probe: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut sockets = self.registry.sockets();
        if let Some(t) = sockets.tracked.get_mut(self.socket)
            && t.probe == Some(self.probe)
        {
            t.probe = None;
        }
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
) -> Result<T, RpcError> {
    let started = Instant::now();
    match tokio::time::timeout(timeout, future).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        // The deadline also travels as `grpc-timeout`: the server (tonic answers
        // `CANCELLED` "Timeout expired") may give up first.
        Ok(Err(status))
            if status.code() == tonic::Code::DeadlineExceeded || started.elapsed() >= timeout =>
        {
            Err(RpcError::DeadlineExceeded(timeout))
        }
        Ok(Err(status)) => Err(status.into()),
        Err(_) => Err(RpcError::DeadlineExceeded(timeout)),
    }
}
