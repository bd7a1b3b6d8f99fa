//! [`CpuManagerMetrics`] counted where upstream's static policy counts them
//! (`policy_static.go`: `Allocate`'s deferred counters and `updateMetricsOnAllocate`):
//! pinning requests and errors for containers needing exclusive CPUs, `physical_cpu`
//! alignment successes and failures under `full-pcpus-only`, and `uncore_cache` alignment
//! for new allocations whose CPUs share one uncore cache.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use corral_checkpoint::StateFile;
use corral_cpumgr::test_util::topology_index;
use corral_cpumgr::{
    CfsQuota, ContainerMap, ContainerRuntime, CpuManager, CpuManagerConfig, CpuManagerMetrics,
    PodSource, PodStatus, RuntimeError,
};
use corral_topology::{CpuSet, CpuTopology, Pod, TopologyHint};

use crate::support::{make_multi_container_pod, make_pod};

/// The pods allocated so far, all active (so no stale-state sweep releases them).
#[derive(Default)]
struct Pods(Mutex<Vec<Pod>>);
impl PodSource for Pods {
    fn active_pods(&self) -> Vec<Pod> {
        self.0.lock().unwrap().clone()
    }
    fn pod_status(&self, _: &str) -> Option<PodStatus> {
        None
    }
}

struct NoRuntime;
#[corral_cpumgr::async_trait]
impl ContainerRuntime for NoRuntime {
    async fn update_container_cpuset(
        &self,
        _: &str,
        _: &CpuSet,
        _: CfsQuota,
    ) -> Result<(), RuntimeError> {
        Ok(())
    }
}

/// One socket, 8 cores × 2 threads (CPU `c` and `c + 8` share core `c`); cores 0-3 share
/// uncore cache 0, cores 4-7 uncore cache 1.
fn topology() -> CpuTopology {
    let cpus = (0..16).map(|cpu| [cpu, cpu % 8, 0, 0, (cpu % 8) / 4]);
    topology_index(cpus, [16, 8, 1, 1, 2]).topology().clone()
}

fn manager(policy: &str, options: &[(&str, &str)]) -> (CpuManager, Arc<Pods>) {
    let config = CpuManagerConfig {
        policy: policy.into(),
        policy_options: options
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        reserved_cpu_millis: (policy == "static").then_some(2000),
        ..CpuManagerConfig::default()
    };
    let manager = CpuManager::new(&config, &topology()).unwrap();
    let pods = Arc::new(Pods::default());
    manager
        .start(
            StateFile::in_memory(),
            Arc::clone(&pods) as _,
            Arc::new(NoRuntime),
            ContainerMap::new(),
        )
        .unwrap();
    (manager, pods)
}

/// Allocate `millis` of CPU to a Guaranteed pod's only container; whether it succeeded.
fn allocate((manager, pods): &(CpuManager, Arc<Pods>), uid: &str, millis: i64) -> bool {
    let pod = make_pod(uid, "c", millis, millis);
    pods.0.lock().unwrap().push(pod.clone());
    manager
        .allocate(&pod, &pod.containers[0], TopologyHint::default())
        .is_ok()
}

/// Allocate each `(pod uid, millis, admitted, counts after)` in turn: the allocation succeeds
/// exactly when `admitted`, and the counters ([`counts`]) are then as given.
fn check_steps(manager: &(CpuManager, Arc<Pods>), steps: &[(&str, i64, bool, [u64; 5])]) {
    for &(uid, millis, admitted, want) in steps {
        assert_eq!(allocate(manager, uid, millis), admitted, "{uid}");
        assert_eq!(counts(manager.0.metrics()), want, "{uid}");
    }
}

/// `[requests, errors, physical_cpu, physical_cpu failures, uncore_cache]`.
fn counts(metrics: &CpuManagerMetrics) -> [u64; 5] {
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    [
        load(&metrics.pinning_requests_total),
        load(&metrics.pinning_errors_total),
        load(&metrics.aligned_physical_cpu_total),
        load(&metrics.aligned_physical_cpu_failures_total),
        load(&metrics.aligned_uncore_cache_total),
    ]
}

