//! The real `corral` binary end to end: `corral run` on a two-NUMA-node sysfs fixture with a
//! temp root, example pods admitted through the CLI, a rejected pod leaving every checkpoint
//! byte-identical, SIGKILL and restart with every allocation intact, and the podresources
//! API (a Rust client and the Python grpcio client dialing with a raw-path `:authority`)
//! reporting them; finally SIGTERM drains and removes the sockets.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use corral_proto::podresources::v1 as pr;
use corral_proto::podresources::v1::pod_resources_lister_client::PodResourcesListerClient;

use crate::support::{
    self, FakeServer, Reaped, STATIC_SINGLE_NUMA, WAIT, checkpoints, corral_run, log_file,
    python_pod_resources, sigterm, wait_exit, workspace,
};

/// A running `corral run`, killed (SIGKILL) and reaped on drop.
/// A running `corral run` (killed and reaped on drop).
struct Agent {
    child: Reaped,
    root: PathBuf,
}

impl Agent {
    fn start(root: &Path) -> Agent {
        Agent::start_with(root, &[])
    }

    fn start_with(root: &Path, extra: &[&str]) -> Agent {
        let flags = [STATIC_SINGLE_NUMA, &["--demo-devices", "4"], extra].concat();
        let log = log_file(&root.with_extension("log"));
        let child = corral_run(root, &flags, log);
        let mut agent = Agent {
            child: Reaped(child),
            root: root.to_path_buf(),
        };
        let deadline = Instant::now() + WAIT;
        // Ready once `corral status` answers.
        loop {
            if let Some(status) = agent.child.0.try_wait().unwrap() {
                panic!("corral run exited with {status}: {}", agent.log());
            }
            if agent.cli(&["status"]).status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "agent not ready: {}",
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        agent
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.root.with_extension("log")).unwrap_or_default()
    }

    fn cli(&self, args: &[&str]) -> Output {
        support::corral()
            .args(args)
            .arg("--root")
            .arg(&self.root)
            .current_dir(workspace())
            .output()
            .expect("run corral")
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let output = self.cli(args);
        assert!(
            output.status.success(),
            "corral {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }

    fn pod_resources_socket(&self) -> PathBuf {
        self.root.join("pod-resources/kubelet.sock")
    }

    /// SIGTERM, and wait (bounded) for the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        sigterm(&self.child.0);
        wait_exit(&mut self.child.0, WAIT).expect("no exit after SIGTERM")
    }
}

/// container name → (cpuset, exclusive, NUMA affinity, devices) for the pod named `name`.
type Held = (String, bool, String, String);

fn containers(status: &serde_json::Value, name: &str) -> BTreeMap<String, Held> {
    let pods = status.as_array().unwrap();
    let pod = pods
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no pod {name} in {status}"));
    pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                (
                    c["cpuset"].as_str().unwrap().to_owned(),
                    c["exclusiveCpus"].as_bool().unwrap(),
                    c["numaAffinity"].to_string(),
                    c["devices"].to_string(),
                ),
            )
        })
        .collect()
}

