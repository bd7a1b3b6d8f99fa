//! Ported from upstream `pkg/kubelet/cm/topologymanager/topology_manager_test.go`
//! (`TestNewManager`, `TestManagerScope`, `TestAddHintProvider`, `TestAdmit`), with small
//! `HintProvider` doubles standing in for upstream's Go mocks. Upstream's
//! `TestAdmitWithPodLevelResources` belongs to a later release (pod-level resource managers)
//! and is not ported.
//!
//! corral splits upstream `NewManager` into [`TopologyManagerConfig::from_strings`] (names, options)
//! and [`TopologyManager::new`] (NUMA nodes); `new_manager` below joins them back.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::policy_cases::{h, p, two_nodes};
use crate::support::recorder::Recorder;
use corral_topology::topologymanager::{
    AffinityStore, AllocationError, Grant, HintProvider, TopologyManager, TopologyManagerConfig,
    TopologyManagerError,
};
use corral_topology::{
    Container, NumaNode, Pod, ProviderHints, QosClass, ResourceList, ResourceRequirements,
    ScopeName,
};

fn new_manager(
    nodes: &[NumaNode],
    policy: &str,
    scope: &str,
    options: &[(&str, &str)],
) -> Result<TopologyManager, String> {
    let options: BTreeMap<String, String> = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let config =
        TopologyManagerConfig::from_strings(policy, scope, &options).map_err(|e| e.to_string())?;
    TopologyManager::new(&config, nodes).map_err(|e| e.to_string())
}

fn bare_nodes(ids: std::ops::Range<usize>) -> Vec<NumaNode> {
    ids.map(|id| NumaNode {
        id,
        distances: None,
    })
    .collect()
}

/// Upstream `TestNewManager` (9 cases).
#[test]
fn new_manager_table() {
    // "Policy is set to none/best-effort/restricted/single-numa-node" (no NUMA nodes given).
    for name in ["none", "best-effort", "restricted", "single-numa-node"] {
        let manager = new_manager(&[], name, "container", &[]).expect(name);
        assert_eq!(manager.policy().name().as_str(), name);
    }
    // "Policy is set to unknown"
    let err = new_manager(&[], "unknown", "container", &[]).expect_err("unknown policy");
    assert!(err.contains("unknown policy: \"unknown\""), "{err}");
    // "Unknown policy name best-effort policy" / "... restricted policy"
    for name in ["best-effort", "restricted"] {
        let err = new_manager(&[], name, "container", &[("unknown-option", "true")])
            .expect_err("unknown option");
        assert!(
            err.contains("unknown Topology Manager Policy option:"),
            "{err}"
        );
    }
    // "can't get NUMA distances": upstream reads distances from cadvisor and says so; corral
    // takes them from its own discovery, and its message names the node instead.
    let err = new_manager(
        &bare_nodes(0..1),
        "best-effort",
        "container",
        &[("prefer-closest-numa-nodes", "true")],
    )
    .expect_err("no distances");
    assert!(err.contains("error getting NUMA distances"), "{err}");
    // "more than 8 NUMA nodes"
    let err =
        new_manager(&bare_nodes(0..9), "best-effort", "container", &[]).expect_err("nine nodes");
    assert!(
        err.contains("unsupported on machines with more than 8 NUMA Nodes"),
        "{err}"
    );
}

/// `TestNewManager` neighbours: the max-allowable-numa-nodes option raises the limit, the
/// `none` policy ignores options and node counts, and the typed error carries the counts.
#[test]
fn new_manager_limits() {
    let nine = bare_nodes(0..9);
    let config = TopologyManagerConfig::from_strings("best-effort", "container", &BTreeMap::new())
        .expect("config");
    assert_eq!(
        TopologyManager::new(&config, &nine).expect_err("9 > 8"),
        TopologyManagerError::TooManyNumaNodes { count: 9, max: 8 }
    );
    assert!(
        new_manager(
            &nine,
            "best-effort",
            "pod",
            &[("max-allowable-numa-nodes", "9")]
        )
        .is_ok()
    );
    assert!(new_manager(&nine, "none", "container", &[("bogus", "true")]).is_ok());
}

