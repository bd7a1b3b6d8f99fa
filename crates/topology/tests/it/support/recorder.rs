//! [`Recorder`]: a hint provider that gives fixed hints and records what it allocated.

use std::sync::Mutex;

use corral_topology::topologymanager::{AffinityStore, AllocationError, Grant, HintProvider};
use corral_topology::{Container, Pod, ProviderHints, TopologyHint};

/// A provider giving the same hints for a container and for the pod, recording the affinity
/// the manager stored for each container it allocates (in order), granting each the
/// device `recorder/<container>`, and failing with "boom" for the container named
/// `fail_on`.
pub(crate) struct Recorder {
    pub(crate) hints: ProviderHints,
    pub(crate) seen: Mutex<Vec<(String, TopologyHint)>>,
    pub(crate) fail_on: Option<&'static str>,
}

impl Recorder {
    /// A recorder giving `hints` that never fails.
    pub(crate) fn new(hints: ProviderHints) -> Recorder {
        Recorder {
            hints,
            seen: Mutex::default(),
            fail_on: None,
        }
    }

    /// The affinity stored for the last container allocated.
    pub(crate) fn last_seen(&self) -> Option<TopologyHint> {
        let seen = self.seen.lock().expect("lock");
        seen.last().map(|(_, hint)| *hint)
    }
}

impl HintProvider for Recorder {
    fn hints_for_container(&self, _: &Pod, _: &Container) -> ProviderHints {
        self.hints.clone()
    }
    fn hints_for_pod(&self, _: &Pod) -> ProviderHints {
        self.hints.clone()
    }
    fn allocate(
        &self,
        pod: &Pod,
        c: &Container,
        store: &AffinityStore,
    ) -> Result<Grant, AllocationError> {
        if self.fail_on == Some(c.name.as_str()) {
            return Err(AllocationError::Unexpected("boom".into()));
        }
        self.seen
            .lock()
            .expect("lock")
            .push((c.name.clone(), store.affinity(&pod.uid, &c.name)));
        Ok(Grant::devices("recorder", [c.name.as_str()]))
    }
}
