//! corral-dra's integration tests, one binary: the manager against upstream's tables and
//! in-memory drivers, restored kubelet checkpoints, crash consistency, properties, and the
//! registry, client and sample driver over real unix sockets (plus a foreign Python grpcio
//! driver).

mod checkpoint_restore;
mod crash_consistency;
mod foreign_driver;
mod health;
mod journaled;
mod manager_tables;
mod properties;
mod registration;
mod rolling_update;
mod sockets;
mod support;
