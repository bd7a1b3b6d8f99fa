//! `corral-devicemgr`: the kubelet device manager as a library.
//!
//! This crate will own the device-plugin v1beta1 registration server and plugin endpoints
//! over unix sockets, device state and topology-aware allocation, device topology hints,
//! container run options, and the `kubelet_internal_checkpoint` checkpoint.
