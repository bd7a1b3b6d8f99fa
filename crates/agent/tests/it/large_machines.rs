//! Whole-node admissions on machines with many NUMA nodes (corral-testkit's
//! `large_machines`: a GB200-like tray with 32 memory-only nodes, and 64 nodes), where
//! upstream would refuse the machine (more than 8 nodes) or walk 2³⁴ and 2⁶⁴ sets of nodes.
//!
//! In process (`in_process`: the topology manager over the CPU, device and memory managers'
//! cores, answering with hint families), a Guaranteed pod asking CPUs, a GPU and memory is
//! admitted under every policy, both scopes, with and without prefer-closest-numa-nodes and
//! the memory manager, and gets all it asked from one node where the policy aligns. Through the real `corral run`
//! on a sysfs tree written from the machine's description: the same on the GB200-like tray
//! with the agent's own managers and demo GPUs, and a decision out of its search budget
//! marked approximate in the answer, the status, the metric and the pod's record, across a
//! restart.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_testkit::large_machines::{LargeMachine, NodeSpec, gb200, synthetic64};
use corral_testkit::upstream_topologies::CpuPlace;
use corral_topology::{NumaMask, PolicyName, ScopeName};
use serde_json::Value;

use crate::in_process::{GI, NodeConfig, Providers, guaranteed, holdings, node, release};
use crate::metrics_endpoint;
use crate::support::{self, RunningAgent, WAIT};

/// Every topology policy, both scopes, with and without prefer-closest-numa-nodes, with
/// and without the memory manager.
fn every_config() -> Vec<NodeConfig> {
    let mut configs = Vec::new();
    for policy in PolicyName::ALL {
        for scope in [ScopeName::Container, ScopeName::Pod] {
            for prefer_closest_numa in [false, true] {
                for providers in [Providers::CpusDevicesAndMemory, Providers::CpusAndDevices] {
                    configs.push(NodeConfig {
                        policy,
                        scope,
                        prefer_closest_numa,
                        providers,
                    });
                }
            }
        }
    }
    configs
}

fn admit_everywhere(machine: &LargeMachine) {
    for config in every_config() {
        let node = node(machine, config);
        let pod = guaranteed("pod", machine.resource, 4, 4 * GI, 1);
        let started = Instant::now();
        let result = node.manager.admit(&pod);
        let what = format!("{config:?}: {:?}", started.elapsed());
        assert!(result.admit, "{what}: {result:?}");
        let held = holdings(&node, machine, &pod);
        // Given back, the node is as before: the pod gets the same again.
        release(&node, &pod);
        assert!(node.manager.admit(&pod).admit, "{what}: again");
        assert_eq!(holdings(&node, machine, &pod), held, "{what}: again");
        let (cpus, memory, devices) = held;
        assert_eq!(cpus.len(), 4, "{what}");
        assert_eq!(devices.len(), 1, "{what}");
        if config.policy == PolicyName::None {
            continue;
        }
        let hint = node.manager.affinity("pod", "app");
        assert!(hint.preferred, "{what}: {hint:?}");
        let mask = hint.numa_affinity.expect("a node");
        assert_eq!(mask.count(), 1, "{what}: {hint:?}");
        let numa = mask.iter().next().expect("one node");
        assert!(cpus.is_subset_of(&node.numa_cpus[&numa]), "{what}: {cpus}");
        let memory_nodes = match config.providers {
            Providers::CpusDevicesAndMemory => vec![numa],
            Providers::CpusAndDevices => Vec::new(),
        };
        assert_eq!(memory, memory_nodes, "{what}");
        assert_eq!(devices, vec![numa], "{what}");
        eprintln!("{} {what}, node {numa}", machine.resource);
    }
}

#[test]
fn gb200_admits_an_aligned_pod_under_every_policy() {
    admit_everywhere(&gb200());
}

#[test]
fn synthetic64_admits_an_aligned_pod_under_every_policy() {
    admit_everywhere(&synthetic64());
}

