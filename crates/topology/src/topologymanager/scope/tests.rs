//! Upstream `scope_container_test.go` and `scope_pod_test.go`: `TestContainerCalculateAffinity`,
//! `TestContainerAccumulateProvidersHints`, `TestPodCalculateAffinity` and
//! `TestPodAccumulateProvidersHints`. Upstream records what a mock policy was handed; here the
//! accumulated hints are checked directly, and admission is checked to store exactly the
//! policy's merge of them.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Admission, container_hints, pod_hints};
use crate::topologymanager::{
    AffinityStore, AllocationError, Grant, HintProvider, NumaInfo, PodGrants, Policy, PolicyName,
    PolicyOptions, ProviderHints, TopologyHint,
};
use crate::{Container, NumaMask, Pod};

fn h(ids: &[usize], preferred: bool) -> TopologyHint {
    TopologyHint::new(
        Some(NumaMask::new(ids.iter().copied()).expect("ids below 64")),
        preferred,
    )
}

fn p(resources: &[(&str, Option<Vec<TopologyHint>>)]) -> ProviderHints {
    Some(
        resources
            .iter()
            .map(|(r, l)| ((*r).to_owned(), l.clone()))
            .collect(),
    )
}

/// The `calculateAffinity` tables (4 cases): what each provider returns is what the policy
/// gets, in order.
fn calculate_affinity_cases() -> Vec<(&'static str, Vec<ProviderHints>)> {
    vec![
        ("No hint providers", vec![]),
        (
            "HintProvider returns empty non-nil map[string][]TopologyHint",
            vec![Some(BTreeMap::new())],
        ),
        (
            "HintProvider returns -nil map[string][]TopologyHint from provider",
            vec![p(&[("resource", None)])],
        ),
        (
            "Assorted HintProviders",
            vec![
                p(&[
                    ("resource-1/A", Some(vec![h(&[0], true), h(&[0, 1], false)])),
                    ("resource-1/B", Some(vec![h(&[1], true), h(&[1, 2], false)])),
                ]),
                p(&[
                    ("resource-2/A", Some(vec![h(&[2], true), h(&[3, 4], false)])),
                    ("resource-2/B", Some(vec![h(&[2], true), h(&[3, 4], false)])),
                ]),
                p(&[("resource-3", None)]),
            ],
        ),
    ]
}

/// The `accumulateProvidersHints` tables (7 cases).
fn accumulate_cases() -> Vec<(&'static str, Vec<ProviderHints>)> {
    let zero = || Some(vec![TopologyHint::default()]);
    vec![
        ("TopologyHint not set", vec![]),
        (
            "HintProvider returns empty non-nil map[string][]TopologyHint",
            vec![Some(BTreeMap::new())],
        ),
        (
            "HintProvider returns - nil map[string][]TopologyHint from provider",
            vec![p(&[("resource", None)])],
        ),
        (
            "2 HintProviders with 1 resource returns hints",
            vec![p(&[("resource1", zero())]), p(&[("resource2", zero())])],
        ),
        (
            "2 HintProviders 1 with 1 resource 1 with nil hints",
            vec![p(&[("resource1", zero())]), None],
        ),
        (
            "2 HintProviders 1 with 1 resource 1 empty hints",
            vec![p(&[("resource1", zero())]), Some(BTreeMap::new())],
        ),
        (
            "HintProvider with 2 resources returns hints",
            vec![p(&[("resource1", zero()), ("resource2", zero())])],
        ),
    ]
}

fn providers(hints: &[ProviderHints]) -> Vec<Arc<dyn HintProvider>> {
    hints
        .iter()
        .map(|h| Arc::new(Fixed::new(h.clone())) as Arc<dyn HintProvider>)
        .collect()
}

fn pod() -> Pod {
    Pod {
        uid: "pod".into(),
        containers: vec![Container::new("c")],
        ..Pod::default()
    }
}

fn policy() -> Policy {
    let info = NumaInfo::from_ids(0..5).expect("nodes");
    Policy::new(PolicyName::BestEffort, info, PolicyOptions::default())
}

