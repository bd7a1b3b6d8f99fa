//! The memory manager end to end, through the real `corral` binary: a copy of the two-node
//! fixture given 512 huge pages of 2 MiB per node, `examples/config/memory.yaml` (the static
//! memory policy under `single-numa-node`). A Guaranteed pod asking memory, `hugepages-2Mi`
//! and a demo device gets its CPUs, device and memory from one NUMA node (status,
//! podresources and `memory_manager_state` agree); a pod whose memory fits no single node is
//! rejected with `TopologyAffinityError` and leaves every checkpoint byte-identical; SIGKILL
//! and restart keep the memory; releasing the pod gives it back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use corral_checkpoint::MemoryManagerCheckpoint;
use corral_proto::podresources::v1 as pr;
use corral_proto::podresources::v1::pod_resources_lister_client::PodResourcesListerClient;

use crate::support::{self, MACHINE, Reaped, STATIC_SINGLE_NUMA, WAIT, workspace};

const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;

/// `from` copied to `to` (files, directories and symlinks).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target).unwrap();
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The fixture machine with 512 pages of 2 MiB on each node.
fn host_root(dir: &Path) -> PathBuf {
    let host = dir.join("host");
    copy_tree(&workspace().join(MACHINE), &host);
    for node in 0..2 {
        let pages = host.join(format!(
            "sys/devices/system/node/node{node}/hugepages/hugepages-2048kB/nr_hugepages"
        ));
        std::fs::write(pages, "512\n").unwrap();
    }
    host
}

struct Agent {
    child: Reaped,
    root: PathBuf,
}

impl Agent {
    fn start(dir: &Path, host: &Path) -> Agent {
        let root = dir.join("root");
        let config = workspace().join("examples/config/memory.yaml");
        let log = support::log_file(&dir.join("agent.log"));
        let child = support::corral()
            .arg("run")
            .arg("-c")
            .arg(&config)
            .arg("--root")
            .arg(&root)
            .arg("--host-root")
            .arg(host)
            .args(STATIC_SINGLE_NUMA)
            .args(["--demo-devices", "4"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut agent = Agent {
            child: Reaped(child),
            root,
        };
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = agent.child.0.try_wait().unwrap() {
                let log = std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
                panic!("corral run exited with {status}: {log}");
            }
            // Ready: it answers, and the demo plugin's devices are registered and committed
            // (the device checkpoint lists them), so later writes are the test's own.
            let registered = std::fs::read(
                agent
                    .root
                    .join("device-plugins/kubelet_internal_checkpoint"),
            )
            .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains("gpu-3"));
            if registered && agent.cli(&["status"]).status.success() {
                break agent;
            }
            assert!(Instant::now() < deadline, "agent not ready");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn cli(&self, args: &[&str]) -> Output {
        support::corral()
            .args(args)
            .arg("--root")
            .arg(&self.root)
            .output()
            .unwrap()
    }

    fn admit(&self, manifest: &str) -> Output {
        let path = self.root.with_extension("pod.yaml");
        std::fs::write(&path, manifest).unwrap();
        self.cli(&["admit", "-f", path.to_str().unwrap(), "-o", "json"])
    }

    fn status(&self) -> serde_json::Value {
        let output = self.cli(&["status", "-o", "json"]);
        assert!(output.status.success());
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// The container-level content of `memory_manager_state`, whichever version the agent
    /// wrote (v1.37's restore order).
    fn state(&self) -> MemoryManagerCheckpoint {
        use corral_checkpoint::{MemoryManagerState, RestoreOrder, restore_memory_manager_state};
        let bytes = std::fs::read(self.root.join("memory_manager_state")).unwrap();
        match restore_memory_manager_state(&bytes, RestoreOrder::V137).unwrap() {
            MemoryManagerState::V1(v1) => v1,
            MemoryManagerState::V2(v2) => v2.without_pod_entries(),
            MemoryManagerState::V3(v3) => v3.0.without_pod_entries(),
            other => panic!("unexpected memory_manager_state {}", other.version()),
        }
    }

    fn checkpoints(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        support::checkpoints(&self.root)
    }
}

fn pod(name: &str, memory: &str, pages: &str, gpus: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: {name}-uid}}\n\
         spec:\n  containers:\n    - name: app\n      resources:\n        limits: {{cpu: \"2\", memory: {memory}, hugepages-2Mi: {pages}, example.com/gpu: \"{gpus}\"}}\n"
    )
}

/// (type, size, nodes) of the container's memory in `corral status -o json`.
fn memory_of(status: &serde_json::Value, pod: &str) -> Vec<(String, u64, Vec<u64>)> {
    let pod = status
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == pod)
        .unwrap();
    pod["containers"][0]["memory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let nodes = m["numaAffinity"].as_array().unwrap();
            (
                m["type"].as_str().unwrap().to_owned(),
                m["size"].as_u64().unwrap(),
                nodes.iter().map(|n| n.as_u64().unwrap()).collect(),
            )
        })
        .collect()
}

