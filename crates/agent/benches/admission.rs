//! Admissions over the agent socket against the real `corral run` binary (static CPU policy,
//! single-numa-node, the 16-CPU two-node fixture): the client's `Admit`, the whole
//! admission (hints, merge, CPU allocation) and its durable record — every state file it
//! rewrote (`cpu_manager_state`, the pod file) made durable by one commit of the state
//! journal, one fsync — and the answer. Each admitted pod is released outside the timing.
//!
//! Besides criterion's median, the bench prints each row's p50 and p99 over every timed
//! admission (criterion reports no tail) and writes them to
//! `<target>/criterion/agent_api/percentiles.json`, which `cargo xtask bench` shows.
//! The floor is the disk: one `fdatasync` of an append costs about 0.3–1 ms here.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use corral_proto::corral::v1 as api;
use corral_proto::corral::v1::agent_client::AgentClient;
use criterion::{Criterion, criterion_group, criterion_main};

const WAIT: Duration = Duration::from_secs(20);
const MACHINE: &str = "../../testdata/sysfs/32em64t-2n8c+dax+nvme+mic+dimms";

/// The agent, killed when the bench ends.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(root: &Path) -> Agent {
    let machine = Path::new(env!("CARGO_MANIFEST_DIR")).join(MACHINE);
    let child = Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("run")
        .arg("--root")
        .arg(root)
        .arg("--host-root")
        .arg(machine)
        .args([
            "--cpu-manager-policy",
            "static",
            "--reserved-system-cpus",
            "0",
            "--topology-manager-policy",
            "single-numa-node",
        ])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start corral run");
    Agent(child)
}

async fn connect(root: &Path) -> AgentClient<corral_proto::uds::Channel> {
    let socket = root.join("corral/agent.sock");
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(channel) = corral_proto::uds::connect(&socket, Duration::from_secs(1)).await {
            let mut client = AgentClient::new(channel);
            if client.list_pods(api::ListPodsRequest {}).await.is_ok() {
                return client;
            }
        }
        assert!(Instant::now() < deadline, "the agent never answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn pod_json(uid: &str, cpu: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "bench", "uid": uid},
        "spec": {"containers": [{"name": "c", "resources": {
            "limits": {"cpu": cpu, "memory": "64Mi"},
            "requests": {"cpu": cpu, "memory": "64Mi"},
        }}]},
    }))
    .expect("pod JSON")
}

/// The `q`-quantile of `samples` (sorted in place), in milliseconds.
fn quantile_ms(samples: &mut [Duration], q: f64) -> f64 {
    samples.sort();
    let at = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples[at].as_secs_f64() * 1e3
}

fn percentiles_file() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("criterion/agent_api/percentiles.json")
}

fn admit(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("root");
    let _agent = start(&root);
    let client = runtime.block_on(connect(&root));
    let mut group = c.benchmark_group("agent_api");
    let mut n = 0u64;
    let mut percentiles = serde_json::Map::new();
    for (name, cpu) in [("guaranteed-2cpu", "2"), ("shared-500m", "500m")] {
        let mut samples: Vec<Duration> = Vec::new();
        group.bench_function(format!("admit/{name}"), |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut client = client.clone();
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        n += 1;
                        let uid = format!("bench-{n}");
                        let request = api::AdmitRequest {
                            pod_json: pod_json(&uid, cpu),
                            resource_claims_json: Vec::new(),
                            resource_slices_json: Vec::new(),
                            ..Default::default()
                        };
                        let started = Instant::now();
                        let answer = client.admit(request).await.expect("admit").into_inner();
                        let took = started.elapsed();
                        assert!(answer.admitted, "{answer:?}");
                        spent += took;
                        samples.push(took);
                        // Released outside the timing, so CPUs never run out.
                        client
                            .pod_removed(api::PodRemovedRequest { pod_uid: uid })
                            .await
                            .expect("release");
                    }
                    spent
                })
            });
        });
        if !samples.is_empty() {
            let (p50, p99) = (
                quantile_ms(&mut samples, 0.5),
                quantile_ms(&mut samples, 0.99),
            );
            println!(
                "agent_api/admit/{name}: p50 {p50:.2} ms, p99 {p99:.2} ms over {} admissions",
                samples.len()
            );
            percentiles.insert(
                format!("agent_api/admit/{name}"),
                serde_json::json!({"p50_ms": p50, "p99_ms": p99, "samples": samples.len()}),
            );
        }
    }
    group.finish();
    let file = percentiles_file();
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&file, serde_json::Value::Object(percentiles).to_string());
}

criterion_group!(name = benches; config = Criterion::default().sample_size(30).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(4)); targets = admit);
criterion_main!(benches);
