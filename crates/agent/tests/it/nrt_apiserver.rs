//! `corral run --node-name N --kubeconfig K` against a real API server (Debian's
//! apiextensions-apiserver and etcd, `cargo xtask apiserver-bundle`) with the project's CRD
//! applied: the NodeResourceTopology appears with a Node zone per NUMA node and the policy,
//! follows admissions and releases, rides out the API server's absence without delaying a
//! release, and equals the node's state after a chaos of API-server and agent restarts.
//! Without a bundle the tests say why and skip.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use corral_nrt::{ATTRIBUTE_FINGERPRINT, ATTRIBUTE_POLICY, NodeResourceTopology, PodFingerprint};
use corral_testkit::adversarial::XorShift;
use corral_testkit::{ApiServer, ApiServerBundle};

use crate::support::{MACHINE, RunningAgent, WAIT, stderr, stdout, workspace};

const NODE: &str = "worker-1";
const OBJECT: &str = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/worker-1";

/// A started API server with the project's CRD applied, or `None` (printed why).
fn api_server() -> Option<ApiServer> {
    let bundle = match ApiServerBundle::locate() {
        Ok(bundle) => bundle,
        Err(why) => {
            eprintln!("skipping: {why}");
            return None;
        }
    };
    let server = ApiServer::start(&bundle).expect("start etcd and the API server");
    server
        .apply_crd(&workspace().join("deploy/crd/noderesourcetopologies.yaml"))
        .expect("the project's CRD is accepted and served");
    Some(server)
}

/// `corral run` publishing as `worker-1` through `server` (static CPU policy, CPU 0
/// reserved, `single-numa-node`, the 2-NUMA fixture).
fn agent(root: &Path, server: &ApiServer, log: &Path) -> RunningAgent {
    let kubeconfig = server.kubeconfig_path();
    let kubeconfig = kubeconfig.to_str().unwrap();
    RunningAgent::start(
        root,
        &workspace().join(MACHINE),
        &[
            "--cpu-manager-policy",
            "static",
            "--reserved-system-cpus",
            "0",
            "--topology-manager-policy",
            "single-numa-node",
            "--node-name",
            NODE,
            "--kubeconfig",
            kubeconfig,
        ],
        log,
    )
}

/// The object as the server has it now (`None` while it has none or does not answer).
fn read(server: &ApiServer) -> Option<NodeResourceTopology> {
    let body = server.kubectl(&["get", "--raw", OBJECT]).ok()?;
    Some(serde_json::from_str(&body).expect("the server's object reads as an NRT"))
}

/// Waits (bounded) until the server's object satisfies `done`; it and how long it took.
fn wait_for(
    server: &ApiServer,
    agent: &RunningAgent,
    what: &str,
    done: impl Fn(&NodeResourceTopology) -> bool,
) -> (NodeResourceTopology, Duration) {
    let started = Instant::now();
    loop {
        if let Some(nrt) = read(server)
            && done(&nrt)
        {
            return (nrt, started.elapsed());
        }
        assert!(
            started.elapsed() < WAIT,
            "{what}: not within {WAIT:?}; the server has {:?}; the agent logged:\n{}",
            read(server),
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn available_cpus(nrt: &NodeResourceTopology) -> Vec<u64> {
    nrt.zones
        .iter()
        .map(|z| {
            z.resource("cpu")
                .map_or(0, |r| r.available.0.parse().unwrap())
        })
        .collect()
}

/// A Guaranteed pod of one container with `cpus` whole CPUs, as a manifest file in `dir`.
fn pod_file(dir: &Path, uid: &str, cpus: u32) -> std::path::PathBuf {
    let path = dir.join(format!("{uid}.json"));
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "app", "image": "busybox",
            "resources": {"limits": {"cpu": cpus.to_string(), "memory": "64Mi"}}}]},
    });
    std::fs::write(&path, pod.to_string()).unwrap();
    path
}

fn admit(agent: &RunningAgent, dir: &Path, uid: &str, cpus: u32) -> bool {
    let file = pod_file(dir, uid, cpus);
    let out = agent.cli(&["admit", "-f", file.to_str().unwrap(), "-o", "json"]);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("admit {uid}: {e}: {} {}", stdout(&out), stderr(&out)));
    answer[0]["admitted"].as_bool().unwrap()
}

fn release(agent: &RunningAgent, uid: &str) -> Duration {
    let started = Instant::now();
    let out = agent.cli(&["release", uid]);
    assert!(out.status.success(), "release {uid}: {}", stderr(&out));
    started.elapsed()
}

