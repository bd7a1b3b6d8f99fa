//! The DRA plugin API (`k8s.io/kubelet/pkg/apis/dra`): the `DRAPlugin` service that DRA
//! drivers serve and the kubelet calls.

/// DRA plugin API v1 (the newest).
pub mod v1 {
    crate::generated_api!("gen/dra_v1.rs");

    /// Service name a driver lists in `PluginInfo.supported_versions` for this API.
    pub const DRA_PLUGIN_SERVICE: &str = "v1.DRAPlugin";
}

/// DRA plugin API v1beta1, with its conversions to and from [`v1`] (`From` both ways for
/// every message) and the adapters that let v1 code speak v1beta1 on the wire
/// ([`V1Beta1ClientWrapper`](crate::dra::v1beta1::V1Beta1ClientWrapper),
/// [`V1ServerWrapper`](crate::dra::v1beta1::V1ServerWrapper)), as upstream's
/// `conversion.go`.
pub mod v1beta1 {
    crate::generated_api!("gen/dra_v1beta1.rs");

    mod convert;
    pub use convert::{V1Beta1ClientWrapper, V1ServerWrapper};

    /// Service name a driver lists in `PluginInfo.supported_versions` for this API.
    pub const DRA_PLUGIN_SERVICE: &str = "v1beta1.DRAPlugin";
}
