//! `corral-dra`: the kubelet's Dynamic Resource Allocation (DRA) manager as a library.
//!
//! - [`Manager`]: prepares a pod's resource claims through their DRA drivers, tells which
//!   CDI devices a container gets, and unprepares claims when their last pod is gone.
//! - [`ClaimInfoCache`] / [`ClaimInfo`]: the claim cache, keyed by `namespace/claimName`,
//!   checkpointed as the kubelet's `dra_manager_state` ([`FileStateStore`]).
//! - [`DriverClients`]: how the manager reaches drivers.
//!
//! The caller supplies what a kubelet would read from the API server: the pod's resolved
//! claims ([`PodClaims`]) and each claim's identity, allocation and `reservedFor`
//! ([`ResourceClaim`]).
//!
//! # Example
//!
//! ```
//! use corral_dra::{
//!     AllocatedDevice, ClaimRef, ConsumerRef, DriverCallError, DriverClients, Manager,
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
//! # async fn main() -> Result<(), corral_dra::DraError> {
//! let state_dir = tempfile::tempdir().expect("temp dir");
//! let manager = Manager::open(state_dir.path(), OneGpu)?;
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

#![deny(missing_docs)]

pub mod cdi;
mod claim;
mod claim_cache;
mod claim_info;
mod driver;
mod error;
mod manager;
pub mod plugin;
pub mod sample;
mod state;

pub use claim::{
    AllocatedDevice, ClaimRef, ConsumerRef, PodClaim, PodClaims, ResourceClaim, claim_key,
};
pub use claim_cache::ClaimInfoCache;
pub use claim_info::{ClaimInfo, PreparedDevice};
pub use driver::{DriverClients, PrepareResults, UnprepareResults};
pub use error::{DraError, DriverCallError};
pub use manager::{ContainerInfo, CrashPoint, Manager, ManagerConfig};
pub use plugin::{
    DraPluginClient, DraService, PluginRegistry, PluginStore, RegistrationEvent, RegistryConfig,
    RegistryWatcher,
};
pub use state::{FileStateStore, MemoryStateStore, StateStore};
