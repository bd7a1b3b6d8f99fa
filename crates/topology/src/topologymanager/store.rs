//! [`AffinityStore`]: the affinity the topology manager decided per (pod uid, container
//! name), which providers read during `allocate` (upstream `Store.GetAffinity`), and the
//! container-id map used to forget it when containers are removed.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::hint::TopologyHint;

#[derive(Debug, Default)]
struct Inner {
    /// pod uid → container name → hint.
    hints: HashMap<String, HashMap<String, TopologyHint>>,
    /// container id → (pod uid, container name).
    containers: HashMap<String, (String, String)>,
}

/// Thread-safe affinity store, keyed by pod uid and container name.
///
/// What a [`HintProvider`](super::HintProvider) reads in `allocate` (upstream `Store`).
///
/// # Example
///
/// ```
/// use corral_topology::{AffinityStore, NumaMask, TopologyHint};
///
/// let store = AffinityStore::new();
/// let node1 = TopologyHint::new(Some(NumaMask::new([1])?), true);
/// store.set_affinity("pod-uid", "app", node1);
/// assert_eq!(store.affinity("pod-uid", "app"), node1);
/// // Unknown containers get upstream's zero value: any node, not preferred.
/// assert_eq!(store.affinity("pod-uid", "other"), TopologyHint::default());
/// store.remove_pod("pod-uid");
/// assert_eq!(store.pod_count(), 0);
/// # Ok::<(), corral_topology::NumaMaskError>(())
/// ```
#[derive(Debug, Default)]
pub struct AffinityStore {
    inner: Mutex<Inner>,
}

impl AffinityStore {
    /// An empty store.
    pub fn new() -> AffinityStore {
        AffinityStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The data stays consistent under every operation, so a poisoned lock is usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The affinity stored for the container; upstream's zero hint (nil, not preferred) when
    /// there is none.
    pub fn affinity(&self, pod_uid: &str, container_name: &str) -> TopologyHint {
        self.lock()
            .hints
            .get(pod_uid)
            .and_then(|c| c.get(container_name))
            .copied()
            .unwrap_or_default()
    }

    /// Store the affinity of a container.
    pub fn set_affinity(&self, pod_uid: &str, container_name: &str, hint: TopologyHint) {
        self.lock()
            .hints
            .entry(pod_uid.to_owned())
            .or_default()
            .insert(container_name.to_owned(), hint);
    }

    /// Forget everything stored for a pod (corral's release of a failed admission).
    pub fn remove_pod(&self, pod_uid: &str) {
        let mut inner = self.lock();
        inner.hints.remove(pod_uid);
        inner.containers.retain(|_, (uid, _)| uid != pod_uid);
    }

    /// Remember that `container_id` runs the container (upstream `AddContainer`).
    pub fn add_container(&self, pod_uid: &str, container_name: &str, container_id: &str) {
        self.lock().containers.insert(
            container_id.to_owned(),
            (pod_uid.to_owned(), container_name.to_owned()),
        );
    }

    /// Upstream `RemoveContainer`: forget the container id, and the container's affinity once
    /// no other id runs that container. Unknown ids are ignored.
    pub fn remove_container(&self, container_id: &str) {
        let mut inner = self.lock();
        let Some((uid, name)) = inner.containers.remove(container_id) else {
            return;
        };
        if inner
            .containers
            .values()
            .any(|(u, n)| *u == uid && *n == name)
        {
            return;
        }
        if let Some(pod) = inner.hints.get_mut(&uid) {
            pod.remove(&name);
            if pod.is_empty() {
                inner.hints.remove(&uid);
            }
        }
    }

    /// Number of pods with stored affinities.
    pub fn pod_count(&self) -> usize {
        self.lock().hints.len()
    }
}
