//! The Container Runtime Interface (`k8s.io/cri-api/pkg/apis/runtime`), the subset corral
//! calls: `RuntimeService.{ListContainers, ContainerStatus, UpdateContainerResources}`.

/// CRI runtime v1 (proto package `runtime.v1`).
pub mod v1 {
    crate::generated_api!("gen/cri_v1.rs");

    /// Upstream's default containerd CRI socket.
    pub const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";
    /// Upstream's default CRI-O socket.
    pub const CRIO_SOCKET: &str = "/var/run/crio/crio.sock";
}
