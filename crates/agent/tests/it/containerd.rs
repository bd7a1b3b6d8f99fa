//! `corral run --nri` with a real containerd and runc: pods driven through CRI as a kubelet
//! would, and each container's real cgroup checked — a Guaranteed container's `cpuset.cpus`
//! is its exclusive CPUs, a Burstable one's the shared pool, updated when exclusive CPUs
//! come and go, and both survive an agent SIGKILL and restart. The machine's own topology
//! (`--host-root /`) decides, since the cgroups are real. Every scenario runs on each
//! containerd release corral supports, 1.7 and 2.1: a module per scenario, a test per
//! release (`…::containerd_1_7`, `…::containerd_2_1`). A release whose bundle the machine
//! lacks is skipped, saying why (see `real_containerd.rs`).

use std::path::Path;
use std::time::Duration;

use corral_proto::cri::v1 as cri;

use crate::real_containerd::{
    Bundle, Containerd, Version, cgroup_cpus, container_config, sandbox_config,
};
use crate::support::{Reaped, WAIT, corral, log_file};

/// `version`'s bundle and this machine's CPUs, or `None` (the reason printed) where the
/// test cannot run.
pub(crate) fn runnable(version: Version) -> Option<(Bundle, corral_topology::CpuSet)> {
    let bundle = Containerd::bundle(version)
        .map_err(|why| println!("skipped: {why}"))
        .ok()?;
    let topology = corral_topology::sysfs::discover(Path::new("/")).unwrap();
    let cpus = topology.all_cpus().clone();
    if cpus.len() < 2 {
        println!("skipped: one CPU; an exclusive CPU needs two");
        return None;
    }
    Some((bundle, cpus))
}

/// `corral run` on this machine's topology, static policy, CPU 0 reserved, with `flags`.
fn agent_with(root: &Path, flags: &[&std::ffi::OsStr]) -> Reaped {
    let child = corral()
        .arg("run")
        .arg("--root")
        .arg(root)
        .args(["--host-root", "/", "--cpu-manager-policy", "static"])
        .args(["--reserved-system-cpus", "0"])
        .args(flags)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log_file(&root.with_extension("log")))
        .spawn()
        .expect("start corral run");
    Reaped(child)
}

/// `corral run --nri` dialing `nri_socket`.
fn agent(root: &Path, nri_socket: &Path) -> Reaped {
    agent_with(
        root,
        &[
            "--nri".as_ref(),
            "--nri-socket".as_ref(),
            nri_socket.as_os_str(),
        ],
    )
}

/// Runs a sandbox and one started container in it; the container id.
pub(crate) async fn run_pod(
    containerd: &mut Containerd,
    uid: &str,
    qos_dir: &str,
    container: cri::ContainerConfig,
) -> (String, String) {
    let mut client = containerd.cri().await;
    let config = sandbox_config(uid, uid, qos_dir, &containerd.log_dir());
    containerd
        .pod_cgroups
        .push(format!("kubepods{qos_dir}/pod{uid}"));
    let sandbox = client
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: String::new(),
        })
        .await
        .unwrap_or_else(|s| panic!("RunPodSandbox: {s}\n{}", containerd.log_tail()))
        .into_inner()
        .pod_sandbox_id;
    let created = client
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox.clone(),
            config: Some(container),
            sandbox_config: Some(config),
        })
        .await
        .unwrap_or_else(|s| panic!("CreateContainer: {s}\n{}", containerd.log_tail()))
        .into_inner()
        .container_id;
    client
        .start_container(cri::StartContainerRequest {
            container_id: created.clone(),
        })
        .await
        .unwrap_or_else(|s| panic!("StartContainer: {s}\n{}", containerd.log_tail()));
    (sandbox, created)
}

/// Stops and removes the sandboxes (and so their containers), as the kubelet does.
pub(crate) async fn remove_pods(containerd: &Containerd, sandboxes: &[String]) {
    let mut client = containerd.cri().await;
    for id in sandboxes {
        let stop = cri::StopPodSandboxRequest {
            pod_sandbox_id: id.clone(),
        };
        client.stop_pod_sandbox(stop).await.unwrap();
        let remove = cri::RemovePodSandboxRequest {
            pod_sandbox_id: id.clone(),
        };
        client.remove_pod_sandbox(remove).await.unwrap();
    }
}

