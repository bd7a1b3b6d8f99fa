//! The device manager as the topology manager's provider: devices are reserved inside the
//! decision (no plugin call, no wait), a decision that needs a plugin's preferred
//! allocation comes back deferred with nothing taken, and the plugins' `Allocate` runs
//! only when the caller realizes the admitted decision.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::support::*;
use corral_devicemgr::DeviceManager;
use corral_topology::topologymanager::{
    NumaNode, PolicyName, PolicyOptions, ScopeName, TopologyManager, TopologyManagerConfig,
};

const GPU: &str = "example.com/gpu";

fn topology_manager(devices: &DeviceManager) -> TopologyManager {
    let config = TopologyManagerConfig {
        policy: PolicyName::BestEffort,
        scope: ScopeName::Container,
        options: PolicyOptions::default(),
    };
    let nodes = [0, 1].map(|id| NumaNode {
        id,
        distances: None,
    });
    let mut manager = TopologyManager::new(&config, &nodes).expect("topology manager");
    manager.add_hint_provider(Arc::new(devices.clone()));
    manager
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_needing_a_preference_is_deferred_then_reserved_then_realized() {
    let (dir, devices) = started(vec![0, 1]).await;
    let mut sample = sample(dir.path(), GPU, "gpu", 4, &[0, 0, 1, 1]);
    sample.preferred_allocation = true;
    let plugin = plugin(&devices, sample).await;
    let topology = topology_manager(&devices);
    let pod = pod("p", vec![], vec![container("app", &[(GPU, 1)])]);

    // The first decision needs the plugin's preference: deferred, nothing taken or counted.
    let first = topology.admit(&pod);
    assert!(first.deferred && !first.admit, "{first:?}");
    let requests = &topology.metrics().admission_requests_total;
    assert_eq!(requests.load(Ordering::Relaxed), 0);
    devices.cancel_reserved(&pod.uid);
    devices.with_state(|s| {
        assert_eq!(s.reservations_in_flight(), 0);
        assert!(s.allocated_devices(GPU).is_empty());
    });
    assert_eq!(plugin.calls().preferred, 0, "asked inside the decision");

    // Asked outside it; the second decision takes the plugin's answer (its last id on node 0).
    devices.ask_plugins(&pod.uid).await.unwrap();
    assert_eq!(plugin.calls().preferred, 1);
    let second = topology.admit(&pod);
    assert!(second.admit, "{second:?}");
    assert_eq!(requests.load(Ordering::Relaxed), 1);
    devices.with_state(|s| {
        assert_eq!(s.reservations_in_flight(), 1);
        assert_eq!(s.allocated_devices(GPU), ["gpu-1".to_owned()].into());
    });
    assert!(
        plugin.calls().allocate.is_empty(),
        "Allocate inside the decision"
    );

    // Realized: the plugin's Allocate, then the allocation is the container's.
    devices.realize(&pod.uid).await.unwrap();
    devices.end_admission(&pod.uid);
    assert_eq!(plugin.calls().allocate, [vec!["gpu-1".to_owned()]]);
    let held = devices.container_devices(&pod.uid, "app");
    assert_eq!(held[GPU].device_ids(), ["gpu-1".to_owned()].into());
    devices.with_state(|s| {
        assert_eq!(s.reservations_in_flight(), 0);
        assert_eq!(s.admissions_in_flight(), 0);
    });
    plugin.stop().await;
    devices.stop().await;
}

/// An init container's reserved devices are reused by the app container in the same
/// decision (upstream's reuse, built from reservations before any `Allocate`), and each
/// container's `Allocate` names them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_containers_reserved_devices_are_reused_before_they_are_realized() {
    let (_dir, devices, plugin) = started_with_plugin(vec![0, 1], GPU, 2, &[0, 1]).await;
    let topology = topology_manager(&devices);
    let pod = pod(
        "p",
        vec![container("init", &[(GPU, 1)])],
        vec![container("app", &[(GPU, 1)])],
    );
    let decided = topology.admit(&pod);
    assert!(decided.admit, "{decided:?}");
    devices.with_state(|s| assert_eq!(s.allocated_devices(GPU).len(), 1));
    devices.realize(&pod.uid).await.unwrap();
    devices.end_admission(&pod.uid);
    let calls = plugin.calls().allocate;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0], calls[1],
        "the app container reuses the init container's GPU"
    );
    assert_eq!(
        devices.container_devices(&pod.uid, "init")[GPU].device_ids(),
        devices.container_devices(&pod.uid, "app")[GPU].device_ids(),
    );
    plugin.stop().await;
    devices.stop().await;
}

/// A decision that is not realized (refused later, or its caller gone) is given back by
/// `end_admission`: nothing stays reserved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_ended_before_it_was_realized_gives_its_reservations_back() {
    let (_dir, devices, plugin) = started_with_plugin(vec![0, 1], GPU, 2, &[0, 1]).await;
    let topology = topology_manager(&devices);
    let pod = pod("p", vec![], vec![container("app", &[(GPU, 2)])]);
    assert!(topology.admit(&pod).admit);
    devices.with_state(|s| assert_eq!(s.allocated_devices(GPU).len(), 2));
    devices.end_admission(&pod.uid);
    devices.with_state(|s| {
        assert!(s.allocated_devices(GPU).is_empty());
        assert_eq!(s.admissions_in_flight(), 0);
    });
    // Realizing now has nothing to do.
    devices.realize(&pod.uid).await.unwrap();
    assert!(plugin.calls().allocate.is_empty());
    plugin.stop().await;
    devices.stop().await;
}
