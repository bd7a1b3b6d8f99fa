//! Pod-level resources (KEP-2837) with `PodLevelResourceManagers` on (v1.36 alpha), through
//! the real `corral` binary: the static CPU and memory policies at pod scope. A pod whose
//! `spec.resources` asks 4 CPUs and 4 GiB gets its budget once — its Guaranteed container 2
//! exclusive CPUs and 1 GiB carved from it, the other container the pod's shared rest — and
//! the state files are the versions a v1.36 kubelet writes with the gate on
//! (`cpu_manager_state` v3 and `memory_manager_state` v2, both with `podEntries`), which
//! `corral checkpoint inspect` names. SIGKILL and restart restore them byte for byte;
//! releasing the pod gives everything back.

use std::path::Path;
use std::process::Output;

use corral_checkpoint::{Checkpoint, CpuManagerCheckpointV3};
use corral_topology::CpuSet;

use crate::support::{self, MACHINE, RunningAgent, workspace};

const CONFIG: &str = "\
cpuManagerPolicy: static
reservedSystemCPUs: \"0\"
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
memoryManagerPolicy: Static
kubeReserved: {memory: 412Mi}
systemReserved: {memory: 512Mi}
reservedMemory:
  - numaNode: 0
    limits: {memory: 1Gi}
featureGates:
  PodLevelResourceManagers: true
";

