//! A real containerd (Debian's 1.7 or 2.1, with runc) for the tests: started on a config of
//! its own under a temp dir, in the release's format — root, state and sockets there, NRI on
//! with its socket there, cgroupfs, overlayfs, `restrict_oom_score_adj` (root here lacks
//! CAP_SYS_RESOURCE) — with a busybox image imported, and driven through CRI. Stopped on
//! drop, its shims and the pods' cgroups removed. The bundles come from `cargo xtask
//! containerd-bundle` (run by `cargo xtask test`), one per release; where one is missing,
//! [`Containerd::bundle`] says why.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use corral_proto::cri::v1 as cri;
use corral_proto::cri::v1::runtime_service_client::RuntimeServiceClient;
use corral_proto::tonic::transport::Channel;

use crate::support::{WAIT, workspace};

/// The image every container runs (its command is `sleep`).
pub(crate) const IMAGE: &str = "docker.io/library/busybox:corral";

/// A containerd release the real-runtime scenarios run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    /// containerd 1.7 (Debian trixie): a version-2 config, NRI enabled there.
    V1_7,
    /// containerd 2.1 (Debian sid): a version-3 config, the CRI plugin split in three.
    V2_1,
}

impl Version {
    /// `1.7`, `2.1`: the bundle's directory under `target/containerd-bundle`.
    fn name(self) -> &'static str {
        match self {
            Version::V1_7 => "1.7",
            Version::V2_1 => "2.1",
        }
    }

    /// `1-7`, `2-1`: a suffix for the pods' names and uids (a valid DNS label).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Version::V1_7 => "1-7",
            Version::V2_1 => "2-1",
        }
    }
}

/// A prepared bundle: a containerd release unpacked with runc, and the busybox image.
pub(crate) struct Bundle {
    version: Version,
    dir: PathBuf,
}

/// Held by each running containerd: the real-runtime tests run one at a time, whichever
/// release, since their pods share the QoS cgroups (`kubepods`, `kubepods/burstable`) each
/// one's drop removes once they are empty — a pod of another test could be created there
/// in between.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A running containerd.
pub(crate) struct Containerd {
    child: Child,
    dir: PathBuf,
    /// The bundle's directory (its `ctr`).
    bundle: PathBuf,
    /// Pod cgroup directories to remove at the end (relative to each controller).
    pub(crate) pod_cgroups: Vec<String>,
    /// Released after the drop's clean-up (fields drop after `Drop::drop`).
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Containerd {
    /// `version`'s prepared bundle, or why there is none.
    pub(crate) fn bundle(version: Version) -> Result<Bundle, String> {
        // `cargo xtask test` names the bundle, or why there is none, with these.
        let suffix = version.label().replace('-', "_");
        if let Ok(why) = std::env::var(format!("CORRAL_CONTAINERD_SKIP_{suffix}")) {
            return Err(format!("containerd {}: {why}", version.name()));
        }
        let dir = std::env::var_os(format!("CORRAL_CONTAINERD_BUNDLE_{suffix}"))
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                workspace()
                    .join("target/containerd-bundle")
                    .join(version.name())
            });
        if let Ok(ready) = std::fs::read_to_string(dir.join("READY")) {
            // What the bundle's `containerd --version` said when it was prepared.
            let release = format!(" {}.", version.name());
            assert!(ready.contains(&release), "{}: {ready}", dir.display());
            Ok(Bundle { version, dir })
        } else {
            Err(format!(
                "no containerd {} bundle at {} (run `cargo xtask containerd-bundle`)",
                version.name(),
                dir.display()
            ))
        }
    }

    /// containerd from `bundle`, everything under `dir`, with the busybox image imported.
    pub(crate) fn start(bundle: &Bundle, dir: &Path) -> Containerd {
        let (version, bundle) = (bundle.version, bundle.dir.as_path());
        // A test that failed holding it poisoned it; its clean-up ran all the same.
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        for sub in [
            "nri",
            "nri-plugins",
            "nri-conf",
            "logs",
            "cni-bin",
            "cni-conf",
        ] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let config = dir.join("config.toml");
        let toml = match version {
            Version::V1_7 => config_v2(bundle, dir),
            Version::V2_1 => config_v3(bundle, dir),
        };
        std::fs::write(&config, toml).unwrap();
        let log = std::fs::File::create(dir.join("containerd.log")).unwrap();
        let child = Command::new(bundle.join("root/usr/bin/containerd"))
            .arg("--config")
            .arg(&config)
            .env("PATH", path_with(bundle))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start containerd");
        let containerd = Containerd {
            child,
            dir: dir.to_path_buf(),
            bundle: bundle.to_path_buf(),
            pod_cgroups: Vec::new(),
            _turn: turn,
        };
        containerd.wait_for_log("containerd successfully booted");
        containerd.import(&bundle.join("busybox.tar"));
        // CRI has taken the image in once it labels it the pinned sandbox image; a sandbox
        // run before would try to pull it.
        containerd.wait_for_log("io.cri-containerd.pinned");
        containerd
    }

    /// `ctr images import` of an OCI image archive into CRI's namespace (`k8s.io`).
    fn import(&self, archive: &Path) {
        let import = Command::new(self.bundle.join("root/usr/bin/ctr"))
            .arg("-a")
            .arg(self.socket())
            .args(["-n", "k8s.io", "images", "import"])
            .arg(archive)
            .output()
            .unwrap();
        assert!(
            import.status.success(),
            "{}: {}",
            archive.display(),
            String::from_utf8_lossy(&import.stderr)
        );
    }

    /// Imports the OCI image archive `archive` named `reference` (e.g. corral's, from
    /// `corral_testkit::oci_image`) and waits until CRI has it: a container of it created
    /// before would find no image.
    pub(crate) fn import_image(&self, archive: &Path, reference: &str) {
        // Both releases log this once CRI has labelled the image its own, in its store.
        let managed = format!(r#"ImageUpdate event name:\"{reference}\""#);
        let before = self.log().matches(&managed).count();
        self.import(archive);
        self.wait_for_log_count(&managed, before + 1);
    }

    /// The CRI socket.
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    /// The NRI socket.
    pub(crate) fn nri_socket(&self) -> PathBuf {
        self.nri_dir().join("nri.sock")
    }

    /// The directory of the NRI socket (what the NRI DaemonSet mounts at /var/run/nri).
    pub(crate) fn nri_dir(&self) -> PathBuf {
        self.dir.join("nri")
    }

    /// containerd's log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    /// The last lines of containerd's log, for a failure message.
    pub(crate) fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(25)..].join("\n")
    }

    /// Waits until the log holds `text` `times` times.
    pub(crate) fn wait_for_log_count(&self, text: &str, times: usize) {
        let deadline = Instant::now() + WAIT;
        while self.log().matches(text).count() < times {
            assert!(
                Instant::now() < deadline,
                "no {text:?} ×{times} in:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_for_log(&self, text: &str) {
        self.wait_for_log_count(text, 1);
    }

    /// A CRI client.
    pub(crate) async fn cri(&self) -> RuntimeServiceClient<Channel> {
        let channel = corral_proto::uds::connect(self.socket(), WAIT)
            .await
            .unwrap();
        RuntimeServiceClient::new(channel)
    }

    /// The directory pod logs go to.
    pub(crate) fn log_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }
}

