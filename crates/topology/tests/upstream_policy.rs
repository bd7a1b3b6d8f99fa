//! Tables ported from upstream `pkg/kubelet/cm/topologymanager/policy_test.go`
//! (`commonPolicyMergeTestCases`, `bestEffortPolicy.mergeTestCases`, run by
//! `TestPolicyBestEffortMerge` / `TestPolicyRestrictedMerge` over NUMA nodes 0–3), checked with
//! the fast merge and the exhaustive reference; plus `TestNewManager`-style construction facts
//! from `topology_manager.go` and the container-removal rules of `scope.go`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use corral_topology::topologymanager::{
    AffinityStore, AllocationError, HintProvider, ManagerConfig, ManagerError, TopologyManager,
    reference_merge,
};
use corral_topology::{
    Container, NumaInfo, NumaMask, NumaNode, Pod, Policy, PolicyName, PolicyOptions, ProviderHints,
    TopologyHint,
};

fn h(ids: &[usize], preferred: bool) -> TopologyHint {
    TopologyHint::new(
        Some(NumaMask::new(ids.iter().copied()).expect("mask")),
        preferred,
    )
}

fn p(resources: &[(&str, Vec<TopologyHint>)]) -> ProviderHints {
    Some(
        resources
            .iter()
            .map(|(r, l)| ((*r).to_owned(), Some(l.clone())))
            .collect(),
    )
}

struct Case {
    name: &'static str,
    providers: Vec<ProviderHints>,
    expected: TopologyHint,
}

fn common_cases() -> Vec<Case> {
    vec![
        Case {
            name: "Two providers, 1 hint each, same mask, both preferred 1/2",
            providers: vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[0], true)])]),
            ],
            expected: h(&[0], true),
        },
        Case {
            name: "Two providers, 1 hint each, same mask, both preferred 2/2",
            providers: vec![
                p(&[("resource1", vec![h(&[1], true)])]),
                p(&[("resource2", vec![h(&[1], true)])]),
            ],
            expected: h(&[1], true),
        },
        Case {
            name: "Two providers, 1 no hints, 1 single hint preferred 1/2",
            providers: vec![None, p(&[("resource", vec![h(&[0], true)])])],
            expected: h(&[0], true),
        },
        Case {
            name: "Two providers, 1 no hints, 1 single hint preferred 2/2",
            providers: vec![None, p(&[("resource", vec![h(&[1], true)])])],
            expected: h(&[1], true),
        },
        Case {
            name: "Two providers, 1 with 2 hints, 1 with single hint matching 1/2",
            providers: vec![
                p(&[("resource1", vec![h(&[0], true), h(&[1], true)])]),
                p(&[("resource2", vec![h(&[0], true)])]),
            ],
            expected: h(&[0], true),
        },
        Case {
            name: "Two providers, 1 with 2 hints, 1 with single hint matching 2/2",
            providers: vec![
                p(&[("resource1", vec![h(&[0], true), h(&[1], true)])]),
                p(&[("resource2", vec![h(&[1], true)])]),
            ],
            expected: h(&[1], true),
        },
        Case {
            name: "Two providers, both with 2 hints, matching narrower preferred hint from both",
            providers: vec![
                p(&[("resource1", vec![h(&[0], true), h(&[1], true)])]),
                p(&[("resource2", vec![h(&[0], true), h(&[0, 1], false)])]),
            ],
            expected: h(&[0], true),
        },
        Case {
            name: "Ensure less narrow preferred hints are chosen over narrower non-preferred hints",
            providers: vec![
                p(&[("resource1", vec![h(&[1], true), h(&[0, 1], false)])]),
                p(&[(
                    "resource2",
                    vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)],
                )]),
            ],
            expected: h(&[1], true),
        },
        Case {
            name: "Multiple resources, same provider",
            providers: vec![p(&[
                ("resource1", vec![h(&[1], true), h(&[0, 1], false)]),
                (
                    "resource2",
                    vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)],
                ),
            ])],
            expected: h(&[1], true),
        },
    ]
}

