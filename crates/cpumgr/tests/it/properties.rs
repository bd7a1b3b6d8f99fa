//! Property tests: exclusive sets never overlap each other or the reserved set; a granted
//! allocation has exactly the requested size and comes from the free pool; the shared pool
//! plus every exclusive set is the machine (reserved included); releasing restores the pool;
//! the assignment functions always return the requested number of available CPUs or an
//! error.

use std::sync::Arc;

use corral_cpumgr::{
    CpuSortingStrategy, CpuState, Policy, StaticPolicy, StaticPolicyOptions, TopologyIndex,
    UncoreCacheAlignment, take_by_topology_numa_distributed, take_by_topology_numa_packed,
};
use corral_topology::{CpuSet, PolicyName, TopologyHint};
use proptest::prelude::*;

fn topologies() -> Vec<Arc<TopologyIndex>> {
    vec![
        crate::support::topologies::single_socket_ht(),
        crate::support::topologies::dual_socket_ht(),
        crate::support::topologies::triple_socket_ht(),
        crate::support::topologies::dual_socket_no_ht(),
        crate::support::topologies::dual_socket_multi_numa_per_socket_ht(),
        crate::support::topologies::fake_multi_socket_dual_socket_per_numa_ht(),
    ]
}

fn options(which: u8) -> StaticPolicyOptions {
    StaticPolicyOptions {
        full_physical_cpus_only: which & 1 != 0,
        distribute_cpus_across_numa: which & 2 != 0,
        prefer_align_by_uncore_cache: which & 4 != 0 && which & 2 == 0,
        distribute_cpus_across_cores: which & 8 != 0 && which & 7 == 0,
        ..StaticPolicyOptions::default()
    }
}

/// One step: allocate `cpus` to a new pod, or release the pod at `index`.
#[derive(Debug, Clone)]
enum Step {
    Allocate { cpus: u8, hint: Option<u8> },
    Release { index: u8 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u8..12, proptest::option::of(0u8..4))
            .prop_map(|(cpus, hint)| Step::Allocate { cpus, hint }),
        any::<u8>().prop_map(|index| Step::Release { index }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn static_policy_invariants(topo in 0usize..6, which in 0u8..16, reserved in 1usize..3, steps in proptest::collection::vec(step(), 1..25)) {
        let index = topologies()[topo].clone();
        let Ok(mut policy) = StaticPolicy::new(index.clone(), reserved, &CpuSet::new(), options(which), PolicyName::None) else {
            return Ok(());
        };
        let reserved_cpus = policy.reserved_cpus().clone();
        let mut state = CpuState::default();
        policy.start(&mut state).unwrap();
        let initial = state.default_cpu_set().clone();
        let mut live: Vec<String> = Vec::new();
        for (n, step) in steps.into_iter().enumerate() {
            match step {
                Step::Allocate { cpus, hint } => {
                    let uid = format!("pod{n}");
                    let pod = crate::support::make_pod(&uid, "c", i64::from(cpus) * 1000, i64::from(cpus) * 1000);
                    let free = policy.available_cpus(&state);
                    let hint = TopologyHint::new(
                        hint.and_then(|h| corral_topology::NumaMask::new([usize::from(h) % index.numa_node_ids().len()]).ok()),
                        true,
                    );
                    if policy.allocate(&mut state, &pod, &pod.containers[0], hint).is_ok() {
                        let got = state.cpu_set(&uid, "c").cloned().unwrap();
                        prop_assert_eq!(got.len(), usize::from(cpus));
                        prop_assert!(got.is_subset_of(&free));
                        live.push(uid);
                    } else {
                        prop_assert!(state.cpu_set(&uid, "c").is_none());
                    }
                }
                Step::Release { index: i } => {
                    if !live.is_empty() {
                        let uid = live.remove(usize::from(i) % live.len());
                        policy.remove_container(&mut state, &uid, "c");
                    }
                }
            }
            // Exclusive sets are disjoint from each other, the reserved CPUs and the pool.
            let mut seen = CpuSet::new();
            for containers in state.assignments().values() {
                for cpus in containers.values() {
                    prop_assert!(!cpus.intersects(&seen));
                    prop_assert!(!cpus.intersects(&reserved_cpus));
                    prop_assert!(!cpus.intersects(state.default_cpu_set()));
                    seen.union_with(cpus);
                }
            }
            // Pool + exclusive = the machine.
            prop_assert_eq!(&state.default_cpu_set().union(&seen), index.all_cpus());
        }
        for uid in live {
            policy.remove_container(&mut state, &uid, "c");
        }
        prop_assert_eq!(state.default_cpu_set(), &initial);
    }

    #[test]
    fn assignment_returns_exactly_n_available_or_errs(topo in 0usize..6, free in proptest::collection::vec(any::<bool>(), 80), n in 0usize..40, algo in 0u8..6) {
        let index = topologies()[topo].clone();
        let available: CpuSet = index.all_cpus().iter().filter(|&c| free[c % free.len()]).collect();
        let got = match algo {
            0 => take_by_topology_numa_packed(&index, &available, n, CpuSortingStrategy::Packed, UncoreCacheAlignment::Ignore),
            1 => take_by_topology_numa_packed(&index, &available, n, CpuSortingStrategy::Spread, UncoreCacheAlignment::Ignore),
            2 => take_by_topology_numa_packed(&index, &available, n, CpuSortingStrategy::Packed, UncoreCacheAlignment::Prefer),
            3 => take_by_topology_numa_distributed(&index, &available, n, 1, CpuSortingStrategy::Packed),
            4 => take_by_topology_numa_distributed(&index, &available, n, 2, CpuSortingStrategy::Packed),
            _ => take_by_topology_numa_distributed(&index, &available, n, 2, CpuSortingStrategy::Spread),
        };
        if let Ok(set) = got {
            prop_assert_eq!(set.len(), n);
            prop_assert!(set.is_subset_of(&available));
        } else {
            // Packed only fails when there are too few CPUs.
            if algo < 3 {
                prop_assert!(available.len() < n);
            }
        }
    }
}
