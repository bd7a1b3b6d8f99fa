//! A foreign device plugin: Python grpcio (`python -m corral_peer device-plugin`) registers
//! with the raw socket path as HTTP/2 `:authority` (what grpc-go plugins send), serves
//! `ListAndWatch` and `Allocate`, and is allocated from by corral's manager.

use crate::support::*;
use corral_testkit::PythonPeer;

const RESOURCE: &str = "example.com/python";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_plugin_registers_lists_and_allocates() {
    let peer = PythonPeer::locate().expect("a Python with grpcio (CORRAL_PYTHON or .venv)");
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(config(dir.path(), vec![0, 1])).await;
    let kubelet = manager.socket_path().display().to_string();
    let socket = dir.path().join("python.sock").display().to_string();
    let running = tokio::spawn(async move {
        peer.run(&[
            "device-plugin",
            "--kubelet-socket",
            &kubelet,
            "--socket",
            &socket,
            "--authority",
            "raw",
            "--resource",
            RESOURCE,
            "--devices",
            "4",
            "--numa",
            "0,1",
            // Its deadline for being allocated from (the default, 20 s, is short for a
            // loaded machine), inside the peer's own limit.
            "--timeout",
            "45",
        ])
        .await
    });
    assert!(
        manager.wait_for_plugin(RESOURCE, WAIT).await,
        "the Python plugin registered and listed its devices"
    );
    assert_eq!(manager.with_state(|s| s.healthy_devices(RESOURCE).len()), 4);
    let app = container("app", &[(RESOURCE, 2)]);
    let p = pod("uid-py", vec![], vec![app.clone()]);
    allocate_on(&manager, &p, &app, 1).await;
    let opts = run_options(&manager, &p, &app).await;
    assert_eq!(opts.envs[0].name, "PYTHON_PLUGIN_DEVICES");
    assert_eq!(opts.envs[0].value, "python-1,python-3");
    assert_eq!(opts.devices.len(), 2);

    let answer = tokio::time::timeout(WAIT * 3, running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(
        answer["allocations"],
        serde_json::json!([["python-1", "python-3"]])
    );
    // The plugin is gone: its devices are unhealthy.
    assert!(
        manager
            .wait_until(WAIT, |s| s.healthy_devices(RESOURCE).is_empty())
            .await
    );
    manager.stop().await;
}
