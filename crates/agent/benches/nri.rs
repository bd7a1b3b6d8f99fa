//! NRI CreateContainer round trips against the real `corral run --nri` binary over a unix
//! socket: the runtime's request, the admission (hints, merge, CPU allocation) and its
//! durable record (the pod file and `cpu_manager_state`, each written atomically and
//! fsynced), and the answer. The floor is the filesystem: one atomic write and fsync costs
//! about 1 ms on this machine, and a Guaranteed container's admission makes two.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_proto::nri::api;
use corral_proto::nri::runtime::{IgnoreUpdates, PluginConnection};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::net::UnixListener;

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

fn start(root: &Path, socket: &Path) -> Agent {
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
        ])
        .args([
            "--topology-manager-policy",
            "single-numa-node",
            "--nri",
            "--nri-socket",
        ])
        .arg(socket)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start corral run --nri");
    Agent(child)
}

async fn connect(listener: &UnixListener) -> PluginConnection {
    let updates = Arc::new(IgnoreUpdates);
    let mut conn = PluginConnection::next(listener, updates, WAIT)
        .await
        .unwrap();
    conn.registration(WAIT).await.unwrap();
    let _: api::ConfigureResponse = conn
        .call("Configure", &api::ConfigureRequest::default())
        .await
        .unwrap();
    let _: api::SynchronizeResponse = conn
        .call("Synchronize", &api::SynchronizeRequest::default())
        .await
        .unwrap();
    conn
}

/// A pod of QoS directory `qos` ("" Guaranteed, "/burstable") and its one container of
/// `milli` CPU.
fn pod_and_container(n: u64, qos: &str, milli: u64) -> (api::PodSandbox, api::Container) {
    let uid = format!("bench-{n}");
    let cgroup_parent = format!("/kubepods{qos}/pod{uid}");
    let linux = api::LinuxPodSandbox {
        cgroup_parent,
        ..Default::default()
    };
    let pod = api::PodSandbox {
        id: format!("sb-{n}"),
        name: uid.clone(),
        uid,
        namespace: "default".into(),
        linux: Some(linux),
        ..Default::default()
    };
    let cpu = api::LinuxCpu {
        shares: Some(api::OptionalUInt64 {
            value: milli * 1024 / 1000,
        }),
        quota: (qos.is_empty()).then_some(api::OptionalInt64 {
            value: (milli * 100) as i64,
        }),
        period: Some(api::OptionalUInt64 { value: 100_000 }),
        ..Default::default()
    };
    let container = api::Container {
        id: format!("c-{n}"),
        pod_sandbox_id: pod.id.clone(),
        name: "app".into(),
        linux: Some(api::LinuxContainer {
            resources: Some(api::LinuxResources {
                cpu: Some(cpu),
                memory: Some(api::LinuxMemory {
                    limit: Some(api::OptionalInt64 { value: 64 << 20 }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    (pod, container)
}

fn create_container(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = runtime.block_on(async { UnixListener::bind(&socket).unwrap() });
    let _agent = start(&dir.path().join("root"), &socket);
    let conn = runtime.block_on(connect(&listener));
    let mut group = c.benchmark_group("nri");
    let mut n = 0u64;
    for (name, qos, milli) in [
        ("guaranteed-1cpu", "", 1000),
        ("burstable", "/burstable", 500),
    ] {
        group.bench_function(format!("create_container/{name}"), |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        n += 1;
                        let (pod, container) = pod_and_container(n, qos, milli);
                        let request = api::CreateContainerRequest {
                            pod: Some(pod.clone()),
                            container: Some(container),
                        };
                        let started = Instant::now();
                        let _: api::CreateContainerResponse =
                            conn.call("CreateContainer", &request).await.unwrap();
                        spent += started.elapsed();
                        // Released outside the timing, so CPUs never run out.
                        let removed = api::StateChangeEvent {
                            event: api::Event::RemovePodSandbox as i32,
                            pod: Some(pod),
                            container: None,
                        };
                        let _: api::Empty = conn.call("StateChange", &removed).await.unwrap();
                    }
                    spent
                })
            });
        });
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3)); targets = create_container);
criterion_main!(benches);
