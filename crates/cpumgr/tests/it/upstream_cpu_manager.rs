//! Ported tables of upstream `cpu_manager_test.go` (the rows not about Go plumbing), through
//! the crate's `ContainerRuntime` / `PodSource` doubles: `TestCPUManagerAdd`,
//! `TestCPUManagerAddWithInitContainers`, `TestCPUManagerGenerate`, `TestCPUManagerRemove`,
//! `TestReconcileState`, `TestCPUManagerAddWithResvList`, `TestCPUManagerHandlePolicyOptions`
//! and `TestCPUManagerGetAllocatableCPUs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use corral_cpumgr::{
    ContainerState, ContainerStatus, CpuManager, CpuManagerConfig, CpuManagerError, CpuState,
    NonePolicy, PodStatus, StaticPolicy, StaticPolicyOptions,
};
use corral_topology::{Container, CpuSet, Pod, PolicyName, TopologyHint};

use crate::support::harness::*;
use crate::support::topologies::*;
use crate::support::*;
use corral_cpumgr::TopologyIndex;

fn static_policy(index: Arc<TopologyIndex>, reserved: usize, explicit: &str) -> StaticPolicy {
    StaticPolicy::new(
        index,
        reserved,
        &set(explicit),
        StaticPolicyOptions::default(),
        PolicyName::None,
    )
    .unwrap()
}

/// Upstream `TestCPUManagerAdd`: (a) the static policy allocates 2 of the shared pool 1-4
/// (CPU 4 is unknown to the 4-CPU topology and never taken); (b) a policy error is returned
/// and leaves the pool alone. In both, the container id is mapped afterwards.
#[test]
fn cpu_manager_add() {
    let pod = make_pod("fakePod", "fakeContainer", 2000, 2000);
    let container = pod.containers[0].clone();
    let cases: [(&str, Box<dyn corral_cpumgr::Policy>, &str, bool); 2] = [
        (
            "cpu manager add - no error",
            Box::new(static_policy(single_socket_four_cores_no_ht(), 0, "")),
            "3-4",
            true,
        ),
        (
            "cpu manager add - policy add container error",
            Box::new(FailingPolicy),
            "1-4",
            false,
        ),
    ];
    for (description, policy, want, ok) in cases {
        let pods = Arc::new(Pods::default());
        *pods.pods.lock().unwrap() = vec![pod.clone()];
        let m = manager_with_state(
            single_socket_four_cores_no_ht(),
            policy,
            &state("1-4", &[]),
            pods,
            Arc::new(Runtime::default()),
        );
        let got = m.allocate(&pod, &container, TopologyHint::default());
        assert_eq!(got.is_ok(), ok, "{description}: {got:?}");
        if !ok {
            assert!(
                matches!(got, Err(CpuManagerError::Allocate(_))),
                "{description}"
            );
        }
        m.add_container("fakePod", "fakeContainer", "fakeID");
        assert_eq!(m.state().default_cpu_set(), &set(want), "{description}");
        // The id is mapped: removing it releases what the container holds.
        m.remove_container("fakeID").unwrap();
        assert_eq!(m.state().default_cpu_set(), &set("1-4"), "{description}");
    }
}

