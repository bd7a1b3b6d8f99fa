//! The claim cache ([`ClaimInfoCache`], upstream `claimInfoCache`): cached claims keyed by
//! `namespace/claimName`, iterated in key order, converted to and from the
//! `dra_manager_state` claim list. Plain data, no locking and no I/O: the manager owns the
//! lock and the checkpoint.

use std::collections::BTreeMap;

use corral_checkpoint::DraManagerCheckpoint;

use crate::claim::claim_key;
use crate::claim_info::ClaimInfo;

/// Cached claims by `namespace/claimName`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimInfoCache {
    claims: BTreeMap<String, ClaimInfo>,
}

impl ClaimInfoCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The cache a checkpoint describes; every entry unprepared. Of two entries with the
    /// same key the later wins, as upstream's map assignment.
    pub fn from_checkpoint(checkpoint: &DraManagerCheckpoint) -> Self {
        let mut cache = Self::new();
        for state in checkpoint.claim_info_state_list.iter().flatten() {
            cache.add(ClaimInfo::from_state(state.clone()));
        }
        cache
    }

    /// The claim list to checkpoint, in key order (upstream `syncToCheckpoint`, whose
    /// order is Go's random map order).
    pub fn to_checkpoint(&self) -> DraManagerCheckpoint {
        DraManagerCheckpoint {
            claim_info_state_list: Some(self.claims.values().map(|c| c.state().clone()).collect()),
        }
    }

    /// Insert or replace an entry; returns it.
    pub fn add(&mut self, info: ClaimInfo) -> &mut ClaimInfo {
        let key = info.key();
        self.claims.insert(key.clone(), info);
        self.claims.get_mut(&key).expect("just inserted")
    }

    /// Whether a claim is cached.
    pub fn contains(&self, claim_name: &str, namespace: &str) -> bool {
        self.claims.contains_key(&claim_key(namespace, claim_name))
    }

    /// A cached claim.
    pub fn get(&self, claim_name: &str, namespace: &str) -> Option<&ClaimInfo> {
        self.claims.get(&claim_key(namespace, claim_name))
    }

    /// A cached claim, mutable.
    pub fn get_mut(&mut self, claim_name: &str, namespace: &str) -> Option<&mut ClaimInfo> {
        self.claims.get_mut(&claim_key(namespace, claim_name))
    }

    /// Remove a claim; returns it.
    pub fn delete(&mut self, claim_name: &str, namespace: &str) -> Option<ClaimInfo> {
        self.claims.remove(&claim_key(namespace, claim_name))
    }

    /// Whether any claim is referenced by the pod: the pod might still need its resources
    /// unprepared (upstream `hasPodReference`, behind `PodMightNeedToUnprepareResources`).
    pub fn has_pod_reference(&self, pod_uid: &str) -> bool {
        self.claims.values().any(|c| c.has_pod_reference(pod_uid))
    }

    /// Keys of the claims the pod references, in key order.
    pub fn claims_of_pod(&self, pod_uid: &str) -> Vec<String> {
        self.claims
            .iter()
            .filter(|(_, c)| c.has_pod_reference(pod_uid))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// An entry by its key.
    pub fn get_by_key(&self, key: &str) -> Option<&ClaimInfo> {
        self.claims.get(key)
    }

    /// An entry by its key, mutable.
    pub fn get_by_key_mut(&mut self, key: &str) -> Option<&mut ClaimInfo> {
        self.claims.get_mut(key)
    }

    /// Remove an entry by its key.
    pub fn delete_by_key(&mut self, key: &str) -> Option<ClaimInfo> {
        self.claims.remove(key)
    }

    /// All entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = &ClaimInfo> {
        self.claims.values()
    }

    /// Number of cached claims.
    pub fn len(&self) -> usize {
        self.claims.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::{AllocatedDevice, ResourceClaim};

    fn info(ns: &str, name: &str, uid: &str) -> ClaimInfo {
        ClaimInfo::from_claim(&ResourceClaim {
            namespace: ns.into(),
            name: name.into(),
            uid: uid.into(),
            allocation: Some(vec![AllocatedDevice {
                driver: "d.example.com".into(),
                ..AllocatedDevice::default()
            }]),
            reserved_for: vec![],
        })
        .unwrap()
    }

    // Upstream TestClaimInfoCacheAdd / TestClaimInfoCacheContains / TestClaimInfoCacheGet /
    // TestClaimInfoCacheDelete: keyed by namespace/name.
    #[test]
    fn add_contains_get_delete() {
        let mut cache = ClaimInfoCache::new();
        cache.add(info("ns", "c", "u1"));
        assert!(cache.contains("c", "ns"));
        assert!(!cache.contains("c", "other"));
        assert!(!cache.contains("ns", "c"));
        assert_eq!(cache.get("c", "ns").unwrap().uid(), "u1");
        cache.add(info("ns", "c", "u2"));
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get("c", "ns").unwrap().uid(), "u2");
        assert!(cache.delete("c", "ns").is_some());
        assert!(cache.delete("c", "ns").is_none());
        assert!(cache.is_empty());
    }

    // Upstream TestClaimInfoCacheHasPodReference.
    #[test]
    fn has_pod_reference() {
        let mut cache = ClaimInfoCache::new();
        cache.add(info("ns", "a", "u1")).add_pod_reference("pod-1");
        cache.add(info("ns", "b", "u2"));
        assert!(cache.has_pod_reference("pod-1"));
        assert!(!cache.has_pod_reference("pod-2"));
        assert_eq!(cache.claims_of_pod("pod-1"), ["ns/a"]);
    }

    // Upstream TestSyncToCheckpoint / TestNewClaimInfoCache: the checkpoint round-trips and
    // restored entries are unprepared.
    #[test]
    fn checkpoint_round_trip() {
        let mut cache = ClaimInfoCache::new();
        cache.add(info("ns", "b", "u2")).set_prepared();
        cache.add(info("ns", "a", "u1")).add_pod_reference("pod");
        let cp = cache.to_checkpoint();
        let names: Vec<_> = cp
            .claim_info_state_list
            .iter()
            .flatten()
            .map(|s| s.claim_name.as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let restored = ClaimInfoCache::from_checkpoint(&cp);
        assert_eq!(restored.to_checkpoint(), cp);
        assert!(restored.iter().all(|c| !c.is_prepared()));
        assert!(ClaimInfoCache::from_checkpoint(&DraManagerCheckpoint::default()).is_empty());
    }
}
