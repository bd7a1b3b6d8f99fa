//! `corral-devicemgr`: the kubelet device manager as a library.
//!
//! Device plugins register on `<plugin dir>/kubelet.sock`, stream their devices, and are
//! asked to allocate devices to containers. This crate is upstream's
//! `pkg/kubelet/cm/devicemanager` in two layers:
//!
//! - **a synchronous core** ([`DeviceState`]): devices per resource and their health,
//!   allocations per pod and container ([`PodDevices`]), device choice
//!   ([`DeviceState::devices_to_allocate`], upstream `devicesToAllocate` and
//!   `filterByAffinity`), topology hints ([`DeviceState::hints_for_container`]), run options
//!   ([`RunContainerOptions`]), capacity and the `kubelet_internal_checkpoint` conversion.
//!   No I/O, no tokio; the admission hot path.
//! - **async edges**: the registration server and one client task per plugin, driven by
//!   [`DeviceManager`], which runs every plugin RPC outside its lock and with a deadline.
//!   As a topology manager `HintProvider` it only reserves inside a decision; the plugins
//!   answer after it ([`DeviceManager::ask_plugins`] for a
//!   [deferred](corral_topology::topologymanager::PodAdmitResult::deferred) decision,
//!   [`DeviceManager::realize`] for an admitted one).
//!
//! Where upstream picks devices by ranging over Go maps (at random), corral picks in
//! byte-wise id order. Where upstream has known flaws corral does better and says so:
//! endpoints must be plain file names in the plugin directory; a failed allocation gives
//! back everything it took; a corrupt checkpoint is an error, never ignored, and so is one
//! that gives a device to two owners ([`DoubleAssignment`]); a re-registration never lets
//! the old stream's end disconnect the new plugin.
//!
//! ```
//! use std::collections::BTreeSet;
//! use corral_devicemgr::{AllocationRequest, Device, DeviceState, PluginOptions, ToAllocate};
//! use corral_topology::NumaMask;
//!
//! let mut state = DeviceState::new(vec![0, 1]);
//! state.plugin_connected("example.com/nic", PluginOptions::default());
//! state.update_devices("example.com/nic", &[
//!     Device::new("nic0", Some(vec![0])),
//!     Device::new("nic1", Some(vec![1])),
//!     Device::new("nic2", Some(vec![1])),
//! ]);
//!
//! // Hints for two devices: only node 1 holds two; both nodes together also do.
//! let available = state.available_devices("example.com/nic");
//! let hints = state.generate_device_topology_hints("example.com/nic", &available, &BTreeSet::new(), 2);
//! assert_eq!(hints.len(), 2);
//! assert!(hints[0].preferred && hints[0].numa_affinity == Some(NumaMask::new([1])?));
//!
//! // Choose devices for that affinity; they stay reserved until committed or released.
//! let request = AllocationRequest { affinity: Some(NumaMask::new([1])?),
//!     ..AllocationRequest::new("uid", "app", "example.com/nic", 2) };
//! let ToAllocate::Devices(reserved) = state.devices_to_allocate(&request, None)? else { unreachable!() };
//! assert_eq!(reserved.devices, ["nic1", "nic2"]);
//! state.commit(&reserved, "uid", "app", Default::default());
//! assert_eq!(state.available_devices("example.com/nic"), BTreeSet::from(["nic0".to_owned()]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod allocation;
mod bitset;
mod changes;
mod checkpoint_legacy;
mod checkpoint_state;
mod checkpoint_writer;
mod config;
mod device;
mod endpoint;
mod error;
mod hints;
mod hub;
mod in_flight;
mod locks;
mod manager;
mod observer;
mod plugin_allocation;
mod plugin_dir;
mod pod_devices;
mod pods;
mod pre_start;
mod registration;
mod resource_devices;
mod resource_name;
mod run_options;
#[cfg(feature = "sample-plugin")]
#[cfg_attr(docsrs, doc(cfg(feature = "sample-plugin")))]
pub mod sample;
mod shared;
mod state;
mod tasks;
mod topology_hints;

pub use allocation::{AffinitySplit, AllocationRequest, NODE_WITHOUT_TOPOLOGY, ToAllocate};
pub use checkpoint_state::encode_allocate_response;
pub use config::{
    DEFAULT_ENDPOINT_STOP_GRACE, DEFAULT_MAX_RESOURCES, DEFAULT_MAX_RESOURCES_PER_PLUGIN,
    DeviceManagerConfig,
};
pub use device::{Device, PluginOptions, ResourceInventory};
pub use error::{AllocateError, DeviceManagerError, DeviceOwner, DoubleAssignment};
pub use in_flight::MAX_QUESTIONS_PER_RESOURCE;
pub use manager::DeviceManager;
pub use observer::{ALLOC_DURATION_BUCKETS, DeviceManagerObserver};
pub use pod_devices::{ContainerAllocation, NumaDeviceIds, PodDevices, ResourceAllocations};
pub use pods::{ActivePods, PodSpecs, StartOptions};
pub use resource_name::{EndpointNameError, is_extended_resource_name, validate_endpoint_name};
pub use run_options::{Annotation, DeviceNode, EnvVar, Mount, NameValue, RunContainerOptions};
pub use state::{Capacity, DeviceReuse, DeviceState, EndpointInfo, PreferredRequest, Reservation};
pub use topology_hints::pod_limits;
