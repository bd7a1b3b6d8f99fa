//! Upstream PR #137534 (open upstream; "kubelet/devicemanager: preserve in-flight
//! reservations across allocatedDevices rebuilds"): upstream's `Allocate` runs outside
//! `m.mutex`, and `UpdateAllocatedDevices` rebuilt `allocatedDevices` from `podDevices`
//! alone, dropping the devices of an allocation whose plugin `Allocate` was still under
//! way: a second pod saw them free and got the same id ("pod1=[dev0] pod2=[dev0]").
//!
//! corral never had it: a reservation lives in `DeviceState`'s reservations from the choice
//! until it is committed or given back, and every rebuild of the allocated sets
//! (`regenerate_allocated`: a sweep of inactive pods, a pod removed, a reservation
//! released) is committed ∪ reserved, under the state lock (rank `State`), while the plugin
//! RPC runs with no lock held. These tests attack that through real plugins over unix
//! sockets, and the core's interleavings as a property.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use corral_devicemgr::sample::FailureMode;
use corral_devicemgr::{
    AllocationRequest, Device, DeviceManager, DeviceState, PluginOptions, Reservation,
    StartOptions, ToAllocate,
};
use corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse;
use corral_topology::Pod;
use proptest::prelude::*;

use crate::support::*;

const GPU: &str = "example.com/gpu";

/// A manager whose active pods are `active` (read at each sweep), sources ready.
async fn manager_with_active(
    dir: &std::path::Path,
    active: Arc<Mutex<BTreeSet<String>>>,
) -> DeviceManager {
    let manager = DeviceManager::new(config(dir, vec![0])).unwrap();
    let options = StartOptions {
        active_pods: Some(Arc::new(move || {
            active.lock().unwrap_or_else(|e| e.into_inner()).clone()
        })),
        sources_ready: true,
        running_containers: BTreeSet::new(),
    };
    manager.start(options).await.unwrap();
    manager
}

fn one_gpu_pod(uid: &str, count: i64) -> Pod {
    pod(uid, vec![], vec![container("app", &[(GPU, count)])])
}

/// The devices `pod`'s container holds.
fn held(manager: &DeviceManager, pod: &str) -> BTreeSet<String> {
    manager
        .container_devices(pod, "app")
        .get(GPU)
        .map(|a| a.device_ids())
        .unwrap_or_default()
}

