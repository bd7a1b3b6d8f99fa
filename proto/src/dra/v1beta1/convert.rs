//! DRAPlugin v1beta1 ↔ v1 (upstream `k8s.io/kubelet/pkg/apis/dra/v1beta1/conversion.go`
//! and its generated conversions): `From` both ways for every message, and the two
//! adapters that let code written against v1 speak v1beta1 on the wire —
//! [`V1Beta1ClientWrapper`] (a kubelet calling a v1beta1-only driver) and
//! [`V1ServerWrapper`] (a v1 driver serving v1beta1 kubelets).
//!
//! The two versions are the same messages but for `Device.share_id`, which only v1 has:
//! v1beta1 → v1 is lossless (`share_id` stays unset), v1 → v1beta1 drops it, since a
//! v1beta1 peer has no field to receive it in (what the wire does too: a v1beta1 decoder
//! skips field 5). Every conversion destructures its source and builds its target without
//! `..`, so a field added to either version fails to compile here until it is mapped.

use std::collections::HashMap;

use tonic::codegen::{Body, Bytes, StdError};
use tonic::{Request, Response, Status};

use super::dra_plugin_client::DraPluginClient;
use super::dra_plugin_server::DraPlugin;
use crate::dra::{v1, v1beta1};

/// A field's value in the other version: the same value, element by element.
trait Convert<T> {
    fn convert(self) -> T;
}

impl Convert<String> for String {
    fn convert(self) -> String {
        self
    }
}

impl<A: Into<B>, B> Convert<Vec<B>> for Vec<A> {
    fn convert(self) -> Vec<B> {
        self.into_iter().map(Into::into).collect()
    }
}

impl<A: Into<B>, B> Convert<HashMap<String, B>> for HashMap<String, A> {
    fn convert(self) -> HashMap<String, B> {
        self.into_iter().map(|(k, v)| (k, v.into())).collect()
    }
}

/// `From` both ways for messages whose fields are the same in both versions.
macro_rules! same_fields {
    ($($message:ident { $($field:ident),+ $(,)? })+) => {$(
        impl From<v1beta1::$message> for v1::$message {
            fn from(message: v1beta1::$message) -> Self {
                let v1beta1::$message { $($field),+ } = message;
                v1::$message { $($field: Convert::convert($field)),+ }
            }
        }

        impl From<v1::$message> for v1beta1::$message {
            fn from(message: v1::$message) -> Self {
                let v1::$message { $($field),+ } = message;
                v1beta1::$message { $($field: Convert::convert($field)),+ }
            }
        }
    )+};
}

same_fields! {
    NodePrepareResourcesRequest { claims }
    NodePrepareResourcesResponse { claims }
    NodePrepareResourceResponse { devices, error }
    NodeUnprepareResourcesRequest { claims }
    NodeUnprepareResourcesResponse { claims }
    NodeUnprepareResourceResponse { error }
    Claim { namespace, uid, name }
}

impl From<v1beta1::Device> for v1::Device {
    fn from(device: v1beta1::Device) -> Self {
        let v1beta1::Device {
            request_names,
            pool_name,
            device_name,
            cdi_device_ids,
        } = device;
        v1::Device {
            request_names,
            pool_name,
            device_name,
            cdi_device_ids,
            share_id: None,
        }
    }
}

/// Drops `share_id`: v1beta1 cannot carry it.
impl From<v1::Device> for v1beta1::Device {
    fn from(device: v1::Device) -> Self {
        let v1::Device {
            request_names,
            pool_name,
            device_name,
            cdi_device_ids,
            share_id: _,
        } = device;
        v1beta1::Device {
            request_names,
            pool_name,
            device_name,
            cdi_device_ids,
        }
    }
}

/// A v1beta1 DRAPlugin client that its caller speaks v1 to (upstream
/// `V1Beta1ClientWrapper`): requests are converted to v1beta1 before they are sent,
/// answers to v1 when they arrive. Metadata, extensions and the deadline travel unchanged.
#[derive(Debug, Clone)]
pub struct V1Beta1ClientWrapper<T> {
    inner: DraPluginClient<T>,
}

impl<T> V1Beta1ClientWrapper<T>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    /// Wrap a v1beta1 client.
    pub fn new(inner: DraPluginClient<T>) -> Self {
        V1Beta1ClientWrapper { inner }
    }

    /// `NodePrepareResources` over v1beta1.
    pub async fn node_prepare_resources(
        &mut self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        let response = self
            .inner
            .node_prepare_resources(request.map(Into::into))
            .await?;
        Ok(response.map(Into::into))
    }

    /// `NodeUnprepareResources` over v1beta1.
    pub async fn node_unprepare_resources(
        &mut self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        let response = self
            .inner
            .node_unprepare_resources(request.map(Into::into))
            .await?;
        Ok(response.map(Into::into))
    }
}

/// Serves v1beta1 with a v1 implementation (upstream `V1ServerWrapper`): requests are
/// converted to v1 before the implementation sees them, its answers to v1beta1 (dropping
/// `Device.share_id`). Serve it with
/// `v1beta1::dra_plugin_server::DraPluginServer::new(V1ServerWrapper::new(service))`.
#[derive(Debug, Clone)]
pub struct V1ServerWrapper<S> {
    inner: S,
}

impl<S> V1ServerWrapper<S> {
    /// Wrap a v1 service.
    pub fn new(inner: S) -> Self {
        V1ServerWrapper { inner }
    }

    /// The wrapped v1 service.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

#[tonic::async_trait]
impl<S: v1::dra_plugin_server::DraPlugin> DraPlugin for V1ServerWrapper<S> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        let response = self
            .inner
            .node_prepare_resources(request.map(Into::into))
            .await?;
        Ok(response.map(Into::into))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodeUnprepareResourcesResponse>, Status> {
        let response = self
            .inner
            .node_unprepare_resources(request.map(Into::into))
            .await?;
        Ok(response.map(Into::into))
    }
}

#[cfg(test)]
mod tests;
