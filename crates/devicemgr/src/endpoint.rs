//! A registered plugin's client (upstream `endpoint` + `plugin/v1beta1/client.go`): dial,
//! read its options, and call it with deadlines; and its `ListAndWatch` stream, read as the
//! plugin's newest device list until the stream ends or the socket disappears
//! ([`DeviceLists`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_proto::deviceplugin::v1beta1::{
    AllocateRequest, ContainerAllocateRequest, ContainerAllocateResponse,
    ContainerPreferredAllocationRequest, Empty, ListAndWatchResponse, PreStartContainerRequest,
    PreferredAllocationRequest, device_plugin_client::DevicePluginClient,
};
use corral_proto::uds;
use tokio_stream::{Stream, StreamExt};
use tonic::Streaming;
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

    /// Open `ListAndWatch` (its first answer within the RPC deadline) and follow it while
    /// the socket file exists, checking it every `poll`; lists of more than `max_devices`
    /// devices are dropped.
    pub(crate) async fn list_and_watch(
        &self,
        poll: Duration,
        max_devices: usize,
    ) -> Result<DeviceLists<Streaming<ListAndWatchResponse>>, StreamEnd> {
        let mut client = self.client.clone();
        match tokio::time::timeout(self.rpc_timeout, client.list_and_watch(Empty {})).await {
            Ok(Ok(response)) => Ok(DeviceLists::new(
                response.into_inner(),
                &self.resource,
                &self.socket,
                poll,
                max_devices,
            )),
            Ok(Err(status)) => Err(StreamEnd::Refused(status.message().to_owned())),
            Err(_) => Err(StreamEnd::NoAnswer(self.rpc_timeout)),
        }
    }
}

/// Why a plugin's `ListAndWatch` stream stopped, or never started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StreamEnd {
    /// Opening the stream failed with this status message.
    #[error("ListAndWatch failed: {0}")]
    Refused(String),
    /// The stream did not open within the RPC deadline.
    #[error("ListAndWatch did not answer within {0:?}")]
    NoAnswer(Duration),
    /// The plugin ended the stream.
    #[error("ListAndWatch stream ended")]
    Ended,
    /// The stream failed with this status message.
    #[error("ListAndWatch ended unexpectedly: {0}")]
    Failed(String),
    /// The plugin's socket file is gone.
    #[error("plugin socket {} disappeared", .0.display())]
    SocketGone(PathBuf),
}

/// Most lists taken from a plugin's stream for one [`DeviceLists::next`].
pub(crate) const MAX_LISTS_PER_TAKE: usize = 16;

/// A plugin's open `ListAndWatch` stream, read as the plugin's newest device list.
///
/// Every list is the plugin's complete list, so of the lists already received only the
/// newest matters: [`next`](Self::next) takes them all (at most [`MAX_LISTS_PER_TAKE`])
/// and returns the newest. A plugin sending lists faster than they are applied therefore
/// costs one application per take, never one per list; and as a gRPC stream's buffered
/// messages are read without ever yielding to the runtime, the caller must yield between
/// takes (the hub does).
pub(crate) struct DeviceLists<S> {
    stream: S,
    resource: String,
    socket: PathBuf,
    ticker: tokio::time::Interval,
    max_devices: usize,
    /// Why the stream ended, when it ended behind lists not returned yet.
    ended: Option<StreamEnd>,
}

