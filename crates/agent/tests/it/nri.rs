//! `corral run --nri` against corral's NRI runtime end (what containerd does) on a real
//! unix socket: registration, Configure, Synchronize, Guaranteed and Burstable containers,
//! shared-pool updates, release, a rejected container, and a SIGKILLed agent that comes
//! back and keeps a running container's CPUs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_proto::nri::NriError;
use corral_proto::nri::api::{self, Event, EventMask};
use corral_proto::nri::runtime::{IgnoreUpdates, PluginConnection};
use corral_proto::podresources::v1 as pr;
use corral_proto::tonic;
use corral_topology::CpuSet;
use tokio::net::UnixListener;

use crate::support::{FakeServer, Reaped, STATIC_SINGLE_NUMA, WAIT, corral_run, log_file};

/// A temp dir, the agent's root in it, and the runtime's NRI socket there, listening.
pub(crate) fn runtime_socket() -> (tempfile::TempDir, PathBuf, PathBuf, UnixListener) {
    let dir = tempfile::tempdir().unwrap();
    let (root, socket) = (dir.path().join("root"), dir.path().join("nri.sock"));
    let listener = UnixListener::bind(&socket).unwrap();
    (dir, root, socket, listener)
}

fn start(root: &Path, socket: &Path) -> Reaped {
    start_with(root, socket, &[])
}

pub(crate) fn start_with(root: &Path, socket: &Path, more: &[&str]) -> Reaped {
    let mut flags = STATIC_SINGLE_NUMA.to_vec();
    let socket = socket.to_str().unwrap();
    flags.extend(["--nri", "--nri-socket", socket, "--nri-plugin-index", "42"]);
    flags.extend(more);
    Reaped(corral_run(
        root,
        &flags,
        log_file(&root.with_extension("log")),
    ))
}

/// Accepts corral's connection, waits for its registration and configures it as a v0.8
/// runtime (containerd 2.0) does: one that names no NRI release and refuses a subscription
/// to any event past v0.8's.
pub(crate) async fn connect(listener: &UnixListener) -> PluginConnection {
    connect_as(listener, "", EventMask::V0_8).await.0
}

/// [`connect`] as a runtime that names its NRI release `nri_version` (empty: none) and
/// knows the events `knows`; answers the events corral subscribed to too.
async fn connect_as(
    listener: &UnixListener,
    nri_version: &str,
    knows: EventMask,
) -> (PluginConnection, EventMask) {
    let updates = Arc::new(IgnoreUpdates);
    let mut conn = PluginConnection::next(listener, updates, WAIT)
        .await
        .unwrap();
    let registered = conn.registration(WAIT).await.unwrap();
    assert_eq!(
        (
            registered.plugin_name.as_str(),
            registered.plugin_idx.as_str()
        ),
        ("corral", "42")
    );
    let configure = api::ConfigureRequest {
        runtime_name: "corral-test-runtime".into(),
        // Milliseconds the agent's own calls to this runtime may take (the default is 2 s):
        // longer than any answer takes on a busy machine.
        request_timeout: 60_000,
        nri_version: nri_version.into(),
        ..Default::default()
    };
    let mask = conn.configure(&configure, knows).await.unwrap();
    for event in [
        Event::CreateContainer,
        Event::StopContainer,
        Event::RemovePodSandbox,
    ] {
        assert!(mask.contains(event), "{event:?} not subscribed");
    }
    // v0.10's pod resize only from a runtime that knows it.
    assert_eq!(
        mask.contains(Event::UpdatePodSandbox),
        knows.contains(Event::UpdatePodSandbox)
    );
    (conn, mask)
}

pub(crate) fn pod(uid: &str, qos_dir: &str) -> api::PodSandbox {
    let cgroup_parent = format!("/kubepods{qos_dir}/pod{uid}");
    let linux = api::LinuxPodSandbox {
        cgroup_parent,
        ..Default::default()
    };
    let (id, name, namespace) = (format!("sandbox-{uid}"), uid.into(), "default".into());
    api::PodSandbox {
        id,
        name,
        uid: uid.into(),
        namespace,
        linux: Some(linux),
        ..Default::default()
    }
}

