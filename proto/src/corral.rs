//! corral's own agent API.

/// Agent API v1: admission, container lifecycle, release and queries.
pub mod v1 {
    mod generated {
        #![allow(
            missing_docs,
            unreachable_pub,
            clippy::all,
            clippy::pedantic,
            rustdoc::all
        )]
        include!("gen/corral_v1.rs");
    }
    pub use generated::*;
}
