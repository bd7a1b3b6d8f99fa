//! The agent's integration tests: the real `corral` binary, run as an operator and a
//! kubelet would; and the whole admission in process (`in_process`, the harness the
//! large-machine tests and `benches/whole_admission.rs` share) over the managers' cores.

mod chaos;
mod checkpoint_cpusets;
mod cli;
mod config_parity;
mod containerd;
mod containerized;
mod disk_full;
mod dra;
mod dra_health;
mod e2e;
mod in_process;
mod large_machines;
mod memory;
mod metrics_endpoint;
mod nri;
mod nrt_apiserver;
mod one_agent_per_root;
mod pod_level;
mod python_agent;
mod real_containerd;
mod support;
mod unanswered;
mod verbose_log;
mod verbose_log_nri;