/// Upstream `TestManagerScope` (3 cases).
#[test]
fn manager_scope() {
    let container = new_manager(&[], "best-effort", "container", &[]).expect("container");
    assert_eq!(container.scope(), Some(ScopeName::Container));
    let pod = new_manager(&[], "best-effort", "pod", &[]).expect("pod");
    assert_eq!(pod.scope(), Some(ScopeName::Pod));
    assert_eq!(ScopeName::Pod.as_str(), "pod");
    let err = new_manager(&[], "best-effort", "unknown", &[]).expect_err("unknown scope");
    assert!(err.contains("unknown scope: \"unknown\""), "{err}");
}

/// Upstream's `mockHintProvider`: fixed hints, allocation always succeeds; counts the calls.
#[derive(Default)]
struct Mock {
    hints: ProviderHints,
    asked: AtomicUsize,
    allocated: AtomicUsize,
}

impl Mock {
    fn new(hints: ProviderHints) -> Arc<Mock> {
        Arc::new(Mock {
            hints,
            ..Mock::default()
        })
    }
}

impl HintProvider for Mock {
    fn hints_for_container(&self, _: &Pod, _: &Container) -> ProviderHints {
        self.asked.fetch_add(1, Ordering::Relaxed);
        self.hints.clone()
    }
    fn hints_for_pod(&self, _: &Pod) -> ProviderHints {
        self.asked.fetch_add(1, Ordering::Relaxed);
        self.hints.clone()
    }
    fn allocate(
        &self,
        _: &Pod,
        _: &Container,
        _: &AffinityStore,
    ) -> Result<Grant, AllocationError> {
        self.allocated.fetch_add(1, Ordering::Relaxed);
        Ok(Grant::default())
    }
}

fn one_container_pod(qos: QosClass) -> Pod {
    let mut container = Container::new("c");
    let amount = ResourceList {
        cpu_millis: Some(1000),
        memory_bytes: Some(1 << 30),
        ..ResourceList::default()
    };
    container.resources = match qos {
        QosClass::BestEffort => ResourceRequirements::default(),
        QosClass::Burstable => ResourceRequirements {
            requests: amount,
            limits: ResourceList::default(),
        },
        QosClass::Guaranteed => ResourceRequirements {
            requests: amount.clone(),
            limits: amount,
        },
    };
    let pod = Pod {
        uid: "pod".into(),
        containers: vec![container],
        ..Pod::default()
    };
    assert_eq!(pod.qos_class(), qos);
    pod
}

/// Upstream `TestAddHintProvider`: every provider added is consulted.
#[test]
fn add_hint_provider() {
    let mut manager = new_manager(&two_nodes(), "best-effort", "container", &[]).expect("manager");
    let mocks = [Mock::new(None), Mock::new(None), Mock::new(None)];
    for mock in &mocks {
        manager.add_hint_provider(mock.clone());
    }
    assert!(
        manager
            .admit(&one_container_pod(QosClass::BestEffort))
            .admit
    );
    for mock in &mocks {
        assert_eq!(mock.asked.load(Ordering::Relaxed), 1);
        assert_eq!(mock.allocated.load(Ordering::Relaxed), 1);
    }
}

