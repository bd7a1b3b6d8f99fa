//! The agent's integration tests: the real `corral` binary, run as an operator and a
//! kubelet would.

mod chaos;
mod checkpoint_cpusets;
mod cli;
mod config_parity;
mod containerd;
mod disk_full;
mod dra;
mod dra_health;
mod e2e;
mod memory;
mod metrics_endpoint;
mod nri;
mod one_agent_per_root;
mod pod_level;
mod python_agent;
mod real_containerd;
mod support;
mod unanswered;
