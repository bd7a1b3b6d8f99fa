//! `kubelet_internal_checkpoint` files with a valid checksum but inconsistent content: a
//! device held by two owners is refused at start (naming the file, the resource, the device,
//! both owners and the remedy), except upstream's legitimate sharing — an init container's
//! devices reused by a later container of the same pod. Devices whose plugin has not
//! registered (yet) stay allocated, as upstream, until their pod goes.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use crate::support::*;
use corral_checkpoint::{
    CheckpointStore, DEVICE_MANAGER_FILE, DeviceManagerCheckpoint, PodDevicesEntry,
};
use corral_devicemgr::{
    AllocateError, DeviceManager, DeviceManagerError, StartOptions, encode_allocate_response,
};
use corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse;
use corral_topology::Pod;

const GPU: &str = "example.com/gpu";

fn entry(pod: &str, container: &str, resource: &str, numa: i64, ids: &[&str]) -> PodDevicesEntry {
    PodDevicesEntry {
        pod_uid: pod.into(),
        container_name: container.into(),
        resource_name: resource.into(),
        device_ids: Some(
            [(numa, Some(ids.iter().map(|s| (*s).to_owned()).collect()))]
                .into_iter()
                .collect(),
        ),
        alloc_resp: Some(encode_allocate_response(
            &ContainerAllocateResponse::default(),
        )),
    }
}

/// Write a checkpoint with a valid checksum (through the store, as a kubelet would).
fn write_checkpoint(dir: &Path, entries: Vec<PodDevicesEntry>, registered: &[&str]) {
    let checkpoint = DeviceManagerCheckpoint {
        pod_device_entries: Some(entries),
        registered_devices: Some(
            registered
                .iter()
                .map(|r| ((*r).to_owned(), Some(vec![])))
                .collect(),
        ),
    };
    CheckpointStore::open(dir)
        .unwrap()
        .create(DEVICE_MANAGER_FILE, &checkpoint)
        .unwrap();
}

async fn start(dir: &Path, pods: Option<Vec<Pod>>) -> Result<DeviceManager, DeviceManagerError> {
    let manager = DeviceManager::new(config(dir, vec![0, 1])).unwrap();
    if let Some(pods) = pods {
        manager.set_pod_specs(Arc::new(move |uid: &str| {
            pods.iter().find(|p| p.uid == uid).cloned()
        }));
    }
    manager.start(StartOptions::default()).await?;
    Ok(manager)
}

