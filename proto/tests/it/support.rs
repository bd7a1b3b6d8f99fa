//! Test services shared by the proto integration tests: a device-plugin `Registration`
//! that records every request with the caller's credentials, and a `DevicePlugin` whose
//! `ListAndWatch` streams given lists and then holds the stream open.

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use corral_proto::deviceplugin::v1beta1::{
    AllocateRequest, AllocateResponse, DevicePluginOptions, Empty, ListAndWatchResponse,
    PreStartContainerRequest, PreStartContainerResponse, PreferredAllocationRequest,
    PreferredAllocationResponse, RegisterRequest, device_plugin_server::DevicePlugin,
    registration_server::Registration,
};
use corral_proto::uds::{self, PeerCredentials};
use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// A registration request and the credentials of the process that sent it.
pub(crate) type Registered = (RegisterRequest, Option<PeerCredentials>);

/// Records every registration with the caller's credentials.
#[derive(Clone, Default)]
pub(crate) struct RecordingRegistration {
    pub(crate) seen: Arc<Mutex<Vec<Registered>>>,
}

#[tonic::async_trait]
impl Registration for RecordingRegistration {
    async fn register(&self, request: Request<RegisterRequest>) -> Result<Response<Empty>, Status> {
        let peer = uds::peer_credentials(&request);
        self.seen.lock().unwrap().push((request.into_inner(), peer));
        Ok(Response::new(Empty {}))
    }
}

/// A device plugin whose ListAndWatch sends the given lists, then waits for cancellation
/// (or forever, when `honour_cancel` is false).
pub(crate) struct StreamingPlugin {
    pub(crate) lists: Vec<ListAndWatchResponse>,
    pub(crate) cancel: CancellationToken,
    pub(crate) honour_cancel: bool,
}

type ListStream = Pin<Box<dyn Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for StreamingPlugin {
    type ListAndWatchStream = ListStream;

    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(DevicePluginOptions::default()))
    }

    async fn list_and_watch(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let lists = tokio_stream::iter(self.lists.clone().into_iter().map(Ok));
        let cancel = self.cancel.clone();
        let honour = self.honour_cancel;
        let tail = async_stream_end(cancel, honour);
        Ok(Response::new(Box::pin(lists.chain(tail))))
    }

    async fn get_preferred_allocation(
        &self,
        _: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        Err(Status::unimplemented("not offered"))
    }

    async fn allocate(
        &self,
        _: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        Err(Status::unimplemented("not needed here"))
    }

    async fn pre_start_container(
        &self,
        _: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

/// A stream that yields nothing and ends when `cancel` fires (never, unless `honour`).
pub(crate) fn async_stream_end(
    cancel: CancellationToken,
    honour: bool,
) -> impl Stream<Item = Result<ListAndWatchResponse, Status>> {
    tokio_stream::once(())
        .then(move |()| {
            let cancel = cancel.clone();
            async move {
                if honour {
                    cancel.cancelled().await;
                } else {
                    std::future::pending::<()>().await;
                }
            }
        })
        .filter_map(|()| None)
}
