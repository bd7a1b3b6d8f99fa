//! The registration server on `<plugin dir>/kubelet.sock` (upstream
//! `plugin/v1beta1/server.go` `Register`): validates the request as upstream does — API
//! version, extended resource name — and, unlike upstream, requires the endpoint to be a
//! plain file name inside the plugin directory. A valid request connects the plugin; a
//! re-registration replaces the resource's old endpoint (and closes its connection). Unlike
//! upstream, the resources one plugin (endpoint) and all plugins may register are capped
//! ([`crate::DeviceManagerConfig::max_resources_per_plugin`],
//! [`crate::DeviceManagerConfig::max_resources`]): one more is refused with
//! `RESOURCE_EXHAUSTED`, so registrations cannot exhaust file descriptors.

use std::future::Future;
use std::sync::Arc;

use corral_proto::deviceplugin::v1beta1::{
    Empty, RegisterRequest, SUPPORTED_VERSIONS, registration_server::Registration,
};
use tonic::{Request, Response, Status};

use crate::endpoint::PluginCallError;
use crate::{is_extended_resource_name, validate_endpoint_name};

/// What the registration server asks of the device manager once a request is valid — the
/// role of upstream's `plugin.ClientHandler`: the server knows nothing of the manager's
/// state, the manager nothing of the wire.
pub(crate) trait RegistrationHandler: Send + Sync + 'static {
    /// A place under the registration caps, held while the plugin is dialed.
    type Slot: Send;
    /// Take a place for `resource` of the plugin at `endpoint`, or say which cap refuses it.
    fn reserve(&self, resource: &str, endpoint: &str) -> Result<Self::Slot, RegistrationLimit>;
    /// A valid registration arrived (counted whether the dial succeeds, as upstream).
    fn registered(&self, resource: &str);
    /// Dial the plugin and start following it (upstream `PluginConnected`).
    fn connect(
        &self,
        resource: &str,
        endpoint: &str,
    ) -> impl Future<Output = Result<(), PluginCallError>> + Send;
}

/// A registration refused because it would pass a cap of [`crate::DeviceManagerConfig`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RegistrationLimit {
    /// The plugin (endpoint) has as many resources registered as it may.
    #[error(
        "cannot register resource {resource:?}: plugin endpoint {endpoint:?} already has {registered} resources registered, the most one plugin may have (max_resources_per_plugin = {max})"
    )]
    PerPlugin {
        resource: String,
        endpoint: String,
        registered: usize,
        max: usize,
    },
    /// All plugins together have as many resources registered as they may.
    #[error(
        "cannot register resource {resource:?}: {registered} resources are registered, the most the device manager accepts (max_resources = {max})"
    )]
    Total {
        resource: String,
        registered: usize,
        max: usize,
    },
}

/// Why a registration is refused, as the gRPC status the plugin receives.
pub(crate) fn validate(request: &RegisterRequest) -> Result<(), Status> {
    if !SUPPORTED_VERSIONS.contains(&request.version.as_str()) {
        return Err(Status::invalid_argument(format!(
            "requested API version {:?} is not supported by kubelet. Supported version is {:?}",
            request.version, SUPPORTED_VERSIONS
        )));
    }
    if !is_extended_resource_name(&request.resource_name) {
        return Err(Status::invalid_argument(format!(
            "the ResourceName {:?} is invalid",
            request.resource_name
        )));
    }
    validate_endpoint_name(&request.endpoint).map_err(|err| {
        Status::invalid_argument(format!(
            "invalid endpoint for resource {:?}: {err}",
            request.resource_name
        ))
    })
}

/// The `Registration` service, reporting to `H`.
pub(crate) struct RegistrationService<H> {
    pub(crate) handler: Arc<H>,
}

#[tonic::async_trait]
impl<H: RegistrationHandler> Registration for RegistrationService<H> {
    async fn register(&self, request: Request<RegisterRequest>) -> Result<Response<Empty>, Status> {
        let peer = corral_proto::uds::peer_credentials(&request);
        let request = request.into_inner();
        tracing::info!(resource = %request.resource_name, endpoint = %request.endpoint,
            version = %request.version, pid = peer.and_then(|p| p.pid),
            "got registration request from device plugin");
        if let Err(status) = validate(&request) {
            tracing::warn!(resource = %request.resource_name, error = %status.message(),
                "bad registration request from device plugin");
            return Err(status);
        }
        // Caps on registered resources (corral; upstream has none): a place is held while
        // the plugin is dialed, so registrations in flight count too.
        let _slot = self
            .handler
            .reserve(&request.resource_name, &request.endpoint)
            .map_err(|refused| {
                tracing::warn!(resource = %request.resource_name, endpoint = %request.endpoint,
                    error = %refused, "device plugin registration refused");
                Status::resource_exhausted(refused.to_string())
            })?;
        // Counted once validated, as upstream's Register does, whether the dial succeeds.
        self.handler.registered(&request.resource_name);
        self.handler
            .connect(&request.resource_name, &request.endpoint)
            .await
            .map_err(|err| {
                let message = err.full_message();
                tracing::warn!(resource = %request.resource_name, %message,
                    "cannot connect to device plugin");
                Status::unavailable(message)
            })?;
        Ok(Response::new(Empty {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(version: &str, endpoint: &str, resource: &str) -> RegisterRequest {
        RegisterRequest {
            version: version.into(),
            endpoint: endpoint.into(),
            resource_name: resource.into(),
            options: None,
        }
    }

    #[test]
    fn refusals_are_invalid_argument_with_upstream_messages() {
        let err = validate(&req("v1alpha1", "a.sock", "example.com/r")).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message().contains("\"v1alpha1\" is not supported"),
            "{}",
            err.message()
        );
        let err = validate(&req("v1beta1", "a.sock", "gpu")).unwrap_err();
        assert_eq!(err.message(), "the ResourceName \"gpu\" is invalid");
        let err = validate(&req("v1beta1", "../a.sock", "example.com/r")).unwrap_err();
        assert!(err.message().contains("contains '/'"), "{}", err.message());
        assert!(validate(&req("v1beta1", "a.sock", "example.com/r")).is_ok());
    }
}