/// Upstream `TestCPUManagerAddWithInitContainers`: (description, init requests, app
/// requests, expected init sets, expected app sets) on `topoSingleSocketHT`, nothing
/// reserved. No reconcile runs, so corral's release of terminated init containers' CPUs
/// (#112228) does not apply and upstream's sets hold as they are.
#[test]
fn cpu_manager_add_with_init_containers() {
    type Row = (
        &'static str,
        &'static [i64],
        &'static [i64],
        &'static [&'static str],
        &'static [&'static str],
    );
    let rows: [Row; 9] = [
        (
            "No Guaranteed Init CPUs",
            &[100],
            &[4000],
            &[""],
            &["0-1,4-5"],
        ),
        (
            "Equal Number of Guaranteed CPUs",
            &[4000],
            &[4000],
            &["0-1,4-5"],
            &["0-1,4-5"],
        ),
        (
            "More Init Container Guaranteed CPUs",
            &[6000],
            &[4000],
            &["0-2,4-6"],
            &["0-1,4-5"],
        ),
        (
            "Less Init Container Guaranteed CPUs",
            &[2000],
            &[4000],
            &["0,4"],
            &["0-1,4-5"],
        ),
        (
            "Multi Init Container Equal CPUs",
            &[2000, 2000],
            &[2000],
            &["0,4", "0,4"],
            &["0,4"],
        ),
        (
            "Multi Init Container Less CPUs",
            &[4000, 4000],
            &[2000],
            &["0-1,4-5", "0-1,4-5"],
            &["0,4"],
        ),
        (
            "Multi Init Container More CPUs",
            &[2000, 2000],
            &[4000],
            &["0,4", "0,4"],
            &["0-1,4-5"],
        ),
        (
            "Multi Init Container Increasing CPUs",
            &[2000, 4000],
            &[6000],
            &["0,4", "0-1,4-5"],
            &["0-2,4-6"],
        ),
        (
            "Multi Init, Multi App Container Split CPUs",
            &[2000, 4000],
            &[2000, 2000],
            &["0,4", "0-1,4-5"],
            &["0,4", "1,5"],
        ),
    ];
    for (description, init, apps, want_init, want_apps) in rows {
        let pair = |r: &i64| (*r, *r);
        let pod = make_multi_container_pod(
            "podUID",
            &init.iter().map(pair).collect::<Vec<_>>(),
            &apps.iter().map(pair).collect::<Vec<_>>(),
        );
        let pods = Arc::new(Pods::default());
        *pods.pods.lock().unwrap() = vec![pod.clone()];
        let m = manager_with_state(
            single_socket_ht(),
            Box::new(static_policy(single_socket_ht(), 0, "")),
            &state("0-7", &[]),
            pods,
            Arc::new(Runtime::default()),
        );
        let wants = want_init.iter().chain(want_apps);
        let mut cumulative = CpuSet::new();
        for (i, ((_, c), want)) in pod.all_containers().zip(wants).enumerate() {
            m.allocate(&pod, c, TopologyHint::default())
                .unwrap_or_else(|e| panic!("{description}: {}: {e}", c.name));
            m.add_container("podUID", &c.name, &format!("fakeID-{i}"));
            let got = m.state().cpu_set("podUID", &c.name).cloned();
            match got {
                Some(cpus) => {
                    assert_eq!(cpus, set(want), "{description}: {}", c.name);
                    cumulative.union_with(&cpus);
                }
                None => assert!(want.is_empty(), "{description}: {} missing", c.name),
            }
        }
        assert_eq!(
            m.state().default_cpu_set(),
            &set("0-7").difference(&cumulative),
            "{description}"
        );
    }
}

/// Upstream `TestCPUManagerGenerate` on its 4-CPU machine. The "broken topology" row is
/// topology discovery failing (`could not detect number of cpus`), which in corral happens
/// before a manager exists (`corral-topology`'s sysfs discovery), so it has no row here.
#[test]
fn cpu_manager_generate() {
    let topology = single_socket_four_cores_no_ht().topology().clone();
    // (description, policy, reserved millicores, policy name or error text)
    type Row = (
        &'static str,
        &'static str,
        Option<i64>,
        Result<&'static str, &'static str>,
    );
    let cases: [Row; 5] = [
        ("set none policy", "none", None, Ok("none")),
        (
            "invalid policy name",
            "invalid",
            None,
            Err("unknown policy: \"invalid\""),
        ),
        ("static policy", "static", Some(3000), Ok("static")),
        (
            "static policy - broken reservation",
            "static",
            None,
            Err("unable to determine reserved CPU resources for static policy"),
        ),
        (
            "static policy - no CPU resources",
            "static",
            Some(0),
            Err(
                "the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero",
            ),
        ),
    ];
    for (description, policy, reserved, want) in cases {
        let config = CpuManagerConfig {
            policy: policy.into(),
            reserved_cpu_millis: reserved,
            ..CpuManagerConfig::default()
        };
        match (CpuManager::new(&config, &topology), want) {
            (Ok(m), Ok(name)) => {
                assert_eq!(m.policy_name(), name, "{description}");
                assert_eq!(m.all_cpus(), set("0-3"), "{description}");
            }
            (Err(e), Err(msg)) => assert!(error_chain(&e).contains(msg), "{description}: {e}"),
            (got, want) => panic!("{description}: got {got:?}, want {want:?}"),
        }
    }
}

