//! The whole node on a GB200-like tray (2 sockets × 72 cores on 2 CPU nodes, 32
//! memory-only nodes, 4 GPUs): a Guaranteed pod with CPUs, a GPU and pinned memory is
//! admitted under every policy that aligns, with everything on one node. Every provider —
//! the CPU manager, the device manager through the node's device provider, the memory
//! manager — answers with hint families, so the admission never walks the 2^34 subsets of
//! NUMA nodes (it would not finish; the admission is bounded by a timeout).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use corral_devicemgr::sample::{SampleConfig, SamplePlugin};
use corral_testkit::large_machines::gb200;
use corral_topology::memory::NumaMemory;
use corral_topology::{CpuInfo, CpuRecord, CpuTopology};

use super::{Admission, NoRuntime, Node};
use crate::config::{AgentConfig, ConfigSource};

const GPU: &str = "nvidia.com/gpu";

fn topology_and_memory() -> (CpuTopology, BTreeMap<usize, NumaMemory>) {
    let machine = gb200();
    let records: Vec<CpuRecord> = machine
        .cpus
        .iter()
        .map(|p| CpuRecord {
            cpu: p.cpu,
            info: CpuInfo {
                core: p.core,
                socket: p.socket,
                numa: p.numa,
                uncore: p.uncore,
            },
        })
        .collect();
    let rows: BTreeMap<usize, Vec<u64>> = machine
        .nodes
        .iter()
        .map(|n| (n.id, n.distances.clone()))
        .collect();
    let topology = CpuTopology::new(&records)
        .unwrap()
        .with_numa_distances(&rows)
        .unwrap();
    let memory = machine
        .nodes
        .iter()
        .map(|n| {
            (
                n.id,
                NumaMemory {
                    node: n.id,
                    memory_bytes: n.memory_bytes,
                    huge_pages: Vec::new(),
                },
            )
        })
        .collect();
    (topology, memory)
}

fn config(root: &std::path::Path, policy: &str) -> AgentConfig {
    let source: ConfigSource = serde_json::from_value(serde_json::json!({
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "topologyManagerPolicy": policy,
        "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "64"},
        "memoryManagerPolicy": "Static",
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "100Mi"}}],
    }))
    .unwrap();
    ConfigSource {
        root: Some(root.to_path_buf()),
        ..source
    }
    .validate()
    .unwrap()
}

fn gpu_pod(uid: &str) -> k8s_openapi::api::core::v1::Pod {
    let limits = serde_json::json!({"cpu": "4", "memory": "4Gi", GPU: "1"});
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "c0", "resources": {"limits": limits, "requests": limits}}]},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guaranteed_gpu_pod_is_admitted_on_a_gb200_tray_under_every_aligning_policy() {
    let (topology, memory) = topology_and_memory();
    for policy in ["best-effort", "restricted", "single-numa-node"] {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), policy);
        let node = Arc::new(Node::open(&config, &topology, &memory, Arc::new(NoRuntime)).unwrap());
        node.start_devices().await.unwrap();
        // The tray's GPUs sit on the two CPU nodes.
        let socket = config.layout.device_plugins_dir().join("gpu.sock");
        let plugin = SamplePlugin::start(SampleConfig::new(GPU, socket, 4, &[0, 1]))
            .await
            .unwrap();
        plugin
            .register(&node.devices().socket_path())
            .await
            .unwrap();
        assert!(
            node.devices()
                .wait_for_plugin(GPU, super::tests::WAIT)
                .await
        );
        let answer = tokio::time::timeout(
            Duration::from_secs(60),
            node.admit(gpu_pod("trainer"), Vec::new()),
        )
        .await
        .expect("the admission ends")
        .unwrap();
        let Admission::Admitted(view) = answer else {
            panic!("{policy}: rejected: {answer:?}");
        };
        let c0 = &view.containers[0];
        assert!(c0.exclusive_cpus, "{policy}: {c0:?}");
        assert_eq!(c0.numa_affinity.len(), 1, "{policy}: {c0:?}");
        let numa = c0.numa_affinity[0];
        assert!(numa < 2, "{policy}: a CPU node, got {numa}");
        assert_eq!(
            c0.devices[GPU].keys().copied().collect::<Vec<_>>(),
            [numa as i64],
            "{policy}: {c0:?}"
        );
        assert!(
            !c0.memory.is_empty() && c0.memory.iter().all(|m| m.numa_affinity == [numa]),
            "{policy}: {c0:?}"
        );
        node.stop_devices().await;
        plugin.stop().await;
    }
}

/// 64 nodes of 4 CPUs at distances 20 or 21 (`corral_testkit::adversarial::near_ties`) under
/// best-effort with prefer-closest-numa-nodes: the pod needs 16 of them, the closest 16 are
/// out of the search budget's reach, and the decision says so — in the answer, in the
/// pod's record (so after a restart too), in the metric — while it stays admitted on 16
/// nodes as an exact decision would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_out_of_its_search_budget_is_admitted_and_marked_approximate() {
    let ties = corral_testkit::adversarial::near_ties(64, 7);
    let records: Vec<CpuRecord> = (0..64 * 4)
        .map(|cpu| CpuRecord {
            cpu,
            info: CpuInfo {
                core: cpu,
                socket: 0,
                numa: cpu / 4,
                uncore: 0,
            },
        })
        .collect();
    let rows: BTreeMap<usize, Vec<u64>> = ties.distances.iter().cloned().enumerate().collect();
    let topology = CpuTopology::new(&records)
        .unwrap()
        .with_numa_distances(&rows)
        .unwrap();
    let memory: BTreeMap<usize, NumaMemory> = (0..64)
        .map(|n| {
            let node = NumaMemory {
                node: n,
                memory_bytes: 1 << 30,
                huge_pages: Vec::new(),
            };
            (n, node)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let source: ConfigSource = serde_json::from_value(serde_json::json!({
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "topologyManagerPolicy": "best-effort",
        "topologyManagerPolicyOptions": {
            "max-allowable-numa-nodes": "64",
            "prefer-closest-numa-nodes": "true",
        },
    }))
    .unwrap();
    let config = ConfigSource {
        root: Some(dir.path().to_path_buf()),
        ..source
    }
    .validate()
    .unwrap();
    let node = Arc::new(Node::open(&config, &topology, &memory, Arc::new(NoRuntime)).unwrap());
    node.start_devices().await.unwrap();
    let limits = serde_json::json!({"cpu": "64", "memory": "1Gi"});
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "wide", "namespace": "default", "uid": "wide"},
        "spec": {"containers": [{"name": "c0", "resources": {"limits": limits, "requests": limits}}]},
    }))
    .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(60), node.admit(pod, Vec::new()))
        .await
        .expect("the admission ends")
        .unwrap();
    let Admission::Admitted(view) = answer else {
        panic!("rejected: {answer:?}");
    };
    assert!(view.approximate, "{view:?}");
    let c0 = &view.containers[0];
    assert!(c0.exclusive_cpus);
    assert_eq!(c0.numa_affinity.len(), 16, "{c0:?}");
    let metrics = node.topology().metrics();
    assert_eq!(
        metrics
            .approximate_decisions_total
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    let record = std::fs::read_to_string(node.pods().file_of("wide")).unwrap();
    assert!(record.contains(r#""approximate":true"#), "{record}");
    node.stop_devices().await;
    drop(node);
    let node = Arc::new(Node::open(&config, &topology, &memory, Arc::new(NoRuntime)).unwrap());
    assert!(node.view("wide").unwrap().approximate);
}