fn refused(err: &DeviceManagerError, dir: &Path) -> String {
    let DeviceManagerError::DoubleAssignment(conflict) = err else {
        panic!("not a double assignment: {err}");
    };
    let text = err.to_string();
    let path = dir.join(DEVICE_MANAGER_FILE);
    assert_eq!(conflict.path, path);
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(
        text.contains(&format!("drain this node, delete {}", path.display())),
        "remedy: {text}"
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_of_two_pods_is_refused_naming_file_resource_device_and_owners() {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(
        dir.path(),
        vec![
            entry("pod-a", "app", GPU, 0, &["gpu-0", "gpu-1"]),
            entry("pod-b", "main", GPU, 0, &["gpu-2", "gpu-1"]),
        ],
        &[GPU],
    );
    let err = start(dir.path(), None).await.unwrap_err();
    let text = refused(&err, dir.path());
    for part in [GPU, "gpu-1", "pod-a", "app", "pod-b", "main"] {
        assert!(text.contains(part), "{part} missing: {text}");
    }
    let DeviceManagerError::DoubleAssignment(conflict) = &err else {
        unreachable!()
    };
    assert_eq!(
        (conflict.resource.as_str(), conflict.device.as_str()),
        (GPU, "gpu-1")
    );
    assert_eq!(
        (
            conflict.first.pod_uid.as_str(),
            conflict.first.container.as_str()
        ),
        ("pod-a", "app")
    );
    assert_eq!(
        (
            conflict.second.pod_uid.as_str(),
            conflict.second.container.as_str()
        ),
        ("pod-b", "main")
    );
    let manager = DeviceManager::new(config(dir.path(), vec![0])).unwrap();
    assert!(!manager.socket_path().exists(), "nothing is served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_listed_under_two_numa_nodes_or_in_another_resource_is_not_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let mut multi_numa = entry("pod-a", "app", GPU, 0, &["gpu-0"]);
    multi_numa
        .device_ids
        .as_mut()
        .unwrap()
        .insert(1, Some(vec!["gpu-0".into()]));
    write_checkpoint(
        dir.path(),
        vec![
            multi_numa,
            // The same id in another resource is another device.
            entry("pod-b", "app", "example.com/nic", 0, &["gpu-0"]),
        ],
        &[GPU],
    );
    let manager = start(dir.path(), None).await.unwrap();
    assert_eq!(
        manager.with_state(|s| s.allocated_devices(GPU)),
        BTreeSet::from(["gpu-0".to_owned()])
    );
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_container_devices_reused_by_a_later_container_of_the_same_pod_stay_valid() {
    // Upstream's reusable devices: `init` ran first, `app` reused its gpu-0.
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(
        dir.path(),
        vec![
            entry("pod-a", "init", GPU, 0, &["gpu-0", "gpu-1"]),
            entry("pod-a", "init2", GPU, 0, &["gpu-1"]),
            entry("pod-a", "app", GPU, 0, &["gpu-0"]),
            entry("pod-a", "side", GPU, 0, &["gpu-1"]),
        ],
        &[GPU],
    );
    let spec = pod(
        "pod-a",
        vec![
            container("init", &[(GPU, 2)]),
            container("init2", &[(GPU, 1)]),
            sidecar("side", &[(GPU, 1)]),
        ],
        vec![container("app", &[(GPU, 1)])],
    );
    // Without pod specs (a kubelet's checkpoint, nothing known about the pod) and with them.
    for pods in [None, Some(vec![spec])] {
        let known = pods.is_some();
        let manager = start(dir.path(), pods)
            .await
            .unwrap_or_else(|e| panic!("specs known: {known}: {e}"));
        assert_eq!(
            manager.container_devices("pod-a", "app")[GPU].device_ids(),
            BTreeSet::from(["gpu-0".to_owned()])
        );
        assert_eq!(manager.with_state(|s| s.allocated_devices(GPU)).len(), 2);
        manager.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_non_init_containers_of_one_pod_sharing_a_device_are_refused_when_the_pod_is_known() {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(
        dir.path(),
        vec![
            entry("pod-a", "init", GPU, 0, &["gpu-0"]),
            entry("pod-a", "side", GPU, 0, &["gpu-0"]),
            entry("pod-a", "app", GPU, 0, &["gpu-0"]),
        ],
        &[GPU],
    );
    let spec = pod(
        "pod-a",
        vec![container("init", &[(GPU, 1)]), sidecar("side", &[(GPU, 1)])],
        vec![container("app", &[(GPU, 1)])],
    );
    // A sidecar keeps its devices for the pod's life: an app container cannot reuse them.
    let err = start(dir.path(), Some(vec![spec])).await.unwrap_err();
    let text = refused(&err, dir.path());
    assert!(
        text.contains("\"app\"") && text.contains("\"side\""),
        "{text}"
    );
    assert!(
        !text.contains("\"init\""),
        "the init container shares legitimately: {text}"
    );
    assert!(text.contains("same pod"), "{text}");

    // Two app containers.
    write_checkpoint(
        dir.path(),
        vec![
            entry("pod-b", "one", GPU, 0, &["gpu-3"]),
            entry("pod-b", "two", GPU, 0, &["gpu-3"]),
        ],
        &[GPU],
    );
    let spec = pod(
        "pod-b",
        vec![],
        vec![container("one", &[(GPU, 1)]), container("two", &[(GPU, 1)])],
    );
    let err = start(dir.path(), Some(vec![spec])).await.unwrap_err();
    refused(&err, dir.path());

    // The same file when nothing is known about the pod: the sharing may be upstream's
    // init-container reuse, so it loads.
    let manager = start(dir.path(), None).await.unwrap();
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_of_a_plugin_not_registered_yet_stay_allocated_until_it_comes_back() {
    // As upstream's readCheckpoint: allocations come back whether or not their plugin has
    // registered (and whether or not the resource is among the registered ones); they keep
    // their devices and no other pod gets them when the plugin registers.
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(
        dir.path(),
        vec![entry("pod-a", "app", GPU, 0, &["gpu-1"])],
        &[],
    );
    let manager = start(dir.path(), None).await.unwrap();
    assert_eq!(
        manager.with_state(|s| s.allocated_devices(GPU)),
        BTreeSet::from(["gpu-1".to_owned()])
    );
    assert!(manager.with_state(|s| s.is_device_plugin_resource(GPU)));
    assert_eq!(
        manager.capacity().capacity.get(GPU),
        None,
        "no plugin: no capacity"
    );
    // A new pod is refused while the plugin is away.
    let new = container("new", &[(GPU, 1)]);
    assert_allocate_error!(
        manager
            .allocate(&pod("pod-n", vec![], vec![new.clone()]), &new, None)
            .await,
        AllocateError::NoHealthyDevices { .. } | AllocateError::Unregistered { .. }
    );

    // The plugin registers with gpu-0 and gpu-1: only gpu-0 is free.
    let plugin = plugin(&manager, sample(dir.path(), GPU, "gpu", 2, &[0])).await;
    assert_eq!(manager.capacity().capacity[GPU], 2);
    assert_eq!(
        manager.with_state(|s| s.available_devices(GPU)),
        BTreeSet::from(["gpu-0".to_owned()])
    );
    let two = container("two", &[(GPU, 2)]);
    assert_allocate_error!(
        manager
            .allocate(&pod("pod-2", vec![], vec![two.clone()]), &two, None)
            .await,
        AllocateError::Unavailable { .. }
    );
    manager
        .allocate(&pod("pod-n", vec![], vec![new.clone()]), &new, None)
        .await
        .unwrap();
    assert_eq!(
        manager.container_devices("pod-n", "new")[GPU].device_ids(),
        BTreeSet::from(["gpu-0".to_owned()])
    );
    plugin.stop().await;
    manager.stop().await;
}
