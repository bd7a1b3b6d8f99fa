//! Plugins that hang, fail, flood or lie never block admission of other resources, never
//! crash the manager, and never leak devices; every malformed registration is refused.

use std::time::Duration;

use crate::support::*;
use corral_devicemgr::sample::{FailureMode, SamplePlugin};
use corral_devicemgr::{AllocateError, Device, DeviceManagerError};
use corral_proto::deviceplugin::v1beta1::{
    RegisterRequest, registration_client::RegistrationClient,
};
use corral_proto::uds;
use corral_topology::{HintProvider, NumaMask};

const GPU: &str = "example.com/gpu";
const NIC: &str = "example.com/nic";

fn nothing_leaked(manager: &corral_devicemgr::DeviceManager, resource: &str, total: usize) {
    manager.with_state(|s| {
        assert_eq!(
            s.available_devices(resource).len(),
            total,
            "every device is available again"
        );
        assert_eq!(s.reservations_in_flight(), 0);
    });
}

/// Wait (bounded) until `plugin` received an `Allocate` call.
async fn allocate_reached(plugin: &SamplePlugin) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while plugin.calls().allocate.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Allocate never reached the plugin"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_allocate_blocks_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), vec![0]);
    // No deadline passes during this test: only the plugin going away ends the call.
    cfg.rpc_timeout = Duration::from_secs(24 * 3600);
    let manager = manager(cfg).await;
    let mut hanging = sample(dir.path(), GPU, "gpu", 2, &[0]);
    hanging.failure = FailureMode::HangAllocate;
    let gpu = plugin(&manager, hanging).await;
    let nic = plugin(&manager, sample(dir.path(), NIC, "nic", 2, &[0])).await;

    let app = container("app", &[(GPU, 1)]);
    let stuck_pod = pod("uid-h", vec![], vec![app.clone()]);
    let stuck = {
        let manager = manager.clone();
        tokio::spawn(async move { manager.allocate(&stuck_pod, &app, None).await })
    };
    allocate_reached(&gpu).await;
    // Another resource is admitted while the hanging call waits.
    let other = container("other", &[(NIC, 1)]);
    let other_pod = pod("uid-o", vec![], vec![other.clone()]);
    manager.allocate(&other_pod, &other, None).await.unwrap();
    assert!(!stuck.is_finished(), "the hanging call is still waiting");
    assert_eq!(nic.calls().allocate.len(), 1);

    // The plugin dies: the hanging call fails and gives back what it took.
    gpu.crash().await;
    let err = tokio::time::timeout(WAIT, stuck)
        .await
        .expect("the call ends with its plugin")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, DeviceManagerError::Allocate(AllocateError::AllocateRpc { resource, .. }) if resource == GPU),
        "unexpected error {err}"
    );
    // Its devices are unhealthy now (their plugin is gone), but none is held.
    manager.with_state(|s| {
        assert!(s.allocated_devices(GPU).is_empty());
        assert_eq!(s.reservations_in_flight(), 0);
    });
    assert!(manager.container_devices("uid-h", "app").is_empty());
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_allocate_hits_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(config_with_deadline(dir.path(), vec![0])).await;
    let mut hanging = sample(dir.path(), GPU, "gpu", 2, &[0]);
    hanging.failure = FailureMode::HangAllocate;
    let _gpu = plugin(&manager, hanging).await;
    let app = container("app", &[(GPU, 1)]);
    let p = pod("uid-h", vec![], vec![app.clone()]);
    let err = tokio::time::timeout(WAIT, manager.allocate(&p, &app, None))
        .await
        .expect("the deadline ends the call")
        .unwrap_err();
    let DeviceManagerError::Allocate(AllocateError::AllocateRpc {
        message, resource, ..
    }) = &err
    else {
        panic!("unexpected error {err}");
    };
    assert_eq!(resource, GPU);
    let within = format!("no answer within {HANG_DEADLINE:?}");
    assert!(message.contains(&within), "{message}");
    nothing_leaked(&manager, GPU, 2);
    assert!(manager.container_devices("uid-h", "app").is_empty());
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_second_resource_gives_back_the_first() {
    let (dir, manager) = started(vec![0]).await;
    let _gpu = plugin(&manager, sample(dir.path(), GPU, "gpu", 2, &[0])).await;
    let mut failing = sample(dir.path(), NIC, "nic", 2, &[0]);
    failing.failure = FailureMode::FailAllocate;
    let nic = plugin(&manager, failing).await;
    // Resources are allocated in name order: gpu, then nic (which fails).
    let app = container("app", &[(GPU, 1), (NIC, 1)]);
    let p = pod("uid-f", vec![], vec![app.clone()]);
    let err = manager.allocate(&p, &app, None).await.unwrap_err();
    assert!(err.to_string().contains("refuses to allocate"), "{err}");
    nothing_leaked(&manager, GPU, 2);
    nothing_leaked(&manager, NIC, 2);
    assert!(manager.container_devices("uid-f", "app").is_empty());
    tokio::time::timeout(WAIT, manager.settled())
        .await
        .expect("background writes finish");
    let text = std::fs::read_to_string(dir.path().join("kubelet_internal_checkpoint")).unwrap();
    assert!(
        !text.contains("uid-f"),
        "nothing of the failed container reaches the checkpoint: {text}"
    );

    nic.set_failure(FailureMode::EmptyAllocate);
    assert_allocate_error!(
        manager.allocate(&p, &app, None).await,
        AllocateError::NoContainerResponse { .. }
    );
    nothing_leaked(&manager, GPU, 2);

    nic.set_failure(FailureMode::None);
    manager.allocate(&p, &app, None).await.unwrap();
    assert_eq!(manager.container_devices("uid-f", "app").len(), 2);
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_preferred_allocation_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(config_with_deadline(dir.path(), vec![0])).await;
    let mut cfg = fussy_sample(dir.path(), GPU, 4, &[0]);
    cfg.failure = FailureMode::HangPreferred;
    let _gpu = plugin(&manager, cfg).await;
    let app = container("app", &[(GPU, 2)]);
    let p = pod("uid-pp", vec![], vec![app.clone()]);
    let affinity = Some(NumaMask::new([0]).unwrap());
    let allocation = tokio::time::timeout(WAIT, manager.allocate(&p, &app, affinity));
    let err = assert_allocate_error!(
        allocation.await.expect("the deadline ends the call"),
        AllocateError::PreferredAllocation { .. }
    );
    let within = format!("no answer within {HANG_DEADLINE:?}");
    assert!(err.to_string().contains(&within), "{err}");
    nothing_leaked(&manager, GPU, 4);
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_pre_start_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(config_with_deadline(dir.path(), vec![0])).await;
    let mut cfg = fussy_sample(dir.path(), GPU, 4, &[0]);
    cfg.failure = FailureMode::HangPreStart;
    let gpu = plugin(&manager, cfg).await;
    let app = container("app", &[(GPU, 2)]);
    let p = pod("uid-ps", vec![], vec![app.clone()]);
    manager.allocate(&p, &app, None).await.unwrap();
    let err = tokio::time::timeout(WAIT, manager.run_container_options(&p, &app, None))
        .await
        .expect("the deadline ends the call")
        .unwrap_err();
    assert!(err.to_string().contains("PreStartContainer"), "{err}");
    assert_eq!(gpu.calls().pre_start.len(), 1);
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_options_or_stream_never_block_other_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(config_with_deadline(dir.path(), vec![0])).await;
    let mut hang_options = sample(dir.path(), GPU, "gpu", 2, &[0]);
    hang_options.failure = FailureMode::HangOptions;
    let stuck = SamplePlugin::start(hang_options).await.unwrap();
    let socket = manager.socket_path();
    let registering = {
        let socket = socket.clone();
        tokio::spawn(async move {
            let result = stuck.register(&socket).await;
            (stuck, result)
        })
    };
    // Meanwhile a well-behaved plugin registers and is allocated from.
    let _nic = plugin(&manager, sample(dir.path(), NIC, "nic", 1, &[0])).await;
    let app = container("app", &[(NIC, 1)]);
    manager
        .allocate(&pod("uid-x", vec![], vec![app.clone()]), &app, None)
        .await
        .unwrap();
    let (stuck, result) = tokio::time::timeout(WAIT, registering)
        .await
        .unwrap()
        .unwrap();
    let status = result.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert!(status.message().contains("options"), "{}", status.message());
    stuck.stop().await;

    // A plugin whose stream never sends a list: registered, never ready, harmless.
    let mut silent = sample(dir.path(), "example.com/silent", "silent", 2, &[0]);
    silent.failure = FailureMode::HangListAndWatch;
    let silent = SamplePlugin::start(silent).await.unwrap();
    silent.register(&socket).await.unwrap();
    // It never lists (so it can never be ready): a short look is as good as a long one.
    assert!(
        !manager
            .wait_for_plugin("example.com/silent", Duration::from_millis(200))
            .await
    );
    let app2 = container("app2", &[(NIC, 0)]);
    manager
        .allocate(&pod("uid-y", vec![], vec![app2.clone()]), &app2, None)
        .await
        .unwrap();
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_plugin_does_not_starve_admission() {
    let (dir, manager) = started(vec![0]).await;
    let mut flood = sample(dir.path(), GPU, "gpu", 64, &[0]);
    flood.failure = FailureMode::FloodLists;
    let _gpu = plugin(&manager, flood).await;
    // Another plugin registers, lists, and has its health changes seen while it floods.
    let nic = plugin(&manager, sample(dir.path(), NIC, "nic", 4, &[0])).await;
    for healthy in [false, true] {
        assert!(nic.set_health("nic-0", healthy));
        let seen =
            |s: &corral_devicemgr::DeviceState| s.healthy_devices(NIC).contains("nic-0") == healthy;
        assert!(
            manager.wait_until(WAIT, seen).await,
            "nic-0 healthy: {healthy}"
        );
    }
    for i in 0..4 {
        let app = container("app", &[(GPU, 2), (NIC, 1)]);
        let p = pod(&format!("uid-{i}"), vec![], vec![app.clone()]);
        tokio::time::timeout(WAIT, manager.allocate(&p, &app, None))
            .await
            .expect("admission finishes while the plugin floods")
            .unwrap();
    }
    assert_eq!(manager.with_state(|s| s.available_devices(NIC).len()), 0);
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_lists_are_survived() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), vec![0, 1]);
    cfg.max_devices_per_plugin = 1000;
    let manager = manager(cfg).await;
    let gpu = plugin(&manager, sample(dir.path(), GPU, "gpu", 4, &[0, 1])).await;
    // NUMA ids the machine lacks, negative and huge ids, duplicates.
    let mut lies = vec![
        Device::new("a", Some(vec![7])),
        Device::new("b", Some(vec![-1])),
        Device::new("c", Some(vec![i64::MAX, -5])),
        Device::new("d", Some(vec![0])),
        Device::new("d", Some(vec![1])),
        Device::new("", None),
    ];
    lies[3].healthy = false;
    gpu.set_devices(lies);
    assert!(
        manager
            .wait_until(WAIT, |s| s.all_devices(GPU).len() == 5)
            .await
    );
    manager.with_state(|s| {
        let d = s
            .all_devices(GPU)
            .into_iter()
            .find(|d| d.id == "d")
            .unwrap();
        assert_eq!(d.numa_nodes, Some(vec![1]), "the last occurrence counts");
        assert!(d.healthy);
    });
    let app = container("app", &[(GPU, 5)]);
    let p = pod("uid-l", vec![], vec![app.clone()]);
    let hints = manager.hints_for_container(&p, &app).unwrap();
    assert_eq!(
        hints[GPU],
        Some(vec![]),
        "no mask of this machine holds 5 of them"
    );
    allocate_on(&manager, &p, &app, 1).await;
    assert_eq!(
        manager.container_devices("uid-l", "app")[GPU]
            .device_ids()
            .len(),
        5
    );

    // A list longer than allowed is ignored (`DeviceLists`' unit tests: the previous one
    // stays); the plugin stays connected, and its next list is applied.
    let sent = gpu.lists_sent();
    gpu.set_devices(
        (0..1001)
            .map(|i| Device::new(format!("x{i}"), None))
            .collect(),
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    while gpu.lists_sent() == sent {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the long list was never sent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    gpu.set_devices(vec![Device::new("after", Some(vec![0]))]);
    assert!(
        manager
            .wait_until(WAIT, |s| s.healthy_devices(GPU)
                == std::collections::BTreeSet::from(["after".to_owned()]))
            .await
    );
    assert!(manager.plugin_ready(GPU));
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_devices() {
    let (dir, manager) = started((0..8).collect()).await;
    let numa: Vec<i64> = (0..8).collect();
    let _gpu = plugin(&manager, sample(dir.path(), GPU, "gpu", 10_000, &numa)).await;
    assert_eq!(manager.with_state(|s| s.healthy_devices(GPU).len()), 10_000);
    let app = container("app", &[(GPU, 100)]);
    let p = pod("uid-big", vec![], vec![app.clone()]);
    let hints = manager.hints_for_container(&p, &app).unwrap()[GPU]
        .clone()
        .unwrap();
    assert_eq!(hints.len(), 255);
    assert_eq!(hints.iter().filter(|h| h.preferred).count(), 8);
    allocate_on(&manager, &p, &app, 3).await;
    let held = manager.container_devices("uid-big", "app");
    assert_eq!(
        held[GPU].devices.keys().copied().collect::<Vec<_>>(),
        vec![3],
        "all on node 3"
    );
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_malformed_registration_is_refused() {
    let (_dir, manager) = started(vec![0]).await;
    let outside = tempfile::tempdir().unwrap();
    let elsewhere =
        corral_devicemgr::sample::SamplePlugin::start(sample(outside.path(), GPU, "gpu", 1, &[0]))
            .await
            .unwrap();
    let abs = elsewhere.socket().display().to_string();
    let cases: Vec<(&str, &str, String, &str)> = vec![
        ("v1alpha", GPU, "gpu.sock".into(), "is not supported"),
        ("", GPU, "gpu.sock".into(), "is not supported"),
        ("v1beta1", "gpu", "gpu.sock".into(), "is invalid"),
        (
            "v1beta1",
            "kubernetes.io/gpu",
            "gpu.sock".into(),
            "is invalid",
        ),
        (
            "v1beta1",
            "requests.example.com/gpu",
            "gpu.sock".into(),
            "is invalid",
        ),
        (
            "v1beta1",
            "example.com/a/b",
            "gpu.sock".into(),
            "is invalid",
        ),
        ("v1beta1", GPU, abs, "contains '/'"),
        ("v1beta1", GPU, "../gpu.sock".into(), "contains '/'"),
        ("v1beta1", GPU, "sub/gpu.sock".into(), "contains '/'"),
        ("v1beta1", GPU, "..".into(), "not a file name"),
        ("v1beta1", GPU, "".into(), "empty"),
        ("v1beta1", GPU, "kubelet.sock".into(), "registration socket"),
        ("v1beta1", GPU, "missing.sock".into(), "failed to dial"),
    ];
    let channel = uds::connect(manager.socket_path(), WAIT).await.unwrap();
    let mut client = RegistrationClient::new(channel);
    for (version, resource, endpoint, expect) in cases {
        let status = client
            .register(RegisterRequest {
                version: version.into(),
                endpoint: endpoint.clone(),
                resource_name: resource.into(),
                options: None,
            })
            .await
            .unwrap_err();
        assert!(
            status.message().contains(expect),
            "{version:?} {resource:?} {endpoint:?}: {:?} {}",
            status.code(),
            status.message()
        );
        let code = if expect == "failed to dial" {
            tonic::Code::Unavailable
        } else {
            tonic::Code::InvalidArgument
        };
        assert_eq!(status.code(), code, "{endpoint:?}");
    }
    assert!(
        manager.with_state(|s| s.resources().is_empty()),
        "nothing registered"
    );
    elsewhere.stop().await;
    manager.stop().await;
}
