//! Why a plugin's registration failed ([`RegistrationError`]) and the finer errors it wraps.
//!
//! Each error's `Display` says only its own part; the cause is its `source()`.
//! [`RegistrationError::reason`] joins the whole chain into the one line that is logged and
//! sent back to the plugin in `NotifyRegistrationStatus`, worded as upstream's.

use std::path::PathBuf;
use std::time::Duration;

use corral_proto::tonic;
use corral_proto::uds::UdsError;

/// Why a registration handshake with one socket failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The registration socket could not be dialed.
    #[error("RegisterPlugin error -- dial failed at socket {}", socket.display())]
    Dial {
        /// The registration socket.
        socket: PathBuf,
        /// Why.
        source: UdsError,
    },
    /// `GetInfo` failed or was not answered in time.
    #[error(
        "RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket {}",
        socket.display()
    )]
    GetInfo {
        /// The registration socket.
        socket: PathBuf,
        /// Why.
        source: RpcError,
    },
    /// The plugin is not a DRA plugin.
    #[error(
        "RegisterPlugin error -- no handler registered for plugin type: {plugin_type} at socket {}",
        socket.display()
    )]
    UnknownPluginType {
        /// The type the plugin reported.
        plugin_type: String,
        /// The registration socket.
        socket: PathBuf,
    },
    /// The plugin's name, endpoint or service list is not acceptable.
    #[error(
        "RegisterPlugin error -- plugin validation failed with err: invalid DRA driver plugin {driver} at endpoint {}",
        endpoint.display()
    )]
    InvalidPlugin {
        /// The driver name the plugin reported.
        driver: String,
        /// The DRAPlugin endpoint (the registration socket when the plugin named none).
        endpoint: PathBuf,
        /// What is wrong.
        source: PluginInfoError,
    },
    /// The plugin's DRAPlugin endpoint could not be dialed.
    #[error(
        "RegisterPlugin error -- plugin registration failed with err: DRA driver {driver} endpoint {}",
        endpoint.display()
    )]
    EndpointUnreachable {
        /// The driver name.
        driver: String,
        /// The DRAPlugin endpoint.
        endpoint: PathBuf,
        /// Why.
        source: UdsError,
    },
    /// The store refused the plugin.
    #[error("RegisterPlugin error -- plugin registration failed with err")]
    Store {
        /// Why.
        #[from]
        source: EndpointAlreadyRegistered,
    },
    /// The handshake did not reach a verdict within the per-socket deadline
    /// ([`RegistryConfig::probe_timeout`](super::RegistryConfig::probe_timeout)).
    #[error(
        "RegisterPlugin error -- no verdict from socket {} within the registration deadline of {timeout:?}",
        socket.display()
    )]
    ProbeDeadline {
        /// The registration socket.
        socket: PathBuf,
        /// The deadline.
        timeout: Duration,
    },
}

impl RegistrationError {
    /// The error and its causes on one line, `: `-separated, each once
    /// ([`corral_proto::error_chain`]): what is logged and sent to the plugin.
    pub fn reason(&self) -> String {
        corral_proto::error_chain(self)
    }
}

/// Why an RPC to a plugin's registration socket failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    /// The plugin answered with a gRPC error status.
    #[error("gRPC status {code:?}: {message}")]
    Status {
        /// The status code.
        code: tonic::Code,
        /// The status message.
        message: String,
    },
    /// No answer within the deadline.
    #[error("no answer within {0:?}")]
    DeadlineExceeded(Duration),
}

impl From<tonic::Status> for RpcError {
    fn from(status: tonic::Status) -> Self {
        RpcError::Status {
            code: status.code(),
            message: status.message().to_owned(),
        }
    }
}

/// What is wrong with a DRA plugin's `PluginInfo`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginInfoError {
    /// The driver name.
    #[error(transparent)]
    DriverName(#[from] DriverNameError),
    /// The endpoint.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The supported services.
    #[error("invalid supported gRPC versions")]
    Versions(#[from] ServiceError),
}

/// Why a DRA driver name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DriverNameError {
    /// The name is empty.
    #[error("DRA driver name is empty")]
    Empty,
    /// The name is not a DNS subdomain.
    #[error("DRA driver name {0:?} is not a DNS subdomain")]
    NotDnsSubdomain(String),
}

/// Why a DRAPlugin endpoint path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// The path is relative.
    #[error("endpoint {} is not an absolute path", .0.display())]
    NotAbsolute(PathBuf),
    /// The path contains `..`.
    #[error("endpoint {} contains '..'", .0.display())]
    ParentDir(PathBuf),
}

/// Why no DRAPlugin service can be chosen for a plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The plugin listed no services.
    #[error("empty list of supported gRPC services (aka supported versions)")]
    NoneListed,
    /// None of the plugin's services is one corral calls.
    #[error(
        "none of services supported by the plugin ({offered:?}) are supported by the kubelet ({supported:?})"
    )]
    NoneSupported {
        /// What the plugin listed.
        offered: Vec<String>,
        /// What corral supports.
        supported: Vec<&'static str>,
    },
}

/// A second registration socket named an endpoint another socket already registered for
/// the same driver (upstream: "endpoint already registered").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "endpoint {} already registered for DRA driver plugin {driver}",
    endpoint.display()
)]
pub struct EndpointAlreadyRegistered {
    /// The driver name.
    pub driver: String,
    /// The endpoint.
    pub endpoint: PathBuf,
}