/// Upstream `TestAdmit` (14 cases), each with the container and the pod scope. NUMA nodes are
/// upstream's two-node machine with distances (unused without prefer-closest).
#[test]
fn admit() {
    use QosClass::{BestEffort, Burstable, Guaranteed};
    let preferred_one = || p(&[("resource", vec![h(&[0], true), h(&[0, 1], false)])]);
    let preferred_two = || {
        p(&[(
            "resource",
            vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)],
        )])
    };
    let not_preferred = || p(&[("resource", vec![h(&[0, 1], false)])]);
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, QosClass, &str, Vec<ProviderHints>, bool)> = vec![
        (
            "QOSClass set as BestEffort. None Policy. No Hints.",
            BestEffort,
            "none",
            vec![],
            true,
        ),
        (
            "QOSClass set as Guaranteed. None Policy. No Hints.",
            Guaranteed,
            "none",
            vec![],
            true,
        ),
        (
            "QOSClass set as BestEffort. single-numa-node Policy. No Hints.",
            BestEffort,
            "single-numa-node",
            vec![None],
            true,
        ),
        (
            "QOSClass set as BestEffort. Restricted Policy. No Hints.",
            BestEffort,
            "restricted",
            vec![None],
            true,
        ),
        (
            "QOSClass set as Guaranteed. BestEffort Policy. Preferred Affinity.",
            Guaranteed,
            "best-effort",
            vec![preferred_one()],
            true,
        ),
        (
            "QOSClass set as Guaranteed. BestEffort Policy. More than one Preferred Affinity.",
            Guaranteed,
            "best-effort",
            vec![preferred_two()],
            true,
        ),
        (
            "QOSClass set as Burstable. BestEffort Policy. More than one Preferred Affinity.",
            Burstable,
            "best-effort",
            vec![preferred_two()],
            true,
        ),
        (
            "QOSClass set as Guaranteed. BestEffort Policy. No Preferred Affinity.",
            Guaranteed,
            "best-effort",
            vec![not_preferred()],
            true,
        ),
        (
            "QOSClass set as Guaranteed. Restricted Policy. Preferred Affinity.",
            Guaranteed,
            "restricted",
            vec![preferred_one()],
            true,
        ),
        (
            "QOSClass set as Burstable. Restricted Policy. Preferred Affinity.",
            Burstable,
            "restricted",
            vec![preferred_one()],
            true,
        ),
        (
            "QOSClass set as Guaranteed. Restricted Policy. More than one Preferred affinity.",
            Guaranteed,
            "restricted",
            vec![preferred_two()],
            true,
        ),
        (
            "QOSClass set as Burstable. Restricted Policy. More than one Preferred affinity.",
            Burstable,
            "restricted",
            vec![preferred_two()],
            true,
        ),
        (
            "QOSClass set as Guaranteed. Restricted Policy. No Preferred affinity.",
            Guaranteed,
            "restricted",
            vec![not_preferred()],
            false,
        ),
        (
            "QOSClass set as Burstable. Restricted Policy. No Preferred affinity.",
            Burstable,
            "restricted",
            vec![not_preferred()],
            false,
        ),
    ];
    assert_eq!(cases.len(), 14);
    for (name, qos, policy, hints, expected) in cases {
        for scope in ["container", "pod"] {
            let mut manager = new_manager(&two_nodes(), policy, scope, &[]).expect(name);
            for hint in &hints {
                manager.add_hint_provider(Mock::new(hint.clone()));
            }
            let result = manager.admit(&one_container_pod(qos));
            assert_eq!(result.admit, expected, "{name} ({scope} scope)");
            if !result.admit {
                assert_eq!(result.reason, "TopologyAffinityError", "{name}");
                assert_eq!(
                    result.message,
                    "Resources cannot be allocated with Topology locality"
                );
            }
        }
    }
}

fn three_container_pod() -> Pod {
    Pod {
        uid: "uid".into(),
        init_containers: vec![Container::new("init")],
        containers: vec![Container::new("a"), Container::new("b")],
        ..Pod::default()
    }
}

