//! The device-plugin API (`k8s.io/kubelet/pkg/apis/deviceplugin`).

/// Device plugin API v1beta1: the kubelet's `Registration` service and the plugins'
/// `DevicePlugin` service, with upstream's constants.
pub mod v1beta1 {
    crate::generated_api!("gen/deviceplugin_v1beta1.rs");

    pub mod checkpoint_bytes;

    /// Health value of a device that can be allocated.
    pub const HEALTHY: &str = "Healthy";
    /// Health value of a device that must not be allocated.
    pub const UNHEALTHY: &str = "Unhealthy";
    /// The API version the kubelet speaks, sent in `RegisterRequest.version`.
    pub const VERSION: &str = "v1beta1";
    /// Every API version the kubelet accepts in `RegisterRequest.version`.
    pub const SUPPORTED_VERSIONS: &[&str] = &["v1beta1"];
    /// Upstream's directory for device-plugin sockets (with the trailing slash upstream has).
    pub const DEVICE_PLUGIN_PATH: &str = "/var/lib/kubelet/device-plugins/";
    /// File name of the kubelet's registration socket inside the device-plugin directory.
    pub const KUBELET_SOCKET_NAME: &str = "kubelet.sock";
    /// Upstream's full path of the kubelet's registration socket.
    pub const KUBELET_SOCKET: &str = "/var/lib/kubelet/device-plugins/kubelet.sock";
    /// Deadline of the PreStartContainer RPC, in seconds.
    pub const KUBELET_PRE_START_CONTAINER_RPC_TIMEOUT_SECS: u64 = 30;
}