fn best_effort_cases() -> Vec<Case> {
    let all = &[0, 1, 2, 3];
    vec![
        Case {
            name: "Two providers, 2 hints each, same mask (some with different bits), same preferred",
            providers: vec![
                p(&[("resource1", vec![h(&[0, 1], true), h(&[0, 2], true)])]),
                p(&[("resource2", vec![h(&[0, 1], true), h(&[0, 2], true)])]),
            ],
            expected: h(&[0, 1], true),
        },
        Case {
            name: "TopologyHint not set",
            providers: vec![],
            expected: h(all, true),
        },
        Case {
            name: "HintProvider returns empty non-nil map[string][]TopologyHint",
            providers: vec![Some(BTreeMap::new())],
            expected: h(all, true),
        },
        Case {
            name: "HintProvider returns -nil map[string][]TopologyHint from provider",
            providers: vec![Some(BTreeMap::from([("resource".to_owned(), None)]))],
            expected: h(all, true),
        },
        Case {
            name: "HintProvider returns empty non-nil map[string][]TopologyHint from provider",
            providers: vec![p(&[("resource", vec![])])],
            expected: h(all, false),
        },
        Case {
            name: "Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
            providers: vec![p(&[("resource", vec![TopologyHint::new(None, true)])])],
            expected: h(all, true),
        },
        Case {
            name: "Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
            providers: vec![p(&[("resource", vec![TopologyHint::new(None, false)])])],
            expected: h(all, false),
        },
        Case {
            name: "Two providers, 1 hint each, no common mask",
            providers: vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[1], true)])]),
            ],
            expected: h(all, false),
        },
        Case {
            name: "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
            providers: vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[0], false)])]),
            ],
            expected: h(&[0], false),
        },
        Case {
            name: "Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
            providers: vec![
                p(&[("resource1", vec![h(&[1], true)])]),
                p(&[("resource2", vec![h(&[1], false)])]),
            ],
            expected: h(&[1], false),
        },
        Case {
            name: "Two providers, 1 hint each, 1 wider mask, both preferred 1/2",
            providers: vec![
                p(&[("resource1", vec![h(&[0], true)])]),
                p(&[("resource2", vec![h(&[0, 1], true)])]),
            ],
            expected: h(&[0], false),
        },
        Case {
            name: "Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
            providers: vec![
                p(&[("resource1", vec![h(&[0], true), h(&[1], true)])]),
                p(&[("resource2", vec![h(&[0, 1], false)])]),
            ],
            expected: h(&[0], false),
        },
        Case {
            name: "Two providers, 1 hint each, 1 wider mask, both preferred 2/2",
            providers: vec![
                p(&[("resource1", vec![h(&[1], true)])]),
                p(&[("resource2", vec![h(&[0, 1], true)])]),
            ],
            expected: h(&[1], false),
        },
        Case {
            name: "bestNonPreferredAffinityCount (1)",
            providers: vec![
                p(&[(
                    "resource1",
                    vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)],
                )]),
                p(&[("resource2", vec![h(&[0, 1], false)])]),
            ],
            expected: h(&[0, 1], false),
        },
        Case {
            name: "bestNonPreferredAffinityCount (2)",
            providers: vec![
                p(&[(
                    "resource1",
                    vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)],
                )]),
                p(&[("resource2", vec![h(&[0, 3], false)])]),
            ],
            expected: h(&[0, 3], false),
        },
        Case {
            name: "bestNonPreferredAffinityCount (3)",
            providers: vec![
                p(&[(
                    "resource1",
                    vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)],
                )]),
                p(&[("resource2", vec![h(&[1, 2], false)])]),
            ],
            expected: h(&[1, 2], false),
        },
    ]
}

fn policy(name: PolicyName) -> Policy {
    Policy::new(
        name,
        NumaInfo::from_ids([0, 1, 2, 3]).expect("nodes"),
        PolicyOptions::default(),
    )
}

#[test]
fn policy_best_effort_merge() {
    // Upstream TestPolicyBestEffortMerge: common and best-effort tables, always admitted.
    let policy = policy(PolicyName::BestEffort);
    for case in common_cases().into_iter().chain(best_effort_cases()) {
        for result in [
            policy.merge(&case.providers),
            reference_merge(&policy, &case.providers),
        ] {
            assert_eq!(result.best_hint, case.expected, "{}", case.name);
            assert!(result.admit, "{}", case.name);
        }
    }
}

