//! `corral-dra`: the kubelet Dynamic Resource Allocation (DRA) manager as a library.
//!
//! This crate will own the claim cache and its `dra_manager_state` checkpoint, the DRA plugin
//! registry (plugin registration v1 over a watched directory), and the DRAPlugin client that
//! calls NodePrepareResources and NodeUnprepareResources.