const POD: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: budget, namespace: default, uid: budget-uid}
spec:
  resources:
    limits: {cpu: \"4\", memory: 4Gi}
  containers:
    - name: exclusive
      resources:
        limits: {cpu: \"2\", memory: 1Gi}
    - name: shared
";

struct Agent(RunningAgent);

impl Agent {
    fn start(dir: &Path) -> Agent {
        let config = dir.join("config.yaml");
        std::fs::write(&config, CONFIG).unwrap();
        let host = workspace().join(MACHINE);
        let args = ["-c", config.to_str().unwrap()];
        let log = dir.join("agent.log");
        Agent(RunningAgent::start(&dir.join("root"), &host, &args, &log))
    }

    fn root(&self) -> &Path {
        &self.0.root
    }

    fn cli(&self, args: &[&str]) -> Output {
        self.0.cli(args)
    }

    /// Each container's cpuset in `corral status -o json`.
    fn cpusets(&self) -> Vec<(String, CpuSet, bool)> {
        let output = self.cli(&["status", "-o", "json"]);
        assert!(output.status.success(), "{}", support::stderr(&output));
        let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        status[0]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_owned(),
                    c["cpuset"].as_str().unwrap().parse().unwrap(),
                    c["exclusiveCpus"].as_bool().unwrap_or(false),
                )
            })
            .collect()
    }

    /// `corral checkpoint inspect FILE -o json`.
    fn inspect(&self, file: &str) -> serde_json::Value {
        let path = self.root().join(file);
        let output = support::corral()
            .args([
                "checkpoint",
                "inspect",
                path.to_str().unwrap(),
                "-o",
                "json",
            ])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", support::stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_budget_is_allocated_once_and_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path());
    let fresh = support::checkpoints(agent.root());

    let manifest = dir.path().join("pod.yaml");
    std::fs::write(&manifest, POD).unwrap();
    let admitted = agent.cli(&["admit", "-f", manifest.to_str().unwrap(), "-o", "json"]);
    assert!(
        admitted.status.success(),
        "{}{}",
        support::stdout(&admitted),
        support::stderr(&admitted)
    );
    let containers = agent.cpusets();
    let [(first, exclusive, pinned), (second, shared, _)] = &containers[..] else {
        panic!("{containers:?}");
    };
    assert_eq!((first.as_str(), second.as_str()), ("exclusive", "shared"));
    assert!(pinned, "{containers:?}");
    assert_eq!(exclusive.len(), 2, "{containers:?}");
    assert_eq!(shared.len(), 2, "{containers:?}");
    assert!(!exclusive.intersects(shared), "{containers:?}");
    let budget = exclusive.union(shared);
    // single-numa-node: the whole budget on one node (CPUs 0-7 or 8-15).
    let node = budget.iter().next().unwrap() / 8;
    assert!(budget.iter().all(|cpu| cpu / 8 == node), "{budget}");

    // The files are v1.36's with the gate on: CPU v3, memory v2, with the pod's entries.
    let cpu = agent.inspect("cpu_manager_state");
    assert_eq!(cpu["format"], "cpumanager_v3", "{cpu}");
    assert_eq!(cpu["verified"], true, "{cpu}");
    let memory = agent.inspect("memory_manager_state");
    assert_eq!(memory["format"], "memorymanager_v2", "{memory}");
    assert_eq!(memory["verified"], true, "{memory}");
    let pod_memory = &memory["contents"]["podEntries"]["budget-uid"]["memoryBlocks"];
    assert_eq!(pod_memory[0]["type"], "memory", "{memory}");
    assert_eq!(pod_memory[0]["size"], 4u64 << 30, "{memory}");
    assert_eq!(pod_memory[0]["numaAffinity"], serde_json::json!([node]));
    // The containers' blocks come from the pod's: 1 GiB exclusive, the 3 GiB rest shared;
    // the node's free memory fell by the pod's 4 GiB once.
    let entries = &memory["contents"]["entries"]["budget-uid"];
    assert_eq!(entries["exclusive"][0]["size"], 1u64 << 30, "{memory}");
    assert_eq!(entries["shared"][0]["size"], 3u64 << 30, "{memory}");
    let table = &memory["contents"]["machineState"][node.to_string()]["memoryMap"]["memory"];
    assert_eq!(table["reserved"], 4u64 << 30, "{memory}");
    let bytes = std::fs::read(agent.root().join("cpu_manager_state")).unwrap();
    let v3 = CpuManagerCheckpointV3::decode(&bytes).unwrap();
    let pod_cpus: CpuSet = v3.pod_entries.unwrap()["budget-uid"]
        .cpu_set
        .parse()
        .unwrap();
    assert_eq!(pod_cpus, budget);
    let default: CpuSet = v3.default_cpu_set.parse().unwrap();
    assert!(!default.intersects(&budget), "{default}");

    // podresources (the Python grpcio client): the pod's whole CPU set and memory at pod
    // level (v1.37's PodResources fields 4 and 5), each container's own beside.
    let socket = agent.root().join("pod-resources/kubelet.sock");
    let answer = support::python_pod_resources(&socket, &[], "default/budget").await;
    let got = &answer["get"];
    let mut reported: Vec<usize> = serde_json::from_value(got["cpu_ids"].clone()).unwrap();
    reported.sort_unstable();
    assert_eq!(reported, budget.iter().collect::<Vec<_>>(), "{answer}");
    assert_eq!(got["memory"][0]["type"], "memory", "{answer}");
    assert_eq!(got["memory"][0]["size"], 4u64 << 30, "{answer}");
    assert_eq!(
        got["memory"][0]["numa"],
        serde_json::json!([node]),
        "{answer}"
    );
    assert_eq!(got["containers"][0]["cpu_ids"].as_array().unwrap().len(), 2);

    // SIGKILL and restart: the same CPUs, the same bytes.
    let admitted_files = support::checkpoints(agent.root());
    drop(agent);
    let agent = Agent::start(dir.path());
    assert_eq!(agent.cpusets(), containers);
    assert_eq!(support::checkpoints(agent.root()), admitted_files);

    // Released: the state files are the fresh ones again.
    assert!(agent.cli(&["release", "budget-uid"]).status.success());
    for name in ["cpu_manager_state", "memory_manager_state"] {
        let path = agent.root().join(name);
        assert_eq!(std::fs::read(&path).unwrap(), fresh[&path], "{name}");
    }
}
