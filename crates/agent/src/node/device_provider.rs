//! The device manager as the node's topology manager sees it: hints straight from the
//! device manager's memory, and allocation with the [`DecisionLock`] handed back while the
//! device plugins answer (`GetPreferredAllocation`, `Allocate`, a wait for registration), so
//! a plugin that hangs delays only the admissions that ask for its resource. The devices
//! are reserved in the device manager before it calls `Allocate`, so no decision taken
//! meanwhile can hand them out again; the providers after it (the memory manager) then
//! allocate with the hint taken before that decision (see `locks.rs`).

use std::sync::Arc;

use corral_devicemgr::DeviceManager;
use corral_topology::topologymanager::{
    AffinityStore, AllocationError, HintProvider, ProviderHintSets, ProviderHints,
};
use corral_topology::{Container, Pod};

use super::locks::DecisionLock;

/// [`DeviceManager`] behind the node's decision lock.
pub(crate) struct DeviceProvider {
    devices: Arc<DeviceManager>,
    decisions: Arc<DecisionLock>,
}

impl DeviceProvider {
    /// `devices`, whose allocations run with `decisions` handed back.
    pub(crate) fn new(devices: Arc<DeviceManager>, decisions: Arc<DecisionLock>) -> Self {
        DeviceProvider { devices, decisions }
    }
}

impl HintProvider for DeviceProvider {
    fn hints_for_container(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.devices.hints_for_container(pod, container)
    }

    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints {
        self.devices.hints_for_pod(pod)
    }

    /// The device manager's hints as families (no subset walk on many-NUMA machines).
    fn hint_sets_for_container(&self, pod: &Pod, container: &Container) -> ProviderHintSets {
        HintProvider::hint_sets_for_container(&*self.devices, pod, container)
    }

    fn hint_sets_for_pod(&self, pod: &Pod) -> ProviderHintSets {
        HintProvider::hint_sets_for_pod(&*self.devices, pod)
    }

    /// Called only from the topology manager's admission, which the node runs holding the
    /// decision lock on a blocking thread.
    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        store: &AffinityStore,
    ) -> Result<(), AllocationError> {
        // Only a plugin's answer is waited for with the lock handed back (huge pages and
        // extended resources no plugin serves are decided under it, as every other
        // resource).
        if !self.devices.asks_plugins(container) {
            return HintProvider::allocate(&*self.devices, pod, container, store);
        }
        self.decisions
            .released_during(|| HintProvider::allocate(&*self.devices, pod, container, store))
    }
}
