//! The plugin-registration API (`k8s.io/kubelet/pkg/apis/pluginregistration`).

/// Plugin registration API v1. Its proto package is `pluginregistration`, as upstream's.
pub mod v1 {
    crate::generated_api!("gen/pluginregistration_v1.rs");

    /// `PluginInfo.type` of a CSI driver.
    pub const CSI_PLUGIN: &str = "CSIPlugin";
    /// `PluginInfo.type` of a device plugin.
    pub const DEVICE_PLUGIN: &str = "DevicePlugin";
    /// `PluginInfo.type` of a DRA driver.
    pub const DRA_PLUGIN: &str = "DRAPlugin";
    /// Upstream's plugin registration directory, watched for plugin sockets.
    pub const PLUGINS_REGISTRY_PATH: &str = "/var/lib/kubelet/plugins_registry";
}
