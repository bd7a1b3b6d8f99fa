//! The crate's errors: [`AllocateError`] (why devices could not be allocated, upstream's
//! messages), [`DoubleAssignment`] (an inconsistent checkpoint) and [`DeviceManagerError`]
//! (everything the manager facade can fail with).

use std::path::PathBuf;
use std::time::Duration;

/// Why devices could not be allocated to a container. Messages are upstream's, with the
/// resource, pod and container named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AllocateError {
    /// The container already holds a different number of devices.
    #[error(
        "pod {pod_uid:?} container {container:?} changed request for resource {resource:?} from {allocated} to {required}"
    )]
    ChangedRequest {
        /// Pod uid.
        pod_uid: String,
        /// Container name.
        container: String,
        /// Resource name.
        resource: String,
        /// Devices it holds.
        allocated: usize,
        /// Devices it asks for now.
        required: usize,
    },
    /// No plugin ever registered the resource.
    #[error("cannot allocate unregistered device {resource}")]
    Unregistered {
        /// Resource name.
        resource: String,
    },
    /// The resource has no healthy device.
    #[error("no healthy devices present; cannot allocate unhealthy devices {resource}")]
    NoHealthyDevices {
        /// Resource name.
        resource: String,
    },
    /// Devices the container held before are unhealthy now.
    #[error(
        "previously allocated devices are no longer healthy; cannot allocate unhealthy devices {resource}"
    )]
    PreviouslyAllocatedUnhealthy {
        /// Resource name.
        resource: String,
    },
    /// Not enough available devices.
    #[error(
        "requested number of devices unavailable for {resource}. Requested: {requested}, Available: {available}"
    )]
    Unavailable {
        /// Resource name.
        resource: String,
        /// Devices still needed.
        requested: usize,
        /// Devices available.
        available: usize,
    },
    /// The selection took fewer devices than required (an internal inconsistency).
    #[error(
        "unexpectedly allocated less resources than required. Requested: {required}, Got: {got}"
    )]
    Shortfall {
        /// Devices required.
        required: usize,
        /// Devices taken.
        got: usize,
    },
    /// The resource is registered but its endpoint is gone.
    #[error("endpoint not found in cache for a registered resource: {resource}")]
    EndpointNotFound {
        /// Resource name.
        resource: String,
    },
    /// No plugin endpoint serves the resource.
    #[error("unknown Device Plugin {resource}")]
    UnknownPlugin {
        /// Resource name.
        resource: String,
    },
    /// `GetPreferredAllocation` failed.
    #[error(
        "device plugin GetPreferredAllocation rpc failed with err: {message} (resource {resource})"
    )]
    PreferredAllocation {
        /// Resource name.
        resource: String,
        /// The plugin's error.
        message: String,
    },
    /// `Allocate` failed.
    #[error(
        "device plugin Allocate rpc failed for resource {resource}, pod {pod_uid:?}, container {container:?}: {message}"
    )]
    AllocateRpc {
        /// Resource name.
        resource: String,
        /// Pod uid.
        pod_uid: String,
        /// Container name.
        container: String,
        /// The plugin's error.
        message: String,
    },
    /// The plugin answered `Allocate` without a container response.
    #[error("no containers return in allocation response for resource {resource}")]
    NoContainerResponse {
        /// Resource name.
        resource: String,
    },
    /// A decision of the pod was deferred for a plugin's preferred allocation but noted no
    /// question to ask (a caller that admits again without its answer would loop).
    #[error("pod {pod_uid}: the device decision was deferred without a question for the plugins")]
    NoQuestion {
        /// Pod uid.
        pod_uid: String,
    },
    /// `PreStartContainer` failed.
    #[error("device plugin PreStartContainer rpc failed with err: {message} (resource {resource})")]
    PreStart {
        /// Resource name.
        resource: String,
        /// The plugin's error.
        message: String,
    },
    /// `PreStartContainer` is required but the container holds no devices.
    #[error(
        "no devices found allocated in local cache for pod {pod_uid}, container {container}, resource {resource}"
    )]
    NoDevicesForPreStart {
        /// Pod uid.
        pod_uid: String,
        /// Container name.
        container: String,
        /// Resource name.
        resource: String,
    },
    /// The resource's plugin did not (re-)register within the configured wait.
    #[error(
        "device plugin for resource {resource} did not register within {waited:?}; cannot admit pod {pod_uid:?} container {container:?}"
    )]
    PluginNotRegistered {
        /// Resource name.
        resource: String,
        /// Pod uid.
        pod_uid: String,
        /// Container name.
        container: String,
        /// How long admission waited.
        waited: Duration,
    },
}

/// A container holding devices, as `kubelet_internal_checkpoint` names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeviceOwner {
    /// Pod uid.
    pub pod_uid: String,
    /// Container name.
    pub container: String,
}

/// A `kubelet_internal_checkpoint` that passed its checksum but gives one device to two
/// owners that cannot share it: containers of two pods, or two containers of one pod
/// neither of which is an init container whose devices a later container may reuse
/// (upstream's reusable devices). Restoring such a file would let both keep the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "device manager checkpoint {} assigns device {device:?} of resource {resource:?} to both pod {:?} container {:?} and pod {:?} container {:?}{}; the file is inconsistent: drain this node, delete {} and restart",
    path.display(), first.pod_uid, first.container, second.pod_uid, second.container,
    if first.pod_uid == second.pod_uid {
        " (same pod, and neither is an init container whose devices a later container may reuse)"
    } else { "" },
    path.display()
)]
pub struct DoubleAssignment {
    /// The checkpoint file.
    pub path: PathBuf,
    /// The resource.
    pub resource: String,
    /// The device held twice.
    pub device: String,
    /// One owner (the first in sorted order).
    pub first: DeviceOwner,
    /// Another owner.
    pub second: DeviceOwner,
}

/// What the device manager facade can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceManagerError {
    /// Allocation failed (everything taken for the container was given back).
    #[error(transparent)]
    Allocate(#[from] AllocateError),
    /// The checkpoint could not be read or written (the error names the file).
    #[error(transparent)]
    Checkpoint(#[from] corral_checkpoint::CheckpointError),
    /// The checkpoint passed its checksum but gives a device to two owners.
    #[error(transparent)]
    DoubleAssignment(#[from] Box<DoubleAssignment>),
    /// The plugin directory could not be prepared.
    #[error("device plugin directory {}", path.display())]
    PluginDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The registration socket could not be served.
    #[error(transparent)]
    Socket(#[from] corral_proto::uds::UdsError),
}

/// `err` and each of its causes once, `: `-separated: for the places that can carry only
/// text — a gRPC status to a plugin, an upstream-worded message.
pub(crate) use corral_proto::error_chain;
