//! The pod-resources API (`k8s.io/kubelet/pkg/apis/podresources`).

/// Pod resources API v1: the kubelet's read-only `PodResourcesLister` service.
pub mod v1 {
    crate::generated_api!("gen/podresources_v1.rs");

    /// Upstream's directory of the pod-resources socket.
    pub const POD_RESOURCES_PATH: &str = "/var/lib/kubelet/pod-resources";
    /// File name of the pod-resources socket.
    pub const POD_RESOURCES_SOCKET_NAME: &str = "kubelet.sock";
}
