//! The device manager's integration tests, one binary: real sockets and sample plugins
//! (`end_to_end`, `failure_modes`, `registration_limits`, `restart`, `observer`,
//! `foreign_plugin`, `hint_provider_threads`), upstream's manager and hint tests ported
//! (`upstream_*`), upstream's v1.38 fixes (`in_flight_race`: PR #137534; `dra_backed`: PR
//! #141426), checkpoint consistency, sparse NUMA ids and properties — the device
//! manager alone (whole admissions with the CPU and memory managers are the agent's tests).
//! Shared setup lives in `support`.

#[macro_use]
mod support;

mod checkpoint_consistency;
mod dra_backed;
mod end_to_end;
mod failure_modes;
mod foreign_plugin;
mod hint_provider_threads;
mod in_flight_race;
mod observer;
mod properties;
mod registration_limits;
mod reserve_realize;
mod restart;
mod run_options;
mod sparse_numa;
mod upstream_manager_core;
mod upstream_manager_sockets;
mod upstream_topology_hints;