#[test]
fn corral_keeps_its_nrt_on_a_real_api_server() {
    let Some(mut server) = api_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(
        &dir.path().join("root"),
        &server,
        &dir.path().join("agent.log"),
    );

    let (nrt, first) = wait_for(&server, &agent, "the object appears", |nrt| {
        nrt.zones.len() == 2
    });
    let zones: Vec<_> = nrt
        .zones
        .iter()
        .map(|z| (z.name.as_str(), z.zone_type.as_str()))
        .collect();
    assert_eq!(zones, [("node-0", "Node"), ("node-1", "Node")]);
    assert_eq!(nrt.attribute(ATTRIBUTE_POLICY), Some("single-numa-node"));
    assert_eq!(nrt.attribute("topologyManagerScope"), Some("container"));
    let before = available_cpus(&nrt);
    eprintln!("the object appeared {first:?} after the agent answered");

    // A 4-CPU exclusive admission lowers the zones' available CPUs by 4.
    assert!(admit(&agent, dir.path(), "four", 4));
    let (_, lowered) = wait_for(&server, &agent, "4 CPUs leave available", |nrt| {
        available_cpus(nrt).iter().sum::<u64>() + 4 == before.iter().sum::<u64>()
    });
    eprintln!("a 4-CPU admission showed on the server {lowered:?} after its answer");

    // The API server goes away: a release answers at once and the object catches up after.
    server.stop_apiserver().unwrap();
    let took = release(&agent, "four");
    eprintln!("a release while the API server was down took {took:?}");
    assert!(took < WAIT);
    server.start_apiserver().unwrap();
    let (_, back) = wait_for(
        &server,
        &agent,
        "the release shows after the server's return",
        |nrt| available_cpus(nrt) == before,
    );
    eprintln!("the object was right {back:?} after the API server answered again");
    let log = agent.log();
    let warnings = log
        .matches("cannot publish the NodeResourceTopology")
        .count();
    assert!(warnings <= 1, "one episode, logged once: {log}");
}

/// Per NUMA node, the CPUs held exclusively as `corral status` shows them.
fn exclusive_per_numa(agent: &RunningAgent) -> BTreeMap<usize, u64> {
    let topology =
        corral_topology::sysfs::discover(&workspace().join(MACHINE)).expect("the fixture");
    let out = agent.cli(&["status", "-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let pods: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut held = BTreeMap::new();
    for pod in pods.as_array().unwrap() {
        for container in pod["containers"].as_array().unwrap() {
            if container["exclusiveCpus"] != true {
                continue;
            }
            let cpus: corral_topology::CpuSet =
                container["cpuset"].as_str().unwrap().parse().unwrap();
            for cpu in cpus.iter() {
                *held.entry(topology.cpu(cpu).unwrap().numa).or_insert(0) += 1;
            }
        }
    }
    held
}

#[test]
fn after_a_chaos_of_restarts_the_nrt_equals_the_state() {
    let Some(mut server) = api_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let mut agent = agent(&root, &server, &dir.path().join("agent-0.log"));
    let (nrt, _) = wait_for(&server, &agent, "the object appears", |nrt| {
        nrt.zones.len() == 2
    });
    let allocatable: Vec<u64> = nrt
        .zones
        .iter()
        .map(|z| z.resource("cpu").unwrap().allocatable.0.parse().unwrap())
        .collect();
    let mut rng = XorShift::new(0x5eed_c0ff_ee00_0032);
    let mut admitted: Vec<String> = Vec::new();
    // Admissions, releases, API server stops, starts, agent SIGKILLs.
    let mut done = [0usize; 5];
    for round in 0..60 {
        match rng.below(6) {
            0 | 1 => {
                let uid = format!("pod-{round}");
                if admit(&agent, dir.path(), &uid, 1 + rng.below(3) as u32) {
                    admitted.push(uid);
                }
                done[0] += 1;
            }
            2 if !admitted.is_empty() => {
                let uid = admitted.swap_remove(rng.below(admitted.len() as u64) as usize);
                release(&agent, &uid);
                done[1] += 1;
            }
            3 if server.apiserver_running() => {
                server.stop_apiserver().unwrap();
                done[2] += 1;
            }
            3 | 4 => {
                if !server.apiserver_running() {
                    server.start_apiserver().unwrap();
                    done[3] += 1;
                }
            }
            _ => {
                // SIGKILL (dropping it) and start again on the same state.
                drop(agent);
                let log = dir.path().join(format!("agent-{round}.log"));
                agent = self::agent(&root, &server, &log);
                done[4] += 1;
            }
        }
    }
    eprintln!("admissions, releases, API server stops, starts, agent kills: {done:?}");
    assert!(done.iter().all(|&n| n > 0), "every kind of event: {done:?}");
    if !server.apiserver_running() {
        server.start_apiserver().unwrap();
    }
    // The state: the pods corral answered as admitted and not released, and where their
    // CPUs are.
    let mut fingerprint = PodFingerprint::new();
    for uid in &admitted {
        fingerprint.add("default", uid);
    }
    let held = exclusive_per_numa(&agent);
    let expected: Vec<u64> = allocatable
        .iter()
        .enumerate()
        .map(|(numa, a)| a - held.get(&numa).copied().unwrap_or(0))
        .collect();
    let signature = fingerprint.sign();
    wait_for(&server, &agent, "the object equals the state", |nrt| {
        nrt.attribute(ATTRIBUTE_FINGERPRINT) == Some(signature.as_str())
            && available_cpus(nrt) == expected
    });
}