/// Upstream `TestContainerAccumulateProvidersHints` and `TestPodAccumulateProvidersHints`.
#[test]
fn accumulate_providers_hints() {
    let pod = pod();
    for (name, expected) in accumulate_cases() {
        let providers = providers(&expected);
        assert_eq!(
            container_hints(&providers, &pod, &pod.containers[0]),
            expected,
            "container scope: {name}"
        );
        assert_eq!(pod_hints(&providers, &pod), expected, "pod scope: {name}");
    }
}

/// Upstream `TestContainerCalculateAffinity` and `TestPodCalculateAffinity`: the policy is
/// handed every provider's hints unchanged, and the affinity stored is its merge of them.
#[test]
fn calculate_affinity() {
    let pod = pod();
    let policy = policy();
    for (name, expected) in calculate_affinity_cases() {
        let providers = providers(&expected);
        let hints = container_hints(&providers, &pod, &pod.containers[0]);
        assert_eq!(hints, expected, "container scope: {name}");
        assert_eq!(pod_hints(&providers, &pod), expected, "pod scope: {name}");
        let merged = policy.merge(&expected).best_hint;
        let scopes: [fn(&Admission<'_>, &Pod) -> super::PodAdmitResult; 2] = [
            |admission, pod| admission.container_scope(pod),
            |admission, pod| admission.pod_scope(pod),
        ];
        for admit in scopes {
            let store = AffinityStore::new();
            let metrics = super::ManagerMetrics::default();
            let admission = Admission {
                policy: &policy,
                providers: &providers,
                store: &store,
                metrics: &metrics,
                pod_level: crate::PodLevelResources::Unmanaged,
                grants: Default::default(),
            };
            assert!(admit(&admission, &pod).admit, "{name}");
            assert_eq!(store.affinity("pod", "c"), merged, "{name}");
        }
    }
}

/// Upstream's `mockHintProvider`: the same hints for the container and for the pod;
/// it counts its container and pod allocations.
#[derive(Default)]
struct Fixed {
    hints: ProviderHints,
    containers: std::sync::atomic::AtomicUsize,
    pods: std::sync::atomic::AtomicUsize,
}

impl Fixed {
    fn new(hints: ProviderHints) -> Fixed {
        Fixed {
            hints,
            ..Fixed::default()
        }
    }
}

impl HintProvider for Fixed {
    fn hints_for_container(&self, _: &Pod, _: &Container) -> ProviderHints {
        self.hints.clone()
    }
    fn hints_for_pod(&self, _: &Pod) -> ProviderHints {
        self.hints.clone()
    }
    fn allocate(
        &self,
        _: &Pod,
        _: &Container,
        _: &AffinityStore,
    ) -> Result<Grant, AllocationError> {
        self.containers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Grant::default())
    }
    fn allocate_pod(&self, _: &Pod, _: &AffinityStore) -> Result<PodGrants, AllocationError> {
        self.pods.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(PodGrants::new())
    }
}

