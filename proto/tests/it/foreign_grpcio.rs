//! Interop with a foreign gRPC stack: Python grpcio (via `corral-testkit`) calls corral's
//! unix-socket servers with every `:authority` real clients send — grpcio's own default for
//! a `unix:` target (the percent-encoded path), the raw path (what grpc-go device plugins
//! send), `localhost`, an empty authority — and over a socket path close to the 108-byte
//! limit. Unary (`Registration.Register`) and server-streaming (`DevicePlugin.ListAndWatch`).
//!
//! A control test serves the same service with plain tonic (no rewriter) and shows the raw
//! path is refused there: the problem the rewriter exists for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_proto::deviceplugin::v1beta1::{
    Device, HEALTHY, ListAndWatchResponse, NumaNode, TopologyInfo, UNHEALTHY,
    device_plugin_server::DevicePluginServer, registration_server::RegistrationServer,
};
use corral_proto::uds::{self, SocketOptions, UdsListener};
use corral_testkit::PythonPeer;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;

use crate::support::{RecordingRegistration, StreamingPlugin};

/// Upper bound of every wait here: what the tests wait for happens far sooner, also on a
/// busy machine.
const WAIT: Duration = Duration::from_secs(60);
/// The deadline the Python peer gives each of its calls (`--timeout`, seconds): within the
/// peer's own 60 s limit, far longer than a call takes on a busy machine.
const PEER_CALL_TIMEOUT: &str = "45";
const MODES: [&str; 5] = ["default", "raw", "encoded", "localhost", "empty"];

fn lists() -> Vec<ListAndWatchResponse> {
    let numa = |id| {
        Some(TopologyInfo {
            nodes: vec![NumaNode { id }],
        })
    };
    vec![
        ListAndWatchResponse {
            devices: vec![Device {
                id: "d0".into(),
                health: HEALTHY.into(),
                topology: numa(0),
            }],
        },
        ListAndWatchResponse {
            devices: vec![
                Device {
                    id: "d0".into(),
                    health: UNHEALTHY.into(),
                    topology: numa(0),
                },
                Device {
                    id: "d1".into(),
                    health: HEALTHY.into(),
                    topology: None,
                },
            ],
        },
    ]
}

/// A corral unix-socket server with both services; stops when dropped.
struct TestServer {
    path: PathBuf,
    recorder: RecordingRegistration,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), uds::UdsError>>>,
}

impl TestServer {
    fn start(path: &Path) -> Self {
        let recorder = RecordingRegistration::default();
        let cancel = CancellationToken::new();
        let listener = UdsListener::bind(path, &SocketOptions::default()).unwrap();
        let router = Server::builder()
            .add_service(RegistrationServer::new(recorder.clone()))
            .add_service(DevicePluginServer::new(StreamingPlugin {
                lists: lists(),
                cancel: cancel.clone(),
                honour_cancel: true,
            }));
        let task = tokio::spawn(uds::serve(
            router,
            listener,
            cancel.clone().cancelled_owned(),
            WAIT,
        ));
        Self {
            path: path.to_path_buf(),
            recorder,
            cancel,
            task: Some(task),
        }
    }

