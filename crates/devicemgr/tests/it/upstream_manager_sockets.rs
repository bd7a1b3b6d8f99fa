//! Upstream `pkg/kubelet/cm/devicemanager/manager_test.go` tables that test the manager
//! with plugins, ported through the [`DeviceManager`] facade with sample plugins over real
//! sockets (every wait bounded): init and sidecar device reuse, run options of inactive
//! pods, PreStartContainer, allocatable devices, re-registration, capacity reset.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::support::*;
use corral_devicemgr::sample::{SampleConfig, SamplePlugin};
use corral_devicemgr::{Device, DeviceManager, StartOptions};
use corral_topology::HintProvider;

const RES1: &str = "domain1.com/resource1";
const RES2: &str = "domain2.com/resource2";

/// A sample plugin serving exactly `devices`.
fn serving(
    dir: &std::path::Path,
    resource: &str,
    name: &str,
    devices: Vec<Device>,
) -> SampleConfig {
    SampleConfig {
        devices,
        ..sample(dir, resource, name, 0, &[])
    }
}

fn devs(ids: &[&str], numa: Option<i64>) -> Vec<Device> {
    ids.iter()
        .map(|id| Device::new(*id, numa.map(|n| vec![n])))
        .collect()
}

fn held(manager: &DeviceManager, pod: &str, container: &str, resource: &str) -> BTreeSet<String> {
    manager
        .container_devices(pod, container)
        .get(resource)
        .map(|a| a.device_ids())
        .unwrap_or_default()
}