impl<S> DeviceLists<S>
where
    S: Stream<Item = Result<ListAndWatchResponse, tonic::Status>> + Unpin,
{
    /// Follow `stream` of `resource`'s plugin while `socket` exists (checked every `poll`).
    pub(crate) fn new(
        stream: S,
        resource: &str,
        socket: &Path,
        poll: Duration,
        max_devices: usize,
    ) -> DeviceLists<S> {
        let mut ticker = tokio::time::interval(poll);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        DeviceLists {
            stream,
            resource: resource.to_owned(),
            socket: socket.to_path_buf(),
            ticker,
            max_devices,
            ended: None,
        }
    }

    /// The plugin's newest list: waits for a list, then takes the lists already received
    /// behind it and returns the newest. `Err` says why the stream stopped (it ended or
    /// failed, or the socket file disappeared) once every list before that was returned.
    pub(crate) async fn next(&mut self) -> Result<ListAndWatchResponse, StreamEnd> {
        if let Some(why) = self.ended.take() {
            return Err(why);
        }
        let mut newest = loop {
            let item = tokio::select! {
                item = self.stream.next() => item,
                _ = self.ticker.tick() => {
                    if std::fs::symlink_metadata(&self.socket).is_err() {
                        return Err(StreamEnd::SocketGone(self.socket.clone()));
                    }
                    continue;
                }
            };
            if let Some(list) = self.accept(item)? {
                break list;
            }
        };
        for _ in 1..MAX_LISTS_PER_TAKE {
            let Some(item) = self.received().await else {
                break;
            };
            match self.accept(item) {
                Ok(Some(list)) => newest = list,
                Ok(None) => {}
                Err(why) => {
                    self.ended = Some(why);
                    break;
                }
            }
        }
        Ok(newest)
    }

    /// The stream's next item if it was received already (without waiting).
    async fn received(&mut self) -> Option<Option<Result<ListAndWatchResponse, tonic::Status>>> {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut self.stream).poll_next(cx) {
                std::task::Poll::Ready(item) => Some(item),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    /// A list to apply, `None` for one too long (logged and dropped), or why the stream
    /// stopped.
    fn accept(
        &self,
        item: Option<Result<ListAndWatchResponse, tonic::Status>>,
    ) -> Result<Option<ListAndWatchResponse>, StreamEnd> {
        match item {
            None => Err(StreamEnd::Ended),
            Some(Err(status)) => Err(StreamEnd::Failed(status.message().to_owned())),
            Some(Ok(list)) if list.devices.len() > self.max_devices => {
                tracing::error!(
                    resource = %self.resource,
                    devices = list.devices.len(),
                    max = self.max_devices,
                    "device plugin sent more devices than allowed; list ignored"
                );
                Ok(None)
            }
            Some(Ok(list)) => Ok(Some(list)),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use corral_proto::deviceplugin::v1beta1::Device as ProtoDevice;

    use super::*;

    pub(crate) type Item = Result<ListAndWatchResponse, tonic::Status>;

    /// A list of `n` devices whose first id is `first`.
    pub(crate) fn list(first: &str, n: usize) -> ListAndWatchResponse {
        ListAndWatchResponse {
            devices: (0..n)
                .map(|i| ProtoDevice {
                    id: if i == 0 {
                        first.to_owned()
                    } else {
                        format!("{first}-{i}")
                    },
                    health: "Healthy".into(),
                    topology: None,
                })
                .collect(),
        }
    }

    /// A stream whose items were all received already (always ready, as a gRPC stream
    /// with buffered messages is), then open or ended.
    pub(crate) struct Received {
        pub(crate) items: std::collections::VecDeque<Item>,
        pub(crate) then_pending: bool,
    }

    impl Stream for Received {
        type Item = Item;

        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Item>> {
            match self.items.pop_front() {
                Some(item) => std::task::Poll::Ready(Some(item)),
                None if self.then_pending => std::task::Poll::Pending,
                None => std::task::Poll::Ready(None),
            }
        }
    }

    fn first_id(list: &ListAndWatchResponse) -> &str {
        &list.devices[0].id
    }

    /// Lists of a stream whose items are already received; with `then_pending` the stream
    /// stays open after them, otherwise it ends.
    fn received(items: Vec<Item>, then_pending: bool, max_devices: usize) -> DeviceLists<Received> {
        let stream = Received {
            items: items.into(),
            then_pending,
        };
        // The socket: any path that exists (the check runs before the first list).
        let socket = std::env::temp_dir();
        DeviceLists::new(
            stream,
            "example.com/r",
            &socket,
            Duration::from_secs(3600),
            max_devices,
        )
    }

    #[tokio::test]
    async fn of_the_lists_already_received_the_newest_is_taken() {
        let items = ["a", "b", "c"].map(|id| Ok(list(id, 1))).to_vec();
        let mut lists = received(items, true, 10);
        assert_eq!(first_id(&lists.next().await.unwrap()), "c");
    }

    #[tokio::test]
    async fn the_end_of_the_stream_comes_after_the_lists_before_it() {
        let items = ["a", "b"].map(|id| Ok(list(id, 1))).to_vec();
        let mut lists = received(items, false, 10);
        assert_eq!(first_id(&lists.next().await.unwrap()), "b");
        assert_eq!(lists.next().await.unwrap_err(), StreamEnd::Ended);

        let items = vec![Ok(list("a", 1)), Err(tonic::Status::unavailable("gone"))];
        let mut lists = received(items, true, 10);
        assert_eq!(first_id(&lists.next().await.unwrap()), "a");
        let why = lists.next().await.unwrap_err().to_string();
        assert!(why.contains("ended unexpectedly: gone"), "{why}");
    }

    #[tokio::test]
    async fn lists_longer_than_allowed_are_dropped() {
        // The newest list is too long: the one before it is the plugin's list.
        let items = vec![Ok(list("a", 1)), Ok(list("b", 2)), Ok(list("long", 3))];
        let mut lists = received(items, true, 2);
        assert_eq!(first_id(&lists.next().await.unwrap()), "b");
        // A stream whose only list is too long gives no list; it ends with the stream.
        let mut lists = received(vec![Ok(list("long", 3))], false, 2);
        assert_eq!(lists.next().await.unwrap_err(), StreamEnd::Ended);
    }

    #[tokio::test]
    async fn at_most_a_bounded_number_of_lists_is_taken_at_once() {
        let items: Vec<Item> = (0..MAX_LISTS_PER_TAKE + 1)
            .map(|i| Ok(list(&i.to_string(), 1)))
            .collect();
        let mut lists = received(items, true, 10);
        let newest = MAX_LISTS_PER_TAKE - 1;
        assert_eq!(first_id(&lists.next().await.unwrap()), newest.to_string());
        let last = MAX_LISTS_PER_TAKE.to_string();
        assert_eq!(first_id(&lists.next().await.unwrap()), last);
    }

    #[tokio::test]
    async fn a_socket_that_disappeared_ends_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("gone.sock");
        let mut lists = DeviceLists::new(
            tokio_stream::pending::<Item>(),
            "example.com/r",
            &socket,
            Duration::from_secs(3600),
            10,
        );
        let why = lists.next().await.unwrap_err().to_string();
        assert!(why.contains("gone.sock disappeared"), "{why}");
    }
}