async fn stop_container(containerd: &Containerd, id: &str) {
    let mut client = containerd.cri().await;
    // busybox as PID 1 ignores SIGTERM: no grace period.
    let stop = cri::StopContainerRequest {
        container_id: id.into(),
        timeout: 0,
    };
    client.stop_container(stop).await.unwrap();
}

/// Polls until `parent`/`id`'s cgroup holds `want`.
pub(crate) async fn wait_for_cpus(parent: &str, id: &str, want: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = cgroup_cpus(parent, id);
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{parent}/{id}: {got}, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// For each scenario `async fn name(Version)`, a module `name` with one test per release.
macro_rules! on_each_containerd {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use crate::real_containerd::Version;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn containerd_1_7() {
                super::$scenario(Version::V1_7).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn containerd_2_1() {
                super::$scenario(Version::V2_1).await;
            }
        }
    )*};
}

pub(crate) use on_each_containerd;

on_each_containerd!(
    real_cgroups_follow_corrals_decisions_across_an_agent_sigkill,
    cri_reconcile_pins_real_containers,
);

async fn real_cgroups_follow_corrals_decisions_across_an_agent_sigkill(version: Version) {
    let Some((bundle, cpus)) = runnable(version) else {
        return;
    };
    let all = cpus.to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut containerd = Containerd::start(&bundle, dir.path());
    let root = dir.path().join("corral");
    let mut first = agent(&root, &containerd.nri_socket());
    containerd.wait_for_log_count(r#"\"50-corral\" connected"#, 1);

    let suffix = format!("{}-{}", std::process::id(), version.label());
    let (b_uid, g_uid) = (format!("b{suffix}"), format!("g{suffix}"));
    let (b_parent, g_parent) = (
        format!("/kubepods/burstable/pod{b_uid}"),
        format!("/kubepods/pod{g_uid}"),
    );
    let shared = container_config("shared", 500, 0);
    let (b_sandbox, burstable) = run_pod(&mut containerd, &b_uid, "/burstable", shared).await;
    wait_for_cpus(&b_parent, &burstable, &all).await;

    let pinned = container_config("pinned", 1000, 1000);
    let (g_sandbox, guaranteed) = run_pod(&mut containerd, &g_uid, "", pinned).await;
    let exclusive = cgroup_cpus(&g_parent, &guaranteed);
    let exclusive_set: corral_topology::CpuSet = exclusive.parse().unwrap();
    assert_eq!(exclusive_set.len(), 1, "{exclusive}");
    assert!(
        !exclusive_set.contains(0),
        "the reserved CPU 0 is not exclusive: {exclusive}"
    );
    let pool = cpus.difference(&exclusive_set).to_string();
    wait_for_cpus(&b_parent, &burstable, &pool).await;

    // SIGKILL the agent with both containers running; a new one resynchronizes.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let _second = agent(&root, &containerd.nri_socket());
    // containerd logs this once the plugin is synchronized and the updates it answered
    // with are applied (1.7: `plugin "50-corral" connected`, 2.1: `… connected and
    // synchronized`, once per connection): the cgroups below are what the new agent decided.
    containerd.wait_for_log_count(r#"\"50-corral\" connected"#, 2);
    assert_eq!(cgroup_cpus(&g_parent, &guaranteed), exclusive);
    assert_eq!(cgroup_cpus(&b_parent, &burstable), pool);

    // The Guaranteed container stops: its CPU stays its own while its pod runs (as the
    // kubelet's: a restart gets it back).
    stop_container(&containerd, &guaranteed).await;
    let state = std::fs::read_to_string(root.join("cpu_manager_state")).unwrap();
    assert!(state.contains(&g_uid), "{state}");
    // Its sandbox stops: the CPU goes back, and the reconcile gives the Burstable
    // container the whole pool.
    let mut client = containerd.cri().await;
    let stop = cri::StopPodSandboxRequest {
        pod_sandbox_id: g_sandbox.clone(),
    };
    client.stop_pod_sandbox(stop).await.unwrap();
    wait_for_cpus(&b_parent, &burstable, &all).await;
    remove_pods(&containerd, &[g_sandbox, b_sandbox]).await;
}

/// The admission API's client on `root`'s agent socket.
async fn agent_api(
    root: &Path,
) -> corral_proto::corral::v1::agent_client::AgentClient<corral_proto::tonic::transport::Channel> {
    let socket = root.join("corral/agent.sock");
    let deadline = tokio::time::Instant::now() + WAIT;
    while !socket.exists() {
        assert!(tokio::time::Instant::now() < deadline, "no agent socket");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let channel = corral_proto::uds::connect(&socket, WAIT).await.unwrap();
    corral_proto::corral::v1::agent_client::AgentClient::new(channel)
}

/// Admits a one-container pod through the admission API, as a kubelet does before creating
/// it; the container's cpuset.
async fn admit(root: &Path, uid: &str, cpu_limit: Option<&str>) -> String {
    use corral_proto::corral::v1 as api;
    let resources = match cpu_limit {
        Some(cpus) => serde_json::json!({"limits": {"cpu": cpus, "memory": "64Mi"}}),
        None => serde_json::json!({"requests": {"cpu": "500m", "memory": "64Mi"}}),
    };
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "app", "resources": resources}]},
    });
    let mut client = agent_api(root).await;
    let admitted = client
        .admit(api::AdmitRequest {
            pod_json: serde_json::to_vec(&pod).unwrap(),
            resource_claims_json: Vec::new(),
            resource_slices_json: Vec::new(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        admitted.admitted,
        "{}: {}",
        admitted.reason, admitted.message
    );
    let allocation = admitted.allocation.expect("an allocation");
    allocation.containers[0].cpuset.clone()
}

/// Reports the container's real id once it runs, as the kubelet's `AddContainer`.
async fn report_started(root: &Path, uid: &str, container_id: &str) {
    let started = corral_proto::corral::v1::ContainerStartedRequest {
        pod_uid: uid.into(),
        container_name: "app".into(),
        container_id: container_id.into(),
    };
    agent_api(root)
        .await
        .container_started(started)
        .await
        .unwrap();
}

/// A container config whose cpuset is `cpus`, as the kubelet's `PreCreateContainer` sets it.
fn pinned_config(request_milli: i64, limit_milli: i64, cpus: &str) -> cri::ContainerConfig {
    let mut config = container_config("app", request_milli, limit_milli);
    let linux = config.linux.as_mut().unwrap();
    linux.resources.as_mut().unwrap().cpuset_cpus = cpus.into();
    config
}

async fn cri_reconcile_pins_real_containers(version: Version) {
    let Some((bundle, cpus)) = runnable(version) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut containerd = Containerd::start(&bundle, dir.path());
    let config = dir.path().join("corral.yaml");
    let endpoint = format!("unix://{}", containerd.socket().display());
    let yaml = format!("cpuManagerReconcilePeriod: 100ms\ncontainerRuntimeEndpoint: {endpoint}\n");
    std::fs::write(&config, yaml).unwrap();
    let root = dir.path().join("corral");
    let _agent = agent_with(&root, &["-c".as_ref(), config.as_os_str()]);
    let suffix = format!("{}-{}", std::process::id(), version.label());
    let (b_uid, g_uid) = (format!("rb{suffix}"), format!("rg{suffix}"));
    let (b_parent, g_parent) = (
        format!("/kubepods/burstable/pod{b_uid}"),
        format!("/kubepods/pod{g_uid}"),
    );
    // The kubelet's order: admit, create and start with the cpuset admission gave, report.
    let pool = admit(&root, &b_uid, None).await;
    let b_config = pinned_config(500, 0, &pool);
    let (b_sandbox, burstable) = run_pod(&mut containerd, &b_uid, "/burstable", b_config).await;
    report_started(&root, &b_uid, &burstable).await;
    let exclusive = admit(&root, &g_uid, Some("1")).await;
    let g_config = pinned_config(1000, 1000, &exclusive);
    let (g_sandbox, guaranteed) = run_pod(&mut containerd, &g_uid, "", g_config).await;
    report_started(&root, &g_uid, &guaranteed).await;
    // The pool shrank: reconcile pushes it to the Burstable container through CRI
    // UpdateContainerResources, into its real cgroup.
    let exclusive_set: corral_topology::CpuSet = exclusive.parse().unwrap();
    assert_eq!(exclusive_set.len(), 1, "{exclusive}");
    wait_for_cpus(&g_parent, &guaranteed, &exclusive).await;
    wait_for_cpus(
        &b_parent,
        &burstable,
        &cpus.difference(&exclusive_set).to_string(),
    )
    .await;
    remove_pods(&containerd, &[g_sandbox, b_sandbox]).await;
}