impl Drop for Containerd {
    /// Whatever the test left: containerd and its shims end, the pods' processes are
    /// killed, every mount under the temp dir is detached and the pods' cgroups removed.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let address = self.socket();
        let _ = Command::new("pkill")
            .args(["-9", "-f"])
            .arg(format!(
                "containerd-shim-runc-v2 .*-address {}",
                address.display()
            ))
            .status();
        for cgroup in &self.pod_cgroups {
            kill_processes_in(cgroup);
        }
        // Until the killed processes are gone (bounded), so their mounts and cgroups can go.
        let deadline = Instant::now() + WAIT;
        while self.pod_cgroups.iter().any(|c| has_processes(c)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        unmount_below(&self.dir);
        for cgroup in &self.pod_cgroups {
            remove_cgroup(cgroup);
        }
        // The QoS parents, when nothing else uses them (a real kubelet's stay).
        for parent in ["kubepods/burstable", "kubepods/besteffort", "kubepods"] {
            remove_empty_cgroup(parent);
        }
    }
}

/// SIGKILL to every process in `relative` (and below) of the pids controller.
fn kill_processes_in(relative: &str) {
    let top = Path::new("/sys/fs/cgroup/pids").join(relative.trim_start_matches('/'));
    let mut stack = vec![top];
    while let Some(dir) = stack.pop() {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in procs.split_whitespace() {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
        for child in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if child.path().is_dir() {
                stack.push(child.path());
            }
        }
    }
}

/// Whether any process is in `relative` (or below) of the pids controller.
fn has_processes(relative: &str) -> bool {
    let top = Path::new("/sys/fs/cgroup/pids").join(relative.trim_start_matches('/'));
    let mut stack = vec![top];
    while let Some(dir) = stack.pop() {
        if std::fs::read_to_string(dir.join("cgroup.procs"))
            .is_ok_and(|procs| !procs.trim().is_empty())
        {
            return true;
        }
        for child in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if child.path().is_dir() {
                stack.push(child.path());
            }
        }
    }
    false
}

