//! [`ContainerMap`]: container id → (pod UID, container name) (upstream
//! `cm/containermap.ContainerMap`).

use std::collections::BTreeMap;

/// Which pod and container each container id belongs to.
///
/// ```
/// use corral_cpumgr::ContainerMap;
///
/// let mut map = ContainerMap::new();
/// map.add("pod", "app", "cid-1");
/// assert_eq!(map.container_ref("cid-1"), Some(("pod", "app")));
/// map.add("pod", "app", "cid-2"); // a restart replaces the id
/// assert_eq!(map.container_ref("cid-1"), None);
/// assert_eq!(map.container_id("pod", "app"), Some("cid-2"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerMap {
    by_id: BTreeMap<String, (String, String)>,
}

impl ContainerMap {
    /// An empty map.
    pub fn new() -> ContainerMap {
        ContainerMap::default()
    }

    /// Upstream `Add`: map `container_id`, replacing any other id of the same container.
    pub fn add(&mut self, pod_uid: &str, container: &str, container_id: &str) {
        self.by_id
            .retain(|_, (p, c)| !(p == pod_uid && c == container));
        self.by_id.insert(
            container_id.to_owned(),
            (pod_uid.to_owned(), container.to_owned()),
        );
    }

    /// Upstream `RemoveByContainerID`.
    pub fn remove_by_container_id(&mut self, container_id: &str) {
        self.by_id.remove(container_id);
    }

    /// Upstream `RemoveByContainerRef`.
    pub fn remove_by_container_ref(&mut self, pod_uid: &str, container: &str) {
        self.by_id
            .retain(|_, (p, c)| !(p == pod_uid && c == container));
    }

    /// Upstream `GetContainerRef`.
    pub fn container_ref(&self, container_id: &str) -> Option<(&str, &str)> {
        self.by_id
            .get(container_id)
            .map(|(p, c)| (p.as_str(), c.as_str()))
    }

    /// Upstream `GetContainerID`.
    pub fn container_id(&self, pod_uid: &str, container: &str) -> Option<&str> {
        self.by_id
            .iter()
            .find(|(_, (p, c))| p == pod_uid && c == container)
            .map(|(id, _)| id.as_str())
    }

    /// Every (container id, pod UID, container name).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.by_id
            .iter()
            .map(|(id, (p, c))| (id.as_str(), p.as_str(), c.as_str()))
    }

    /// Number of container ids.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}
