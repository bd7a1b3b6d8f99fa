//! Real sockets end to end: a sample plugin registers on `kubelet.sock`, lists its devices,
//! and is allocated from; health flips, preferred allocation, PreStartContainer, plugin
//! restart and re-registration, a plugin killed mid-stream, a socket that disappears.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::*;
use corral_devicemgr::AllocateError;
use corral_topology::HintProvider;

const GPU: &str = "example.com/gpu";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_list_allocate_run_options() {
    let (dir, manager, plugin) = started_with_plugin(vec![0, 1], GPU, 4, &[0, 1]).await;
    assert_eq!(manager.with_state(|s| s.healthy_devices(GPU).len()), 4);
    let capacity = manager.capacity();
    assert_eq!(capacity.capacity[GPU], 4);
    assert_eq!(capacity.allocatable[GPU], 4);

    let app = container("app", &[(GPU, 2)]);
    let pod = pod("uid-1", vec![], vec![app.clone()]);
    let hints = manager.hints_for_container(&pod, &app).unwrap();
    let gpu_hints = hints[GPU].clone().unwrap();
    assert!(gpu_hints[0].preferred, "{gpu_hints:?}");
    allocate_on(&manager, &pod, &app, 1).await;
    let held = manager.container_devices("uid-1", "app");
    assert_eq!(
        held[GPU].device_ids(),
        BTreeSet::from(["gpu-1".to_owned(), "gpu-3".to_owned()]),
        "both on NUMA 1"
    );
    assert_eq!(
        plugin.calls().allocate,
        vec![vec!["gpu-1".to_owned(), "gpu-3".to_owned()]]
    );

    let opts = run_options(&manager, &pod, &app).await;
    assert_eq!(opts.envs[0].name, "SAMPLE_DEVICES");
    assert_eq!(opts.envs[0].value, "gpu-1,gpu-3");
    assert_eq!(opts.devices.len(), 2);
    assert_eq!(opts.mounts.len(), 1);
    assert_eq!(
        opts.cdi_devices,
        vec!["corral.dev/sample=gpu-1", "corral.dev/sample=gpu-3"]
    );

    // Allocating again for the same container changes nothing (a container restart).
    manager.allocate(&pod, &app, None).await.unwrap();
    assert_eq!(plugin.calls().allocate.len(), 1);

    // The checkpoint holds the allocation.
    let bytes = std::fs::read(dir.path().join("kubelet_internal_checkpoint")).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("\"PodUID\":\"uid-1\""), "{text}");
    assert!(text.contains("\"1\":[\"gpu-1\",\"gpu-3\"]"), "{text}");

    // Not enough devices left: upstream's message, nothing leaked.
    let big = container("big", &[(GPU, 3)]);
    let pod2 = crate::support::pod("uid-2", vec![], vec![big.clone()]);
    let err = manager.allocate(&pod2, &big, None).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "requested number of devices unavailable for example.com/gpu. Requested: 3, Available: 2"
    );
    assert_eq!(manager.with_state(|s| s.available_devices(GPU).len()), 2);
    manager.stop().await;
    plugin.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_flip_is_seen_at_once() {
    let (_dir, manager, plugin) = started_with_plugin(vec![0], GPU, 2, &[0]).await;
    assert!(plugin.set_health("gpu-0", false));
    assert!(
        manager
            .wait_until(WAIT, |s| s.unhealthy_devices(GPU).len() == 1)
            .await
    );
    let capacity = manager.capacity();
    assert_eq!((capacity.capacity[GPU], capacity.allocatable[GPU]), (2, 1));
    assert!(plugin.set_health("gpu-0", true));
    assert!(
        manager
            .wait_until(WAIT, |s| s.healthy_devices(GPU).len() == 2)
            .await
    );
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferred_allocation_and_pre_start() {
    let (dir, manager) = started(vec![0]).await;
    let cfg = fussy_sample(dir.path(), GPU, 6, &[0]);
    let plugin = plugin(&manager, cfg).await;
    let app = container("app", &[(GPU, 2)]);
    let pod = pod("uid-p", vec![], vec![app.clone()]);
    allocate_on(&manager, &pod, &app, 0).await;
    // The sample prefers the highest ids; the manager would have taken gpu-0, gpu-1.
    assert_eq!(plugin.calls().preferred, 1);
    assert_eq!(
        manager.container_devices("uid-p", "app")[GPU].device_ids(),
        BTreeSet::from(["gpu-4".to_owned(), "gpu-5".to_owned()])
    );
    manager
        .run_container_options(&pod, &app, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        plugin.calls().pre_start,
        vec![vec!["gpu-4".to_owned(), "gpu-5".to_owned()]]
    );
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_restart_and_re_registration_replace_the_endpoint() {
    let (dir, manager) = started(vec![0]).await;
    let first = plugin(&manager, sample(dir.path(), GPU, "gpu-a", 2, &[0])).await;
    // A second plugin for the same resource on another socket replaces the first; the
    // first one's stream ending later must not disconnect the second.
    let second = plugin(&manager, sample(dir.path(), GPU, "gpu-b", 3, &[0])).await;
    assert!(
        manager
            .wait_until(WAIT, |s| s.healthy_devices(GPU).len() == 3)
            .await
    );
    first.stop().await;
    // Once the old stream has ended (and reported whatever it would), the new endpoint
    // is still there.
    tokio::time::timeout(WAIT, manager.settled())
        .await
        .expect("the old stream ends");
    assert!(
        manager.plugin_ready(GPU),
        "the old stream's end left the new endpoint alone"
    );
    assert_eq!(manager.with_state(|s| s.healthy_devices(GPU).len()), 3);
    let app = container("app", &[(GPU, 1)]);
    let pod = pod("uid-r", vec![], vec![app.clone()]);
    manager.allocate(&pod, &app, None).await.unwrap();
    assert_eq!(second.calls().allocate.len(), 1);

    // The plugin restarts on the same socket and registers again.
    second.stop().await;
    assert!(
        manager
            .wait_until(WAIT, |s| s.healthy_devices(GPU).is_empty())
            .await
    );
    let third = plugin(&manager, sample(dir.path(), GPU, "gpu-b", 3, &[0])).await;
    assert_eq!(manager.with_state(|s| s.healthy_devices(GPU).len()), 3);
    assert_eq!(
        manager.with_state(|s| s.available_devices(GPU).len()),
        2,
        "the allocation survived"
    );
    third.stop().await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_killed_mid_stream_makes_every_device_unhealthy_at_once() {
    // Upstream's grace period (5 min): the resource stays for the whole test.
    let (_dir, manager, plugin) = started_with_plugin(vec![0], GPU, 3, &[0]).await;
    plugin.crash().await;
    assert!(
        manager
            .wait_until(WAIT, |s| s.healthy_devices(GPU).is_empty()
                && s.unhealthy_devices(GPU).len() == 3)
            .await,
        "every device unhealthy at once"
    );
    let capacity = manager.capacity();
    assert_eq!((capacity.capacity[GPU], capacity.allocatable[GPU]), (3, 0));
    assert!(capacity.removed.is_empty(), "within the grace period");
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_of_a_killed_plugin_is_dropped_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), vec![0]);
    cfg.endpoint_stop_grace = Duration::from_millis(300);
    let manager = manager(cfg).await;
    let plugin = plugin(&manager, sample(dir.path(), GPU, "gpu", 3, &[0])).await;
    plugin.crash().await;
    // After the grace period the resource is reported removed, once.
    let deadline = tokio::time::Instant::now() + WAIT;
    let removed = loop {
        let capacity = manager.capacity();
        if !capacity.removed.is_empty() {
            break capacity;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "resource never removed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(removed.removed, vec![GPU.to_owned()]);
    assert!(!removed.capacity.contains_key(GPU));
    assert!(manager.capacity().removed.is_empty());
    let app = container("app", &[(GPU, 1)]);
    let pod = pod("uid-k", vec![], vec![app.clone()]);
    // Not a device-plugin resource any more: nothing to allocate, as upstream.
    manager.allocate(&pod, &app, None).await.unwrap();
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_disappearing_stops_the_endpoint() {
    let (_dir, manager, plugin) = started_with_plugin(vec![0], GPU, 2, &[0]).await;
    std::fs::remove_file(plugin.socket()).unwrap();
    assert!(
        manager
            .wait_until(WAIT, |s| s.healthy_devices(GPU).is_empty())
            .await
    );
    assert!(!manager.plugin_ready(GPU));
    let app = container("app", &[(GPU, 1)]);
    let pod = pod("uid-s", vec![], vec![app.clone()]);
    assert_allocate_error!(
        manager.allocate(&pod, &app, None).await,
        AllocateError::NoHealthyDevices { .. }
    );
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_container_devices_are_reused_and_sidecars_keep_theirs() {
    // Upstream TestInitContainerDeviceAllocation / TestRestartableInitContainerDeviceAllocation.
    let (dir, manager) = started(vec![0]).await;
    let _plugin = plugin(&manager, sample(dir.path(), GPU, "gpu", 6, &[0])).await;
    let init = container("init", &[(GPU, 2)]);
    let side = sidecar("side", &[(GPU, 1)]);
    let app1 = container("app1", &[(GPU, 1)]);
    let app2 = container("app2", &[(GPU, 2)]);
    let pod = pod(
        "uid-i",
        vec![init.clone(), side.clone()],
        vec![app1.clone(), app2.clone()],
    );
    for c in [&init, &side, &app1, &app2] {
        manager.allocate(&pod, c, None).await.unwrap();
    }
    let ids = |c: &str| manager.container_devices("uid-i", c)[GPU].device_ids();
    let (init_ids, side_ids, a1, a2) = (ids("init"), ids("side"), ids("app1"), ids("app2"));
    assert!(
        side_ids.is_subset(&init_ids),
        "the sidecar reuses an init device"
    );
    assert!(
        side_ids.is_disjoint(&a1) && side_ids.is_disjoint(&a2),
        "apps never share the sidecar's"
    );
    assert!(a1.is_disjoint(&a2));
    let used: BTreeSet<_> = [&init_ids, &side_ids, &a1, &a2]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    assert_eq!(used.len(), 4, "init devices are reused: {used:?}");
    manager.stop().await;
}