/// A manager whose active pods the test sets.
async fn manager_with_active_pods(
    dir: &std::path::Path,
) -> (DeviceManager, Arc<Mutex<BTreeSet<String>>>) {
    let active = Arc::new(Mutex::new(BTreeSet::new()));
    let seen = Arc::clone(&active);
    let manager = DeviceManager::new(config(dir, vec![0])).unwrap();
    manager
        .start(StartOptions {
            active_pods: Some(Arc::new(move || seen.lock().unwrap().clone())),
            ..StartOptions::default()
        })
        .await
        .unwrap();
    (manager, active)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_container_device_allocation() {
    // Upstream TestInitContainerDeviceAllocation (manager_test.go): devices of init
    // containers are reused by the app containers.
    let dir = tempfile::tempdir().unwrap();
    let (manager, active) = manager_with_active_pods(dir.path()).await;
    let p1 = plugin(
        &manager,
        serving(dir.path(), RES1, "r1", devs(&["dev1", "dev2"], None)),
    )
    .await;
    let p2 = plugin(
        &manager,
        serving(dir.path(), RES2, "r2", devs(&["dev3", "dev4"], Some(0))),
    )
    .await;
    let init1 = container("init1", &[(RES1, 1)]);
    let init2 = container("init2", &[(RES1, 2)]);
    let app1 = container("app1", &[(RES1, 1), (RES2, 1)]);
    let app2 = container("app2", &[(RES1, 1), (RES2, 1)]);
    let pod = pod(
        "uid-init",
        vec![init1.clone(), init2.clone()],
        vec![app1.clone(), app2.clone()],
    );
    active.lock().unwrap().insert(pod.uid.clone());
    for c in [&init1, &init2, &app1, &app2] {
        manager.allocate(&pod, c, None).await.unwrap();
    }
    let (i1, i2) = (
        held(&manager, "uid-init", "init1", RES1),
        held(&manager, "uid-init", "init2", RES1),
    );
    let (a1, a2) = (
        held(&manager, "uid-init", "app1", RES1),
        held(&manager, "uid-init", "app2", RES1),
    );
    assert_eq!((i1.len(), i2.len(), a1.len(), a2.len()), (1, 2, 1, 1));
    assert!(i2.is_superset(&i1) && i2.is_superset(&a1) && i2.is_superset(&a2));
    assert!(a1.is_disjoint(&a2));
    p1.stop().await;
    p2.stop().await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restartable_init_container_device_allocation() {
    // Upstream TestRestartableInitContainerDeviceAllocation (manager_test.go): a regular
    // init container's devices are shared; sidecars (restartable init containers) and app
    // containers each keep their own.
    let dir = tempfile::tempdir().unwrap();
    let (manager, active) = manager_with_active_pods(dir.path()).await;
    let ids = ["dev1", "dev2", "dev3", "dev4", "dev5", "dev6"];
    let p1 = plugin(&manager, serving(dir.path(), RES1, "r1", devs(&ids, None))).await;
    let init1 = container("init1", &[(RES1, 3)]);
    let side2 = sidecar("side2", &[(RES1, 1)]);
    let side3 = sidecar("side3", &[(RES1, 2)]);
    let app1 = container("app1", &[(RES1, 1)]);
    let app2 = container("app2", &[(RES1, 2)]);
    let pod = pod(
        "uid-side",
        vec![init1.clone(), side2.clone(), side3.clone()],
        vec![app1.clone(), app2.clone()],
    );
    active.lock().unwrap().insert(pod.uid.clone());
    for c in [&init1, &side2, &side3, &app1, &app2] {
        manager.allocate(&pod, c, None).await.unwrap();
    }
    let get = |c: &str| held(&manager, "uid-side", c, RES1);
    let (init, s2, s3, a1, a2) = (
        get("init1"),
        get("side2"),
        get("side3"),
        get("app1"),
        get("app2"),
    );
    assert_eq!(
        (init.len(), s2.len(), s3.len(), a1.len(), a2.len()),
        (3, 1, 2, 1, 2)
    );
    assert!(init.is_superset(&s2) && init.is_superset(&s3));
    let dedicated = [&s2, &s3, &a1, &a2];
    for (i, x) in dedicated.iter().enumerate() {
        for y in &dedicated[i + 1..] {
            assert!(x.is_disjoint(y), "{x:?} and {y:?} overlap");
        }
    }
    p1.stop().await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_device_run_container_options() {
    // Upstream TestGetDeviceRunContainerOptions (manager_test.go): run options for an
    // active pod; once the pod left the active pods and its devices were freed, no run
    // options and no error (and no re-allocation).
    let dir = tempfile::tempdir().unwrap();
    let (manager, active) = manager_with_active_pods(dir.path()).await;
    let p1 = plugin(
        &manager,
        serving(dir.path(), RES1, "r1", devs(&["dev1", "dev2"], Some(0))),
    )
    .await;
    let p2 = plugin(
        &manager,
        serving(dir.path(), RES2, "r2", devs(&["dev3", "dev4"], None)),
    )
    .await;
    let c1 = container("c", &[(RES1, 2), (RES2, 1)]);
    let c2 = container("c", &[(RES2, 1)]);
    let pod1 = pod("pod1", vec![], vec![c1.clone()]);
    let pod2 = pod("pod2", vec![], vec![c2.clone()]);
    active
        .lock()
        .unwrap()
        .extend(["pod1".to_owned(), "pod2".to_owned()]);
    manager.allocate(&pod1, &c1, None).await.unwrap();
    manager.allocate(&pod2, &c2, None).await.unwrap();

    let opts = manager
        .run_container_options(&pod1, &c1, None)
        .await
        .unwrap()
        .expect("run options of an active pod");
    // The sample plugin answers one device node per device and one mount per resource.
    assert_eq!(opts.devices.len(), 3);
    assert_eq!(opts.mounts.len(), 1, "both plugins mount the same path");

    *active.lock().unwrap() = BTreeSet::from(["pod2".to_owned()]);
    manager.update_allocated_devices();
    let allocations = p1.calls().allocate.len() + p2.calls().allocate.len();
    let opts = manager
        .run_container_options(&pod1, &c1, None)
        .await
        .unwrap();
    assert_eq!(opts, None);
    assert_eq!(
        p1.calls().allocate.len() + p2.calls().allocate.len(),
        allocations,
        "an inactive pod is not re-allocated"
    );
    p1.stop().await;
    p2.stop().await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_pre_start_container() {
    // Upstream TestDevicePreStartContainer (manager_test.go): PreStartContainer is called
    // with the container's devices when the plugin asks for it; a container asking for
    // zero devices causes no call.
    let dir = tempfile::tempdir().unwrap();
    let (manager, active) = manager_with_active_pods(dir.path()).await;
    let p1 = plugin(
        &manager,
        SampleConfig {
            pre_start_required: true,
            ..serving(dir.path(), RES1, "r1", devs(&["dev1", "dev2"], None))
        },
    )
    .await;
    let c = container("c", &[(RES1, 2)]);
    let pod1 = pod("pod1", vec![], vec![c.clone()]);
    active.lock().unwrap().insert("pod1".to_owned());
    manager.allocate(&pod1, &c, None).await.unwrap();
    let opts = manager
        .run_container_options(&pod1, &c, None)
        .await
        .unwrap()
        .unwrap();
    let calls = p1.calls();
    assert_eq!(calls.pre_start.len(), 1);
    let initialized: BTreeSet<&str> = calls.pre_start[0].iter().map(String::as_str).collect();
    assert_eq!(initialized, BTreeSet::from(["dev1", "dev2"]));
    assert_eq!(opts.devices.len(), 2);
    assert_eq!(opts.mounts.len(), 1);
    assert_eq!(opts.envs.len(), 1);

    let zero = container("c", &[(RES1, 0)]);
    let pod2 = pod("pod2", vec![], vec![zero.clone()]);
    active.lock().unwrap().insert("pod2".to_owned());
    manager.allocate(&pod2, &zero, None).await.unwrap();
    manager
        .run_container_options(&pod2, &zero, None)
        .await
        .unwrap();
    assert_eq!(
        p1.calls().pre_start.len(),
        1,
        "no PreStartContainer for zero devices"
    );
    p1.stop().await;
    manager.stop().await;
}

fn allocatable_ids(manager: &DeviceManager, resource: &str) -> Option<BTreeSet<String>> {
    manager
        .allocatable_devices()
        .get(resource)
        .map(|d| d.iter().map(|d| d.id.clone()).collect())
}

fn set(ids: &[&str]) -> Option<BTreeSet<String>> {
    Some(ids.iter().map(|s| (*s).to_owned()).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_allocatable_devices_multiple_resources() {
    // Upstream TestGetAllocatableDevicesMultipleResources (manager_test.go).
    let (dir, manager) = started(vec![0]).await;
    let mut r1 = devs(&["R1Device1", "R1Device2", "R1Device3"], None);
    r1[2].healthy = false;
    let other = "other.domain2.org/resource2";
    let p1 = plugin(&manager, serving(dir.path(), RES1, "r1", r1)).await;
    let p2 = plugin(
        &manager,
        serving(dir.path(), other, "r2", devs(&["R2Device1"], None)),
    )
    .await;
    assert_eq!(manager.allocatable_devices().len(), 2);
    assert_eq!(
        allocatable_ids(&manager, RES1),
        set(&["R1Device1", "R1Device2"])
    );
    assert_eq!(allocatable_ids(&manager, other), set(&["R2Device1"]));
    p1.stop().await;
    p2.stop().await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_allocatable_devices_health_transition() {
    // Upstream TestGetAllocatableDevicesHealthTransition (manager_test.go).
    let (dir, manager) = started(vec![0]).await;
    let mut r1 = devs(&["R1Device1", "R1Device2", "R1Device3"], None);
    r1[2].healthy = false;
    let p1 = plugin(&manager, serving(dir.path(), RES1, "r1", r1)).await;
    assert_eq!(manager.allocatable_devices().len(), 1);
    assert_eq!(
        allocatable_ids(&manager, RES1),
        set(&["R1Device1", "R1Device2"])
    );

    assert!(p1.set_health("R1Device3", true));
    assert!(
        manager
            .wait_until(WAIT, |s| s.healthy_devices(RES1).len() == 3)
            .await
    );
    assert_eq!(manager.allocatable_devices().len(), 1);
    assert_eq!(
        allocatable_ids(&manager, RES1),
        set(&["R1Device1", "R1Device2", "R1Device3"])
    );
    p1.stop().await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_plugin_re_registration() {
    // Upstream TestDevicePluginReRegistration (manager_test.go), for every combination of
    // the re-registering plugins' PreStartContainer and GetPreferredAllocation flags: a
    // plugin re-registering with the same devices changes nothing; one re-registering with
    // other devices replaces them.
    let devices = devs(&["Dev1", "Dev2"], None);
    for pre_start in [false, true] {
        for preferred in [false, true] {
            let (dir, manager) = started(vec![0]).await;
            let p1 = plugin(
                &manager,
                serving(dir.path(), RES1, "device-plugin", devices.clone()),
            )
            .await;
            let c = manager.capacity();
            assert_eq!(
                (c.capacity[RES1], c.allocatable[RES1]),
                (2, 2),
                "devices are not updated"
            );
            let flags = |name: &str, devices: Vec<Device>| SampleConfig {
                pre_start_required: pre_start,
                preferred_allocation: preferred,
                ..serving(dir.path(), RES1, name, devices)
            };
            let endpoint_is = |s: &corral_devicemgr::DeviceState| {
                s.endpoint(RES1).and_then(|e| e.options).is_some_and(|o| {
                    o.pre_start_required == pre_start
                        && o.get_preferred_allocation_available == preferred
                })
            };

            let p2 = SamplePlugin::start(flags("device-plugin.new", devices.clone()))
                .await
                .unwrap();
            p2.register(&manager.socket_path()).await.unwrap();
            assert!(manager.wait_until(WAIT, endpoint_is).await);
            assert!(manager.wait_for_plugin(RES1, WAIT).await);
            let c = manager.capacity();
            assert_eq!(
                (c.capacity[RES1], c.allocatable[RES1]),
                (2, 2),
                "devices shouldn't change"
            );

            let p3 = SamplePlugin::start(flags("device-plugin.third", devs(&["Dev3"], None)))
                .await
                .unwrap();
            p3.register(&manager.socket_path()).await.unwrap();
            assert!(
                manager
                    .wait_until(WAIT, |s| s.healthy_devices(RES1).len() == 1)
                    .await
            );
            assert!(manager.with_state(endpoint_is));
            let c = manager.capacity();
            assert_eq!(
                (c.capacity[RES1], c.allocatable[RES1]),
                (1, 1),
                "devices of the plugin previously registered are removed"
            );
            p2.stop().await;
            p3.stop().await;
            p1.stop().await;
            manager.stop().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_manager_start_and_stop_twice() {
    // Upstream TestNewManagerImplStart (manager_test.go): stop tolerates being called more
    // than once.
    let (dir, manager) = started(vec![0]).await;
    let p1 = plugin(&manager, serving(dir.path(), RES1, "device-plugin", vec![])).await;
    p1.stop().await;
    manager.stop().await;
    manager.stop().await;
    assert!(!manager.plugin_ready(RES1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_topology_hints_with_updates() {
    // Upstream TestGetTopologyHintsWithUpdates (manager_test.go): container and pod hints
    // asked while the plugin keeps sending device lists. Upstream relies on Go's race
    // detector; here every answer must also be the right one.
    let (dir, manager) = started(vec![0]).await;
    let ids: Vec<String> = (0..1000).map(|i| format!("dev-{i}")).collect();
    let list: Vec<Device> = ids
        .iter()
        .map(|id| Device::new(id, Some(vec![0])))
        .collect();
    let p1 = plugin(&manager, serving(dir.path(), RES1, "device-plugin", list)).await;
    let c = container("c", &[(RES1, 1)]);
    let pod = pod("uid-hints", vec![], vec![c.clone()]);
    let expected = vec![corral_topology::TopologyHint {
        numa_affinity: Some(corral_topology::NumaMask::new([0]).unwrap()),
        preferred: true,
    }];
    let updates = {
        let p1 = &p1;
        async move {
            for i in 0..10 {
                // Each health change sends the whole list again.
                assert!(p1.set_health("dev-999", i % 2 == 1));
                tokio::task::yield_now().await;
            }
        }
    };
    let queries = async {
        for _ in 0..50 {
            let hints = manager.hints_for_container(&pod, &c).unwrap();
            assert_eq!(hints[RES1].as_ref(), Some(&expected));
            let hints = manager.hints_for_pod(&pod).unwrap();
            assert_eq!(hints[RES1].as_ref(), Some(&expected));
            tokio::task::yield_now().await;
        }
    };
    tokio::join!(updates, queries);
    p1.stop().await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_extended_resource() {
    // Upstream TestResetExtendedResource (manager_test.go): no reset while the checkpoint
    // exists; a reset once it is gone (the node was recreated). Corral deviation
    // (documented on should_reset_extended_resource_capacity): only
    // kubelet_internal_checkpoint counts, not any file in the directory.
    let (dir, manager) = started(vec![0]).await;
    let p1 = plugin(
        &manager,
        serving(dir.path(), RES1, "r1", devs(&["dev1"], None)),
    )
    .await;
    let c = container("con", &[(RES1, 1)]);
    let pod = pod("pod", vec![], vec![c.clone()]);
    manager.allocate(&pod, &c, None).await.unwrap();
    let checkpoint = dir.path().join("kubelet_internal_checkpoint");
    assert!(checkpoint.exists());
    assert!(!manager.should_reset_extended_resource_capacity());

    // Nothing may write the checkpoint again once it is removed: the plugin is gone (its
    // disconnection seen) and the writes asked for so far are done.
    p1.stop().await;
    let stopped = |s: &corral_devicemgr::DeviceState| {
        s.endpoint(RES1).is_some_and(|e| e.stopped_at.is_some())
    };
    assert!(manager.wait_until(WAIT, stopped).await);
    tokio::time::timeout(WAIT, manager.settled())
        .await
        .expect("background writes finish");
    std::fs::remove_file(&checkpoint).unwrap();
    std::fs::write(dir.path().join("stray-file"), b"not a checkpoint").unwrap();
    assert!(manager.should_reset_extended_resource_capacity());
    manager.stop().await;
}
