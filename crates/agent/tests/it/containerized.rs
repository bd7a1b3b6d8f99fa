//! corral *as a container*, the way deploy/overlays/nri runs it, on a real containerd
//! (1.7 and 2.1, a test per release): its OCI image (`corral_testkit::oci_image`, the
//! assembler of `cargo xtask image`, fed the binary under test with its debug info
//! stripped) imported with `ctr images import`, then run through CRI in a host-network
//! Burstable pod with the image's own entrypoint and default arguments, a read-only root,
//! its config at /etc/corral, the state dir at /var/lib/corral, the host's /sys read-only
//! at /host/sys and the NRI socket's directory at /var/run/nri. A sibling Guaranteed busybox
//! pod, created through CRI as a kubelet would, gets its exclusive CPU from that corral: the
//! sibling's real cgroup holds the set corral's state file (in the mounted state dir) names.
//!
//! It is the containerized corral that connects and pins, not a host process: the test
//! starts none, the plugin index it connects with (51) is only in the mounted config, and
//! the peer containerd names (its pid, from the socket's credentials) is the one process in
//! the corral container's cgroup, running the image's entrypoint. The same image
//! also runs `corral topology` as the unprivileged user 65532.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use corral_proto::cri::v1 as cri;
use corral_testkit::oci_image;

use crate::containerd::{on_each_containerd, remove_pods, run_pod, runnable, wait_for_cpus};
use crate::real_containerd::{Containerd, Version, cgroup_cpus, container_config, sandbox_config};
use crate::support::WAIT;

on_each_containerd!(corral_in_a_container_pins_a_sibling);

/// The corral config the test mounts at /etc/corral: the NRI DaemonSet's, with a plugin
/// index of its own so that only a corral that read this file connects as `51-corral`.
const CONFIG: &str = "nri: true\n\
                      nriSocket: /var/run/nri/nri.sock\n\
                      nriPluginIndex: \"51\"\n\
                      cpuManagerPolicy: static\n\
                      reservedSystemCPUs: \"0\"\n";

/// What containerd logs once the plugin of [`CONFIG`] is registered and synchronized.
const CONNECTED: &str = r#"\"51-corral\" connected"#;

/// corral's image archive, built once per test process from the binary under test (debug
/// info, most of its 370 MB, is stripped: no part of what runs) under the target's temp dir.
fn corral_image() -> &'static Path {
    static ARCHIVE: OnceLock<PathBuf> = OnceLock::new();
    ARCHIVE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corral-image");
        std::fs::create_dir_all(&dir).unwrap();
        let debug = Path::new(env!("CARGO_BIN_EXE_corral"));
        let stripped = dir.join(format!("corral.{}", std::process::id()));
        let objcopy = Command::new("objcopy")
            .arg("--strip-debug")
            .arg(debug)
            .arg(&stripped)
            .status();
        let binary = if objcopy.is_ok_and(|s| s.success()) {
            stripped.as_path()
        } else {
            debug
        };
        // Persisted by a rename: another test process writing the same bytes is harmless.
        let archive = dir.join("corral-oci.tar");
        oci_image::write_archive(binary, oci_image::REFERENCE, &archive).unwrap();
        let _ = std::fs::remove_file(&stripped);
        archive
    })
}

/// The host directories the corral pod mounts, under the test's temp dir.
struct HostDirs {
    config: PathBuf,
    state: PathBuf,
    nri: PathBuf,
}

/// A CRI mount of `host` at `container`.
fn mount(host: &Path, container: &str, readonly: bool) -> cri::Mount {
    cri::Mount {
        container_path: container.into(),
        host_path: host.display().to_string(),
        readonly,
    }
}

