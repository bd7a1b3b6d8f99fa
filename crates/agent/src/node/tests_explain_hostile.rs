//! A refusal's explanation against pods made to make it big: NUMA nodes up to the
//! topology manager's limit (every set of nodes a hint), static memory with huge pages,
//! many containers at pod and container scope. The explanation must stay far below the
//! admission API's message limit (4 MiB, tonic's default on the client) and its one-line
//! text (the log line, NRI's error) bounded, and add little time under the decision lock.

use std::path::Path;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::Admission;
use super::explain::MAX_LISTED_HINTS;
use super::tests_concurrent::{machine, open};
use super::tests_gated_plugin::{GatedPlugin, Held};
use crate::config::{AgentConfig, ConfigSource};

/// Far below the admission API's 4 MiB: the JSON (larger than the protobuf) of any
/// explanation.
const MAX_JSON_BYTES: usize = 256 * 1024;

/// Static CPU and memory policies, `policy` at `scope`, up to `max_nodes` NUMA nodes.
fn config(root: &Path, policy: &str, scope: &str, max_nodes: usize) -> AgentConfig {
    let source: ConfigSource = serde_json::from_value(serde_json::json!({
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "topologyManagerPolicy": policy,
        "topologyManagerScope": scope,
        "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": max_nodes.to_string()},
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

/// A Guaranteed pod of `containers` containers, each with `limits`.
fn pod(uid: &str, containers: usize, limits: &serde_json::Value) -> K8sPod {
    let containers: Vec<serde_json::Value> = (0..containers)
        .map(|at| serde_json::json!({"name": format!("c{at}"), "resources": {"limits": limits}}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": containers},
    }))
    .unwrap()
}

/// Admit `pod` on `node`, which must refuse it with an explanation: the explanation, its
/// JSON and its one-line text, the sizes printed under `what` with the admission's time.
async fn explained(
    node: &std::sync::Arc<super::Node>,
    pod: K8sPod,
    what: &str,
) -> (Box<super::explain::Explanation>, String, String) {
    let started = Instant::now();
    let answer = node.admit(pod, Vec::new()).await.unwrap();
    let took = started.elapsed();
    let Admission::Rejected {
        explanation: Some(explanation),
        ..
    } = answer
    else {
        panic!("not a refusal with an explanation: {answer:?}");
    };
    let json = serde_json::to_string(&explanation).unwrap();
    let line = explanation.to_string();
    eprintln!(
        "{what}: JSON {} bytes, line {} bytes, admission {took:?}",
        json.len(),
        line.len()
    );
    (explanation, json, line)
}

/// Admit a pod of `containers` containers with `limits` on a fresh node of `nodes` NUMA
/// nodes at `scope` (refused): its explanation's JSON and one-line text.
async fn refused(
    nodes: usize,
    scope: &str,
    containers: usize,
    limits: serde_json::Value,
) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let node = open(
        &config(dir.path(), "single-numa-node", scope, nodes.max(8)),
        &machine(nodes, 2, 1024, 8),
    )
    .await;
    let what = format!("{nodes} nodes, {scope} scope, {containers} containers");
    let (_, json, line) = explained(&node, pod("big", containers, &limits), &what).await;
    (json, line)
}

/// Ten NUMA nodes (the most whose hints are listed): every set of nodes with room is a
/// hint, for cpu, memory and huge pages alike — over 1,000 hints per resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explanation_over_ten_numa_nodes_stays_small() {
    // 3 CPUs, 1.5 GiB and 24 huge pages: more than one node has, so no single-node hint.
    let limits = serde_json::json!({"cpu": "3", "memory": "1536Mi", "hugepages-2Mi": "48Mi"});
    for scope in ["container", "pod"] {
        let (json, line) = refused(10, scope, 1, limits.clone()).await;
        assert!(json.len() < MAX_JSON_BYTES, "{} bytes of JSON", json.len());
        assert!(line.len() < MAX_JSON_BYTES, "{} bytes of text", line.len());
    }
}