#[test]
fn policy_restricted_merge() {
    // Upstream TestPolicyRestrictedMerge shares the best-effort tables; admission follows
    // the merged hint's preference.
    let policy = policy(PolicyName::Restricted);
    for case in common_cases().into_iter().chain(best_effort_cases()) {
        let result = policy.merge(&case.providers);
        assert_eq!(result.best_hint, case.expected, "{}", case.name);
        assert_eq!(result.admit, case.expected.preferred, "{}", case.name);
    }
}

#[test]
fn policy_none_merge() {
    // Upstream TestPolicyNoneMerge: always {nil, false} and admitted.
    let policy = policy(PolicyName::None);
    for case in common_cases() {
        let result = policy.merge(&case.providers);
        assert_eq!(result.best_hint, TopologyHint::default(), "{}", case.name);
        assert!(result.admit);
    }
}

#[test]
fn policy_single_numa_node_filters_and_nils_default() {
    // Upstream TestPolicySingleNumaNodeMerge / TestPolicySingleNumaNodeFilterHints facts:
    // multi-node and non-preferred hints are dropped, a result equal to the default affinity
    // is reported as nil.
    let policy = policy(PolicyName::SingleNumaNode);
    let r = policy.merge(&[p(&[("r", vec![h(&[0, 1], true), h(&[1], true)])])]);
    assert_eq!((r.best_hint, r.admit), (h(&[1], true), true));
    let r = policy.merge(&[p(&[("r", vec![h(&[0, 1], true)])])]);
    assert_eq!(
        (r.best_hint, r.admit),
        (TopologyHint::new(None, false), false)
    );
    let r = policy.merge(&[None]);
    assert_eq!(
        (r.best_hint, r.admit),
        (TopologyHint::new(None, true), true)
    );
    let r = policy.merge(&[p(&[("r", vec![h(&[0], false)])])]);
    assert!(!r.admit);
}

#[test]
fn new_manager() {
    // Upstream TestNewManager: unknown policy/scope names fail, and more NUMA nodes than
    // max-allowable-numa-nodes fails unless the option raises the limit.
    let nodes: Vec<NumaNode> = (0..9)
        .map(|id| NumaNode {
            id,
            distances: Some(vec![10; 9]),
        })
        .collect();
    let none = BTreeMap::new();
    assert!(ManagerConfig::from_strings("bogus", "container", &none).is_err());
    assert!(ManagerConfig::from_strings("best-effort", "bogus", &none).is_err());
    let config = ManagerConfig::from_strings("best-effort", "container", &none).expect("config");
    let err = TopologyManager::new(&config, &nodes).expect_err("9 > 8 nodes");
    assert_eq!(err, ManagerError::TooManyNumaNodes { count: 9, max: 8 });
    assert_eq!(
        err.to_string(),
        "unsupported on machines with more than 8 NUMA Nodes"
    );
    let raised = BTreeMap::from([("max-allowable-numa-nodes".to_owned(), "9".to_owned())]);
    let config = ManagerConfig::from_strings("best-effort", "pod", &raised).expect("config");
    assert!(TopologyManager::new(&config, &nodes).is_ok());
    let low = BTreeMap::from([("max-allowable-numa-nodes".to_owned(), "7".to_owned())]);
    assert!(ManagerConfig::from_strings("best-effort", "pod", &low).is_err());
    let unknown = BTreeMap::from([("bogus".to_owned(), "true".to_owned())]);
    assert!(ManagerConfig::from_strings("restricted", "pod", &unknown).is_err());
    // The none policy ignores options and NUMA limits, as upstream.
    let config = ManagerConfig::from_strings("none", "container", &unknown).expect("config");
    assert!(TopologyManager::new(&config, &nodes).is_ok());
    // prefer-closest needs distances.
    let closest = BTreeMap::from([("prefer-closest-numa-nodes".to_owned(), "true".to_owned())]);
    let config = ManagerConfig::from_strings("restricted", "pod", &closest).expect("config");
    let no_distances = [NumaNode {
        id: 0,
        distances: None,
    }];
    assert!(TopologyManager::new(&config, &no_distances).is_err());
}

