//! `corral-cpumgr`: the kubelet CPU manager as a library (upstream
//! `pkg/kubelet/cm/cpumanager`, Kubernetes v1.37).
//!
//! - [`take_by_topology_numa_packed`] / [`take_by_topology_numa_distributed`]: upstream's CPU
//!   assignment, decision for decision (checked against upstream's own outputs), with the
//!   distributed algorithm's non-terminating loops bounded and its combination search on a
//!   step budget (upstream's answer whenever it finishes); [`UncoreCacheAlignment`] says
//!   whether packing prefers whole uncore caches.
//! - [`generate_cpu_topology_hints`]: the static policy's NUMA hints ([`SocketAlignment`]:
//!   `align-by-socket`).
//! - [`StaticPolicyOptions`]: every static policy option with upstream's names, validation and
//!   incompatibility errors.
//! - [`Policy`], [`NonePolicy`], [`StaticPolicy`]: the policies over a [`CpuState`].
//! - [`restore`] and [`CpuStateFile`]: the `cpu_manager_state` checkpoint, byte-compatible
//!   with a kubelet's, read and staged through a [`StateFile`](corral_checkpoint::StateFile).
//! - [`CpuManager`]: allocation, container lifecycle, stale-state removal, reconciliation
//!   through a [`ContainerRuntime`], queries, and the topology manager's
//!   [`HintProvider`](corral_topology::HintProvider).
//! - `test_util` (feature `test-util`, off by default): a [`TopologyIndex`] from plain
//!   fixture ids (corral-testkit's upstream topologies and conformance files), and
//!   `CpuManager::without_start_validation`.
//!
//! **Architecture Invariant:** the core (assignment, hints, policies, state validation) is
//! synchronous and does no I/O; persistence and the runtime are edges behind
//! [`StateFile`](corral_checkpoint::StateFile) and [`ContainerRuntime`]. No tokio, no gRPC: the agent owns the periodic
//! reconcile loop and adapts [`ContainerRuntime`] to CRI.
//!
//! Where upstream hurts users corral does better, each documented where it happens: init
//! container CPUs no later container reuses go back to the shared pool once the init
//! container terminated ([`StaticPolicy`]); a `none` → `static` policy change with no
//! exclusive assignment migrates the checkpoint ([`restore`]); every restore failure names
//! the file and the remedy; the distributed algorithm always terminates ([`TakeError`]); the
//! checkpoint is written once per operation and a failed write is rolled back
//! ([`CpuManager`]).
//!
//! ```
//! use corral_cpumgr::{CpuSortingStrategy, SocketAlignment, TopologyIndex, UncoreCacheAlignment,
//!     generate_cpu_topology_hints, take_by_topology_numa_packed};
//! use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology};
//!
//! // 2 sockets (= NUMA nodes) × 3 cores × 2 threads, upstream's topoDualSocketHT.
//! let records: Vec<CpuRecord> = (0..12)
//!     .map(|cpu| {
//!         let core = cpu % 6;
//!         CpuRecord { cpu, info: CpuInfo { core, socket: core % 2, numa: core % 2, uncore: 0 } }
//!     })
//!     .collect();
//! let index = TopologyIndex::new(&CpuTopology::new(&records)?);
//! let free: CpuSet = "1-11".parse()?; // CPU 0 is reserved
//! let packed = CpuSortingStrategy::Packed;
//! let cpus = take_by_topology_numa_packed(&index, &free, 4, packed, UncoreCacheAlignment::Ignore)?;
//! assert_eq!(cpus.to_string(), "2,4,8,10");
//! let hints = generate_cpu_topology_hints(&index, &free, &CpuSet::new(), 6, SocketAlignment::Ignore);
//! assert_eq!(hints.len(), 2); // node 1 alone, and both nodes
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod assignment;
mod container_map;
mod hints;
mod index;
mod manager;
mod options;
mod policy;
mod runtime;
mod state;
#[cfg(any(test, feature = "test-util"))]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub mod test_util;

pub use assignment::{
    CpuSortingStrategy, DistributedOptions, TakeError, UncoreCacheAlignment,
    take_by_topology_numa_distributed, take_by_topology_numa_distributed_with,
    take_by_topology_numa_packed,
};
/// The attribute a [`ContainerRuntime`] implementation takes (`#[corral_cpumgr::async_trait]`),
/// so implementors need not depend on `async-trait` themselves.
pub use async_trait::async_trait;
pub use container_map::ContainerMap;
pub use hints::{SocketAlignment, cpu_topology_hint_family, generate_cpu_topology_hints};
pub use index::TopologyIndex;
pub use manager::{
    CpuManager, CpuManagerConfig, CpuManagerError, CpuManagerMetrics, CpuTrial, PolicySnapshot,
};
pub use options::{
    ALIGN_BY_SOCKET, ALL_OPTIONS, DISTRIBUTE_CPUS_ACROSS_CORES, DISTRIBUTE_CPUS_ACROSS_NUMA,
    FULL_PCPUS_ONLY, OptionMaturity, OptionsError, PREFER_ALIGN_CPUS_BY_UNCORECACHE,
    STRICT_CPU_RESERVATION, StaticPolicyOptions, option_maturity,
};
pub use policy::{
    AllocateError, EMPTY_POD_SHARED_POOL_ERROR, EmptyPodSharedPoolError, NonePolicy, Policy,
    PolicyError, SMT_ALIGNMENT_ERROR, SmtAlignmentError, StaticPolicy, ValidationError,
    guaranteed_cpus, pod_guaranteed_cpus,
};
pub use runtime::{
    CfsQuota, ContainerIdError, ContainerRuntime, ContainerState, ContainerStatus, CpuQuotaPolicy,
    PodSource, PodStatus, ReconcileReport, ReconciledContainer, RuntimeError,
};
pub use state::{
    ContainerCpuAssignments, CpuState, CpuStateFile, CpuStateFileVersion, RestoreError, Restored,
    StateIoError, restore, restore_writing,
};