#[test]
fn full_pcpus_only_counts_physical_cpu_alignment() {
    let manager = manager("static", &[("full-pcpus-only", "true")]);
    check_steps(
        &manager,
        &[
            // Two whole cores on one uncore cache.
            ("a", 4000, true, [1, 0, 1, 0, 1]),
            // The same container again: a request and a physical_cpu success, no new allocation.
            ("a", 4000, true, [2, 0, 2, 0, 1]),
            // Three CPUs are not whole cores: SMTAlignmentError.
            ("b", 3000, false, [3, 1, 2, 1, 1]),
            // A Burstable pod asks for nothing exclusive.
            ("c", 500, true, [3, 1, 2, 1, 1]),
        ],
    );
}

#[test]
fn uncore_cache_alignment_counts_new_allocations_within_one_cache() {
    let manager = manager("static", &[]);
    check_steps(
        &manager,
        &[
            // One CPU: aligned by definition.
            ("one", 1000, true, [1, 0, 0, 0, 1]),
            // Ten CPUs cannot fit one cache of 8.
            ("ten", 10_000, true, [2, 0, 0, 0, 1]),
            // More than what is left fails, no alignment counted.
            ("huge", 8000, false, [3, 1, 0, 0, 1]),
        ],
    );
}

#[test]
fn none_policy_counts_nothing() {
    let manager = manager("none", &[]);
    check_steps(&manager, &[("a", 4000, true, [0, 0, 0, 0, 0])]);
}

/// The CPU gauges as corral serves them (`crates/agent/src/server/metrics.rs`, computed from
/// the manager's state at every scrape): `[shared_pool_size_millicores,
/// exclusive_cpu_allocation_count, allocation_per_numa{numa_node="0"}]`.
fn gauges(manager: &CpuManager) -> [usize; 3] {
    let state = manager.state();
    let exclusive = state.exclusive_cpus();
    let shared = state
        .default_cpu_set()
        .intersection(&manager.allocatable_cpus());
    let numa0 = manager
        .topology()
        .cpus_in_numa_node(0)
        .intersection(&exclusive);
    [shared.len() * 1000, exclusive.len(), numa0.len()]
}

/// Upstream #141261 ("kubelet: cpumanager: Fix exclusive allocation metrics accounting",
/// issue #141262): v1.37 kept the exclusive-CPU and shared-pool gauges by per-event
/// deltas, so an app container reusing its init container's CPUs was counted twice on
/// allocation and once on release (a lasting residue), and a restart's recount disagreed
/// with the run-time deltas. v1.38 computes them from the state. corral always did (the
/// agent computes them at each scrape): after reuse, release and restart the gauges are
/// what the state says, with no residue. 16 CPUs, 2 reserved.
#[test]
fn cpu_gauges_follow_the_state_through_init_reuse_and_restart_pr_141261() {
    let file = StateFile::in_memory();
    let started = || {
        let config = CpuManagerConfig {
            policy: "static".into(),
            reserved_cpu_millis: Some(2000),
            ..CpuManagerConfig::default()
        };
        let manager = CpuManager::new(&config, &topology()).unwrap();
        let pods = Arc::new(Pods::default());
        manager
            .start(
                file.clone(),
                Arc::clone(&pods) as _,
                Arc::new(NoRuntime),
                ContainerMap::new(),
            )
            .unwrap();
        (manager, pods)
    };
    let (manager, pods) = started();
    assert_eq!(gauges(&manager), [14_000, 0, 0]);
    // An init container of 4 CPUs, then an app container of 4 that reuses them.
    let pod = make_multi_container_pod("p", &[(4000, 4000)], &[(4000, 4000)]);
    pods.0.lock().unwrap().push(pod.clone());
    for container in pod.init_containers.iter().chain(&pod.containers) {
        manager
            .allocate(&pod, container, TopologyHint::default())
            .unwrap();
    }
    let init = manager.exclusive_cpus("p", "initContainer-0");
    assert_eq!(manager.exclusive_cpus("p", "appContainer-0"), init);
    assert_eq!(gauges(&manager), [10_000, 4, 4]);
    // A restart reads the same state back: the same gauges.
    drop(manager);
    let (restarted, pods) = started();
    pods.0.lock().unwrap().push(pod.clone());
    assert_eq!(gauges(&restarted), [10_000, 4, 4]);
    // Releasing the pod leaves nothing behind.
    restarted.remove_pod_containers(&pod).unwrap();
    assert_eq!(gauges(&restarted), [14_000, 0, 0]);
}