/// A provider returning fixed hints and recording the affinities it saw in allocate.
struct Recorder {
    hints: ProviderHints,
    seen: Mutex<Vec<(String, TopologyHint)>>,
    fail_on: Option<&'static str>,
}

impl HintProvider for Recorder {
    fn hints_for_container(&self, _: &Pod, _: &Container) -> ProviderHints {
        self.hints.clone()
    }
    fn hints_for_pod(&self, _: &Pod) -> ProviderHints {
        self.hints.clone()
    }
    fn allocate(
        &self,
        pod: &Pod,
        c: &Container,
        store: &AffinityStore,
    ) -> Result<(), AllocationError> {
        if self.fail_on == Some(c.name.as_str()) {
            return Err(AllocationError::Unexpected("boom".into()));
        }
        self.seen
            .lock()
            .expect("lock")
            .push((c.name.clone(), store.affinity(&pod.uid, &c.name)));
        Ok(())
    }
}

fn pod() -> Pod {
    Pod {
        uid: "uid".into(),
        init_containers: vec![Container::new("init")],
        containers: vec![Container::new("a"), Container::new("b")],
        ..Pod::default()
    }
}

#[test]
fn scopes_admit_store_and_remove() {
    // Upstream TestContainerScopeAdmit / TestPodScopeAdmit / TestRemoveContainer facts.
    let nodes: Vec<NumaNode> = (0..2)
        .map(|id| NumaNode {
            id,
            distances: None,
        })
        .collect();
    for scope in ["container", "pod"] {
        let config =
            ManagerConfig::from_strings("restricted", scope, &BTreeMap::new()).expect("config");
        let mut manager = TopologyManager::new(&config, &nodes).expect("manager");
        let provider = Arc::new(Recorder {
            hints: p(&[("cpu", vec![h(&[1], true)])]),
            seen: Mutex::default(),
            fail_on: None,
        });
        manager.add_hint_provider(provider.clone());
        let result = manager.admit(&pod());
        assert!(result.admit, "{scope}");
        let seen = provider.seen.lock().expect("lock").clone();
        assert_eq!(
            seen.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["init", "a", "b"]
        );
        assert!(seen.iter().all(|(_, hint)| *hint == h(&[1], true)));
        manager.add_container(&pod(), "a", "id-a");
        manager.add_container(&pod(), "a", "id-a2");
        manager.remove_container("id-a");
        assert_eq!(
            manager.affinity("uid", "a"),
            h(&[1], true),
            "another id still runs a"
        );
        manager.remove_container("id-a2");
        assert_eq!(manager.affinity("uid", "a"), TopologyHint::default());
        manager.remove_container("unknown");
    }
}

#[test]
fn admission_rejections() {
    let nodes: Vec<NumaNode> = (0..2)
        .map(|id| NumaNode {
            id,
            distances: None,
        })
        .collect();
    let config = ManagerConfig::from_strings("single-numa-node", "container", &BTreeMap::new())
        .expect("config");
    let mut manager = TopologyManager::new(&config, &nodes).expect("manager");
    manager.add_hint_provider(Arc::new(Recorder {
        hints: p(&[("cpu", vec![h(&[0, 1], true)])]),
        seen: Mutex::default(),
        fail_on: None,
    }));
    let result = manager.admit(&pod());
    assert!(!result.admit);
    assert_eq!(result.reason, "TopologyAffinityError");
    assert_eq!(
        result.message,
        "Resources cannot be allocated with Topology locality"
    );

    let config =
        ManagerConfig::from_strings("best-effort", "pod", &BTreeMap::new()).expect("config");
    let mut manager = TopologyManager::new(&config, &nodes).expect("manager");
    manager.add_hint_provider(Arc::new(Recorder {
        hints: None,
        seen: Mutex::default(),
        fail_on: Some("a"),
    }));
    let result = manager.admit(&pod());
    assert_eq!(result.reason, "UnexpectedAdmissionError");
    assert_eq!(
        result.message,
        "Allocate failed due to boom, which is unexpected"
    );
    assert_eq!(
        manager
            .metrics()
            .admission_errors_total
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}
