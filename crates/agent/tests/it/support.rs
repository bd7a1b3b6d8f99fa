//! What the agent's integration tests share: the fixture machine, the real `corral` binary,
//! and child processes that are killed and reaped whatever the test does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Two NUMA nodes: CPUs 0-7 and 8-15, no SMT.
pub(crate) const MACHINE: &str = "testdata/sysfs/32em64t-2n8c+dax+nvme+mic+dimms";

/// The static CPU policy with CPU 0 reserved, under the `single-numa-node` topology policy.
pub(crate) const STATIC_SINGLE_NUMA: &[&str] = &[
    "--cpu-manager-policy",
    "static",
    "--reserved-system-cpus",
    "0",
    "--topology-manager-policy",
    "single-numa-node",
];

/// How long an agent may take to start or to stop, and the bound of every other wait for
/// something that must happen: it happens far sooner, also on a busy machine; this only ends
/// a test that would otherwise hang.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// The workspace root (the fixtures' paths are relative to it).
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The `corral` binary, with the caller's `RUST_LOG` removed so that its output is the
/// test's own.
pub(crate) fn corral() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_corral"));
    command.env_remove("RUST_LOG");
    command
}

/// `corral run --root ROOT --host-root MACHINE FLAGS…`, stdin and stdout closed, stderr to
/// `stderr` (a log file).
pub(crate) fn corral_run(root: &Path, flags: &[&str], stderr: impl Into<Stdio>) -> Child {
    corral()
        .arg("run")
        .arg("--root")
        .arg(root)
        .arg("--host-root")
        .arg(workspace().join(MACHINE))
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start corral run")
}

/// A new log file for a child's stderr.
pub(crate) fn log_file(path: &Path) -> std::fs::File {
    std::fs::File::create(path).unwrap()
}

/// A child killed and reaped when the test ends, whatever happens.
pub(crate) struct Reaped(pub(crate) Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `corral run`, ready (its `corral status` answers), killed (SIGKILL) and reaped
/// when dropped.
pub(crate) struct RunningAgent {
    pub(crate) child: Reaped,
    pub(crate) root: PathBuf,
    log: PathBuf,
}

impl RunningAgent {
    /// `corral run --root ROOT --host-root HOST ARGS…`, its stderr in `log`; waits (bounded)
    /// until it answers, and panics with its log if it exits first.
    pub(crate) fn start(root: &Path, host: &Path, args: &[&str], log: &Path) -> RunningAgent {
        let child = corral()
            .arg("run")
            .arg("--root")
            .arg(root)
            .arg("--host-root")
            .arg(host)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(log))
            .spawn()
            .expect("start corral run");
        let mut agent = RunningAgent {
            child: Reaped(child),
            root: root.to_path_buf(),
            log: log.to_path_buf(),
        };
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = agent.child.0.try_wait().unwrap() {
                panic!("corral run exited with {status}: {}", agent.log());
            }
            if agent.cli(&["status"]).status.success() {
                return agent;
            }
            assert!(
                Instant::now() < deadline,
                "agent not ready: {}",
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What it logged so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `corral ARGS… --root ROOT`.
    pub(crate) fn cli(&self, args: &[&str]) -> Output {
        corral()
            .args(args)
            .arg("--root")
            .arg(&self.root)
            .output()
            .expect("run corral")
    }
}

/// The exit status, if the child exits within `limit`; killed and reaped otherwise.
pub(crate) fn wait_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM to the child.
pub(crate) fn sigterm(child: &Child) {
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
}

/// A command's standard output as text.
pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A command's standard error as text.
pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A gRPC server (a test double of the kubelet or the runtime) on the unix socket `socket`,
/// stopped, its socket removed, when [`FakeServer::stop`] is awaited.
pub(crate) struct FakeServer {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), corral_proto::uds::UdsError>>,
}

impl FakeServer {
    /// Serves `router` on `socket`.
    pub(crate) fn start(socket: &Path, router: tonic::transport::server::Router) -> FakeServer {
        let listener = corral_proto::uds::UdsListener::bind(socket, &Default::default()).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        let serve = corral_proto::uds::serve(router, listener, shutdown, Duration::from_secs(1));
        FakeServer {
            stop,
            task: tokio::spawn(serve),
        }
    }

    /// Stops serving and checks the server ended cleanly.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// The bytes of every state file under the agent's `root`: the checkpoints and every
/// admitted pod's file (none before the first admission).
pub(crate) fn checkpoints(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files: Vec<PathBuf> = [
        "cpu_manager_state",
        "memory_manager_state",
        "dra_manager_state",
        "device-plugins/kubelet_internal_checkpoint",
    ]
    .into_iter()
    .map(|name| root.join(name))
    .collect();
    files.extend(
        std::fs::read_dir(root.join("corral/pods"))
            .into_iter()
            .flatten()
            .map(|entry| entry.unwrap().path()),
    );
    files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

/// What the Python grpcio podresources client reads from `socket` (List,
/// GetAllocatableResources, and Get of `pod`, `namespace/name`), with `flags` (e.g. the
/// `:authority` it dials with); it must succeed.
pub(crate) async fn python_pod_resources(
    socket: &Path,
    flags: &[&str],
    pod: &str,
) -> serde_json::Value {
    let peer = corral_testkit::PythonPeer::locate().unwrap();
    let socket = socket.to_str().unwrap();
    let args = [&["podresources", "--socket", socket, "--pod", pod], flags].concat();
    let answer = peer.run(&args).await.unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    answer
}