/// Upstream `TestCPUManagerRemove`: removing a mapped container succeeds; upstream's second
/// row (the policy's `RemoveContainer` fails) cannot happen in corral, whose policies
/// release infallibly. The one way removal fails in corral is persisting the release: the
/// error is returned and the state rolled back (corral writes once per operation and rolls
/// back; upstream only logs a failed write).
#[test]
fn cpu_manager_remove() {
    let m = manager_with_state(
        single_socket_ht(),
        Box::new(FailingPolicy),
        &state("", &[]),
        Arc::new(Pods::default()),
        Arc::new(Runtime::default()),
    );
    m.add_container("", "", "fakeID");
    m.remove_container("fakeID").unwrap();

    // A failed checkpoint write on removal.
    let backend = FlakyFile::default();
    let pod = make_pod("fakePod", "fakeContainer", 2000, 2000);
    let pods = Arc::new(Pods::default());
    *pods.pods.lock().unwrap() = vec![pod.clone()];
    let m = CpuManager::with_policy(
        single_socket_ht(),
        Box::new(static_policy(single_socket_ht(), 0, "")),
        std::time::Duration::from_secs(10),
    );
    m.start(
        backend.file.clone(),
        pods,
        Arc::new(Runtime::default()),
        corral_cpumgr::ContainerMap::new(),
    )
    .unwrap();
    m.allocate(&pod, &pod.containers[0], TopologyHint::default())
        .unwrap();
    m.add_container("fakePod", "fakeContainer", "fakeID");
    let before = m.state();
    backend.fail(true);
    let err = m.remove_container("fakeID").unwrap_err();
    assert!(matches!(err, CpuManagerError::Persist(_)), "{err}");
    // The cause is the error's source, printed once by whoever shows the chain.
    let chain = error_chain(&err);
    assert!(chain.contains("rename into place"), "{chain}");
    assert_eq!(m.state(), before);
    backend.fail(false);
    m.remove_container("fakeID").unwrap();
    assert_eq!(m.state().default_cpu_set(), &set("0-7"));
}

fn pod_named(containers: &[&str], init: &[&str]) -> Pod {
    Pod {
        uid: "fakePodUID".into(),
        name: "fakePodName".into(),
        containers: containers.iter().map(|c| Container::new(*c)).collect(),
        init_containers: init.iter().map(|c| Container::new(*c)).collect(),
        ..Pod::default()
    }
}

fn status(name: &str, state: ContainerState) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        container_id: "docker://fakeContainerID".into(),
        state,
    }
}

/// One `TestReconcileState` row.
struct ReconcileRow {
    description: &'static str,
    pod: Pod,
    status: Option<PodStatus>,
    update_err: Option<&'static str>,
    state: CpuState,
    want_state: CpuState,
    want_success: &'static str,
    want_failure: &'static str,
}

