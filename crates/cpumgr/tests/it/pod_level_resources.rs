//! Pods with pod-level resources (`spec.resources`, KEP-2837): with v1.36's default
//! `PodLevelResourceManagers` off, the static policy gives their Guaranteed containers no
//! exclusive CPUs and no hints (upstream `policy_static.go` `Allocate`,
//! `GetTopologyHints`, `GetPodTopologyHints`: "pod is using pod-level resources but the
//! PodLevelResourceManagers feature gate is not enabled").

use corral_cpumgr::Policy;
use corral_topology::{ResourceRequirements, TopologyHint};

use crate::support::static_cases::policy;
use crate::support::{make_pod, state};

fn index() -> std::sync::Arc<corral_cpumgr::TopologyIndex> {
    crate::support::topologies::index(&corral_testkit::upstream_topologies::dual_socket_ht())
}

#[test]
fn guaranteed_containers_of_pod_level_pods_stay_in_the_shared_pool() {
    let mut p = policy(index(), 1, "", &[]);
    let mut pod = make_pod("pod-level", "app", 2000, 2000);
    let mut resources = ResourceRequirements::default();
    resources.requests.cpu_millis = Some(4000);
    resources.limits.cpu_millis = Some(4000);
    resources.requests.memory_bytes = Some(2_000_000_000);
    resources.limits.memory_bytes = Some(2_000_000_000);
    pod.resources = Some(resources);
    let container = pod.containers[0].clone();
    let mut st = state("1-11", &[]);

    assert_eq!(p.hints_for_container(&st, &pod, &container), None);
    assert_eq!(p.hints_for_pod(&st, &pod), None);
    p.allocate(&mut st, &pod, &container, TopologyHint::default())
        .unwrap();
    assert!(st.cpu_set("pod-level", "app").is_none());
    assert_eq!(st.default_cpu_set().to_string(), "1-11");

    // The same pod without pod-level resources gets its two CPUs.
    pod.resources = None;
    assert!(p.hints_for_container(&st, &pod, &container).is_some());
    p.allocate(&mut st, &pod, &container, TopologyHint::default())
        .unwrap();
    assert_eq!(st.cpu_set("pod-level", "app").map(|c| c.len()), Some(2));
}

/// A container of upstream's `containerSpec`: exclusive-eligible when it has a CPU
/// request (equal limit, and equal memory request and limit), else no resources.
fn spec(name: &str, cpus: Option<i64>, sidecar: bool) -> corral_topology::Container {
    let mut c = corral_topology::Container::new(name);
    if let Some(cpus) = cpus {
        for list in [&mut c.resources.requests, &mut c.resources.limits] {
            list.cpu_millis = Some(cpus * 1000);
            list.memory_bytes = Some(1 << 30);
        }
    }
    if sidecar {
        c.restart_policy = Some(corral_topology::ContainerRestartPolicy::Always);
    }
    c
}

/// Upstream `makePodWithContainersAndPodLevelResources(uid, cpuRequest, cpuLimit, init,
/// app)`: pod-level CPU request and limit (and equal memory).
fn pod_level_pod(
    uid: &str,
    request: i64,
    limit: i64,
    init: Vec<corral_topology::Container>,
    app: Vec<corral_topology::Container>,
) -> corral_topology::Pod {
    let mut resources = ResourceRequirements::default();
    resources.requests.cpu_millis = Some(request * 1000);
    resources.limits.cpu_millis = Some(limit * 1000);
    resources.requests.memory_bytes = Some(4 << 30);
    resources.limits.memory_bytes = Some(4 << 30);
    corral_topology::Pod {
        uid: uid.into(),
        init_containers: init,
        containers: app,
        resources: Some(resources),
        ..corral_topology::Pod::default()
    }
}