async fn pod_resources(socket: &Path) -> (pr::ListPodResourcesResponse, Vec<i64>) {
    let channel = corral_proto::uds::connect(socket, WAIT).await.unwrap();
    let mut client = PodResourcesListerClient::new(channel);
    let list = client
        .list(pr::ListPodResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    let allocatable = client
        .get_allocatable_resources(pr::AllocatableResourcesRequest {})
        .await
        .unwrap()
        .into_inner()
        .cpu_ids;
    (list, allocatable)
}

fn cpu_ids(list: &pr::ListPodResourcesResponse, pod: &str, container: &str) -> Option<Vec<i64>> {
    list.pod_resources
        .iter()
        .find(|p| p.name == pod)?
        .containers
        .iter()
        .find(|c| c.name == container)
        .map(|c| c.cpu_ids.clone())
}

fn ids(cpuset: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for part in cpuset.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        out.extend(a.parse::<i64>().unwrap()..=b.parse::<i64>().unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_admitted_through_the_cli_survive_sigkill_and_podresources_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let agent = Agent::start(&root);

    // Admit the example pods.
    let admitted = agent.json(&["admit", "-f", "examples/pods/guaranteed.yaml", "-o", "json"]);
    assert_eq!(admitted[0]["admitted"], true, "{admitted}");
    agent.json(&["admit", "-f", "examples/pods/burstable.yaml", "-o", "json"]);
    let status = agent.json(&["status", "-o", "json"]);
    let guaranteed = containers(&status, "guaranteed");
    let (app, app_exclusive, app_numa, _) = &guaranteed["app"];
    let (side, side_exclusive, side_numa, _) = &guaranteed["sidecar-metrics"];
    assert!(*app_exclusive && *side_exclusive);
    assert_eq!(ids(app).len(), 4);
    assert_eq!(ids(side).len(), 2);
    // single-numa-node: each container's CPUs on the one node of its affinity, CPU 0 reserved.
    for (cpus, numa) in [(app, app_numa), (side, side_numa)] {
        let node: i64 = serde_json::from_str::<Vec<i64>>(numa).unwrap()[0];
        assert!(
            ids(cpus).iter().all(|c| c / 8 == node && *c != 0),
            "{cpus} {numa}"
        );
    }
    let (web, web_exclusive, _, _) = &containers(&status, "burstable")["web"];
    assert!(!web_exclusive);
    assert!(
        !ids(web)
            .iter()
            .any(|c| ids(app).contains(c) || ids(side).contains(c))
    );

    // Demo devices: 4 devices round-robin over the two nodes; the pod's CPUs and devices
    // share one node (even device indexes are on node 0, odd on node 1).
    agent.json(&["admit", "-f", "examples/pods/gpu.yaml", "-o", "json"]);
    let status = agent.json(&["status", "-o", "json"]);
    let (gpu_cpus, _, gpu_numa, gpu_devices) = containers(&status, "gpu")["trainer"].clone();
    let node: i64 = serde_json::from_str::<Vec<i64>>(&gpu_numa).unwrap()[0];
    assert!(ids(&gpu_cpus).iter().all(|c| c / 8 == node), "{gpu_cpus}");
    let devices: BTreeMap<String, Vec<String>> = serde_json::from_str(&gpu_devices).unwrap();
    let gpus = &devices["example.com/gpu"];
    assert_eq!(gpus.len(), 2, "{gpu_devices}");
    for gpu in gpus {
        let index: i64 = gpu.trim_start_matches("gpu-").parse().unwrap();
        assert_eq!(index % 2, node, "{gpu_devices} on node {node}");
    }
    // The plugin's Allocate answer, merged into the container's run options.
    let trainer = &status
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "gpu")
        .unwrap()["containers"][0];
    assert_eq!(
        trainer["envs"]["SAMPLE_DEVICES"],
        gpus.join(","),
        "{trainer}"
    );
    assert_eq!(
        trainer["deviceNodes"].as_array().unwrap().len(),
        2,
        "{trainer}"
    );
    // allocatedResourcesStatus (KEP-4680): the two devices, healthy, under the kubelet's names.
    let health: Vec<(&str, &str)> = trainer["allocatedResourcesStatus"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["resourceID"].as_str().unwrap(),
                r["health"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        trainer["allocatedResourcesStatus"][0]["name"],
        "example.com/gpu"
    );
    let expected: Vec<(&str, &str)> = gpus.iter().map(|g| (g.as_str(), "Healthy")).collect();
    assert_eq!(health, expected, "{trainer}");

    // A rejected pod: reason on stderr, exit 1, every checkpoint byte-identical.
    let before = checkpoints(&root);
    let rejected = agent.cli(&["admit", "-f", "examples/pods/unalignable.yaml"]);
    assert_eq!(rejected.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&rejected.stderr);
    assert!(stderr.contains("TopologyAffinityError"), "{stderr}");
    assert_eq!(checkpoints(&root), before);

    // SIGKILL, restart: every allocation intact.
    drop(agent);
    let agent = Agent::start(&root);
    let after = agent.json(&["status", "-o", "json"]);
    assert_eq!(containers(&after, "guaranteed"), guaranteed);
    assert_eq!(
        containers(&after, "burstable"),
        containers(&status, "burstable")
    );
    assert_eq!(containers(&after, "gpu"), containers(&status, "gpu"));

    // podresources (Rust client): exclusive CPUs per container, none for the shared pool.
    let (list, allocatable) = pod_resources(&agent.pod_resources_socket()).await;
    assert_eq!(cpu_ids(&list, "guaranteed", "app"), Some(ids(app)));
    assert_eq!(
        cpu_ids(&list, "guaranteed", "sidecar-metrics"),
        Some(ids(side))
    );
    assert_eq!(cpu_ids(&list, "burstable", "web"), Some(Vec::new()));
    let trainer = list
        .pod_resources
        .iter()
        .find(|p| p.name == "gpu")
        .unwrap()
        .containers[0]
        .clone();
    let mut reported: Vec<String> = trainer
        .devices
        .iter()
        .flat_map(|d| d.device_ids.clone())
        .collect();
    reported.sort();
    assert_eq!(&reported, gpus);
    assert!(
        trainer
            .devices
            .iter()
            .all(|d| d.topology.as_ref().unwrap().nodes[0].id == node)
    );
    assert_eq!(allocatable, ids("1-15"));

    // The Python grpcio client, dialing with the raw socket path as :authority.
    let socket = agent.pod_resources_socket();
    let answer = python_pod_resources(&socket, &["--authority", "raw"], "default/guaranteed").await;
    let got = &answer["get"]["containers"];
    assert_eq!(got[0]["cpu_ids"], serde_json::json!(ids(app)), "{answer}");
    assert_eq!(answer["pods"].as_array().unwrap().len(), 3);

    // A released pod is no longer reported, and its CPUs are allocatable again.
    let uid = after
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "guaranteed")
        .unwrap()["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(agent.cli(&["release", &uid]).status.success());
    let (list, _) = pod_resources(&agent.pod_resources_socket()).await;
    assert_eq!(cpu_ids(&list, "guaranteed", "app"), None);
    assert!(!agent.cli(&["release", &uid]).status.success());

    // SIGTERM: exit 0, sockets removed, the state journal retired (the files alone are the
    // state, so a kubelet taking over is not overruled at corral's next start).
    let socket = agent.pod_resources_socket();
    let agent_socket = root.join("corral/agent.sock");
    assert!(root.join("corral/state.journal").exists());
    assert!(agent.terminate().success());
    assert!(!socket.exists() && !agent_socket.exists());
    assert!(!root.join("corral/state.journal").exists());
}

#[test]
fn client_commands_explain_an_absent_agent() {
    let dir = tempfile::tempdir().unwrap();
    let output = support::corral()
        .args(["status", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot reach the agent"), "{stderr}");
}

/// A fake CRI runtime: records every UpdateContainerResources call.
#[derive(Default, Clone)]
struct FakeCri {
    /// (container id, cpuset, CFS quota) of every UpdateContainerResources call.
    updates: std::sync::Arc<std::sync::Mutex<Vec<(String, String, i64)>>>,
}

#[tonic::async_trait]
impl corral_proto::cri::v1::runtime_service_server::RuntimeService for FakeCri {
    async fn list_containers(
        &self,
        _: tonic::Request<corral_proto::cri::v1::ListContainersRequest>,
    ) -> Result<tonic::Response<corral_proto::cri::v1::ListContainersResponse>, tonic::Status> {
        Ok(tonic::Response::new(Default::default()))
    }

    async fn container_status(
        &self,
        _: tonic::Request<corral_proto::cri::v1::ContainerStatusRequest>,
    ) -> Result<tonic::Response<corral_proto::cri::v1::ContainerStatusResponse>, tonic::Status>
    {
        Err(tonic::Status::unimplemented("not needed"))
    }

    async fn update_container_resources(
        &self,
        request: tonic::Request<corral_proto::cri::v1::UpdateContainerResourcesRequest>,
    ) -> Result<
        tonic::Response<corral_proto::cri::v1::UpdateContainerResourcesResponse>,
        tonic::Status,
    > {
        let request = request.into_inner();
        let (cpus, quota) = request
            .linux
            .map(|l| (l.cpuset_cpus, l.cpu_quota))
            .unwrap_or_default();
        self.updates
            .lock()
            .unwrap()
            .push((request.container_id, cpus, quota));
        Ok(tonic::Response::new(Default::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_reconcile_pushes_cpusets_through_cri_update_container_resources() {
    use corral_proto::corral::v1 as api;
    use corral_proto::cri::v1::runtime_service_server::RuntimeServiceServer;

    let dir = tempfile::tempdir().unwrap();
    let cri_socket = dir.path().join("cri.sock");
    let fake = FakeCri::default();
    let router =
        tonic::transport::Server::builder().add_service(RuntimeServiceServer::new(fake.clone()));
    let server = FakeServer::start(&cri_socket, router);
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "cpuManagerReconcilePeriod: 100ms\ncontainerRuntimeEndpoint: unix://{}\n",
            cri_socket.display()
        ),
    )
    .unwrap();
    let root = dir.path().join("root");
    let agent = Agent::start_with(&root, &["-c", config.to_str().unwrap()]);
    let admitted = agent.json(&["admit", "-f", "examples/pods/burstable.yaml", "-o", "json"]);
    let uid = admitted[0]["allocation"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let channel = corral_proto::uds::connect(root.join("corral/agent.sock"), WAIT)
        .await
        .unwrap();
    let mut client = api::agent_client::AgentClient::new(channel);
    client
        .container_started(api::ContainerStartedRequest {
            pod_uid: uid,
            container_name: "web".into(),
            container_id: "cid-web".into(),
        })
        .await
        .unwrap();
    // The running shared-pool container gets the pool pushed; after a Guaranteed pod takes
    // exclusive CPUs, the shrunken pool is pushed on a later pass.
    // A shared-pool container keeps its quota (0: unchanged; a container with exclusive
    // CPUs is pushed -1, DisableCPUQuotaWithExclusiveCPUs: see corral-cpumgr's tests).
    let pushed = |container: &'static str, cpus: String, quota: i64| {
        let fake = fake.clone();
        let agent_log = root.with_extension("log");
        async move {
            let deadline = Instant::now() + WAIT;
            loop {
                let updates = fake.updates.lock().unwrap().clone();
                if updates
                    .iter()
                    .any(|(id, set, q)| id == container && *set == cpus && *q == quota)
                {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "no UpdateContainerResources({container}, {cpus}, quota {quota}); calls: {updates:?}; log: {}",
                    std::fs::read_to_string(&agent_log).unwrap_or_default()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    pushed("cid-web", "0-15".into(), 0).await;
    let guaranteed = agent.json(&["admit", "-f", "examples/pods/guaranteed.yaml", "-o", "json"]);
    let allocation = &guaranteed[0]["allocation"];
    let app = &allocation["containers"][0];
    // The container is created with its exclusive cpuset and no quota from this answer
    // (as upstream's AddContainer, reconcile then has nothing to push for it).
    assert_eq!(app["cpuQuotaDisabled"], true, "{allocation}");
    let web = containers(&agent.json(&["status", "-o", "json"]), "burstable")["web"]
        .0
        .clone();
    assert_ne!(web, "0-15");
    pushed("cid-web", web, 0).await;
    assert!(agent.terminate().success());
    server.stop().await;
}
