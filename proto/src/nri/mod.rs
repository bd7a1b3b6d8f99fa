//! NRI, the Node Resource Interface of containerd and CRI-O (`containerd/nri` v0.6 to
//! v0.12), spoken from Rust: the API messages ([`api`], as of v0.12.2), ttrpc ([`ttrpc`])
//! over NRI's connection multiplexer ([`mux`]), both ends of a plugin connection — the
//! plugin ([`plugin`]) and the runtime ([`runtime`], what containerd does; for tests and
//! Rust runtimes) — and which events a runtime's release knows ([`version`]).
//!
//! One unix stream (the *trunk*) carries two ttrpc connections: the plugin serves the
//! `Plugin` service on connection [`mux::PLUGIN_SERVICE_CONN`] and calls the runtime's
//! `Runtime` service on [`mux::RUNTIME_SERVICE_CONN`].
//!
//! ```no_run
//! use corral_proto::nri::api::{ConfigureRequest, CreateContainerRequest, CreateContainerResponse};
//! use corral_proto::nri::plugin::{NriPlugin, PluginConfig, PluginStub};
//! use corral_proto::nri::{EventMask, NriStatus};
//!
//! struct Pinner;
//!
//! #[corral_proto::tonic::async_trait]
//! impl NriPlugin for Pinner {
//!     async fn configure(&self, _: ConfigureRequest) -> Result<EventMask, NriStatus> {
//!         Ok(EventMask::of(&[corral_proto::nri::api::Event::CreateContainer]))
//!     }
//!     async fn create_container(
//!         &self,
//!         _: CreateContainerRequest,
//!     ) -> Result<CreateContainerResponse, NriStatus> {
//!         Ok(CreateContainerResponse::default())
//!     }
//! }
//!
//! # async fn demo() -> Result<(), corral_proto::nri::NriError> {
//! let config = PluginConfig::new("corral", "10")?;
//! let stub = PluginStub::connect(config).await?;
//! stub.run(Pinner).await
//! # }
//! ```

pub mod api;
pub mod decode_cost;
mod error;
pub mod mux;
pub mod plugin;
pub mod runtime;
pub mod ttrpc;
pub mod version;

pub use api::EventMask;
pub use error::{NriError, NriStatus};