/// Lazily unmounts every mount point below `dir`, deepest first.
fn unmount_below(dir: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .filter(|point| Path::new(point).starts_with(dir))
        .collect();
    points.sort_by_key(|point| std::cmp::Reverse(point.len()));
    for point in points {
        let _ = Command::new("umount").args(["-l", point]).status();
    }
}

/// Removes `relative` from every controller where it has no child cgroup left.
fn remove_empty_cgroup(relative: &str) {
    for controller in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        let _ = std::fs::remove_dir(controller.path().join(relative));
    }
}

/// Removes `relative` and every cgroup below it from every cgroup v1 controller.
fn remove_cgroup(relative: &str) {
    let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for controller in controllers.flatten() {
        let top = controller.path().join(relative.trim_start_matches('/'));
        let mut dirs = vec![top.clone()];
        let mut at = 0;
        while at < dirs.len() {
            for child in std::fs::read_dir(&dirs[at]).into_iter().flatten().flatten() {
                if child.path().is_dir() {
                    dirs.push(child.path());
                }
            }
            at += 1;
        }
        for dir in dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn path_with(bundle: &Path) -> String {
    let ours = bundle.join("root/usr/bin");
    format!(
        "{}:{}",
        ours.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// containerd 1.7's config (version 2).
fn config_v2(bundle: &Path, dir: &Path) -> String {
    let d = dir.display();
    let runc = bundle.join("root/usr/sbin/runc");
    format!(
        r#"version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{IMAGE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
{nri}"#,
        runc = runc.display(),
        nri = nri_section(dir),
    )
}

/// containerd 2.1's config (version 3): images, runtime and streaming are separate CRI
/// plugins; CDI off and CNI pointed at empty directories of its own (the pods use the
/// host's network), so nothing of the host's runtime set-up is read.
fn config_v3(bundle: &Path, dir: &Path) -> String {
    let d = dir.display();
    let runc = bundle.join("root/usr/sbin/runc");
    format!(
        r#"version = 3
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{IMAGE}"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_cdi = false
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{d}/cni-bin"]
    conf_dir = "{d}/cni-conf"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
{nri}"#,
        runc = runc.display(),
        nri = nri_section(dir),
    )
}

/// The NRI section, the same in both formats: on (1.7's default is off), its socket and
/// plugin directories under `dir`.
fn nri_section(dir: &Path) -> String {
    let d = dir.display();
    format!(
        r#"[plugins."io.containerd.nri.v1.nri"]
  disable = false
  disable_connections = false
  socket_path = "{d}/nri/nri.sock"
  plugin_path = "{d}/nri-plugins"
  plugin_config_path = "{d}/nri-conf"
  # Longer than corral takes to answer on a busy machine: no test here is about these.
  plugin_registration_timeout = "30s"
  plugin_request_timeout = "30s"
"#
    )
}

/// A host-network pod sandbox config (no hostname: containerd refuses one for host-network
/// sandboxes) in the QoS cgroup `qos_dir` ("" Guaranteed, "/burstable", "/besteffort").
pub(crate) fn sandbox_config(
    uid: &str,
    name: &str,
    qos_dir: &str,
    logs: &Path,
) -> cri::PodSandboxConfig {
    let node = cri::NamespaceMode::Node as i32;
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.into(),
            uid: uid.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        log_directory: logs.join(uid).display().to_string(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: format!("/kubepods{qos_dir}/pod{uid}"),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    network: node,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A container config with the resources the kubelet derives from `request_milli` and
/// `limit_milli` (0: no limit) CPUs and a 64 MiB memory limit.
pub(crate) fn container_config(
    name: &str,
    request_milli: i64,
    limit_milli: i64,
) -> cri::ContainerConfig {
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: name.into(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: IMAGE.into(),
            ..Default::default()
        }),
        command: vec!["/bin/sleep".into(), "1000000".into()],
        log_path: format!("{name}.log"),
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(cri::LinuxContainerResources {
                cpu_shares: (request_milli * 1024 / 1000).max(2),
                cpu_period: 100_000,
                cpu_quota: limit_milli * 100,
                memory_limit_in_bytes: 64 << 20,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The `cpuset.cpus` of a container's real cgroup (cgroup v1, cgroupfs driver:
/// `<cgroup parent>/<container id>`).
pub(crate) fn cgroup_cpus(parent: &str, container_id: &str) -> String {
    let path = Path::new("/sys/fs/cgroup/cpuset")
        .join(parent.trim_start_matches('/'))
        .join(container_id)
        .join("cpuset.cpus");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_owned()
}
