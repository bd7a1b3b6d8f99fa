//! `corral-checkpoint`: checkpoint files a kubelet would accept.
//!
//! This crate will own the durable checkpoint store (atomic, fsynced writes under a state
//! directory), the kubelet's go-spew/FNV-32a and CRC32 checksums, and typed readers and
//! writers for the device manager, CPU manager, memory manager and DRA manager state files,
//! byte for byte compatible with the upstream kubelet.
//!
//! It knows nothing of gRPC or tokio.