/// Upstream `TestReconcileState`, on its 8-CPU, 2-socket machine with a static policy and
/// nothing reserved. The two "last update state" rows, which preset the manager's private
/// last-update state, are in `reconcile_state_last_update`.
#[tokio::test]
async fn reconcile_state() {
    let running = ContainerState::Running;
    let app_status = |name: &str, state| PodStatus {
        container_statuses: vec![status(name, state)],
        ..PodStatus::default()
    };
    let rows = [
        ReconcileRow {
            description: "cpu manager reconcile - no error",
            pod: pod_named(&["fakeContainerName"], &[]),
            status: Some(app_status("fakeContainerName", running)),
            update_err: None,
            state: state("3-7", &[("fakePodUID", "fakeContainerName", "1-2")]),
            want_state: state("3-7", &[("fakePodUID", "fakeContainerName", "1-2")]),
            want_success: "fakeContainerName",
            want_failure: "",
        },
        ReconcileRow {
            description: "cpu manager reconcile init container - no error",
            pod: pod_named(&[], &["fakeContainerName"]),
            status: Some(PodStatus {
                init_container_statuses: vec![status("fakeContainerName", running)],
                ..PodStatus::default()
            }),
            update_err: None,
            state: state("3-7", &[("fakePodUID", "fakeContainerName", "1-2")]),
            want_state: state("3-7", &[("fakePodUID", "fakeContainerName", "1-2")]),
            want_success: "fakeContainerName",
            want_failure: "",
        },
        ReconcileRow {
            description: "cpu manager reconcile - pod status not found",
            pod: pod_named(&["fakeContainerName"], &[]),
            status: None,
            update_err: None,
            state: state("", &[]),
            want_state: state("", &[]),
            want_success: "",
            want_failure: "",
        },
        ReconcileRow {
            description: "cpu manager reconcile - container state not found",
            pod: pod_named(&["fakeContainerName"], &[]),
            status: Some(app_status("fakeContainerName1", ContainerState::Unknown)),
            update_err: None,
            state: state("", &[]),
            want_state: state("", &[]),
            want_success: "",
            want_failure: "fakeContainerName",
        },
        ReconcileRow {
            description: "cpu manager reconclie - cpuset is empty",
            pod: pod_named(&["fakeContainerName"], &[]),
            status: Some(app_status("fakeContainerName", running)),
            update_err: None,
            state: state("1-7", &[("fakePodUID", "fakeContainerName", "")]),
            want_state: state("1-7", &[("fakePodUID", "fakeContainerName", "")]),
            want_success: "",
            want_failure: "fakeContainerName",
        },
        ReconcileRow {
            description: "cpu manager reconclie - container update error",
            pod: pod_named(&["fakeContainerName"], &[]),
            status: Some(app_status("fakeContainerName", running)),
            update_err: Some("fake container update error"),
            state: state("3-7", &[("fakePodUID", "fakeContainerName", "1-2")]),
            want_state: state("3-7", &[("fakePodUID", "fakeContainerName", "1-2")]),
            want_success: "",
            want_failure: "fakeContainerName",
        },
        ReconcileRow {
            description: "cpu manager reconcile - state has inactive container",
            pod: pod_named(&["fakeContainerName"], &[]),
            status: Some(app_status("fakeContainerName", running)),
            update_err: None,
            state: state(
                "5-7",
                &[
                    ("fakePodUID", "fakeContainerName", "1-2"),
                    ("secondfakePodUID", "secondfakeContainerName", "3-4"),
                ],
            ),
            want_state: state("3-7", &[("fakePodUID", "fakeContainerName", "1-2")]),
            want_success: "fakeContainerName",
            want_failure: "",
        },
    ];
    for row in rows {
        let pods = Arc::new(Pods::default());
        *pods.pods.lock().unwrap() = vec![row.pod.clone()];
        *pods.status.lock().unwrap() = row.status.clone();
        let runtime = Arc::new(Runtime::default());
        *runtime.err.lock().unwrap() = row.update_err.map(str::to_owned);
        let m = manager_with_state(
            reconcile_dual_socket(),
            Box::new(static_policy(reconcile_dual_socket(), 0, "")),
            &row.state,
            pods,
            runtime,
        );
        let report = m.reconcile_once().await;
        let d = row.description;
        assert_eq!(m.state(), row.want_state, "{d}");
        if !row.want_success.is_empty() {
            assert!(
                report
                    .success
                    .iter()
                    .any(|r| r.container_name == row.want_success),
                "{d}: {report:?}"
            );
        }
        if !row.want_failure.is_empty() {
            assert!(
                report
                    .failure
                    .iter()
                    .any(|r| r.container_name == row.want_failure),
                "{d}: {report:?}"
            );
        }
        if row.want_success.is_empty() {
            assert!(report.success.is_empty(), "{d}: {report:?}");
        }
    }
}

