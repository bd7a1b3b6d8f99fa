//! The DRA resource-health API (`k8s.io/kubelet/pkg/apis/dra-health`).

/// DRA resource health API v1: the `DRAResourceHealth` service a driver may serve.
pub mod v1 {
    mod generated {
        #![allow(
            missing_docs,
            unreachable_pub,
            clippy::all,
            clippy::pedantic,
            rustdoc::all
        )]
        include!("gen/dra_health_v1.rs");
    }
    pub use generated::*;

    /// Service name a driver lists in `PluginInfo.supported_versions` for this API.
    pub const DRA_RESOURCE_HEALTH_SERVICE: &str = "v1.DRAResourceHealth";
}