/// Upstream's regression scenario, step by step (no timing): `pod1`'s plugin `Allocate`
/// hangs, so its device is in flight; the sweep of an inactive pod rebuilds the allocated
/// set (upstream's `UpdateAllocatedDevices`), and so does removing a pod; `pod2` then gets
/// the swept pod's device, never `pod1`'s, and `pod3` gets none. Upstream without the fix
/// gave `pod2` the in-flight device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_in_flight_survives_rebuilds_and_goes_to_no_other_pod() {
    let dir = tempfile::tempdir().unwrap();
    let active: BTreeSet<String> = ["gone", "pod1", "pod2", "pod3"].map(String::from).into();
    let active = Arc::new(Mutex::new(active));
    let manager = Arc::new(manager_with_active(dir.path(), active.clone()).await);
    let plugin = plugin(&manager, sample(dir.path(), GPU, "gpu", 2, &[0])).await;

    manager
        .allocate(
            &one_gpu_pod("gone", 1),
            &container("app", &[(GPU, 1)]),
            None,
        )
        .await
        .unwrap();
    let swept = held(&manager, "gone");

    plugin.set_failure(FailureMode::HangAllocate);
    let first = {
        let manager = manager.clone();
        tokio::spawn(async move {
            let pod1 = one_gpu_pod("pod1", 1);
            manager.allocate(&pod1, &pod1.containers[0], None).await
        })
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while plugin.calls().allocate.len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "pod1's Allocate");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let in_flight: BTreeSet<String> = plugin.calls().allocate[1].iter().cloned().collect();
    assert_eq!(in_flight.len(), 1);
    assert!(in_flight.is_disjoint(&swept));

    // Rebuilds while pod1's Allocate is under way: "gone" is swept, a pod is removed.
    active.lock().unwrap().remove("gone");
    manager.update_allocated_devices();
    manager.remove_pod("never-admitted").unwrap();
    let allocated = manager.with_state(|s| s.allocated_devices(GPU));
    assert_eq!(
        allocated, in_flight,
        "only pod1's in-flight device is taken"
    );

    plugin.set_failure(FailureMode::None);
    let pod2 = one_gpu_pod("pod2", 1);
    manager
        .allocate(&pod2, &pod2.containers[0], None)
        .await
        .unwrap();
    assert_eq!(held(&manager, "pod2"), swept, "pod2 gets the free device");
    let pod3 = one_gpu_pod("pod3", 1);
    let refused = manager.allocate(&pod3, &pod3.containers[0], None).await;
    assert!(refused.is_err(), "no device is free for pod3");
    assert!(held(&manager, "pod3").is_empty());

    // pod1's Allocate fails when its plugin stops; it gives its device back.
    plugin.stop().await;
    let first = tokio::time::timeout(WAIT, first).await.unwrap().unwrap();
    assert!(first.is_err(), "{first:?}");
    assert!(held(&manager, "pod1").is_empty());
    let allocated = manager.with_state(|s| s.allocated_devices(GPU));
    assert_eq!(allocated, swept, "only pod2's device is taken");
}

/// Many pods ask for the last devices at once (4 devices, 12 pods of one or two), through a
/// real plugin's `Allocate`, while another task keeps rebuilding the allocated sets (pod
/// removals, sweeps): no device is given to two pods, the plugin is never asked for a
/// device twice, and what the pods hold is exactly the allocated set.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pods_racing_for_the_last_devices_never_share_one() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let uids: Vec<String> = (0..12).map(|i| format!("pod{i}")).collect();
        let active = Arc::new(Mutex::new(uids.iter().cloned().collect()));
        let manager = Arc::new(manager_with_active(dir.path(), active).await);
        let plugin = plugin(&manager, sample(dir.path(), GPU, "gpu", 4, &[0])).await;

        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let churn = {
            let (manager, done) = (manager.clone(), done.clone());
            tokio::spawn(async move {
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    manager.remove_pod("never-admitted").unwrap();
                    manager.update_allocated_devices();
                    tokio::task::yield_now().await;
                }
            })
        };
        let tasks: Vec<_> = uids
            .iter()
            .enumerate()
            .map(|(i, uid)| {
                let manager = manager.clone();
                let pod = one_gpu_pod(uid, 1 + (i as i64 + round) % 2);
                tokio::spawn(async move {
                    manager
                        .allocate(&pod, &pod.containers[0], None)
                        .await
                        .is_ok()
                })
            })
            .collect();
        let mut admitted = 0;
        for task in tasks {
            admitted += usize::from(tokio::time::timeout(WAIT, task).await.unwrap().unwrap());
        }
        done.store(true, std::sync::atomic::Ordering::Release);
        churn.await.unwrap();

        let mut owner: BTreeMap<String, String> = BTreeMap::new();
        for uid in &uids {
            for id in held(&manager, uid) {
                if let Some(other) = owner.insert(id.clone(), uid.clone()) {
                    panic!("round {round}: {id} given to {other} and {uid}");
                }
            }
        }
        assert!(
            admitted >= 2,
            "round {round}: 4 devices hold at least two pods"
        );
        let asked: Vec<String> = plugin.calls().allocate.concat();
        let distinct: BTreeSet<&String> = asked.iter().collect();
        assert_eq!(distinct.len(), asked.len(), "round {round}: {asked:?}");
        let allocated = manager.with_state(|s| s.allocated_devices(GPU));
        let owned: BTreeSet<String> = owner.into_keys().collect();
        assert_eq!(allocated, owned, "round {round}");
        manager.stop().await;
        plugin.stop().await;
    }
}