/// A container as the kubelet creates it: `cpu.shares` from `request_milli`, CFS quota from
/// `limit_milli` (0: none), a 64 MiB memory limit.
pub(crate) fn container(
    pod: &api::PodSandbox,
    id: &str,
    request_milli: u64,
    limit_milli: u64,
) -> api::Container {
    let cpu = api::LinuxCpu {
        shares: Some(api::OptionalUInt64 {
            value: (request_milli * 1024 / 1000).max(2),
        }),
        quota: (limit_milli > 0).then(|| api::OptionalInt64 {
            value: (limit_milli * 100) as i64,
        }),
        period: Some(api::OptionalUInt64 { value: 100_000 }),
        ..Default::default()
    };
    let memory = api::LinuxMemory {
        limit: Some(api::OptionalInt64 { value: 64 << 20 }),
        ..Default::default()
    };
    api::Container {
        id: id.into(),
        pod_sandbox_id: pod.id.clone(),
        name: format!("name-{id}"),
        state: api::ContainerState::ContainerCreated as i32,
        linux: Some(api::LinuxContainer {
            resources: Some(api::LinuxResources {
                cpu: Some(cpu),
                memory: Some(memory),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(crate) async fn create(
    conn: &PluginConnection,
    pod: &api::PodSandbox,
    container: &api::Container,
) -> Result<api::CreateContainerResponse, NriError> {
    let request = api::CreateContainerRequest {
        pod: Some(pod.clone()),
        container: Some(container.clone()),
    };
    conn.call("CreateContainer", &request).await
}

/// A pod-level event.
async fn state_change(conn: &PluginConnection, event: Event, pod: api::PodSandbox) {
    let event = api::StateChangeEvent {
        event: event as i32,
        pod: Some(pod),
        container: None,
    };
    let _: api::Empty = conn.call("StateChange", &event).await.unwrap();
}

pub(crate) fn adjusted_cpus(response: &api::CreateContainerResponse) -> CpuSet {
    let adjust = response.adjust.as_ref().expect("an adjustment");
    let resources = adjust.linux.as_ref().unwrap().resources.as_ref().unwrap();
    resources.cpu.as_ref().unwrap().cpus.parse().unwrap()
}

/// The CFS quota the adjustment sets (`None`: left alone).
fn adjusted_quota(response: &api::CreateContainerResponse) -> Option<i64> {
    let adjust = response.adjust.as_ref().expect("an adjustment");
    let resources = adjust.linux.as_ref()?.resources.as_ref()?;
    Some(resources.cpu.as_ref()?.quota.as_ref()?.value)
}

fn updated(updates: &[api::ContainerUpdate], id: &str) -> Option<CpuSet> {
    let update = updates.iter().find(|u| u.container_id == id)?;
    let resources = update.linux.as_ref()?.resources.as_ref()?;
    Some(resources.cpu.as_ref()?.cpus.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_get_exclusive_or_shared_cpus_and_survive_a_sigkill() {
    let (_dir, root, socket, listener) = runtime_socket();
    let mut agent = start(&root, &socket);
    let conn = connect(&listener).await;
    let synced: api::SynchronizeResponse = conn
        .call("Synchronize", &api::SynchronizeRequest::default())
        .await
        .unwrap();
    assert!(synced.update.is_empty());

    // A Burstable container first: the whole shared pool, all 16 CPUs of the machine (the
    // pool holds the reserved CPU 0 too).
    let burstable = pod("b-uid", "/burstable");
    let shared = container(&burstable, "shared-1", 500, 0);
    let created = create(&conn, &burstable, &shared).await.unwrap();
    let pool = adjusted_cpus(&created);
    assert_eq!(pool.to_string(), "0-15");
    assert_eq!(adjusted_quota(&created), None);

    // A Guaranteed 2-CPU container: two exclusive CPUs outside the reserved set, and the
    // Burstable container is told the smaller pool.
    let guaranteed = pod("g-uid", "");
    let pinned = container(&guaranteed, "pinned-1", 2000, 2000);
    let created = create(&conn, &guaranteed, &pinned).await.unwrap();
    let exclusive = adjusted_cpus(&created);
    assert_eq!(exclusive.len(), 2, "{exclusive}");
    // Exclusive CPUs run without a CFS quota (DisableCPUQuotaWithExclusiveCPUs, v1.36).
    assert_eq!(adjusted_quota(&created), Some(-1));
    assert!(!exclusive.contains(0), "{exclusive}");
    let smaller = updated(&created.update, "shared-1").expect("the shared container updated");
    assert_eq!(smaller, pool.difference(&exclusive));

    // More than one NUMA node holds: refused with the topology manager's reason.
    let greedy = pod("x-uid", "");
    let err = create(
        &conn,
        &greedy,
        &container(&greedy, "greedy", 12_000, 12_000),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("NRI call CreateContainer failed"),
        "{err}"
    );
    match err {
        NriError::Status { source, .. } => {
            assert!(
                source.message.starts_with("TopologyAffinityError"),
                "{}",
                source.message
            )
        }
        other => panic!("{other:?}"),
    }

    // SIGKILL with both containers running; the agent comes back, the runtime
    // synchronizes, and the Guaranteed container keeps its CPUs.
    agent.0.kill().unwrap();
    agent.0.wait().unwrap();
    drop(conn);
    let _agent = start(&root, &socket);
    let conn = connect(&listener).await;
    let mut running = [shared.clone(), pinned.clone()];
    for c in &mut running {
        c.state = api::ContainerState::ContainerRunning as i32;
    }
    let sync = api::SynchronizeRequest {
        pods: vec![burstable.clone(), guaranteed.clone()],
        containers: running.to_vec(),
        more: false,
    };
    let synced: api::SynchronizeResponse = conn.call("Synchronize", &sync).await.unwrap();
    assert_eq!(updated(&synced.update, "pinned-1"), Some(exclusive.clone()));
    assert_eq!(updated(&synced.update, "shared-1"), Some(smaller.clone()));

    // The Guaranteed container stops: its CPUs stay its own while its pod runs (as the
    // kubelet's: a restart gets them back), so the pool does not change.
    let stop = api::StopContainerRequest {
        pod: Some(guaranteed.clone()),
        container: Some(pinned.clone()),
    };
    let stopped: api::StopContainerResponse = conn.call("StopContainer", &stop).await.unwrap();
    assert_eq!(updated(&stopped.update, "shared-1"), None);
    let state = std::fs::read_to_string(root.join("cpu_manager_state")).unwrap();
    assert!(state.contains("g-uid"), "{state}");
    // A pod that names no cgroup parent is classed by its container's own values.
    let mut bare = pod("bare-uid", "");
    bare.linux = None;
    let created = create(&conn, &bare, &container(&bare, "bare-1", 1000, 1000))
        .await
        .unwrap();
    assert_eq!(adjusted_cpus(&created).len(), 1);
    let stop_bare = api::StopContainerRequest {
        pod: Some(bare.clone()),
        container: Some(container(&bare, "bare-1", 1000, 1000)),
    };
    let _: api::StopContainerResponse = conn.call("StopContainer", &stop_bare).await.unwrap();

    // A pod sandbox that stops gives its containers' exclusive CPUs back.
    let again = pod("a-uid", "");
    let created = create(&conn, &again, &container(&again, "again-1", 2000, 2000))
        .await
        .unwrap();
    assert_eq!(adjusted_cpus(&created).len(), 2);
    state_change(&conn, Event::StopPodSandbox, again).await;
    let state = std::fs::read_to_string(root.join("cpu_manager_state")).unwrap();
    assert!(!state.contains("a-uid"), "{state}");
    state_change(&conn, Event::RemovePodSandbox, guaranteed).await;
    let state = std::fs::read_to_string(root.join("cpu_manager_state")).unwrap();
    assert!(!state.contains("g-uid"), "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_runtime_is_redialed() {
    let (_dir, root, socket, listener) = runtime_socket();
    let _agent = start(&root, &socket);
    let conn = connect(&listener).await;
    conn.close();
    drop(conn);
    // The agent dials again (after its first backoff, 1 s).
    let again = tokio::time::timeout(WAIT, connect(&listener)).await;
    assert!(again.is_ok(), "no reconnection");
}

/// An UpdateContainer event: `container` resized to `request_milli`/`limit_milli` CPU.
async fn resize(
    conn: &PluginConnection,
    pod: &api::PodSandbox,
    container: &api::Container,
    request_milli: u64,
    limit_milli: u64,
) -> Result<api::UpdateContainerResponse, NriError> {
    let resized = self::container(pod, &container.id, request_milli, limit_milli);
    let mut resources = resized.linux.unwrap().resources.unwrap();
    // The kubelet's own view of the cpuset (its CPU manager is `none` on a stock node).
    resources.cpu.as_mut().unwrap().cpus = "0-15".into();
    let request = api::UpdateContainerRequest {
        pod: Some(pod.clone()),
        container: Some(container.clone()),
        linux_resources: Some(resources),
    };
    conn.call("UpdateContainer", &request).await
}

/// In-place resize (the kubelet's UpdateContainerResources): a Guaranteed pod whose CPUs
/// corral pinned is refused as v1.36 refuses it; a shared-pool container is resized and
/// keeps corral's pool, not the kubelet's cpuset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resizes_are_refused_for_pinned_pods_and_keep_the_pool_for_others() {
    let (_dir, root, socket, listener) = runtime_socket();
    let _agent = start(&root, &socket);
    let conn = connect(&listener).await;
    let _: api::SynchronizeResponse = conn
        .call("Synchronize", &api::SynchronizeRequest::default())
        .await
        .unwrap();
    let guaranteed = pod("g-uid", "");
    let pinned = container(&guaranteed, "pinned-1", 2000, 2000);
    let exclusive = adjusted_cpus(&create(&conn, &guaranteed, &pinned).await.unwrap());
    let burstable = pod("b-uid", "/burstable");
    let shared = container(&burstable, "shared-1", 500, 0);
    create(&conn, &burstable, &shared).await.unwrap();

    let err = resize(&conn, &guaranteed, &pinned, 3000, 3000)
        .await
        .unwrap_err();
    let NriError::Status { source, .. } = err else {
        panic!("{err:?}");
    };
    assert_eq!(
        source.message,
        "Infeasible: Resize is infeasible for Guaranteed Pods alongside CPU Manager static policy"
    );

    let resized = resize(&conn, &burstable, &shared, 700, 0).await.unwrap();
    let pool = updated(&resized.update, "shared-1").expect("the cpuset kept");
    assert!(!pool.intersects(&exclusive), "{pool} {exclusive}");
    assert_eq!(pool.len(), 16 - exclusive.len());
}

/// The kubelet's podresources API, as far as NRI mode reads it: pod `gpu-pod`'s container
/// holds one `example.com/gpu` on NUMA node 1.
#[derive(Clone)]
pub(crate) struct FakeKubelet;

#[corral_proto::tonic::async_trait]
impl corral_proto::podresources::v1::pod_resources_lister_server::PodResourcesLister
    for FakeKubelet
{
    async fn list(
        &self,
        _: tonic::Request<pr::ListPodResourcesRequest>,
    ) -> Result<tonic::Response<pr::ListPodResourcesResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("not used"))
    }

    async fn get_allocatable_resources(
        &self,
        _: tonic::Request<pr::AllocatableResourcesRequest>,
    ) -> Result<tonic::Response<pr::AllocatableResourcesResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("not used"))
    }

    async fn get(
        &self,
        request: tonic::Request<pr::GetPodResourcesRequest>,
    ) -> Result<tonic::Response<pr::GetPodResourcesResponse>, tonic::Status> {
        let request = request.into_inner();
        if request.pod_name != "gpu-pod" {
            return Err(tonic::Status::not_found("pod not found"));
        }
        let devices = pr::ContainerDevices {
            resource_name: "example.com/gpu".into(),
            device_ids: vec!["gpu-3".into()],
            topology: Some(pr::TopologyInfo {
                nodes: vec![pr::NumaNode { id: 1 }],
            }),
        };
        let container = pr::ContainerResources {
            name: "name-aligned".into(),
            devices: vec![devices],
            ..Default::default()
        };
        let pod = pr::PodResources {
            name: request.pod_name,
            namespace: request.pod_namespace,
            containers: vec![container],
            ..Default::default()
        };
        Ok(tonic::Response::new(pr::GetPodResourcesResponse {
            pod_resources: Some(pod),
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_cpus_align_with_the_devices_the_kubelet_gave() {
    use corral_proto::podresources::v1::pod_resources_lister_server::PodResourcesListerServer;

    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet.sock");
    let router =
        tonic::transport::Server::builder().add_service(PodResourcesListerServer::new(FakeKubelet));
    let server = FakeServer::start(&kubelet, router);
    let root = dir.path().join("root");
    let socket = dir.path().join("nri.sock");
    let nri = UnixListener::bind(&socket).unwrap();
    let kubelet_flag = ["--kubelet-pod-resources-socket", kubelet.to_str().unwrap()];
    let _agent = start_with(&root, &socket, &kubelet_flag);
    let conn = connect(&nri).await;

    // Without devices, the first NUMA node's CPUs (0-7) are taken first.
    let plain = pod("plain-uid", "");
    let created = create(&conn, &plain, &container(&plain, "plain", 2000, 2000))
        .await
        .unwrap();
    let first = adjusted_cpus(&created);
    assert!(first.iter().all(|cpu| cpu < 8), "{first}");
    // The kubelet put gpu-pod's GPU on NUMA node 1 (CPUs 8-15): its CPUs follow.
    let mut gpu = pod("gpu-uid", "");
    gpu.name = "gpu-pod".into();
    let created = create(&conn, &gpu, &container(&gpu, "aligned", 2000, 2000))
        .await
        .unwrap();
    let aligned = adjusted_cpus(&created);
    assert!(
        aligned.iter().all(|cpu| (8..16).contains(&cpu)),
        "{aligned}"
    );
    server.stop().await;
}

/// With the static memory policy (`examples/config/memory.yaml`), a Guaranteed container's
/// cpuset answer also pins its memory: `cpuset.mems` is the NUMA node of its CPUs. Huge page
/// limits of 0 (the kubelet sets one per page size) ask for nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guaranteed_containers_memory_nodes_are_its_cpus_node() {
    let (_dir, root, socket, listener) = runtime_socket();
    let config = crate::support::workspace().join("examples/config/memory.yaml");
    let _agent = start_with(&root, &socket, &["-c", config.to_str().unwrap()]);
    let conn = connect(&listener).await;
    let _: api::SynchronizeResponse = conn
        .call("Synchronize", &api::SynchronizeRequest::default())
        .await
        .unwrap();
    let guaranteed = pod("m-uid", "");
    let mut pinned = container(&guaranteed, "pinned-m", 2000, 2000);
    let resources = pinned.linux.as_mut().unwrap().resources.as_mut().unwrap();
    resources.hugepage_limits = vec![api::HugepageLimit {
        page_size: "2MB".into(),
        limit: 0,
    }];
    let created = create(&conn, &guaranteed, &pinned).await.unwrap();
    let cpus = adjusted_cpus(&created);
    let adjust = created.adjust.as_ref().unwrap();
    let cpu = adjust.linux.as_ref().unwrap().resources.as_ref().unwrap();
    let mems = &cpu.cpu.as_ref().unwrap().mems;
    let node = cpus.iter().next().unwrap() / 8;
    assert!(cpus.iter().all(|c| c / 8 == node), "{cpus}");
    assert_eq!(mems, &node.to_string());
    // A Burstable container's memory is not pinned.
    let burstable = pod("mb-uid", "/burstable");
    let shared = container(&burstable, "shared-m", 500, 0);
    let created = create(&conn, &burstable, &shared).await.unwrap();
    let adjust = created.adjust.as_ref().unwrap();
    let cpu = adjust.linux.as_ref().unwrap().resources.as_ref().unwrap();
    assert_eq!(cpu.cpu.as_ref().unwrap().mems, "");
}

/// NRI v0.10 through a v0.12 runtime: corral subscribes to `UpdatePodSandbox` and
/// `ValidateContainerAdjustment`; a pinned pod's resize is refused as a container's is;
/// another plugin's cpuset for the pinned container (as its adjustment, or as an update
/// while another container is created) is rejected with the reason the runtime fails the
/// creation with, and a non-pinned container's is accepted. Turned off
/// (`--nri-guard-pinned-cpusets false`), corral does not validate and accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_12_runtime_gets_pod_resizes_followed_and_pinned_cpusets_guarded() {
    let (_dir, root, socket, listener) = runtime_socket();
    let agent = start(&root, &socket);
    let (conn, events) = connect_as(&listener, "v0.12.2", EventMask::V0_10).await;
    assert!(events.contains(Event::ValidateContainerAdjustment));
    let _: api::SynchronizeResponse = conn
        .call("Synchronize", &api::SynchronizeRequest::default())
        .await
        .unwrap();
    let guaranteed = pod("g-uid", "");
    let pinned = container(&guaranteed, "pinned-1", 2000, 2000);
    let granted = adjusted_cpus(&create(&conn, &guaranteed, &pinned).await.unwrap());
    let burstable = pod("b-uid", "/burstable");
    let shared = container(&burstable, "shared-1", 500, 0);
    create(&conn, &burstable, &shared).await.unwrap();

    // The kubelet resizes the pinned pod: refused.
    let pod_resize = |pod: &api::PodSandbox, c: &api::Container, milli: u64| {
        let before = c.linux.as_ref().and_then(|l| l.resources.clone());
        let after = container(pod, &c.id, milli, milli).linux.unwrap().resources;
        let mut pod = pod.clone();
        pod.linux.as_mut().unwrap().pod_resources = before;
        api::UpdatePodSandboxRequest {
            pod: Some(pod),
            overhead_linux_resources: None,
            linux_resources: after,
        }
    };
    let refused: Result<api::UpdatePodSandboxResponse, _> = conn
        .call("UpdatePodSandbox", &pod_resize(&guaranteed, &pinned, 3000))
        .await;
    match refused {
        Err(NriError::Status { source, .. }) => assert_eq!(
            source.message,
            "Infeasible: Resize is infeasible for Guaranteed Pods alongside CPU Manager static policy"
        ),
        other => panic!("{other:?}"),
    }
    let _: api::UpdatePodSandboxResponse = conn
        .call("UpdatePodSandbox", &pod_resize(&burstable, &shared, 700))
        .await
        .unwrap();

    // Another plugin ("60-tuner") moves the pinned container to CPUs 8-15.
    let validation = |c: &api::Container, cpus: &str, update: Option<(&str, &str)>| {
        let set_cpus = |cpus: &str| {
            Some(api::LinuxResources {
                cpu: Some(api::LinuxCpu {
                    cpus: cpus.into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let owned_by_tuner = || api::FieldOwners {
            simple: [(api::Field::CpuSetCpUs as i32, "60-tuner".to_owned())].into(),
            compound: Default::default(),
        };
        let mut owners = std::collections::HashMap::new();
        owners.insert(c.id.clone(), owned_by_tuner());
        let update: Vec<api::ContainerUpdate> = update
            .map(|(id, cpus)| {
                owners.insert(id.to_owned(), owned_by_tuner());
                api::ContainerUpdate {
                    container_id: id.into(),
                    linux: Some(api::LinuxContainerUpdate {
                        resources: set_cpus(cpus),
                    }),
                    ignore_failure: false,
                }
            })
            .into_iter()
            .collect();
        api::ValidateContainerAdjustmentRequest {
            container: Some(c.clone()),
            adjust: Some(api::ContainerAdjustment {
                linux: Some(api::LinuxContainerAdjustment {
                    resources: set_cpus(cpus),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            update,
            owners: Some(api::OwningPlugins { owners }),
            ..Default::default()
        }
    };
    let validate = async |conn: &PluginConnection, request| {
        let answer: api::ValidateContainerAdjustmentResponse = conn
            .call("ValidateContainerAdjustment", &request)
            .await
            .unwrap();
        answer
    };
    let answer = validate(&conn, validation(&pinned, "8-15", None)).await;
    assert!(answer.reject);
    assert_eq!(
        answer.reason,
        format!(
            "corral pinned container name-pinned-1 of pod default/g-uid to cpuset.cpus {granted}; \
             plugin 60-tuner sets it to \"8-15\" (nriGuardPinnedCpusets)"
        )
    );
    let answer = validate(
        &conn,
        validation(&shared, "8-15", Some(("pinned-1", "0-15"))),
    )
    .await;
    assert!(answer.reject, "the update of the pinned container");
    let answer = validate(&conn, validation(&shared, "8-15", None)).await;
    assert_eq!(answer, api::ValidateContainerAdjustmentResponse::default());
    drop((conn, agent));

    // The guard off: not subscribed, and accepted if asked anyway.
    let (_dir, root, socket, listener) = runtime_socket();
    let _agent = start_with(&root, &socket, &["--nri-guard-pinned-cpusets", "false"]);
    let (conn, events) = connect_as(&listener, "v0.12.2", EventMask::V0_10).await;
    assert!(!events.contains(Event::ValidateContainerAdjustment));
    let _: api::SynchronizeResponse = conn
        .call("Synchronize", &api::SynchronizeRequest::default())
        .await
        .unwrap();
    create(&conn, &guaranteed, &pinned).await.unwrap();
    let answer = validate(&conn, validation(&pinned, "8-15", None)).await;
    assert_eq!(answer, api::ValidateContainerAdjustmentResponse::default());
}

/// The address the agent logged it serves metrics and probes on.
fn served_addr(root: &Path) -> Option<std::net::SocketAddr> {
    let log = std::fs::read_to_string(root.with_extension("log")).unwrap_or_default();
    let line = log.lines().find(|l| l.contains("serving metrics"))?;
    let addr = line.split("addr=").nth(1)?.split_whitespace().next()?;
    Some(addr.parse().expect("a socket address"))
}

/// `path`'s status line and body once `done` accepts them (polled; the agent is in
/// another process and the clock is its own).
async fn probe_until(
    root: &Path,
    path: &str,
    done: impl Fn(&str, &str) -> bool,
) -> (String, String) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(addr) = served_addr(root) {
            let path = path.to_owned();
            let got =
                tokio::task::spawn_blocking(move || crate::metrics_endpoint::get(addr, &path))
                    .await
                    .unwrap();
            if let Ok((status, _, body)) = got
                && done(&status, &body)
            {
                return (status, body);
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} never answered as expected: {}",
            std::fs::read_to_string(root.with_extension("log")).unwrap_or_default()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The probes of `corral run --nri`: `/readyz` waits for the runtime's first Synchronize;
/// `/healthz` fails while corral is not synchronized past `nriDisconnectedGracePeriod` —
/// before the runtime ever answers, and again after it goes away — and is ok once it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_fails_while_nri_is_disconnected_and_readyz_waits_for_synchronize() {
    const OK: &str = "HTTP/1.1 200 OK";
    const UNAVAILABLE: &str = "HTTP/1.1 503 Service Unavailable";
    let (_dir, root, socket, listener) = runtime_socket();
    let _agent = start_with(
        &root,
        &socket,
        &[
            "--metrics-addr=127.0.0.1:0",
            "--nri-disconnected-grace-period=1s",
        ],
    );
    // The runtime does not answer yet (the agent's dial waits in the listener's backlog).
    let (_, body) = probe_until(&root, "/readyz", |s, b| {
        s == UNAVAILABLE && b != "restoring state\n"
    })
    .await;
    assert!(
        body == "NRI: waiting for the runtime's first Synchronize\n"
            || body.starts_with("NRI: not synchronized"),
        "{body}"
    );
    let (_, body) = probe_until(&root, "/healthz", |s, _| s == UNAVAILABLE).await;
    assert!(
        body.starts_with("NRI: not synchronized with the runtime for ")
            && body.contains("since corral started"),
        "{body}"
    );

    let conn = connect(&listener).await;
    let sync = api::SynchronizeRequest::default();
    let _: api::SynchronizeResponse = conn.call("Synchronize", &sync).await.unwrap();
    probe_until(&root, "/healthz", |s, b| s == OK && b == "ok").await;
    probe_until(&root, "/readyz", |s, b| s == OK && b == "ok").await;

    // The runtime goes away and does not come back (its socket is closed).
    conn.close();
    drop(conn);
    drop(listener);
    let (_, body) = probe_until(&root, "/healthz", |s, _| s == UNAVAILABLE).await;
    assert!(body.contains("since corral lost"), "{body}");
}
