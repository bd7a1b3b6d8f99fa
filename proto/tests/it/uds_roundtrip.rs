//! Real unix-socket round trips through `corral_proto::uds`: a unary call (device-plugin
//! `Registration.Register`), a server stream (`DevicePlugin.ListAndWatch`), socket and
//! directory modes, stale-socket handling, shutdown and dial errors.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use corral_proto::deviceplugin::v1beta1::{
    Device, DevicePluginOptions, Empty, HEALTHY, ListAndWatchResponse, RegisterRequest, UNHEALTHY,
    VERSION, device_plugin_client::DevicePluginClient, device_plugin_server::DevicePluginServer,
    registration_client::RegistrationClient, registration_server::RegistrationServer,
};
use corral_proto::uds::{self, SocketOptions, UdsError, UdsListener};
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;

use crate::support::{RecordingRegistration, StreamingPlugin};

/// Every wait in these tests is bounded by this: what they wait for happens far sooner, also
/// on a busy machine; this only ends a test that would otherwise hang.
const WAIT: Duration = Duration::from_secs(60);

fn device(id: &str, health: &str) -> Device {
    Device {
        id: id.into(),
        health: health.into(),
        topology: None,
    }
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[tokio::test]
async fn register_round_trip_with_peer_credentials_and_modes() {
    let dir = tempfile::tempdir().unwrap();
    let socket_dir = dir.path().join("device-plugins");
    let path = socket_dir.join("kubelet.sock");
    let registration = RecordingRegistration::default();
    let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
    assert_eq!(
        mode_of(&socket_dir),
        0o700,
        "created parent dir is owner-only"
    );
    assert_eq!(mode_of(&path), 0o600, "socket is owner-only");

    let token = CancellationToken::new();
    let router = Server::builder().add_service(RegistrationServer::new(registration.clone()));
    let server = tokio::spawn(uds::serve(
        router,
        listener,
        token.clone().cancelled_owned(),
        WAIT,
    ));

    let channel = uds::connect(&path, WAIT).await.unwrap();
    let request = RegisterRequest {
        version: VERSION.into(),
        endpoint: "plugin.sock".into(),
        resource_name: "example.com/gpu".into(),
        options: Some(DevicePluginOptions {
            pre_start_required: true,
            get_preferred_allocation_available: false,
        }),
    };
    RegistrationClient::new(channel)
        .register(request.clone())
        .await
        .unwrap();

    let seen = registration.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, request);
    let peer = seen[0].1.expect("peer credentials over a unix socket");
    let own_uid = std::fs::metadata(dir.path()).unwrap().uid();
    assert_eq!(peer.uid, own_uid, "the caller is this process's user");
    assert_eq!(peer.pid, Some(std::process::id() as i32));

    token.cancel();
    tokio::time::timeout(WAIT, server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!path.exists(), "socket removed on shutdown");
    assert!(socket_dir.exists(), "the directory stays");
}

#[tokio::test]
async fn list_and_watch_streams_every_list_and_ends_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugin.sock");
    let token = CancellationToken::new();
    let lists = vec![
        ListAndWatchResponse {
            devices: vec![device("dev0", HEALTHY), device("dev1", HEALTHY)],
        },
        ListAndWatchResponse {
            devices: vec![device("dev0", UNHEALTHY), device("dev1", HEALTHY)],
        },
        ListAndWatchResponse { devices: vec![] },
    ];
    let plugin = StreamingPlugin {
        lists: lists.clone(),
        cancel: token.clone(),
        honour_cancel: true,
    };
    let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
    let router = Server::builder().add_service(DevicePluginServer::new(plugin));
    let server = tokio::spawn(uds::serve(
        router,
        listener,
        token.clone().cancelled_owned(),
        WAIT,
    ));

    let mut client = DevicePluginClient::new(uds::connect(&path, WAIT).await.unwrap());
    let mut stream = client.list_and_watch(Empty {}).await.unwrap().into_inner();
    for expected in &lists {
        let got = tokio::time::timeout(WAIT, stream.message())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.as_ref(), Some(expected));
    }
    token.cancel();
    let end = tokio::time::timeout(WAIT, stream.message()).await.unwrap();
    assert!(matches!(end, Ok(None)), "stream ends cleanly: {end:?}");
    tokio::time::timeout(WAIT, server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!path.exists());
}

// The grace period is the feature: with a stream that never ends, serve returns only
// because the grace period passes. The test waits for that (at most `WAIT`, 300 times the
// grace period) and asserts only that it happened, never how soon.
#[tokio::test]
async fn grace_period_bounds_shutdown_when_a_stream_never_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stubborn.sock");
    let token = CancellationToken::new();
    let plugin = StreamingPlugin {
        lists: vec![ListAndWatchResponse { devices: vec![] }],
        cancel: token.clone(),
        honour_cancel: false,
    };
    let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
    let router = Server::builder().add_service(DevicePluginServer::new(plugin));
    let grace = Duration::from_millis(200);
    let server = tokio::spawn(uds::serve(
        router,
        listener,
        token.clone().cancelled_owned(),
        grace,
    ));
    let mut client = DevicePluginClient::new(uds::connect(&path, WAIT).await.unwrap());
    let mut stream = client.list_and_watch(Empty {}).await.unwrap().into_inner();
    assert!(stream.message().await.unwrap().is_some());
    token.cancel();
    tokio::time::timeout(WAIT, server)
        .await
        .expect("serve returns after the grace period")
        .unwrap()
        .unwrap();
    assert!(!path.exists());
}

#[tokio::test]
async fn custom_modes_are_applied_and_existing_dirs_keep_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let options = SocketOptions {
        dir_mode: 0o750,
        socket_mode: 0o660,
    };
    let nested = dir.path().join("a/b");
    let path = nested.join("x.sock");
    let listener = UdsListener::bind(&path, &options).unwrap();
    assert_eq!(mode_of(&nested), 0o750);
    assert_eq!(mode_of(&path), 0o660);
    drop(listener);
    assert!(
        !path.exists(),
        "an unserved listener removes its socket on drop"
    );

    std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _listener = UdsListener::bind(&path, &options).unwrap();
    assert_eq!(
        mode_of(&nested),
        0o755,
        "an existing directory keeps its mode"
    );
}

#[tokio::test]
async fn stale_socket_is_replaced_but_live_socket_and_other_files_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubelet.sock");

    // A socket file left behind by a dead server.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let live = UdsListener::bind(&path, &SocketOptions::default()).expect("stale socket replaced");

    // A second server on the same live socket is refused, and the live one keeps its file.
    let err = UdsListener::bind(&path, &SocketOptions::default()).unwrap_err();
    assert!(matches!(err, UdsError::InUse { .. }), "{err}");
    assert!(err.to_string().contains("kubelet.sock"));
    assert!(path.exists());
    drop(live);

    // A regular file is never deleted.
    std::fs::write(&path, b"not a socket").unwrap();
    let err = UdsListener::bind(&path, &SocketOptions::default()).unwrap_err();
    assert!(matches!(err, UdsError::NotASocket { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
}

#[tokio::test]
async fn dialing_a_missing_socket_fails_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nobody-home.sock");
    let err = uds::connect(&path, Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            UdsError::Connect { .. } | UdsError::ConnectTimeout { .. }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("nobody-home.sock"), "{err}");
}
