//! `corral-dra`: the kubelet's Dynamic Resource Allocation (DRA) manager as a library.
//!
//! - [`DraManager`]: prepares a pod's resource claims through their DRA drivers, tells which
//!   CDI devices a container gets, and unprepares claims when their last pod is gone.
//! - [`ClaimInfoCache`] / [`ClaimInfo`]: the claim cache, keyed by `namespace/claimName`,
//!   checkpointed as the kubelet's `dra_manager_state` in a [`StateFile`](corral_checkpoint::StateFile), crash-consistent
//!   (see [`DraManager`]'s module docs).
//! - [`DriverClients`]: how the manager reaches drivers; [`PluginRegistry`] implements it
//!   over gRPC: it watches a registration directory (upstream's
//!   `/var/lib/kubelet/plugins_registry` by default), runs the pluginregistration v1
//!   handshake, and calls DRAPlugin v1 or v1beta1 with deadlines ([`DraPluginClient`]).
//! - `sample::SampleDriver` (feature `sample-driver`, off by default): a fake DRA driver
//!   over real sockets, for tests and the `sample_dra_driver` example.
//! - Feature `test-util` (off by default): `DraManagerConfig::crash_at` and `CrashPoint`,
//!   fault injection for crash-consistency tests.
//!
//! The crate speaks DRAPlugin v1 inside (`wire.rs` maps its types to the v1 messages); a
//! plugin serving only v1beta1 is called, and the sample driver serves v1beta1, through
//! corral-proto's conversion wrappers (`corral_proto::dra::v1beta1::{V1Beta1ClientWrapper,
//! V1ServerWrapper}`).
//!
//! The caller supplies what a kubelet would read from the API server: the pod's resolved
//! claims ([`PodClaims`]) and each claim's identity, allocation and `reservedFor`
//! ([`ResourceClaim`]). The core (cache, claim state, transitions) is synchronous; only
//! driver calls are async, and they never run under the cache lock.
//!
//! Deviations from upstream (v1.32 and newer), each deliberate: re-preparing replaces a
//! driver's devices instead of appending (kubernetes#140471); the checkpoint lists claims in
//! key order; a claim is unprepared only when the pod being released is its last reference
//! (upstream also unprepares a claim this pod never referenced if one other pod does); plugin names must be DNS subdomains and endpoints absolute paths without `..`;
//! the newest service both sides support is chosen regardless of the plugin's list order;
//! a cached claim whose uid differs from the supplied one is an error.
//!
//! # Example
//!
//! ```
//! use corral_dra::{
//!     AllocatedDevice, ClaimRef, ConsumerRef, DriverCallError, DriverClients, DraManager,
//!     PodClaim, PodClaims, PrepareResults, PreparedDevice, ResourceClaim, UnprepareResults,
//! };
//! use corral_topology::{Container, ContainerClaim};
//!
//! /// A driver that gives every claim one fake GPU.
//! struct OneGpu;
//!
//! impl DriverClients for OneGpu {
//!     fn is_registered(&self, driver: &str) -> bool {
//!         driver == "gpu.example.com"
//!     }
//!     async fn node_prepare_resources(
//!         &self, _driver: &str, claims: &[ClaimRef],
//!     ) -> Result<PrepareResults, DriverCallError> {
//!         Ok(claims.iter().map(|c| (c.uid.clone(), Ok(vec![PreparedDevice {
//!             request_names: vec!["gpu".into()],
//!             pool_name: "node-1".into(),
//!             device_name: "gpu-0".into(),
//!             cdi_device_ids: vec!["example.com/gpu=gpu-0".into()],
//!             share_id: None,
//!         }]))).collect())
//!     }
//!     async fn node_unprepare_resources(
//!         &self, _driver: &str, claims: &[ClaimRef],
//!     ) -> Result<UnprepareResults, DriverCallError> {
//!         Ok(claims.iter().map(|c| (c.uid.clone(), Ok(()))).collect())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), corral_dra::DraManagerError> {
//! let state_dir = tempfile::tempdir().expect("temp dir");
//! let manager = DraManager::open(state_dir.path(), OneGpu)?;
//!
//! let pod = PodClaims {
//!     uid: "pod-uid".into(),
//!     namespace: "default".into(),
//!     name: "trainer".into(),
//!     claims: vec![PodClaim { name: "gpu".into(), claim_name: Some("trainer-gpu".into()) }],
//! };
//! let claim = ResourceClaim {
//!     namespace: "default".into(),
//!     name: "trainer-gpu".into(),
//!     uid: "claim-uid".into(),
//!     allocation: Some(vec![AllocatedDevice {
//!         request: "gpu".into(),
//!         driver: "gpu.example.com".into(),
//!         pool: "node-1".into(),
//!         device: "gpu-0".into(),
//!     }]),
//!     reserved_for: vec![ConsumerRef::pod("trainer", "pod-uid")],
//! };
//! manager.prepare_resources(&pod, &[claim]).await?;
//!
//! let mut container = Container::new("main");
//! container.claims.push(ContainerClaim { name: "gpu".into(), request: None });
//! let info = manager.get_resources(&pod, &container)?;
//! assert_eq!(info.cdi_devices, ["example.com/gpu=gpu-0"]);
//! assert!(state_dir.path().join("dra_manager_state").exists());
//!
//! manager.unprepare_resources("pod-uid").await?;
//! assert!(!manager.pod_might_need_to_unprepare_resources("pod-uid"));
//! # Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

//! # Over real sockets
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use corral_dra::sample::{SampleDriver, SampleDriverConfig};
//! use corral_dra::{PluginRegistry, RegistryConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::Builder::new().prefix("dra").tempdir_in("/tmp")?;
//! let registry = PluginRegistry::new(RegistryConfig::new(dir.path().join("registry")));
//! let driver = SampleDriver::start(SampleDriverConfig::new(
//!     "gpu.example.com", dir.path().join("registry"), dir.path().join("plugin"),
//! )).await?;
//! registry.sync_once().await; // or `registry.watch()` to poll in the background
//! assert_eq!(registry.drivers(), ["gpu.example.com"]);
//! let status = driver.wait_for_status(0, Duration::from_secs(5)).await;
//! assert_eq!(status, Some((true, String::new())));
//! // `DraManager::open(state_dir, Arc::clone(&registry))` now prepares claims through it.
//! # let _ = Arc::clone(&registry);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod cdi;
mod claim;
mod claim_cache;
mod claim_info;
mod crash_point;
mod driver;
mod error;
pub mod health;
mod manager;
pub mod plugin;
#[cfg(feature = "sample-driver")]
#[cfg_attr(docsrs, doc(cfg(feature = "sample-driver")))]
pub mod sample;
mod state;
mod wire;

pub use claim::{
    AllocatedDevice, ClaimRef, ConsumerRef, PodClaim, PodClaims, ResourceClaim, claim_key,
};
pub use claim_cache::ClaimInfoCache;
pub use claim_info::{ClaimInfo, PreparedDevice};
#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub use crash_point::CrashPoint;
pub use driver::{DriverClaimError, DriverClients, PrepareResults, UnprepareResults};
pub use error::{DraManagerError, DriverAnswer, DriverCallError, SkippedClaims};
pub use manager::{ContainerInfo, DraManager, DraManagerConfig};
pub use plugin::{
    DraPluginClient, DraService, PluginRegistry, PluginStore, RegistrationError, RegistrationEvent,
    RegistryConfig, RegistryWatcher,
};