/// Upstream `TestStaticPolicyAllocatePod` (policy_static_test.go, v1.36): every
/// "scope: pod … PodLevelResourceManagers enabled" row on `topoDualSocketHT`, reserved
/// CPU 0, NUMA 0 hint — the containers' cpusets and the shared pool after AllocatePod.
#[test]
fn upstream_allocate_pod_table() {
    let gu = |n: &str| spec(n, Some(1), false);
    let ngu = |n: &str| spec(n, None, false);
    type Row = (
        &'static str,
        corral_topology::Pod,
        Result<&'static [(&'static str, &'static str)], &'static str>,
        &'static str,
    );
    let rows: Vec<Row> = vec![
        (
            "guaranteed container",
            pod_level_pod("p", 2, 2, vec![], vec![gu("gu-container")]),
            Ok(&[("gu-container", "2")]),
            "0-1,3-7,9-11",
        ),
        (
            "non-guaranteed container",
            pod_level_pod("p", 1, 1, vec![], vec![ngu("ngu-container")]),
            Ok(&[("ngu-container", "6")]),
            "0-5,7-11",
        ),
        (
            "mix of guaranteed and non-guaranteed containers",
            pod_level_pod(
                "p",
                3,
                3,
                vec![],
                vec![
                    gu("gu-container-1"),
                    gu("gu-container-2"),
                    ngu("ngu-container"),
                ],
            ),
            Ok(&[
                ("gu-container-1", "6"),
                ("gu-container-2", "2"),
                ("ngu-container", "8"),
            ]),
            "0-1,3-5,7,9-11",
        ),
        (
            "guaranteed init and app containers",
            pod_level_pod(
                "p",
                2,
                2,
                vec![gu("gu-init-container-1"), gu("gu-init-container-2")],
                vec![gu("gu-container-1"), gu("gu-container-2")],
            ),
            Ok(&[
                ("gu-init-container-1", "2"),
                ("gu-init-container-2", "2"),
                ("gu-container-1", "2"),
                ("gu-container-2", "8"),
            ]),
            "0-1,3-7,9-11",
        ),
        (
            "shared inits around a guaranteed sidecar",
            pod_level_pod(
                "p",
                3,
                3,
                vec![
                    ngu("ngu-init-container-1"),
                    spec("gu-init-restartable-2", Some(1), true),
                    ngu("ngu-init-container-3"),
                ],
                vec![gu("gu-container-1"), ngu("ngu-container-2")],
            ),
            Ok(&[
                ("ngu-init-container-1", "2,6,8"),
                ("gu-init-restartable-2", "6"),
                ("ngu-init-container-3", "2,8"),
                ("gu-container-1", "2"),
                ("ngu-container-2", "8"),
            ]),
            "0-1,3-5,7,9-11",
        ),
        (
            "shared inits around a shared sidecar",
            pod_level_pod(
                "p",
                3,
                3,
                vec![
                    ngu("ngu-init-container-1"),
                    spec("ngu-init-restartable-2", None, true),
                    ngu("ngu-init-container-3"),
                ],
                vec![gu("gu-container-1"), ngu("ngu-container-2")],
            ),
            Ok(&[
                ("ngu-init-container-1", "2,6,8"),
                ("ngu-init-restartable-2", "2,8"),
                ("ngu-init-container-3", "2,6,8"),
                ("gu-container-1", "6"),
                ("ngu-container-2", "2,8"),
            ]),
            "0-1,3-5,7,9-11",
        ),
        (
            "an empty pod shared pool",
            pod_level_pod(
                "p",
                2,
                2,
                vec![],
                vec![
                    gu("gu-container-1"),
                    gu("gu-container-2"),
                    ngu("ngu-container"),
                ],
            ),
            Err(
                "pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers",
            ),
            "0-11",
        ),
        (
            "a non-guaranteed pod",
            pod_level_pod("p", 2, 1, vec![], vec![gu("gu-container-1")]),
            Ok(&[]),
            "0-11",
        ),
    ];
    for (what, pod, want, default) in rows {
        let mut p = policy(index(), 1, "0", &[]);
        p.set_pod_level_resources(corral_topology::PodLevelResources::Managed);
        let mut st = state("0-11", &[]);
        let hint = TopologyHint::new(Some(corral_topology::NumaMask::new([0]).unwrap()), true);
        let got = p.allocate_pod(&mut st, &pod, hint);
        match want {
            Ok(assignments) => {
                assert_eq!(got, Ok(()), "{what}");
                for (name, cpus) in assignments {
                    let held = st.cpu_set("p", name).map(ToString::to_string);
                    assert_eq!(held.as_deref(), Some(*cpus), "{what}: {name}");
                }
                if assignments.is_empty() {
                    assert!(st.assignments().is_empty(), "{what}");
                }
            }
            Err(message) => {
                let err = got.unwrap_err();
                assert_eq!(err.to_string(), message, "{what}");
                let rejected: corral_topology::AllocationError = err.into();
                assert!(
                    matches!(&rejected, corral_topology::AllocationError::Admission { reason, .. } if reason == "EmptyPodSharedPoolError"),
                    "{what}"
                );
            }
        }
        assert_eq!(st.default_cpu_set().to_string(), default, "{what}");
    }
}

/// The pod's CPUs go back to the pool with its last container, not before.
#[test]
fn pod_level_cpus_return_with_the_last_container() {
    let mut p = policy(index(), 1, "0", &[]);
    p.set_pod_level_resources(corral_topology::PodLevelResources::Managed);
    let mut st = state("0-11", &[]);
    let pod = pod_level_pod(
        "p",
        3,
        3,
        vec![],
        vec![spec("a", Some(1), false), spec("b", None, false)],
    );
    p.allocate_pod(&mut st, &pod, TopologyHint::default())
        .unwrap();
    assert_eq!(st.pod_cpu_set("p").map(|c| c.len()), Some(3));
    p.remove_container(&mut st, "p", "a");
    assert_eq!(st.default_cpu_set().len(), 9);
    p.remove_container(&mut st, "p", "b");
    assert_eq!(st.default_cpu_set().to_string(), "0-11");
    assert!(st.pod_cpu_set("p").is_none());
}