/// 64 NUMA nodes and many containers: the families are not listed, the NUMA nodes are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explanation_over_64_numa_nodes_and_many_containers_stays_small() {
    let limits = serde_json::json!({"cpu": "3", "memory": "1536Mi", "hugepages-2Mi": "48Mi"});
    for scope in ["container", "pod"] {
        let (json, line) = refused(64, scope, 40, limits.clone()).await;
        assert!(json.len() < MAX_JSON_BYTES, "{} bytes of JSON", json.len());
        assert!(line.len() < MAX_JSON_BYTES, "{} bytes of text", line.len());
    }
}

/// A pod asking for every one of many device resources on ten NUMA nodes (one device per
/// node each): each resource alone would list over 1,000 hints; the explanation lists at
/// most `MAX_LISTED_HINTS` and says which it left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explanation_of_a_pod_asking_for_many_device_resources_stays_small() {
    const RESOURCES: usize = 24;
    let dir = tempfile::tempdir().unwrap();
    let node = open(
        &config(dir.path(), "single-numa-node", "container", 10),
        &machine(10, 2, 1024, 8),
    )
    .await;
    let numa: Vec<i64> = (0..10).collect();
    let mut plugins = Vec::new();
    let mut limits = serde_json::json!({"cpu": "3", "memory": "1536Mi", "hugepages-2Mi": "48Mi"});
    for at in 0..RESOURCES {
        let resource = format!("example.com/dev{at}");
        let socket = format!("dev{at}.sock");
        plugins.push(
            GatedPlugin::start_as(&node, &socket, &resource, &numa, Held::Allocate, false).await,
        );
        limits[resource] = serde_json::json!("2");
    }
    let what = format!("{RESOURCES} device resources");
    let (explanation, json, line) = explained(&node, pod("big", 1, &limits), &what).await;
    assert!(json.len() < MAX_JSON_BYTES, "{} bytes of JSON", json.len());
    assert!(line.len() < MAX_JSON_BYTES, "{} bytes of text", line.len());
    let resources: Vec<_> = explanation
        .providers
        .iter()
        .flat_map(|p| &p.resources)
        .collect();
    let listed: usize = resources
        .iter()
        .filter_map(|r| r.hints.as_ref())
        .map(Vec::len)
        .sum();
    assert!(listed <= MAX_LISTED_HINTS, "{listed} hints listed");
    assert!(resources.iter().any(|r| r.not_listed), "nothing left out");
    // Every device resource asked for is on every NUMA node, one device each, free.
    for numa in &explanation.numa_nodes {
        assert_eq!(numa.devices.len(), RESOURCES, "{numa:?}");
        assert!(numa.devices.values().all(|c| c.available == 1), "{numa:?}");
    }
    for plugin in plugins {
        plugin.stop().await;
    }
}

/// Thousands of devices of one resource over 64 NUMA nodes: the NUMA nodes carry counts,
/// not devices, and the device family is not listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explanation_over_thousands_of_devices_on_64_numa_nodes_stays_small() {
    const DEVICES: i64 = 4096;
    let dir = tempfile::tempdir().unwrap();
    let node = open(
        &config(dir.path(), "single-numa-node", "container", 64),
        &machine(64, 2, 1024, 8),
    )
    .await;
    let numa: Vec<i64> = (0..DEVICES).map(|at| at % 64).collect();
    let plugin = GatedPlugin::start_as(
        &node,
        "many.sock",
        "example.com/many",
        &numa,
        Held::Allocate,
        false,
    )
    .await;
    let limits = serde_json::json!({"cpu": "3", "memory": "1536Mi", "example.com/many": "100"});
    let what = format!("{DEVICES} devices on 64 nodes");
    let (explanation, json, line) = explained(&node, pod("big", 1, &limits), &what).await;
    assert!(json.len() < MAX_JSON_BYTES, "{} bytes of JSON", json.len());
    assert!(line.len() < MAX_JSON_BYTES, "{} bytes of text", line.len());
    let available: u64 = explanation
        .numa_nodes
        .iter()
        .map(|n| n.devices["example.com/many"].available)
        .sum();
    assert_eq!(available, DEVICES as u64);
    plugin.stop().await;
}