/// One step of the core's life: choose and reserve for a new pod (`Reserve(n)`), commit or
/// give back a reservation in flight, remove a committed pod, sweep the pods not in a set,
/// rebuild the allocated sets.
#[derive(Debug, Clone)]
enum Step {
    Reserve(usize),
    Commit(usize),
    GiveBack(usize),
    Remove(usize),
    Sweep(u16),
    Rebuild,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1usize..4).prop_map(Step::Reserve),
        2 => any::<usize>().prop_map(Step::Commit),
        1 => any::<usize>().prop_map(Step::GiveBack),
        1 => any::<usize>().prop_map(Step::Remove),
        1 => any::<u16>().prop_map(Step::Sweep),
        1 => Just(Step::Rebuild),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// PR #137534's invariant on the core: after any interleaving of choices, commits,
    /// give-backs, removals, sweeps and rebuilds, no device belongs to two pods (committed
    /// or in flight), and the allocated set is exactly what they hold.
    #[test]
    fn no_interleaving_gives_a_device_to_two_pods(steps in prop::collection::vec(step(), 1..60)) {
        let mut state = DeviceState::new(vec![0]);
        state.plugin_connected(GPU, PluginOptions::default());
        let devices: Vec<Device> = (0..6)
            .map(|i| Device { id: format!("dev{i}"), healthy: true, numa_nodes: Some(vec![0]) })
            .collect();
        state.update_devices(GPU, &devices);
        let mut in_flight: Vec<(String, Reservation)> = Vec::new();
        let mut committed: Vec<String> = Vec::new();
        for (n, step) in steps.into_iter().enumerate() {
            match step {
                Step::Reserve(count) => {
                    let uid = format!("pod{n}");
                    let request = AllocationRequest::new(&uid, "app", GPU, count);
                    if let Ok(ToAllocate::Devices(r)) = state.devices_to_allocate(&request, None) {
                        in_flight.push((uid, r));
                    }
                }
                Step::Commit(i) if !in_flight.is_empty() => {
                    let (uid, r) = in_flight.remove(i % in_flight.len());
                    state.commit(&r, &uid, "app", ContainerAllocateResponse::default());
                    committed.push(uid);
                }
                Step::GiveBack(i) if !in_flight.is_empty() => {
                    let (_, r) = in_flight.remove(i % in_flight.len());
                    state.release(&r);
                }
                Step::Remove(i) if !committed.is_empty() => {
                    let uid = committed.remove(i % committed.len());
                    state.remove_pod(&uid);
                }
                Step::Sweep(keep) => {
                    let active: BTreeSet<String> = committed
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| keep & (1 << (i % 16)) != 0)
                        .map(|(_, uid)| uid.clone())
                        .collect();
                    state.remove_inactive_pods(&active);
                    committed.retain(|uid| active.contains(uid));
                }
                Step::Rebuild => state.regenerate_allocated(),
                _ => {}
            }
            let mut owner: BTreeMap<String, String> = BTreeMap::new();
            let holdings = committed
                .iter()
                .map(|uid| (uid.clone(), state.pod_devices().pod_devices(uid, GPU)))
                .chain(in_flight.iter().map(|(uid, r)| {
                    (format!("{uid} (in flight)"), r.devices.iter().cloned().collect())
                }));
            for (who, ids) in holdings {
                for id in ids {
                    if let Some(other) = owner.insert(id.clone(), who.clone()) {
                        prop_assert!(false, "step {}: {} held by {} and {}", n, id, other, who);
                    }
                }
            }
            let owned: BTreeSet<String> = owner.into_keys().collect();
            prop_assert_eq!(state.allocated_devices(GPU), owned, "step {}", n);
        }
    }
}
