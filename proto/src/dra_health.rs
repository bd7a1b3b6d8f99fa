//! The DRA resource-health API (`k8s.io/kubelet/pkg/apis/dra-health`, KEP-4680): `v1alpha1`
//! is what v1.36 kubelets and drivers (`k8s.io/dynamic-resource-allocation` v0.36) speak;
//! `v1` is its 1.37 copy, the same messages and field numbers under another package.

/// DRA resource health API v1: the `DRAResourceHealth` service a driver may serve.
pub mod v1 {
    crate::generated_api!("gen/dra_health_v1.rs");

    /// Service name a driver lists in `PluginInfo.supported_versions` for this API.
    pub const DRA_RESOURCE_HEALTH_SERVICE: &str = "v1.DRAResourceHealth";
}

/// DRA resource health API v1alpha1 (Kubernetes 1.31–1.36): the same messages as [`v1`]
/// under package `v1alpha1`, so its RPC is `/v1alpha1.DRAResourceHealth/NodeWatchResources`.
pub mod v1alpha1 {
    crate::generated_api!("gen/dra_health_v1alpha1.rs");

    /// Service name a driver lists in `PluginInfo.supported_versions` for this API.
    pub const DRA_RESOURCE_HEALTH_SERVICE: &str = "v1alpha1.DRAResourceHealth";
}
