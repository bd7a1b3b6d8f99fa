//! A plugin the runtime launched: its connection is an inherited socket named by
//! `NRI_PLUGIN_SOCKET`, its name and index come from `NRI_PLUGIN_NAME` and
//! `NRI_PLUGIN_IDX`. The test runs this test binary again as the plugin, through a small
//! Python launcher that connects to the test's socket and hands the connection down as an
//! inherited descriptor (what containerd does with `ExtraFiles`).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use corral_proto::nri::NriStatus;
use corral_proto::nri::api::{self, Event, EventMask};
use corral_proto::nri::plugin::{NriPlugin, PluginStub};
use corral_proto::nri::runtime::{IgnoreUpdates, PluginConnection};
use tokio::net::UnixListener;

const WAIT: Duration = Duration::from_secs(60);
const CHILD_ENV: &str = "CORRAL_NRI_LAUNCHED_CHILD";

const LAUNCHER: &str = r#"
import os, socket, subprocess, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
env = dict(os.environ, NRI_PLUGIN_SOCKET=str(s.fileno()), NRI_PLUGIN_NAME="launched", NRI_PLUGIN_IDX="33")
sys.exit(subprocess.run(sys.argv[2:], pass_fds=(s.fileno(),), env=env).returncode)
"#;

struct Quiet;

#[tonic::async_trait]
impl NriPlugin for Quiet {
    async fn configure(&self, _: api::ConfigureRequest) -> Result<EventMask, NriStatus> {
        Ok(EventMask::of(&[Event::StartContainer]))
    }
}

/// The plugin's side, when this binary runs as the launched child (a no-op otherwise).
#[tokio::test]
async fn launched_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let stub = PluginStub::from_runtime_env()
        .unwrap()
        .expect("NRI_PLUGIN_SOCKET set");
    stub.run(Quiet).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_launched_plugin_uses_its_inherited_socket() {
    // Outside a launched process there is nothing to take.
    assert!(PluginStub::from_runtime_env().unwrap().is_none());
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("launch.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let mut child = Command::new("python3")
        .args(["-c", LAUNCHER])
        .arg(&socket)
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "nri::launched::launched_child", "--nocapture"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs the launcher");
    let (trunk, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .unwrap()
        .unwrap();
    let mut conn = PluginConnection::accept(trunk, Arc::new(IgnoreUpdates), WAIT).unwrap();
    let registered = conn.registration(WAIT).await.unwrap();
    assert_eq!(
        (
            registered.plugin_name.as_str(),
            registered.plugin_idx.as_str()
        ),
        ("launched", "33")
    );
    let configured: api::ConfigureResponse = conn
        .call("Configure", &api::ConfigureRequest::default())
        .await
        .unwrap();
    assert!(EventMask::from_bits(configured.events).contains(Event::StartContainer));
    // The runtime closes the connection: the launched plugin ends, successfully.
    conn.close();
    let deadline = std::time::Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the launched plugin did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}");
}
