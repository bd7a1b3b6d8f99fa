//! Manager restarts: allocations come back from the checkpoint (ours, a kubelet's, the
//! pre-1.20 format), registered resources come back stopped, running containers keep their
//! devices without their plugin (init containers too), admission waits a bounded time for
//! a plugin to come back, and a corrupt checkpoint is a loud error.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::support::*;
use corral_devicemgr::{AllocateError, DeviceManager, DeviceManagerError, StartOptions};

const GPU: &str = "example.com/gpu";
const CHECKPOINT: &str = "kubelet_internal_checkpoint";

async fn restarted(dir: &Path, options: StartOptions, wait: Duration) -> DeviceManager {
    let mut cfg = config(dir, vec![0, 1]);
    cfg.registration_wait = wait;
    let manager = DeviceManager::new(cfg).unwrap();
    manager.start(options).await.unwrap();
    manager
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_restores_allocations_and_stopped_endpoints() {
    let (dir, first) = started(vec![0, 1]).await;
    assert!(
        first.should_reset_extended_resource_capacity(),
        "fresh node"
    );
    let plugin_cfg = sample(dir.path(), GPU, "gpu", 4, &[0, 1]);
    let plugin = plugin(&first, plugin_cfg.clone()).await;
    let init = container("init", &[(GPU, 1)]);
    let app = container("app", &[(GPU, 2)]);
    let p = pod("uid-1", vec![init.clone()], vec![app.clone()]);
    first.allocate(&p, &init, None).await.unwrap();
    first.allocate(&p, &app, None).await.unwrap();
    let held = first.container_devices("uid-1", "app");
    first.stop().await;
    plugin.stop().await;

    // Restart without the plugin: allocations are back, capacity reads 0.
    let running = BTreeSet::from([("uid-1".to_owned(), "app".to_owned())]);
    let options = StartOptions {
        sources_ready: false,
        running_containers: running,
        ..StartOptions::default()
    };
    let second = restarted(dir.path(), options, Duration::ZERO).await;
    assert!(!second.should_reset_extended_resource_capacity());
    assert_eq!(second.container_devices("uid-1", "app"), held);
    let capacity = second.capacity();
    assert_eq!((capacity.capacity[GPU], capacity.allocatable[GPU]), (0, 0));
    assert!(second.with_state(|s| s.endpoint(GPU).unwrap().stopped_at.is_some()));
    // The running container and its finished init container keep their devices without
    // their plugin (upstream #118559, #124345).
    second.allocate(&p, &init, None).await.unwrap();
    second.allocate(&p, &app, None).await.unwrap();
    // A new pod needing the resource fails at once (no wait configured).
    let new_app = container("new", &[(GPU, 1)]);
    assert_allocate_error!(
        second
            .allocate(&pod("uid-2", vec![], vec![new_app.clone()]), &new_app, None)
            .await,
        AllocateError::NoHealthyDevices { .. }
    );

    // The plugin re-registers: capacity comes back, the allocation still holds.
    let plugin = crate::support::plugin(&second, plugin_cfg).await;
    let capacity = second.capacity();
    assert_eq!(capacity.capacity[GPU], 4);
    let mut busy = held[GPU].device_ids();
    busy.extend(second.container_devices("uid-1", "init")[GPU].device_ids());
    let available = second.with_state(|s| s.available_devices(GPU));
    assert!(available.is_disjoint(&busy), "{available:?} vs {busy:?}");
    plugin.stop().await;
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_waits_for_the_plugin_to_come_back() {
    let (dir, first) = started(vec![0, 1]).await;
    let plugin_cfg = sample(dir.path(), GPU, "gpu", 2, &[0]);
    let plugin = plugin(&first, plugin_cfg.clone()).await;
    first.stop().await;
    plugin.stop().await;

    // Without the plugin, the wait is bounded and the error says why (upstream #133382).
    let second = restarted(
        dir.path(),
        StartOptions::default(),
        Duration::from_millis(200),
    )
    .await;
    let app = container("app", &[(GPU, 1)]);
    let p = pod("uid-w", vec![], vec![app.clone()]);
    let err = assert_allocate_error!(
        second.allocate(&p, &app, None).await,
        AllocateError::PluginNotRegistered { .. }
    );
    assert!(
        err.to_string().contains("did not register within 200ms"),
        "{err}"
    );
    second.stop().await;

    // With the plugin coming back during the wait, admission succeeds.
    let third = restarted(dir.path(), StartOptions::default(), WAIT).await;
    let admitting = {
        let third = third.clone();
        let p = p.clone();
        let app = app.clone();
        tokio::spawn(async move { third.allocate(&p, &app, None).await })
    };
    let plugin = corral_devicemgr::sample::SamplePlugin::start(plugin_cfg)
        .await
        .unwrap();
    plugin.register(&third.socket_path()).await.unwrap();
    tokio::time::timeout(WAIT, admitting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(plugin.calls().allocate.len(), 1);
    plugin.stop().await;
    third.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_without_returning_plugin_is_dropped_after_grace() {
    let (dir, first) = started(vec![0]).await;
    let plugin = plugin(&first, sample(dir.path(), GPU, "gpu", 2, &[0])).await;
    first.stop().await;
    plugin.stop().await;
    let mut cfg = config(dir.path(), vec![0]);
    cfg.endpoint_stop_grace = Duration::from_millis(300);
    let second = manager(cfg).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let capacity = second.capacity();
        if capacity.removed == vec![GPU.to_owned()] {
            break;
        }
        assert_eq!(capacity.capacity.get(GPU), Some(&0));
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    second.stop().await;
    let text = std::fs::read_to_string(dir.path().join(CHECKPOINT)).unwrap();
    assert!(text.contains("\"RegisteredDevices\":{}"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_checkpoint_is_a_loud_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(CHECKPOINT);
    for bytes in [
        &b"{not json"[..],
        br#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":1}"#,
    ] {
        std::fs::write(&path, bytes).unwrap();
        let manager = DeviceManager::new(config(dir.path(), vec![0])).unwrap();
        let err = manager.start(StartOptions::default()).await.unwrap_err();
        assert!(matches!(err, DeviceManagerError::Checkpoint(_)), "{err}");
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
        assert!(!manager.socket_path().exists(), "nothing is served");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_plugin_dir_asks_to_reset_capacity_and_stale_sockets_go() {
    let dir = tempfile::tempdir().unwrap();
    let stale = std::os::unix::net::UnixListener::bind(dir.path().join("stale.sock")).unwrap();
    drop(stale);
    std::fs::write(dir.path().join("notes.txt"), "kept").unwrap();
    let manager = manager(config(dir.path(), vec![0])).await;
    assert!(manager.should_reset_extended_resource_capacity());
    assert!(!dir.path().join("stale.sock").exists());
    assert!(dir.path().join("notes.txt").exists());
    assert!(manager.socket_path().exists());
    manager.stop().await;
}

fn vectors(file: &str) -> Vec<serde_json::Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/conformance")
        .join(file);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_written_checkpoints_restore() {
    for (file, reader) in [
        ("checkpoint_devicemanager_v2.json", "as_v2"),
        ("checkpoint_devicemanager_v1.json", "as_v1"),
    ] {
        for vector in vectors(file) {
            if vector["verdicts"][reader]["accepted"] != true {
                continue;
            }
            let name = vector["name"].as_str().unwrap();
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(
                dir.path().join(CHECKPOINT),
                vector["file"].as_str().unwrap(),
            )
            .unwrap();
            let manager = DeviceManager::new(config(dir.path(), vec![0, 1])).unwrap();
            manager
                .start(StartOptions::default())
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let input = &vector["input"];
            let mut want = BTreeSet::new();
            for entry in input["PodDeviceEntries"].as_array().into_iter().flatten() {
                let ids: BTreeSet<String> = match &entry["DeviceIDs"] {
                    serde_json::Value::Object(per_numa) => per_numa
                        .values()
                        .flat_map(|l| l.as_array().cloned().unwrap_or_default())
                        .map(|v| v.as_str().unwrap().to_owned())
                        .collect(),
                    serde_json::Value::Array(ids) => {
                        ids.iter().map(|v| v.as_str().unwrap().to_owned()).collect()
                    }
                    _ => BTreeSet::new(),
                };
                let key = |f: &str| entry[f].as_str().unwrap().to_owned();
                want.insert((
                    key("PodUID"),
                    key("ContainerName"),
                    key("ResourceName"),
                    ids,
                ));
            }
            let got: BTreeSet<_> = manager.with_state(|s| {
                s.pod_devices()
                    .entries()
                    .map(|(p, c, r, a)| (p.to_owned(), c.to_owned(), r.to_owned(), a.device_ids()))
                    .collect()
            });
            // Later duplicates of a (pod, container, resource) replace earlier ones.
            let keys = |s: &BTreeSet<(String, String, String, BTreeSet<String>)>| -> BTreeSet<_> {
                s.iter()
                    .map(|(p, c, r, _)| (p.clone(), c.clone(), r.clone()))
                    .collect()
            };
            assert_eq!(keys(&got), keys(&want), "{name}");
            assert!(got.is_subset(&want), "{name}: {got:?} vs {want:?}");
            let registered: BTreeSet<String> = input["RegisteredDevices"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            for resource in &registered {
                assert_eq!(
                    manager.capacity().capacity.get(resource),
                    Some(&0),
                    "{name}: {resource}"
                );
            }
            manager.stop().await;
        }
    }
}
