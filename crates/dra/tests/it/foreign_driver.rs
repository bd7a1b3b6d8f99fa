//! A foreign DRA driver: the project's Python grpcio peer (`python -m corral_peer
//! dra-driver`) registers through the registration directory and serves
//! NodePrepareResources / NodeUnprepareResources to corral's registry, client and manager:
//! share ids end to end into `dra_manager_state`, and two instances of one driver in a
//! rolling update.

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
        let (registry, plugins) = (dirs.registry(), dirs.plugins(DRIVER));
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

fn checkpoint_text(dirs: &Dirs) -> String {
    std::fs::read_to_string(dirs.state().join("dra_manager_state")).unwrap()
}

/// The share id a grpcio driver sends over DRAPlugin v1 reaches the claim info and is
/// written into `dra_manager_state` as `ShareID`; a driver that sends none is written
/// `"ShareID":null`, as a v1.36 kubelet writes it.
#[tokio::test]
async fn python_driver_share_ids_reach_the_checkpoint() {
    let dirs = Dirs::new();
    let mut py = PythonDriver::spawn(&dirs, &["--share-id", "share-{uid}"]).await;
    let (registry, watcher) = registry(&dirs);
    assert_eq!(py.event("registration").await["registered"], true);
    wait_registered(&registry, DRIVER).await;
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    prepare_pod1(&manager, DRIVER).await.unwrap();
    let devices = manager.claim_info(NAMESPACE, "c1").unwrap().devices(DRIVER);
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].share_id.as_deref(), Some("share-c1-uid"));
    let text = checkpoint_text(&dirs);
    assert!(
        text.contains(
            r#"\"DeviceName\":\"py-c1-uid\",\"ShareID\":\"share-c1-uid\",\"RequestNames\":null"#
        ),
        "{text}"
    );
    // The file is what corral's reader (and a kubelet's) accepts, share id included.
    let restored = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    let devices = restored
        .claim_info(NAMESPACE, "c1")
        .unwrap()
        .devices(DRIVER);
    assert_eq!(devices[0].share_id.as_deref(), Some("share-c1-uid"));
    drop(restored);
    manager.unprepare_resources("pod-1").await.unwrap();
    py.stop().await;
    watcher.stop().await;

    // Without --share-id: null. Over v1beta1 (which has no share_id): null too.
    for extra in [
        &[][..],
        &["--versions", "v1beta1.DRAPlugin", "--share-id", "x"][..],
    ] {
        let dirs = Dirs::new();
        let mut py = PythonDriver::spawn(&dirs, extra).await;
        let (registry, watcher) = crate::support::registry(&dirs);
        assert_eq!(py.event("registration").await["registered"], true);
        wait_registered(&registry, DRIVER).await;
        let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
        prepare_pod1(&manager, DRIVER).await.unwrap();
        let devices = manager.claim_info(NAMESPACE, "c1").unwrap().devices(DRIVER);
        assert_eq!(devices[0].share_id, None, "{extra:?}");
        let text = checkpoint_text(&dirs);
        assert!(
            text.contains(r#"\"DeviceName\":\"py-c1-uid\",\"ShareID\":null,"#),
            "{extra:?}: {text}"
        );
        manager.unprepare_resources("pod-1").await.unwrap();
        py.stop().await;
        watcher.stop().await;
    }
}

/// Two grpcio instances of one driver (`--pod-uid`, the helper's rolling-update sockets)
/// registered at once: prepare goes to the newest; the old one stops and the new one
/// unprepares the claim it prepared — no claim lost.
#[tokio::test]
async fn python_driver_rolling_update() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut old = PythonDriver::spawn(&dirs, &["--pod-uid", "pod-old"]).await;
    assert_eq!(old.event("registration").await["registered"], true);
    wait_registered(&registry, DRIVER).await;
    let manager = DraManager::open(dirs.state(), Arc::clone(&registry)).unwrap();
    prepare_pod1(&manager, DRIVER).await.unwrap();
    assert_eq!(old.event("prepare").await["claims"][0]["uid"], "c1-uid");

    let mut new =
        PythonDriver::spawn(&dirs, &["--pod-uid", "pod-new", "--share-id", "{uid}-new"]).await;
    assert_eq!(new.event("registration").await["registered"], true);
    eventually("two instances", || async {
        registry.store().plugin_count(DRIVER) == 2
    })
    .await;
    let endpoints = registry.store().endpoints(DRIVER);
    assert!(endpoints[0].ends_with("dra-pod-old.sock"), "{endpoints:?}");
    assert!(endpoints[1].ends_with("dra-pod-new.sock"), "{endpoints:?}");
    manager
        .prepare_resources(&pod("pod-2", &["c2"]), &[claim("c2", DRIVER, &["pod-2"])])
        .await
        .unwrap();
    assert_eq!(new.event("prepare").await["claims"][0]["uid"], "c2-uid");
    let devices = manager.claim_info(NAMESPACE, "c2").unwrap().devices(DRIVER);
    assert_eq!(devices[0].share_id.as_deref(), Some("c2-uid-new"));

    let stopped = old.stop().await;
    assert_eq!(stopped["prepared"], serde_json::json!(["c1-uid"]));
    eventually("one instance", || async {
        registry.store().plugin_count(DRIVER) == 1
    })
    .await;
    manager.unprepare_resources("pod-1").await.unwrap();
    let unprepare = new.event("unprepare").await;
    assert_eq!(unprepare["claims"][0]["uid"], "c1-uid");
    assert!(manager.claim_info(NAMESPACE, "c1").is_none());
    manager.unprepare_resources("pod-2").await.unwrap();
    assert!(manager.claim_infos().is_empty());
    new.stop().await;
    watcher.stop().await;
}

/// The Python driver streams health (`v1alpha1.DRAResourceHealth`) to the registry's
/// health monitor as soon as it registers: the first attempt opens it (a retry would come
/// only after an hour here).
#[tokio::test]
async fn python_health_stream_opens_at_registration() {
    use corral_dra::health::{HealthCache, HealthMonitor, HealthMonitorConfig};
    for _ in 0..3 {
        let dirs = Dirs::new();
        let (registry, watcher) = registry(&dirs);
        let monitor = HealthMonitor::new(
            Arc::new(HealthCache::in_memory()),
            HealthMonitorConfig {
                retry_interval: std::time::Duration::from_secs(3600),
                ..HealthMonitorConfig::default()
            },
        );
        registry.set_observer(Arc::new(monitor.clone())).unwrap();
        let mut driver = PythonDriver::spawn(
            &dirs,
            &["--versions", "v1.DRAPlugin,v1alpha1.DRAResourceHealth"],
        )
        .await;
        // `next_event` waits at most `WAIT` for each event.
        while driver.next_event().await["event"] != "health_stream" {}
        monitor.stop();
        watcher.stop().await;
        drop(driver);
    }
}