/// Upstream `TestReconcileState`'s "last update state is current" / "is not current" rows.
/// Corral's last-update state is private, so it is reached the way the kubelet reaches it:
/// `AddContainer` records the exclusive cpuset a new container starts with (current: no
/// update is pushed), and a shared container whose pool shrank after its last push is not
/// current (the new pool is pushed).
#[tokio::test]
async fn reconcile_state_last_update() {
    let pods = Arc::new(Pods::default());
    let pod = pod_named(&["fakeContainerName"], &[]);
    *pods.pods.lock().unwrap() = vec![pod];
    *pods.status.lock().unwrap() = Some(PodStatus {
        container_statuses: vec![status("fakeContainerName", ContainerState::Running)],
        ..PodStatus::default()
    });
    let runtime = Arc::new(Runtime::default());
    let st = state("5-7", &[("fakePodUID", "fakeContainerName", "1-2")]);
    let m = manager_with_state(
        reconcile_dual_socket(),
        Box::new(static_policy(reconcile_dual_socket(), 0, "")),
        &st,
        pods.clone(),
        runtime.clone(),
    );
    m.add_container("fakePodUID", "fakeContainerName", "fakeContainerID");
    let report = m.reconcile_once().await;
    assert_eq!(report.success.len(), 1);
    assert!(runtime.updates.lock().unwrap().is_empty());
    assert_eq!(m.state(), st);

    // Not current: a shared container was pushed the pool 0-7, then the pool shrank.
    let runtime = Arc::new(Runtime::default());
    let m = manager_with_state(
        reconcile_dual_socket(),
        Box::new(static_policy(reconcile_dual_socket(), 0, "")),
        &state("0-7", &[]),
        pods.clone(),
        runtime.clone(),
    );
    let report = m.reconcile_once().await;
    assert_eq!(report.success[0].container_name, "fakeContainerName");
    let guaranteed = make_pod("other", "c", 2000, 2000);
    pods.pods.lock().unwrap().push(guaranteed.clone());
    m.allocate(
        &guaranteed,
        &guaranteed.containers[0],
        TopologyHint::default(),
    )
    .unwrap();
    m.reconcile_once().await;
    let updates = runtime.updates.lock().unwrap().clone();
    assert_eq!(updates[0], ("fakeContainerID".into(), "0-7".into()));
    let shared = m.state().default_cpu_set().to_string();
    assert_eq!(updates[1].1, shared);
    assert_eq!(
        updates.iter().filter(|u| u.0 == "fakeContainerID").count(),
        2
    );
}

/// Upstream `TestCPUManagerAddWithResvList`: CPU 0 reserved explicitly on the 4-CPU machine.
#[test]
fn cpu_manager_add_with_resv_list() {
    let pod = make_pod("fakePod", "fakeContainer", 2000, 2000);
    let pods = Arc::new(Pods::default());
    *pods.pods.lock().unwrap() = vec![pod.clone()];
    let m = manager_with_state(
        single_socket_four_cores_no_ht(),
        Box::new(static_policy(single_socket_four_cores_no_ht(), 1, "0")),
        &state("0-3", &[]),
        pods,
        Arc::new(Runtime::default()),
    );
    m.allocate(&pod, &pod.containers[0], TopologyHint::default())
        .unwrap();
    m.add_container("fakePod", "fakeContainer", "fakeID");
    assert_eq!(m.state().default_cpu_set(), &set("0,3"));
}

/// Upstream `TestCPUManagerHandlePolicyOptions`: the none policy refuses options.
#[test]
fn cpu_manager_handle_policy_options() {
    let config = CpuManagerConfig {
        policy: "none".into(),
        policy_options: BTreeMap::from([("full-pcpus-only".into(), "true".into())]),
        ..CpuManagerConfig::default()
    };
    let topology = single_socket_four_cores_no_ht().topology().clone();
    let err = error_chain(&CpuManager::new(&config, &topology).unwrap_err());
    assert!(err.contains("received unsupported options"), "{err}");
}

/// Upstream `TestCPUManagerGetAllocatableCPUs`: none → nothing, static with CPU 0
/// reserved → 1-3 (unchanged by an allocation).
#[test]
fn cpu_manager_get_allocatable_cpus() {
    let cases: [(&str, Box<dyn corral_cpumgr::Policy>, &str); 2] = [
        (
            "None Policy",
            Box::new(NonePolicy::new(&BTreeMap::new()).unwrap()),
            "",
        ),
        (
            "Static Policy",
            Box::new(static_policy(single_socket_four_cores_no_ht(), 1, "0")),
            "1-3",
        ),
    ];
    for (description, policy, want) in cases {
        let pod = make_pod("fakePod", "fakeContainer", 2000, 2000);
        let m = manager_with_state(
            single_socket_four_cores_no_ht(),
            policy,
            &state("0-3", &[]),
            Arc::new(Pods::default()),
            Arc::new(Runtime::default()),
        );
        let _ = m.allocate(&pod, &pod.containers[0], TopologyHint::default());
        assert_eq!(m.allocatable_cpus(), set(want), "{description}");
    }
}