/// Memory that no single node holds: no preferred merge exists, the best non-preferred one
/// is found among the intersections of the three families (best-effort admits it).
#[test]
fn memory_wider_than_a_node_is_admitted_best_effort() {
    for (machine, memory) in [(gb200(), 600 * GI), (synthetic64(), 12 * GI)] {
        for closest in [false, true] {
            let config = NodeConfig {
                policy: PolicyName::BestEffort,
                scope: ScopeName::Container,
                prefer_closest_numa: closest,
                providers: Providers::CpusDevicesAndMemory,
            };
            let node = node(&machine, config);
            let pod = guaranteed("wide", machine.resource, 4, memory, 1);
            let started = Instant::now();
            let result = node.manager.admit(&pod);
            eprintln!(
                "{} wide closest={closest}: {:?}",
                machine.resource,
                started.elapsed()
            );
            assert!(result.admit, "{result:?}");
            let hint = node.manager.affinity("wide", "app");
            assert!(!hint.preferred, "{hint:?}");
            let (cpus, memory_nodes, devices) = holdings(&node, &machine, &pod);
            assert_eq!(cpus.len(), 4);
            assert_eq!(devices.len(), 1);
            assert!(memory_nodes.len() > 1, "{memory_nodes:?}");
            let merged = hint.numa_affinity.expect("a mask");
            let memory_mask = NumaMask::new(memory_nodes.iter().copied()).expect("mask");
            assert_eq!(
                memory_mask.and(merged),
                merged,
                "memory extends the affinity"
            );
        }
    }
}

// The whole agent on large machines: the real `corral run` over a sysfs tree written from
// the machine's description, with the real CPU, device and memory managers.

/// `root/sys/devices/system/{cpu,node}` as Linux shows `machine`: online CPUs, each CPU's
/// package, core and siblings, each node's CPUs, distances and memory (no caches: each
/// socket is one uncore cache, as corral-testkit's machines have).
fn write_sysfs(root: &Path, machine: &LargeMachine) {
    let write = |path: PathBuf, text: String| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text + "\n").unwrap();
    };
    let list = |cpus: &mut dyn Iterator<Item = usize>| {
        cpus.map(|c| c.to_string()).collect::<Vec<_>>().join(",")
    };
    let cpu_dir = root.join("sys/devices/system/cpu");
    write(
        cpu_dir.join("online"),
        list(&mut machine.cpus.iter().map(|p| p.cpu)),
    );
    for p in &machine.cpus {
        let topology = cpu_dir.join(format!("cpu{}/topology", p.cpu));
        write(topology.join("physical_package_id"), p.socket.to_string());
        write(topology.join("core_id"), p.core.to_string());
        let mut siblings = machine
            .cpus
            .iter()
            .filter(|q| q.socket == p.socket && q.core == p.core)
            .map(|q| q.cpu);
        write(topology.join("thread_siblings_list"), list(&mut siblings));
        let mut package = machine
            .cpus
            .iter()
            .filter(|q| q.socket == p.socket)
            .map(|q| q.cpu);
        write(topology.join("core_siblings_list"), list(&mut package));
    }
    let node_dir = root.join("sys/devices/system/node");
    for n in &machine.nodes {
        let dir = node_dir.join(format!("node{}", n.id));
        write(dir.join("cpulist"), list(&mut n.cpus.iter().copied()));
        let row: Vec<String> = n.distances.iter().map(u64::to_string).collect();
        write(dir.join("distance"), row.join(" "));
        let kib = n.memory_bytes / 1024;
        write(
            dir.join("meminfo"),
            format!("Node {} MemTotal: {kib} kB", n.id),
        );
    }
}

