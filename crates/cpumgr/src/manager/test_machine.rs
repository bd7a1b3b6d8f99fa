//! A small machine for the manager's unit tests.

use corral_topology::{CpuInfo, CpuRecord, CpuTopology};

use super::CpuManager;
use crate::CpuManagerConfig;

/// The static policy on 8 CPUs (4 cores of 2 threads, one NUMA node), 1 CPU reserved;
/// not started.
pub(crate) fn eight_cpu_static_manager() -> CpuManager {
    let records: Vec<CpuRecord> = (0..8)
        .map(|cpu| CpuRecord {
            cpu,
            info: CpuInfo {
                core: cpu % 4,
                socket: 0,
                numa: 0,
                uncore: 0,
            },
        })
        .collect();
    let config = CpuManagerConfig {
        policy: "static".into(),
        reserved_cpu_millis: Some(1000),
        ..CpuManagerConfig::default()
    };
    CpuManager::new(&config, &CpuTopology::new(&records).unwrap()).unwrap()
}