/// Pods with pod-level resources while `PodLevelResourceManagers` is on (upstream
/// `scope_pod.go` `admitUsingPodResources`, and the container scope's
/// `PodLevelTopologyAffinityError`): one `allocate_pod` at pod scope, the best hint stored
/// for every container, and upstream's "Pod Scope …" rejections.
#[test]
fn pod_level_resources_are_allocated_once_per_pod() {
    use std::sync::atomic::Ordering;
    let numa = NumaInfo::new(
        &[
            crate::topologymanager::NumaNode {
                id: 0,
                distances: None,
            },
            crate::topologymanager::NumaNode {
                id: 1,
                distances: None,
            },
        ],
        crate::topologymanager::NumaDistances::Ignore,
    )
    .unwrap();
    let policy = Policy::new(PolicyName::SingleNumaNode, numa, PolicyOptions::default());
    let mut pod = Pod {
        uid: "pod".into(),
        containers: vec![Container::new("a"), Container::new("b")],
        ..Pod::default()
    };
    let mut resources = crate::ResourceRequirements::default();
    resources.requests.cpu_millis = Some(2000);
    pod.resources = Some(resources);
    let fits = Arc::new(Fixed {
        hints: p(&[("cpu", Some(vec![h(&[1], true)]))]),
        ..Fixed::default()
    });
    let providers: Vec<Arc<dyn HintProvider>> = vec![fits.clone()];
    let store = AffinityStore::new();
    let metrics = super::ManagerMetrics::default();
    let admission = Admission {
        policy: &policy,
        providers: &providers,
        store: &store,
        metrics: &metrics,
        pod_level: crate::PodLevelResources::Managed,
        grants: Default::default(),
    };
    assert!(admission.pod_scope(&pod).admit);
    assert_eq!(fits.pods.load(Ordering::Relaxed), 1);
    assert_eq!(fits.containers.load(Ordering::Relaxed), 0);
    assert_eq!(store.affinity("pod", "b"), h(&[1], true));

    let spans = Arc::new(Fixed {
        hints: p(&[("cpu", Some(vec![h(&[0, 1], true)]))]),
        ..Fixed::default()
    });
    let providers: Vec<Arc<dyn HintProvider>> = vec![spans.clone()];
    let admission = Admission {
        providers: &providers,
        ..admission
    };
    let rejected = admission.pod_scope(&pod);
    assert_eq!(
        (rejected.reason.as_str(), rejected.message.as_str()),
        (
            "TopologyAffinityError",
            "Pod Scope pod with pod-level resources failed admission under pod-scope topology manager"
        )
    );
    let rejected = admission.container_scope(&pod);
    assert_eq!(
        rejected.message,
        "Pod Scope pod with pod-level resources failed admission with a container-level topology manager"
    );
    // Without pod-level resources: upstream's plain TopologyAffinityError.
    pod.resources = None;
    assert_eq!(
        admission.pod_scope(&pod).message,
        "Resources cannot be allocated with Topology locality"
    );
    assert_eq!(spans.pods.load(Ordering::Relaxed), 0);
}

/// A refusal carries what was merged for the container (container scope) or the pod (pod
/// scope) that failed; an admission carries nothing.
#[test]
fn a_refusal_carries_the_hints_it_merged() {
    let info = NumaInfo::from_ids(0..2).expect("nodes");
    let policy = Policy::new(PolicyName::Restricted, info, PolicyOptions::default());
    let node0 = p(&[("cpu", Some(vec![h(&[0], true)]))]);
    let node1 = p(&[("example.com/nic", Some(vec![h(&[1], true)]))]);
    let providers = providers(&[node0.clone(), node1.clone()]);
    let store = AffinityStore::new();
    let metrics = super::ManagerMetrics::default();
    let admission = Admission {
        policy: &policy,
        providers: &providers,
        store: &store,
        metrics: &metrics,
        pod_level: crate::PodLevelResources::default(),
        grants: Default::default(),
    };
    let expected = |container: Option<&str>| super::RejectedHints {
        container: container.map(str::to_owned),
        providers: vec![
            (
                "hint provider".to_owned(),
                crate::topologymanager::hint_sets(node0.clone()),
            ),
            (
                "hint provider".to_owned(),
                crate::topologymanager::hint_sets(node1.clone()),
            ),
        ],
        merged: crate::topologymanager::MergeResult {
            best_hint: h(&[0, 1], false),
            admit: false,
        },
    };
    let refused = admission.container_scope(&pod());
    assert!(!refused.admit);
    assert_eq!(
        refused.rejected_hints.as_deref(),
        Some(&expected(Some("c")))
    );
    let refused = admission.pod_scope(&pod());
    assert_eq!(refused.rejected_hints.as_deref(), Some(&expected(None)));

    let providers = self::providers(&[node0]);
    let admission = Admission {
        providers: &providers,
        ..admission
    };
    let admitted = admission.container_scope(&pod());
    assert!(admitted.admit);
    assert_eq!(admitted.rejected_hints, None);
}
