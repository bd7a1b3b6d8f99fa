//! A foreign DRA driver: the project's Python grpcio peer (`python -m corral_peer
//! dra-driver`) registers through the registration directory and serves
//! NodePrepareResources / NodeUnprepareResources to corral's registry, client and manager.

use std::sync::Arc;

use crate::support::*;
use corral_dra::{DraManager, DraService};
use corral_topology::{Container, ContainerClaim};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

const DRIVER: &str = "py.example.com";

/// The Python driver process; killed on drop.
struct PythonDriver {
    child: Child,
    stdin: Option<ChildStdin>,
    events: mpsc::UnboundedReceiver<Value>,
}

impl PythonDriver {
    async fn spawn(dirs: &Dirs, extra: &[&str]) -> Self {
        let peer = corral_testkit::PythonPeer::locate().expect("Python peer");
        let (registry, plugins) = (dirs.registry(), dirs.plugins("py"));
        let mut args = vec!["dra-driver", "--driver", DRIVER, "--registry-dir"];
        args.push(registry.to_str().expect("UTF-8 temp path"));
        args.push("--plugin-dir");
        args.push(plugins.to_str().expect("UTF-8 temp path"));
        args.extend_from_slice(extra);
        let mut child = peer.spawn(&args).expect("start the Python DRA driver");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, events) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(value);
                }
            }
        });
        let mut driver = PythonDriver {
            child,
            stdin,
            events,
        };
        let ready = driver.next_event().await;
        assert_eq!(ready["event"], "ready", "{ready}");
        driver
    }

    async fn next_event(&mut self) -> Value {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("an event from the Python driver in time")
            .expect("the Python driver's stdout is open")
    }

    async fn event(&mut self, kind: &str) -> Value {
        loop {
            let event = self.next_event().await;
            if event["event"] == kind {
                return event;
            }
        }
    }

    /// Close stdin and wait for a clean exit.
    async fn stop(mut self) -> Value {
        drop(self.stdin.take());
        let stopped = self.event("stopped").await;
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success());
        stopped
    }
}

#[tokio::test]
async fn python_driver_prepares_and_unprepares() {
    let dirs = Dirs::new();
    let mut py = PythonDriver::spawn(&dirs, &[]).await;
    let (registry, watcher) = registry(&dirs);
    let status = py.event("registration").await;
    assert_eq!(status["registered"], true, "{status}");
    assert_eq!(status["error"], "");
    wait_registered(&registry, DRIVER).await;
    assert_eq!(registry.plugin(DRIVER).unwrap().service(), DraService::V1);

    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let p = pod("pod-1", &["c1", "c2"]);
    let claims = [
        claim("c1", DRIVER, &["pod-1"]),
        claim("c2", DRIVER, &["pod-1"]),
    ];
    manager.prepare_resources(&p, &claims).await.unwrap();
    let prepare = py.event("prepare").await;
    assert_eq!(prepare["version"], "v1");
    let uids: Vec<&str> = prepare["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["uid"].as_str().unwrap())
        .collect();
    assert_eq!(uids, ["c1-uid", "c2-uid"], "one batch for the driver");
    assert_eq!(prepare["claims"][0]["namespace"], "default");
    assert_eq!(prepare["claims"][0]["name"], "c1");

    let mut c = Container::new("main");
    c.claims.push(ContainerClaim {
        name: "c2".into(),
        request: None,
    });
    let info = manager.get_resources(&p, &c).unwrap();
    assert_eq!(info.cdi_devices, ["corral.example.com/python=py-c2-uid"]);

    manager.unprepare_resources("pod-1").await.unwrap();
    let unprepare = py.event("unprepare").await;
    assert_eq!(unprepare["claims"].as_array().unwrap().len(), 2);
    assert!(manager.claim_infos().is_empty());

    let stopped = py.stop().await;
    assert_eq!(stopped["ok"], true);
    assert_eq!(stopped["prepared"], Value::Array(vec![]));
    eventually("deregistration", || async { registry.drivers().is_empty() }).await;
    watcher.stop().await;
}

#[tokio::test]
async fn python_driver_v1beta1_and_claim_errors() {
    let dirs = Dirs::new();
    let mut py = PythonDriver::spawn(
        &dirs,
        &[
            "--versions",
            "v1beta1.DRAPlugin",
            "--fail",
            "python says no",
        ],
    )
    .await;
    let (registry, watcher) = registry(&dirs);
    assert_eq!(py.event("registration").await["registered"], true);
    wait_registered(&registry, DRIVER).await;
    assert_eq!(
        registry.plugin(DRIVER).unwrap().service(),
        DraService::V1Beta1
    );
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let err = prepare_pod1(&manager, DRIVER).await.unwrap_err();
    assert_mentions(&err, &["python says no", "default/c1", DRIVER]);
    assert_eq!(py.event("prepare").await["version"], "v1beta1");
    py.stop().await;
    watcher.stop().await;
}

#[tokio::test]
async fn python_driver_with_unsupported_version_is_told_why() {
    let dirs = Dirs::new();
    let mut py = PythonDriver::spawn(&dirs, &["--versions", "v1alpha4.DRAPlugin"]).await;
    let (registry, watcher) = registry(&dirs);
    let status = py.event("registration").await;
    assert_eq!(status["registered"], false);
    assert!(
        status["error"]
            .as_str()
            .unwrap()
            .contains("none of services supported by the plugin"),
        "{status}"
    );
    assert!(registry.drivers().is_empty());
    watcher.stop().await;
    py.stop().await;
}