/// Upstream `Admit` (both scopes): containers are allocated init first, each after its
/// affinity was stored, and a rejected merge or a failed allocation gives upstream's reasons.
#[test]
fn admit_allocates_in_order_and_reports_failures() {
    for scope in ["container", "pod"] {
        let mut manager = new_manager(&two_nodes(), "restricted", scope, &[]).expect("manager");
        let provider = Arc::new(Recorder {
            hints: p(&[("cpu", vec![h(&[1], true)])]),
            seen: Mutex::default(),
            fail_on: None,
        });
        manager.add_hint_provider(provider.clone());
        assert!(manager.admit(&three_container_pod()).admit, "{scope}");
        let seen = provider.seen.lock().expect("lock").clone();
        let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["init", "a", "b"]);
        assert!(seen.iter().all(|(_, hint)| *hint == h(&[1], true)));
    }

    let mut manager =
        new_manager(&two_nodes(), "single-numa-node", "container", &[]).expect("manager");
    manager.add_hint_provider(Arc::new(Recorder {
        hints: p(&[("cpu", vec![h(&[0, 1], true)])]),
        seen: Mutex::default(),
        fail_on: None,
    }));
    let result = manager.admit(&three_container_pod());
    assert!(!result.admit);
    assert_eq!(result.reason, "TopologyAffinityError");

    let mut manager = new_manager(&two_nodes(), "best-effort", "pod", &[]).expect("manager");
    manager.add_hint_provider(Arc::new(Recorder {
        hints: None,
        seen: Mutex::default(),
        fail_on: Some("a"),
    }));
    let result = manager.admit(&three_container_pod());
    assert_eq!(result.reason, "UnexpectedAdmissionError");
    assert_eq!(
        result.message,
        "Allocate failed due to boom, which is unexpected"
    );
    assert_eq!(
        manager
            .metrics()
            .admission_errors_total
            .load(Ordering::Relaxed),
        1
    );
    assert_eq!(
        manager
            .metrics()
            .admission_requests_total
            .load(Ordering::Relaxed),
        1
    );
}

/// The counters as upstream's `scope_container.go`, `scope_pod.go` and `topology_manager.go`
/// count them: every admission is a request and one duration; rejections in the container
/// and pod scopes are errors (not under `none`); under `single-numa-node` (upstream
/// `IsAlignmentGuaranteed`) a failed merge is an alignment failure and each allocated
/// container (container scope) or pod (pod scope) an aligned one.
#[test]
fn metrics_are_counted_where_upstream_counts_them() {
    // (policy, scope, hints on node…, fail on, errors,
    //  [container, pod, container failures, pod failures])
    type Case = (
        &'static str,
        &'static str,
        &'static [usize],
        Option<&'static str>,
        u64,
        [u64; 4],
    );
    let cases: [Case; 8] = [
        ("single-numa-node", "container", &[1], None, 0, [3, 0, 0, 0]),
        (
            "single-numa-node",
            "container",
            &[1],
            Some("a"),
            1,
            [1, 0, 0, 0],
        ),
        (
            "single-numa-node",
            "container",
            &[0, 1],
            None,
            1,
            [0, 0, 1, 0],
        ),
        ("single-numa-node", "pod", &[1], None, 0, [0, 1, 0, 0]),
        ("single-numa-node", "pod", &[1], Some("b"), 1, [0, 0, 0, 0]),
        ("single-numa-node", "pod", &[0, 1], None, 1, [0, 0, 0, 1]),
        (
            "restricted",
            "container",
            &[0, 1],
            Some("a"),
            1,
            [0, 0, 0, 0],
        ),
        ("none", "container", &[1], Some("a"), 0, [0, 0, 0, 0]),
    ];
    for (policy, scope, nodes, fail_on, errors, aligned) in cases {
        let name = format!("{policy}/{scope} on {nodes:?}, failing {fail_on:?}");
        let mut manager = new_manager(&two_nodes(), policy, scope, &[]).expect("manager");
        manager.add_hint_provider(Arc::new(Recorder {
            hints: p(&[("cpu", vec![h(nodes, true)])]),
            seen: Mutex::default(),
            fail_on,
        }));
        manager.admit(&three_container_pod());
        let metrics = manager.metrics();
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        assert_eq!(load(&metrics.admission_requests_total), 1, "{name}");
        assert_eq!(load(&metrics.admission_errors_total), errors, "{name}");
        let numa = &metrics.numa_alignment;
        assert_eq!(
            [
                load(&numa.container),
                load(&numa.pod),
                load(&numa.container_failures),
                load(&numa.pod_failures)
            ],
            aligned,
            "{name}"
        );
        let durations = metrics.admission_duration_ms.snapshot();
        assert_eq!(durations.count, 1, "{name}");
    }
}