/// `corral run` on `machine` with the config file `config` (YAML) and `flags`, under
/// `dir/root`; the machine's tree is `dir/host`.
fn start_agent(dir: &Path, machine: &LargeMachine, config: &str, flags: &[&str]) -> RunningAgent {
    let host = dir.join("host");
    if !host.exists() {
        write_sysfs(&host, machine);
    }
    let config_file = dir.join("config.yaml");
    std::fs::write(&config_file, config).unwrap();
    let args = [&["-c", config_file.to_str().unwrap()], flags].concat();
    RunningAgent::start(&dir.join("root"), &host, &args, &dir.join("agent.log"))
}

/// `corral admit` of a one-container Guaranteed pod with `limits`, which must be admitted;
/// what it holds (JSON).
fn admit(agent: &RunningAgent, uid: &str, limits: &str) -> Value {
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {uid}, namespace: default, uid: {uid}}}\n\
         spec:\n  containers:\n    - name: c0\n      resources:\n        limits: {limits}\n"
    );
    let path = agent.root.with_extension(format!("{uid}.yaml"));
    std::fs::write(&path, manifest).unwrap();
    let output = agent.cli(&["admit", "-f", path.to_str().unwrap(), "-o", "json"]);
    assert!(
        output.status.success(),
        "{}{}\n{}",
        support::stdout(&output),
        support::stderr(&output),
        agent.log()
    );
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer[0]["admitted"], true, "{answer}");
    answer[0]["allocation"].clone()
}

/// `corral status -o json`: the pod `uid`.
fn status_of(agent: &RunningAgent, uid: &str) -> Value {
    let output = agent.cli(&["status", "-o", "json"]);
    assert!(output.status.success(), "{}", support::stderr(&output));
    let pods: Value = serde_json::from_slice(&output.stdout).unwrap();
    let pod = pods.as_array().unwrap().iter().find(|p| p["uid"] == uid);
    pod.cloned()
        .unwrap_or_else(|| panic!("{uid} not in {pods}"))
}

