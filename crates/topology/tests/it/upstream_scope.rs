//! Ported from upstream `pkg/kubelet/cm/topologymanager/scope_test.go` (`TestGetAffinity`,
//! `TestAddContainer`, `TestRemoveContainer`) against corral's [`AffinityStore`] and
//! [`TopologyManager`]. The `scope_container_test.go` / `scope_pod_test.go` tables
//! (`calculateAffinity`, `accumulateProvidersHints`) reach crate-private functions and are unit
//! tests in `src/topologymanager/scope/tests.rs`.

use std::collections::BTreeMap;

use corral_topology::topologymanager::{AffinityStore, TopologyManager, TopologyManagerConfig};
use corral_topology::{Container, NumaMask, NumaNode, Pod, TopologyHint};

const UID1: &str = "0aafa4c4-38e8-11e9-bcb1-a4bf01040474";
const UID2: &str = "b3ee37fc-39a5-11e9-bcb1-a4bf01040474";

/// Upstream `TestGetAffinity`: nothing stored gives the zero hint.
#[test]
fn get_affinity() {
    let store = AffinityStore::new();
    assert_eq!(store.affinity(UID1, "nginx"), TopologyHint::default());
}

/// Upstream `TestAddContainer` (2 cases): the container id is remembered for the pod — seen
/// here through `remove_container`, which forgets the affinity only for a known id.
#[test]
fn add_container() {
    let store = AffinityStore::new();
    let hint = TopologyHint::new(Some(NumaMask::new([0]).expect("mask")), true);
    for (name, id, uid) in [("Case1", "nginx", UID1), ("Case2", "Busy_Box", UID2)] {
        store.set_affinity(uid, name, hint);
        store.remove_container(id);
        assert_eq!(store.affinity(uid, name), hint, "{name}: id not added yet");
        store.add_container(uid, name, id);
        store.remove_container(id);
        assert_eq!(store.affinity(uid, name), TopologyHint::default(), "{name}");
    }
}

/// Upstream `TestRemoveContainer` (2 cases): removing a container's id drops its pod's entry.
#[test]
fn remove_container() {
    let store = AffinityStore::new();
    for (name, id, uid) in [("Case1", "nginx", UID1), ("Case2", "Busy_Box", UID2)] {
        store.add_container(uid, name, id);
        store.set_affinity(uid, name, TopologyHint::default());
        let before = store.pod_count();
        store.remove_container(id);
        assert_eq!(before - store.pod_count(), 1, "{name}");
    }
    // Unknown ids are ignored, as upstream.
    store.remove_container("unknown");
    assert_eq!(store.pod_count(), 0);
}

/// The same rules through the manager (upstream `manager.AddContainer` / `RemoveContainer`):
/// an affinity stays while another id still runs the container.
#[test]
fn manager_add_and_remove_container() {
    let nodes: Vec<NumaNode> = (0..2)
        .map(|id| NumaNode {
            id,
            distances: None,
        })
        .collect();
    let config = TopologyManagerConfig::from_strings("best-effort", "container", &BTreeMap::new())
        .expect("config");
    let manager = TopologyManager::new(&config, &nodes).expect("manager");
    let pod = Pod {
        uid: "uid".into(),
        containers: vec![Container::new("a")],
        ..Pod::default()
    };
    assert!(manager.admit(&pod).admit);
    let stored = manager.affinity("uid", "a");
    assert_eq!(stored.numa_affinity, NumaMask::new([0, 1]).ok());
    manager.add_container(&pod, "a", "id-a");
    manager.add_container(&pod, "a", "id-a2");
    manager.remove_container("id-a");
    assert_eq!(manager.affinity("uid", "a"), stored, "id-a2 still runs a");
    manager.remove_container("id-a2");
    assert_eq!(manager.affinity("uid", "a"), TopologyHint::default());
}
