//! corral's own agent API.

/// Agent API v1: admission, container lifecycle, release and queries.
pub mod v1 {
    crate::generated_api!("gen/corral_v1.rs");
}