async fn pod_resources(
    root: &Path,
) -> (
    pr::ListPodResourcesResponse,
    pr::AllocatableResourcesResponse,
) {
    let socket = root.join("pod-resources/kubelet.sock");
    let channel = corral_proto::uds::connect(&socket, WAIT).await.unwrap();
    let mut client = PodResourcesListerClient::new(channel);
    let list = client.list(pr::ListPodResourcesRequest {}).await.unwrap();
    let allocatable = client
        .get_allocatable_resources(pr::AllocatableResourcesRequest {})
        .await
        .unwrap();
    (list.into_inner(), allocatable.into_inner())
}

/// The answer to an admission that must be refused.
fn rejected(agent: &Agent, manifest: &str) -> serde_json::Value {
    let output = agent.admit(manifest);
    assert_eq!(output.status.code(), Some(1));
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    answer[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpus_devices_and_memory_come_from_one_numa_node() {
    let dir = tempfile::tempdir().unwrap();
    let host = host_root(dir.path());
    let agent = Agent::start(dir.path(), &host);
    let fresh = agent.checkpoints();

    // 20 GiB fits only both nodes together: single-numa-node rejects it, nothing changes.
    let answer = rejected(&agent, &pod("too-big", "20Gi", "0", 0));
    assert_eq!(answer["reason"], "TopologyAffinityError", "{answer}");
    assert_eq!(agent.checkpoints(), fresh);

    let admitted = agent.admit(&pod("pinned", "2Gi", "256Mi", 1));
    assert!(
        admitted.status.success(),
        "{}",
        String::from_utf8_lossy(&admitted.stderr)
    );
    let status = agent.status();
    let app = &status[0]["containers"][0];
    let node = app["numaAffinity"][0].as_u64().unwrap();
    assert_eq!(app["numaAffinity"].as_array().unwrap().len(), 1, "{app}");
    let cpus: Vec<u64> = app["cpuset"]
        .as_str()
        .unwrap()
        .split(',')
        .flat_map(|part| {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            a.parse::<u64>().unwrap()..=b.parse::<u64>().unwrap()
        })
        .collect();
    assert!(cpus.iter().all(|c| c / 8 == node), "{app}");
    let gpu = app["devices"]["example.com/gpu"][0].as_str().unwrap();
    let index: u64 = gpu.trim_start_matches("gpu-").parse().unwrap();
    assert_eq!(index % 2, node, "{app}");
    let memory = memory_of(&status, "pinned");
    assert_eq!(
        memory,
        [
            ("hugepages-2Mi".to_owned(), 256 * MI, vec![node]),
            ("memory".to_owned(), 2 * GI, vec![node]),
        ]
    );
    // The table view shows it too.
    let table = String::from_utf8(agent.cli(&["status"]).stdout).unwrap();
    assert!(table.contains(&format!("memory=2Gi@{node}")), "{table}");

    // memory_manager_state says the same; podresources reports it.
    let state = agent.state();
    let blocks = &state.entries.as_ref().unwrap()["pinned-uid"]
        .as_ref()
        .unwrap()["app"];
    assert_eq!(blocks.as_ref().unwrap().len(), 2);
    let (list, allocatable) = pod_resources(&agent.root).await;
    let container = &list.pod_resources[0].containers[0];
    let reported: Vec<(String, u64, i64)> = container
        .memory
        .iter()
        .map(|m| {
            (
                m.memory_type.clone(),
                m.size,
                m.topology.as_ref().unwrap().nodes[0].id,
            )
        })
        .collect();
    assert_eq!(
        reported,
        [
            ("hugepages-2Mi".to_owned(), 256 * MI, node as i64),
            ("memory".to_owned(), 2 * GI, node as i64),
        ]
    );
    // The Python grpcio client reads the same.
    let socket = agent.root.join("pod-resources/kubelet.sock");
    let answer = support::python_pod_resources(&socket, &[], "default/pinned").await;
    let got = &answer["get"]["containers"][0]["memory"];
    assert_eq!(got[1]["type"], "memory", "{answer}");
    assert_eq!(got[1]["size"], 2 * GI, "{answer}");
    assert_eq!(got[1]["numa"], serde_json::json!([node]), "{answer}");
    assert_eq!(answer["allocatable_memory"].as_array().unwrap().len(), 4);
    // Allocatable: per node, memory (less the reservation and the huge pages) and pages.
    assert_eq!(allocatable.memory.len(), 4);
    assert!(
        allocatable
            .memory
            .iter()
            .any(|m| m.memory_type == "hugepages-2Mi" && m.size == GI)
    );

    // The example pod: its memory on the node of its CPUs.
    let example = std::fs::read_to_string(workspace().join("examples/pods/memory.yaml")).unwrap();
    assert!(agent.admit(&example).status.success());
    let status = agent.status();
    let example = status
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "memory-pinned")
        .unwrap();
    let app = &example["containers"][0];
    assert_eq!(
        app["memory"][0]["numaAffinity"], app["numaAffinity"],
        "{app}"
    );
    assert_eq!(
        app["memory"][1]["numaAffinity"], app["numaAffinity"],
        "{app}"
    );
    let uid = example["uid"].as_str().unwrap().to_owned();
    assert!(agent.cli(&["release", &uid]).status.success());

    // Once a node holds single-node memory, no two-node group may form: memory has no
    // hint at all (upstream's "no preference"), the CPUs' hint is taken, and memory's
    // allocation fails as upstream's does, changing nothing.
    let before = agent.checkpoints();
    let answer = rejected(&agent, &pod("too-big", "20Gi", "0", 0));
    assert_eq!(answer["reason"], "UnexpectedAdmissionError", "{answer}");
    assert_eq!(
        answer["message"],
        "Allocate failed due to [memorymanager] failed to find NUMA nodes to extend the current topology hint, which is unexpected"
    );
    assert_eq!(agent.checkpoints(), before);

    // SIGKILL and restart: the memory is still the pod's.
    drop(agent);
    let agent = Agent::start(dir.path(), &host);
    assert_eq!(memory_of(&agent.status(), "pinned"), memory);
    assert_eq!(agent.checkpoints(), before);

    // Released: the memory goes back; memory_manager_state is the fresh one again.
    assert!(agent.cli(&["release", "pinned-uid"]).status.success());
    let root = agent.root.clone();
    drop(agent);
    let file = |map: &BTreeMap<PathBuf, Vec<u8>>| map[&root.join("memory_manager_state")].clone();
    let now = std::fs::read(root.join("memory_manager_state")).unwrap();
    assert_eq!(now, file(&fresh));
}