/// The body of the agent's `/metrics`, served on the port it logged (`--metrics-addr` with
/// port 0).
fn metrics(agent: &RunningAgent) -> String {
    let deadline = Instant::now() + WAIT;
    let addr: SocketAddr = loop {
        let log = agent.log();
        let served = log
            .lines()
            .find(|l| l.contains("serving metrics"))
            .and_then(|l| l.split("addr=").nth(1)?.split_whitespace().next())
            .map(|addr| addr.parse().expect("a socket address"));
        if let Some(addr) = served {
            break addr;
        }
        assert!(Instant::now() < deadline, "no metrics address: {log}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let (status, _, body) = metrics_endpoint::get(addr, "/metrics").unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    body
}

fn numbers(value: &Value) -> Vec<u64> {
    let list = value.as_array().unwrap_or_else(|| panic!("{value}"));
    list.iter().map(|n| n.as_u64().unwrap()).collect()
}

/// The GB200-like tray under the agent: 2 demo GPUs, on the two CPU nodes (the demo
/// plugin spreads them over the nodes in order). A Guaranteed pod asking CPUs, a GPU and
/// memory (the static memory manager) is admitted under every policy that aligns, with all
/// three on one CPU node.
#[test]
fn the_agent_admits_an_aligned_gpu_pod_on_a_gb200_tray() {
    let machine = gb200();
    for policy in ["best-effort", "restricted", "single-numa-node"] {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n\
             topologyManagerPolicy: {policy}\n\
             topologyManagerPolicyOptions: {{max-allowable-numa-nodes: \"64\"}}\n\
             memoryManagerPolicy: Static\n\
             reservedMemory: [{{numaNode: 0, limits: {{memory: 100Mi}}}}]\n"
        );
        let agent = start_agent(dir.path(), &machine, &config, &["--demo-devices", "2"]);
        // Ready for GPU pods: the demo plugin's devices are registered and committed.
        let deadline = Instant::now() + WAIT;
        let checkpoint = agent
            .root
            .join("device-plugins/kubelet_internal_checkpoint");
        while !std::fs::read(&checkpoint)
            .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains("gpu-1"))
        {
            assert!(
                Instant::now() < deadline,
                "no demo devices: {}",
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let limits = r#"{cpu: "4", memory: 4Gi, example.com/gpu: "1"}"#;
        let answer = admit(&agent, "trainer", limits);
        let c0 = &answer["containers"][0];
        assert_eq!(c0["exclusiveCpus"], true, "{policy}: {c0}");
        let numa = numbers(&c0["numaAffinity"]);
        assert_eq!(numa.len(), 1, "{policy}: {c0}");
        assert!(numa[0] < 2, "{policy}: a CPU node, got {c0}");
        // Demo device `gpu-i` sits on node i.
        assert_eq!(
            c0["devices"]["example.com/gpu"],
            serde_json::json!([format!("gpu-{}", numa[0])]),
            "{policy}: {c0}"
        );
        let memory = c0["memory"].as_array().unwrap();
        assert!(!memory.is_empty(), "{policy}: {c0}");
        for block in memory {
            assert_eq!(numbers(&block["numaAffinity"]), numa, "{policy}: {c0}");
        }
    }
}

/// 64 nodes of 4 CPUs at distances 20 or 21 (`corral_testkit::adversarial::near_ties`) under
/// best-effort with prefer-closest-numa-nodes: the pod needs 16 of them, the closest 16 are
/// out of the search budget's reach, and the decision says so — in the answer, in
/// `corral status`, in the metric, in the pod's record and so after a restart — while it
/// stays admitted on 16 nodes as an exact decision would be.
#[test]
fn the_agent_marks_a_decision_out_of_its_search_budget_approximate() {
    let ties = corral_testkit::adversarial::near_ties(64, 7);
    let cpus = (0..64 * 4)
        .map(|cpu| CpuPlace {
            cpu,
            core: cpu,
            socket: 0,
            numa: cpu / 4,
            uncore: 0,
        })
        .collect();
    let nodes = ties
        .distances
        .iter()
        .enumerate()
        .map(|(id, row)| NodeSpec {
            id,
            memory_bytes: GI,
            distances: row.clone(),
            cpus: (id * 4..id * 4 + 4).collect(),
        })
        .collect();
    let machine = LargeMachine {
        cpus,
        nodes,
        resource: "example.com/gpu",
        devices: Vec::new(),
    };
    let config = "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n\
                  topologyManagerPolicy: best-effort\n\
                  topologyManagerPolicyOptions: {max-allowable-numa-nodes: \"64\", prefer-closest-numa-nodes: \"true\"}\n";
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(
        dir.path(),
        &machine,
        config,
        &["--metrics-addr=127.0.0.1:0"],
    );
    let answer = admit(&agent, "wide", r#"{cpu: "64", memory: 1Gi}"#);
    assert_eq!(answer["approximate"], true, "{answer}");
    let c0 = &answer["containers"][0];
    assert_eq!(c0["exclusiveCpus"], true, "{c0}");
    assert_eq!(numbers(&c0["numaAffinity"]).len(), 16, "{c0}");
    assert_eq!(status_of(&agent, "wide")["approximate"], true);
    let metric = "corral_topology_manager_approximate_decisions_total";
    let metrics = metrics(&agent);
    assert!(
        metrics.lines().any(|l| l == format!("{metric} 1")),
        "{metrics}"
    );
    let records: Vec<String> = std::fs::read_dir(agent.root.join("corral/pods"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    assert!(
        records.iter().any(|r| r.contains(r#""approximate":true"#)),
        "{records:?}"
    );
    // SIGKILL, then the same root: the restored pod is still marked.
    drop(agent);
    let agent = start_agent(dir.path(), &machine, config, &[]);
    let restored = status_of(&agent, "wide");
    assert_eq!(restored["approximate"], true, "{restored}");
    assert_eq!(
        restored["containers"][0]["numaAffinity"],
        c0["numaAffinity"]
    );
}
