//! DRA plugins: registration through a watched directory ([`PluginRegistry`]), the
//! registered plugins ([`PluginStore`]) and the gRPC client that calls them
//! ([`DraPluginClient`]).

mod client;
mod error;
mod observer;
mod registration;
mod registry;
mod service;
mod store;

pub use client::DraPluginClient;
pub use error::{
    DriverNameError, EndpointAlreadyRegistered, EndpointError, PluginInfoError, RegistrationError,
    RpcError, ServiceError,
};
pub use observer::PluginObserver;
pub use registration::{
    AcceptedPlugin, validate_driver_name, validate_endpoint, validate_plugin_info,
};
pub use registry::{PluginRegistry, RegistrationEvent, RegistryConfig, RegistryWatcher};
pub use service::{DraService, HealthService};
pub use store::PluginStore;
