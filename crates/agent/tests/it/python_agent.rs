//! corral's own admission API (`corral.v1.Agent`) from a foreign client: the Python grpcio
//! peer (`python -m corral_peer agent`) admits pods through the agent socket of the real
//! `corral run`, reads them back with GetPod and ListPods and removes them with PodRemoved.
//! A Guaranteed container's answer carries its exclusive CPUs and `cpu_quota_disabled`
//! (`DisableCPUQuotaWithExclusiveCPUs`, on by default in v1.36); a Burstable one has
//! neither; a pod no NUMA node can hold is refused with the topology manager's reason; a pod
//! without a uid is an `INVALID_ARGUMENT`, never an admission.

use std::path::Path;

use corral_testkit::PythonPeer;

use crate::support::{MACHINE, RunningAgent, STATIC_SINGLE_NUMA, workspace};

/// A pod manifest as JSON: one container `app` with `limits` (and requests equal to them
/// unless `requests` is given).
fn pod(uid: &str, limits: serde_json::Value, requests: Option<serde_json::Value>) -> String {
    let mut resources = serde_json::json!({ "limits": limits });
    if let Some(requests) = requests {
        resources["requests"] = requests;
    }
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "app", "resources": resources}]},
    })
    .to_string()
}

/// The Python client's answer for `manifest` (written to a file in `dir`).
async fn python_admit(
    agent: &RunningAgent,
    dir: &Path,
    manifest: &str,
    remove: bool,
) -> serde_json::Value {
    let file = dir.join("pod.json");
    std::fs::write(&file, manifest).unwrap();
    let socket = agent.root.join("corral/agent.sock");
    let mut args = vec![
        "agent",
        "--socket",
        socket.to_str().unwrap(),
        "--pod-json",
        file.to_str().unwrap(),
    ];
    if remove {
        args.push("--remove");
    }
    let peer = PythonPeer::locate().unwrap();
    // The peer prints its answer (`ok: false` with the gRPC code on a failed call) either way.
    peer.run(&args).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpcio_client_admits_reads_and_removes_pods() {
    let dir = tempfile::tempdir().unwrap();
    let host = workspace().join(MACHINE);
    let agent = RunningAgent::start(
        &dir.path().join("root"),
        &host,
        STATIC_SINGLE_NUMA,
        &dir.path().join("agent.log"),
    );

    // Guaranteed, 2 CPUs: exclusive, without a CFS quota; GetPod says the same.
    let guaranteed = pod(
        "gu",
        serde_json::json!({"cpu": "2", "memory": "64Mi"}),
        None,
    );
    let answer = python_admit(&agent, dir.path(), &guaranteed, false).await;
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["admitted"], true, "{answer}");
    let app = &answer["allocation"]["containers"][0];
    assert_eq!(app["exclusive_cpus"], true, "{answer}");
    assert_eq!(app["cpu_quota_disabled"], true, "{answer}");
    let cpus: corral_topology::CpuSet = app["cpuset"].as_str().unwrap().parse().unwrap();
    assert_eq!(cpus.len(), 2, "{answer}");
    assert_eq!(
        app["numa_affinity"].as_array().unwrap().len(),
        1,
        "{answer}"
    );
    assert_eq!(answer["get"], answer["allocation"], "{answer}");
    assert_eq!(answer["listed"], serde_json::json!(["gu"]));

    // Burstable: the shared pool (which no longer holds the Guaranteed CPUs), a CFS quota;
    // removed, it leaves the list.
    let burstable = pod(
        "bu",
        serde_json::json!({"cpu": "1", "memory": "64Mi"}),
        Some(serde_json::json!({"cpu": "500m", "memory": "64Mi"})),
    );
    let answer = python_admit(&agent, dir.path(), &burstable, true).await;
    assert_eq!(answer["admitted"], true, "{answer}");
    let web = &answer["allocation"]["containers"][0];
    assert_eq!(web["exclusive_cpus"], false, "{answer}");
    assert_eq!(web["cpu_quota_disabled"], false, "{answer}");
    let pool: corral_topology::CpuSet = web["cpuset"].as_str().unwrap().parse().unwrap();
    assert!(!pool.intersects(&cpus), "{answer}");
    assert_eq!(answer["listed"], serde_json::json!(["bu", "gu"]));
    assert_eq!(answer["listed_after_removal"], serde_json::json!(["gu"]));

    // 10 CPUs fit no single node (8 CPUs each, CPU 0 reserved): refused, nothing held.
    let huge = pod(
        "huge",
        serde_json::json!({"cpu": "10", "memory": "64Mi"}),
        None,
    );
    let answer = python_admit(&agent, dir.path(), &huge, false).await;
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["admitted"], false, "{answer}");
    assert_eq!(answer["reason"], "TopologyAffinityError", "{answer}");
    assert_eq!(answer["listed"], serde_json::json!(["gu"]));

    // No uid: a bad request, not an admission.
    let mut nameless: serde_json::Value = serde_json::from_str(&guaranteed).unwrap();
    nameless["metadata"]["uid"] = serde_json::json!("");
    let answer = python_admit(&agent, dir.path(), &nameless.to_string(), false).await;
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(answer["code"], "INVALID_ARGUMENT", "{answer}");
    let details = answer["details"].as_str().unwrap();
    assert!(details.contains("metadata.uid"), "{answer}");
}
