//! The CPU manager's static policy, the device manager's state and the memory manager's
//! static policy as in-process hint providers of a topology manager: what the large-machine
//! tests and the admission bench (`benches/admission.rs`, which includes this file) wire.

use std::sync::{Mutex, PoisonError};

use corral_cpumgr::{CpuState, Policy as _};
use corral_devicemgr::{AllocationRequest, DeviceState, Reservation, ToAllocate};
use corral_topology::topologymanager::{
    AffinityStore, AllocationError, Grant, HintProvider, MemoryGrant, ProviderHintSets, hint_lists,
};
use corral_topology::{Container, Pod, ProviderHints};

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The CPU manager's static policy and its state.
pub(crate) struct Cpus(pub(crate) Mutex<(corral_cpumgr::StaticPolicy, CpuState)>);

impl HintProvider for Cpus {
    fn hints_for_container(&self, pod: &Pod, c: &Container) -> ProviderHints {
        hint_lists(&self.hint_sets_for_container(pod, c))
    }
    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints {
        hint_lists(&self.hint_sets_for_pod(pod))
    }
    fn hint_sets_for_container(&self, pod: &Pod, c: &Container) -> ProviderHintSets {
        let g = lock(&self.0);
        g.0.hint_sets_for_container(&g.1, pod, c)
    }
    fn hint_sets_for_pod(&self, pod: &Pod) -> ProviderHintSets {
        let g = lock(&self.0);
        g.0.hint_sets_for_pod(&g.1, pod)
    }
    fn allocate(
        &self,
        pod: &Pod,
        c: &Container,
        store: &AffinityStore,
    ) -> Result<Grant, AllocationError> {
        let mut g = lock(&self.0);
        let (policy, state) = &mut *g;
        let affinity = store.affinity(&pod.uid, &c.name);
        policy
            .allocate(state, pod, c, affinity)
            .map_err(AllocationError::unexpected)?;
        let cpus = state
            .cpu_set(&pod.uid, &c.name)
            .cloned()
            .unwrap_or_default();
        Ok(Grant::cpus(cpus))
    }
}

/// The device manager's state, and each container's reservations (by container name).
pub(crate) struct Devices {
    pub(crate) state: Mutex<DeviceState>,
    pub(crate) given: Mutex<Vec<(String, Reservation)>>,
}

impl HintProvider for Devices {
    fn hints_for_container(&self, pod: &Pod, c: &Container) -> ProviderHints {
        hint_lists(&self.hint_sets_for_container(pod, c))
    }
    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints {
        hint_lists(&self.hint_sets_for_pod(pod))
    }
    fn hint_sets_for_container(&self, pod: &Pod, c: &Container) -> ProviderHintSets {
        Some(lock(&self.state).hint_sets_for_container(&pod.uid, c))
    }
    fn hint_sets_for_pod(&self, pod: &Pod) -> ProviderHintSets {
        Some(lock(&self.state).hint_sets_for_pod(pod))
    }
    fn allocate(
        &self,
        pod: &Pod,
        c: &Container,
        store: &AffinityStore,
    ) -> Result<Grant, AllocationError> {
        let mut state = lock(&self.state);
        let mut granted = Grant::default();
        for (resource, n) in state.container_device_requests(c) {
            let request = AllocationRequest {
                affinity: store.affinity(&pod.uid, &c.name).numa_affinity,
                ..AllocationRequest::new(&pod.uid, &c.name, &resource, n)
            };
            let ToAllocate::Devices(reservation) = state
                .devices_to_allocate(&request, None)
                .map_err(AllocationError::unexpected)?
            else {
                return Err(AllocationError::unexpected("no devices"));
            };
            granted.merge(Grant::devices(&resource, &reservation.devices));
            lock(&self.given).push((c.name.clone(), reservation));
        }
        Ok(granted)
    }
}

/// The memory manager's static policy.
pub(crate) struct Memory(pub(crate) Mutex<corral_memmgr::StaticPolicy>);

impl HintProvider for Memory {
    fn hints_for_container(&self, pod: &Pod, c: &Container) -> ProviderHints {
        hint_lists(&self.hint_sets_for_container(pod, c))
    }
    fn hints_for_pod(&self, pod: &Pod) -> ProviderHints {
        hint_lists(&self.hint_sets_for_pod(pod))
    }
    fn hint_sets_for_container(&self, pod: &Pod, c: &Container) -> ProviderHintSets {
        lock(&self.0)
            .hint_sets_for_container(pod, c)
            .map(|h| h.into_iter().map(|(r, s)| (r, Some(s))).collect())
    }
    fn hint_sets_for_pod(&self, pod: &Pod) -> ProviderHintSets {
        lock(&self.0)
            .hint_sets_for_pod(pod)
            .map(|h| h.into_iter().map(|(r, s)| (r, Some(s))).collect())
    }
    fn allocate(
        &self,
        pod: &Pod,
        c: &Container,
        store: &AffinityStore,
    ) -> Result<Grant, AllocationError> {
        let affinity = store.affinity(&pod.uid, &c.name);
        let mut policy = lock(&self.0);
        policy
            .allocate(pod, c, affinity)
            .map_err(AllocationError::unexpected)?;
        let blocks = policy.blocks(&pod.uid, &c.name).unwrap_or_default();
        let memory = blocks
            .iter()
            .map(|b| MemoryGrant::new(b.resource.clone(), b.size, b.numa_affinity.clone()))
            .collect();
        Ok(Grant::memory(memory))
    }
}