    async fn stop(mut self) {
        self.cancel.cancel();
        let task = self.task.take().unwrap();
        tokio::time::timeout(WAIT, task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(!self.path.exists());
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn expected_lists_json() -> serde_json::Value {
    serde_json::json!([
        [{"id": "d0", "health": "Healthy", "numa": [0]}],
        [{"id": "d0", "health": "Unhealthy", "numa": [0]}, {"id": "d1", "health": "Healthy", "numa": null}],
    ])
}

async fn exercise(peer: &PythonPeer, server: &TestServer, mode: &str) {
    let socket = server.path.to_str().unwrap();
    let resource = format!("example.com/{mode}");
    let answer = peer
        .run(&[
            "register",
            "--socket",
            socket,
            "--authority",
            mode,
            "--resource",
            &resource,
            "--timeout",
            PEER_CALL_TIMEOUT,
        ])
        .await
        .unwrap();
    assert_eq!(
        answer["ok"], true,
        "register with authority {mode}: {answer}"
    );
    let registered = server
        .recorder
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(r, _)| r.clone())
        .collect::<Vec<_>>();
    assert!(
        registered
            .iter()
            .any(|r| r.resource_name == resource && r.version == "v1beta1"),
        "{registered:?}"
    );

    let answer = peer
        .run(&[
            "list-and-watch",
            "--socket",
            socket,
            "--authority",
            mode,
            "--count",
            "2",
            "--timeout",
            PEER_CALL_TIMEOUT,
        ])
        .await
        .unwrap();
    assert_eq!(
        answer["ok"], true,
        "list-and-watch with authority {mode}: {answer}"
    );
    assert_eq!(answer["lists"], expected_lists_json(), "authority {mode}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_calls_succeed_with_every_authority() {
    let peer = PythonPeer::locate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&dir.path().join("device-plugins/kubelet.sock"));
    for mode in MODES {
        exercise(&peer, &server, mode).await;
    }

    // A 3 MiB request crosses many DATA frames and flow-control windows through the rewriter.
    let socket = server.path.to_str().unwrap();
    let padding = (3 << 20).to_string();
    let answer = peer
        .run(&[
            "register",
            "--socket",
            socket,
            "--authority",
            "raw",
            "--resource",
            "example.com/big",
            "--endpoint-padding",
            &padding,
            "--timeout",
            PEER_CALL_TIMEOUT,
        ])
        .await
        .unwrap();
    assert_eq!(answer["ok"], true, "large request: {answer}");
    let registered = server
        .recorder
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(r, _)| r.clone())
        .collect::<Vec<_>>();
    let big = registered
        .iter()
        .find(|r| r.resource_name == "example.com/big")
        .unwrap();
    assert_eq!(big.endpoint.len(), "python-plugin.sock".len() + (3 << 20));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_calls_succeed_on_a_socket_path_near_the_length_limit() {
    let peer = PythonPeer::locate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // sun_path holds 108 bytes including the NUL: use a path of 100 bytes.
    let base = dir.path().to_str().unwrap().len();
    let name = format!("{}.sock", "p".repeat(100 - base - 1 - ".sock".len()));
    let path = dir.path().join(name);
    assert_eq!(path.to_str().unwrap().len(), 100);
    let server = TestServer::start(&path);
    for mode in ["default", "raw", "encoded"] {
        exercise(&peer, &server, mode).await;
    }
    server.stop().await;
}

/// Control: plain tonic on a unix socket (no rewriter) refuses the raw path authority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_tonic_refuses_the_raw_path_authority() {
    let peer = PythonPeer::locate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let cancel = CancellationToken::new();
    let server = tokio::spawn(
        Server::builder()
            .add_service(RegistrationServer::new(RecordingRegistration::default()))
            .serve_with_incoming_shutdown(incoming, cancel.clone().cancelled_owned()),
    );
    let socket = path.to_str().unwrap();
    let answer = peer
        .run(&[
            "register",
            "--socket",
            socket,
            "--authority",
            "raw",
            "--timeout",
            PEER_CALL_TIMEOUT,
        ])
        .await
        .unwrap();
    assert_eq!(
        answer["ok"], false,
        "plain tonic accepted a raw path: {answer}"
    );
    let answer = peer
        .run(&[
            "register",
            "--socket",
            socket,
            "--authority",
            "localhost",
            "--timeout",
            PEER_CALL_TIMEOUT,
        ])
        .await
        .unwrap();
    assert_eq!(
        answer["ok"], true,
        "plain tonic with a valid authority: {answer}"
    );
    cancel.cancel();
    tokio::time::timeout(WAIT, server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