/// The corral container as the NRI DaemonSet declares it: the image's entrypoint and
/// default arguments, 50m CPU requested, 64 MiB memory limit, read-only root, its mounts.
fn corral_container(dirs: &HostDirs) -> cri::ContainerConfig {
    let mut config = container_config("corral", 50, 0);
    config.image.as_mut().unwrap().image = oci_image::REFERENCE.into();
    config.command.clear();
    config.mounts = vec![
        mount(&dirs.state, oci_image::STATE_DIR, false),
        mount(Path::new("/sys"), "/host/sys", true),
        mount(&dirs.config, "/etc/corral", true),
        mount(&dirs.nri, "/var/run/nri", false),
    ];
    let linux = config.linux.as_mut().unwrap();
    linux.security_context = Some(cri::LinuxContainerSecurityContext {
        readonly_rootfs: true,
        ..Default::default()
    });
    config
}

/// What `uid`'s container `name` wrote (CRI's log file: a timestamp, the stream and a tag
/// before each line).
fn container_log(containerd: &Containerd, uid: &str, name: &str) -> String {
    std::fs::read_to_string(containerd.log_dir().join(uid).join(format!("{name}.log")))
        .unwrap_or_default()
}

/// Waits until containerd says the plugin of [`CONFIG`] connected; on a timeout, the
/// failure shows corral's own log (from its container) beside containerd's.
async fn wait_for_connected(containerd: &Containerd, uid: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !containerd.log().contains(CONNECTED) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {CONNECTED} in containerd's log:\n{}\ncorral's container log:\n{}",
            containerd.log_tail(),
            container_log(containerd, uid, "corral")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The process (host pid) containerd says registered as the plugin of [`CONFIG`]: both
/// releases log the peer's pid from the socket's credentials, `external:51-corral[PID]`.
fn connected_pid(containerd_log: &str) -> u32 {
    let marker = "external:51-corral[";
    let at = containerd_log
        .find(marker)
        .expect("the plugin's registration")
        + marker.len();
    let digits: String = containerd_log[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// The pids in `parent`/`id`'s cgroup (pids controller).
fn pids_in(parent: &str, id: &str) -> Vec<u32> {
    let procs = Path::new("/sys/fs/cgroup/pids")
        .join(parent.trim_start_matches('/'))
        .join(id)
        .join("cgroup.procs");
    let pids =
        std::fs::read_to_string(&procs).unwrap_or_else(|e| panic!("{}: {e}", procs.display()));
    pids.split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// `pid`'s command line.
fn command_line(pid: u32) -> Vec<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    cmdline
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

/// The exclusive CPUs corral's state file (`cpu_manager_state`, the kubelet's format) gives
/// `uid`'s container `name`, once it names them.
async fn reported_cpus(state_dir: &Path, uid: &str, name: &str) -> String {
    let path = state_dir.join("cpu_manager_state");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let state: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if let Some(cpus) = state["entries"][uid][name].as_str() {
            return cpus.to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} names no CPUs for {uid}/{name}: {text}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `config` to its end in the sandbox `sandbox` (of `sandbox_config`); its exit code.
async fn run_to_exit(
    containerd: &Containerd,
    sandbox: &str,
    sandbox_config: cri::PodSandboxConfig,
    config: cri::ContainerConfig,
) -> i32 {
    let mut client = containerd.cri().await;
    let created = client
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox.into(),
            config: Some(config),
            sandbox_config: Some(sandbox_config),
        })
        .await
        .unwrap_or_else(|s| panic!("CreateContainer: {s}\n{}", containerd.log_tail()))
        .into_inner()
        .container_id;
    let start = cri::StartContainerRequest {
        container_id: created.clone(),
    };
    client.start_container(start).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let asked = cri::ContainerStatusRequest {
            container_id: created.clone(),
            verbose: false,
        };
        let status = client.container_status(asked).await.unwrap().into_inner();
        let status = status.status.unwrap();
        if status.state == cri::ContainerState::ContainerExited as i32 {
            return status.exit_code;
        }
        assert!(tokio::time::Instant::now() < deadline, "{status:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn corral_in_a_container_pins_a_sibling(version: Version) {
    let Some((bundle, cpus)) = runnable(version) else {
        return;
    };
    let archive = corral_image();
    let dir = tempfile::tempdir().unwrap();
    let mut containerd = Containerd::start(&bundle, dir.path());
    containerd.import_image(archive, oci_image::REFERENCE);
    let dirs = HostDirs {
        config: dir.path().join("etc-corral"),
        state: dir.path().join("var-lib-corral"),
        nri: containerd.nri_dir(),
    };
    std::fs::create_dir_all(&dirs.config).unwrap();
    std::fs::create_dir_all(&dirs.state).unwrap();
    std::fs::write(dirs.config.join("config.yaml"), CONFIG).unwrap();

    // corral's pod: Burstable (50m requested), in the host's network.
    let suffix = format!("{}-{}", std::process::id(), version.label());
    let (c_uid, g_uid) = (format!("c{suffix}"), format!("g{suffix}"));
    let (c_parent, g_parent) = (
        format!("/kubepods/burstable/pod{c_uid}"),
        format!("/kubepods/pod{g_uid}"),
    );
    let corral = corral_container(&dirs);
    let (c_sandbox, corral_id) = run_pod(&mut containerd, &c_uid, "/burstable", corral).await;
    wait_for_connected(&containerd, &c_uid).await;
    // The plugin that connected is the process in corral's container, running the image's
    // entrypoint and default arguments.
    let plugin = connected_pid(&containerd.log());
    let inside = pids_in(&c_parent, &corral_id);
    assert_eq!(
        inside,
        [plugin],
        "corral's container holds the connected plugin"
    );
    let mut expected = vec![oci_image::ENTRYPOINT.to_owned()];
    expected.extend(oci_image::DEFAULT_ARGS.map(str::to_owned));
    assert_eq!(command_line(plugin), expected);

    // A sibling Guaranteed pod gets an exclusive CPU, which corral's state file names.
    let pinned = container_config("pinned", 1000, 1000);
    let (g_sandbox, guaranteed) = run_pod(&mut containerd, &g_uid, "", pinned).await;
    let exclusive = reported_cpus(&dirs.state, &g_uid, "pinned").await;
    let exclusive_set: corral_topology::CpuSet = exclusive.parse().unwrap();
    assert_eq!(exclusive_set.len(), 1, "{exclusive}");
    assert!(!exclusive_set.contains(0), "CPU 0 is reserved: {exclusive}");
    assert_eq!(cgroup_cpus(&g_parent, &guaranteed), exclusive);
    // corral's own container is in the shared pool, which lost that CPU.
    let pool = cpus.difference(&exclusive_set).to_string();
    wait_for_cpus(&c_parent, &corral_id, &pool).await;

    // The image runs unprivileged too: `corral topology` as 65532 reads the host's sysfs.
    let c_config = sandbox_config(&c_uid, &c_uid, "/burstable", &containerd.log_dir());
    let mut topology = container_config("topology", 50, 0);
    topology.image.as_mut().unwrap().image = oci_image::REFERENCE.into();
    topology.command.clear();
    topology.args = ["topology", "--host-root", "/host"]
        .map(String::from)
        .to_vec();
    topology.mounts = vec![mount(Path::new("/sys"), "/host/sys", true)];
    topology.linux.as_mut().unwrap().security_context = Some(cri::LinuxContainerSecurityContext {
        run_as_user: Some(cri::Int64Value {
            value: i64::from(oci_image::CORRAL_UID),
        }),
        readonly_rootfs: true,
        ..Default::default()
    });
    let code = run_to_exit(&containerd, &c_sandbox, c_config, topology).await;
    let said = container_log(&containerd, &c_uid, "topology");
    assert_eq!(code, 0, "{said}");
    let count = format!("{} CPUs", cpus.len());
    assert!(said.contains(&count), "{said}");

    remove_pods(&containerd, &[g_sandbox, c_sandbox]).await;
}
