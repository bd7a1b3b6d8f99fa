//! corral-memmgr's integration tests: machine states through real `memory_manager_state`
//! bytes, and their restore check.

mod hint_family;
mod manager;
mod properties;
mod restore;
mod state_versions;
mod static_policy;
mod support;
mod upstream_memory_manager;
mod upstream_pod_level;
mod upstream_policy_static;
mod upstream_state_checkpoint;
mod upstream_v132_files;
mod v138_fixes;
