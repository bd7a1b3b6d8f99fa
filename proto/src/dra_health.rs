//! The DRA resource-health API (`k8s.io/kubelet/pkg/apis/dra-health`).

/// DRA resource health API v1: the `DRAResourceHealth` service a driver may serve.
pub mod v1 {
    crate::generated_api!("gen/dra_health_v1.rs");

    /// Service name a driver lists in `PluginInfo.supported_versions` for this API.
    pub const DRA_RESOURCE_HEALTH_SERVICE: &str = "v1.DRAResourceHealth";
}
