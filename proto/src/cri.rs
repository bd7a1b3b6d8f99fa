//! The Container Runtime Interface (`k8s.io/cri-api/pkg/apis/runtime`), the subset corral
//! calls: `RuntimeService.{ListContainers, ContainerStatus, UpdateContainerResources}`.

/// CRI runtime v1 (proto package `runtime.v1`).
pub mod v1 {
    mod generated {
        #![allow(
            missing_docs,
            unreachable_pub,
            clippy::all,
            clippy::pedantic,
            rustdoc::all
        )]
        include!("gen/cri_v1.rs");
    }
    pub use generated::*;

    /// Upstream's default containerd CRI socket.
    pub const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";
    /// Upstream's default CRI-O socket.
    pub const CRIO_SOCKET: &str = "/var/run/crio/crio.sock";
}
