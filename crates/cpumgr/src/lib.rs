//! `corral-cpumgr`: the kubelet CPU manager as a library.
//!
//! This crate will own the `none` and `static` CPU manager policies with every static policy
//! option upstream has, CPU assignment (`takeByTopology`), CPU topology hints, the
//! `cpu_manager_state` checkpoint, and reconciliation of container cpusets through a
//! container-runtime trait.
