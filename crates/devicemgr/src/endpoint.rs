//! A registered plugin's client (upstream `endpoint` + `plugin/v1beta1/client.go`): dial,
//! read its options, and call it with deadlines; and the task that consumes its
//! `ListAndWatch` stream until the stream ends, the socket disappears or the endpoint is
//! replaced.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_proto::deviceplugin::v1beta1::{
    AllocateRequest, ContainerAllocateRequest, ContainerAllocateResponse,
    ContainerPreferredAllocationRequest, Empty, ListAndWatchResponse, PreStartContainerRequest,
    PreferredAllocationRequest, device_plugin_client::DevicePluginClient,
};
use corral_proto::uds;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::{DeviceManagerConfig, PluginOptions, PreferredRequest};

/// A connected plugin.
#[derive(Debug, Clone)]
pub(crate) struct PluginClient {
    pub(crate) resource: String,
    pub(crate) socket: PathBuf,
    pub(crate) options: PluginOptions,
    client: DevicePluginClient<Channel>,
    rpc_timeout: Duration,
    pre_start_timeout: Duration,
}

/// Why a call to a plugin failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PluginCallError {
    /// The plugin's socket could not be dialed.
    #[error("failed to dial device plugin")]
    Dial(#[source] corral_proto::uds::UdsError),
    /// The plugin did not answer within the deadline.
    #[error("{call}: no answer within {timeout:?}")]
    Timeout {
        /// The call (or what it was for).
        call: &'static str,
        /// The deadline.
        timeout: Duration,
    },
    /// The plugin answered with an error status.
    #[error("{call}: {message} ({code:?})")]
    Status {
        /// The call (or what it was for).
        call: &'static str,
        /// The status message.
        message: String,
        /// The status code.
        code: tonic::Code,
    },
}

impl PluginCallError {
    /// The error and each of its causes once, `: `-separated: what a plugin or an
    /// upstream-worded [`crate::AllocateError`] carries as text.
    pub(crate) fn full_message(&self) -> String {
        crate::error::error_chain(self)
    }
}

/// Run `call` with a deadline, sent to the plugin as `grpc-timeout` too.
async fn with_deadline<T>(
    timeout: Duration,
    what: &'static str,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, PluginCallError> {
    let timed_out = PluginCallError::Timeout {
        call: what,
        timeout,
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status))
            if status.code() == tonic::Code::Cancelled && status.message().contains("Timeout") =>
        {
            Err(timed_out)
        }
        Ok(Err(status)) => Err(PluginCallError::Status {
            call: what,
            message: status.message().to_owned(),
            code: status.code(),
        }),
        Err(_) => Err(timed_out),
    }
}

fn request<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

impl PluginClient {
    /// Dial the plugin and read its options.
    pub(crate) async fn connect(
        resource: &str,
        socket: &Path,
        config: &DeviceManagerConfig,
    ) -> Result<PluginClient, PluginCallError> {
        let channel = uds::connect(socket, config.dial_timeout)
            .await
            .map_err(PluginCallError::Dial)?;
        let mut client =
            DevicePluginClient::new(channel).max_decoding_message_size(config.max_message_bytes);
        let options = with_deadline(
            config.rpc_timeout,
            "failed to get device plugin options",
            client.get_device_plugin_options(request(Empty {}, config.rpc_timeout)),
        )
        .await?;
        Ok(PluginClient {
            resource: resource.to_owned(),
            socket: socket.to_path_buf(),
            options: PluginOptions::from(&options),
            client,
            rpc_timeout: config.rpc_timeout,
            pre_start_timeout: config.pre_start_timeout,
        })
    }

    /// A handle to the plugin and `message` as a request with `timeout` as its deadline.
    fn prepare<M>(
        &self,
        message: M,
        timeout: Duration,
    ) -> (DevicePluginClient<Channel>, tonic::Request<M>) {
        (self.client.clone(), request(message, timeout))
    }

    /// `GetPreferredAllocation` for one container: the devices the plugin prefers.
    pub(crate) async fn preferred_allocation(
        &self,
        ask: &PreferredRequest,
    ) -> Result<BTreeSet<String>, PluginCallError> {
        let message = PreferredAllocationRequest {
            container_requests: vec![ContainerPreferredAllocationRequest {
                available_device_i_ds: ask.available.clone(),
                must_include_device_i_ds: ask.must_include.clone(),
                allocation_size: i32::try_from(ask.size).unwrap_or(i32::MAX),
            }],
        };
        let (mut client, message) = self.prepare(message, self.rpc_timeout);
        let call = client.get_preferred_allocation(message);
        let response = with_deadline(self.rpc_timeout, "GetPreferredAllocation", call).await?;
        Ok(response
            .container_responses
            .into_iter()
            .next()
            .map(|r| r.device_i_ds.into_iter().collect())
            .unwrap_or_default())
    }

    /// `Allocate` for one container: its response, or why there is none.
    pub(crate) async fn allocate(
        &self,
        devices: &[String],
    ) -> Result<Option<ContainerAllocateResponse>, PluginCallError> {
        let message = AllocateRequest {
            container_requests: vec![ContainerAllocateRequest {
                devices_ids: devices.to_vec(),
            }],
        };
        let (mut client, message) = self.prepare(message, self.rpc_timeout);
        let call = client.allocate(message);
        let response = with_deadline(self.rpc_timeout, "Allocate", call).await?;
        Ok(response.container_responses.into_iter().next())
    }

    /// `PreStartContainer` for one container.
    pub(crate) async fn pre_start_container(
        &self,
        devices: &[String],
    ) -> Result<(), PluginCallError> {
        let message = PreStartContainerRequest {
            devices_ids: devices.to_vec(),
        };
        let (mut client, message) = self.prepare(message, self.pre_start_timeout);
        let call = client.pre_start_container(message);
        with_deadline(self.pre_start_timeout, "PreStartContainer", call)
            .await
            .map(|_| ())
    }

    /// Consume `ListAndWatch`, handing every list to `on_list`, until the stream ends or
    /// fails, the socket file disappears, or `cancel` fires. Returns why it stopped
    /// (`None` when cancelled).
    pub(crate) async fn watch(
        &self,
        cancel: &CancellationToken,
        poll: Duration,
        mut on_list: impl FnMut(ListAndWatchResponse),
    ) -> Option<String> {
        let mut client = self.client.clone();
        let opened = tokio::select! {
            () = cancel.cancelled() => return None,
            opened = tokio::time::timeout(self.rpc_timeout, client.list_and_watch(Empty {})) => opened,
        };
        let mut stream = match opened {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => return Some(format!("ListAndWatch failed: {}", status.message())),
            Err(_) => {
                return Some(format!(
                    "ListAndWatch did not answer within {:?}",
                    self.rpc_timeout
                ));
            }
        };
        let mut ticker = tokio::time::interval(poll);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return None,
                message = stream.message() => match message {
                    Ok(Some(list)) => on_list(list),
                    Ok(None) => return Some("ListAndWatch stream ended".to_owned()),
                    Err(status) => return Some(format!("ListAndWatch ended unexpectedly: {}", status.message())),
                },
                _ = ticker.tick() => {
                    if std::fs::symlink_metadata(&self.socket).is_err() {
                        return Some(format!("plugin socket {} disappeared", self.socket.display()));
                    }
                }
            }
        }
    }
}
