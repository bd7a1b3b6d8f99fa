//! corral-cpumgr's integration tests, one binary (one link step): upstream's ported tables,
//! the conformance vectors, the manager over real checkpoint files, metrics and properties.

mod conformance;
mod hint_family;
mod manager;
mod metrics;
mod pod_level_resources;
mod properties;
mod state_versions;
mod support;
mod upstream_cpu_assignment;
mod upstream_cpu_manager;
mod upstream_policy_options;
mod upstream_policy_static;
mod upstream_policy_static_resv;
mod upstream_state_checkpoint;
mod upstream_topology_hints;
mod upstream_v138;
