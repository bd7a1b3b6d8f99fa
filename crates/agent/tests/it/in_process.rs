//! The whole admission in process, no I/O: a topology manager over the CPU manager's static
//! policy, the device manager's state and (optionally) the memory manager's static policy —
//! the synchronous cores the agent's node wires, as hint providers answering with hint
//! families — built for a corral-testkit `LargeMachine`. What the large-machine tests
//! (`large_machines`) and the whole-admission bench (`benches/whole_admission.rs`, which
//! includes this file) run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use corral_cpumgr::{CpuState, Policy as _, StaticPolicyOptions, TopologyIndex};
use corral_devicemgr::{
    AllocationRequest, Device, DeviceState, PluginOptions, Reservation, ToAllocate,
};
use corral_memmgr::{MEMORY, SystemReserved, default_machine_state};
use corral_testkit::large_machines::LargeMachine;
use corral_topology::memory::NumaMemory;
use corral_topology::topologymanager::{
    AffinityStore, AllocationError, Grant, HintProvider, MemoryGrant, ProviderHintSets,
    TopologyManager, TopologyManagerConfig, hint_lists,
};
use corral_topology::{
    Container, CpuInfo, CpuRecord, CpuSet, CpuTopology, NumaNode, Pod, PolicyName, PolicyOptions,
    ProviderHints, ScopeName,
};

pub(crate) const GI: u64 = 1 << 30;

/// The one container of [`guaranteed`]'s pods.
pub(crate) const CONTAINER: &str = "app";

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
        let memory = blocks.iter().map(MemoryGrant::from).collect();
        Ok(Grant::memory(memory))
    }
}

/// How a [`node`] decides: the topology manager's policy, scope and prefer-closest option,
/// and which providers it asks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeConfig {
    pub(crate) policy: PolicyName,
    pub(crate) scope: ScopeName,
    pub(crate) prefer_closest_numa: bool,
    pub(crate) providers: Providers,
}

/// Which hint providers a [`node`]'s topology manager asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Providers {
    /// The CPU manager and the device manager.
    CpusAndDevices,
    /// The CPU, device and memory managers.
    CpusDevicesAndMemory,
}

/// A machine's topology manager and its providers.
pub(crate) struct Node {
    pub(crate) manager: TopologyManager,
    pub(crate) cpus: Arc<Cpus>,
    pub(crate) devices: Arc<Devices>,
    pub(crate) memory: Option<Arc<Memory>>,
    /// CPUs per NUMA node.
    pub(crate) numa_cpus: BTreeMap<usize, CpuSet>,
}

/// `machine` with its CPUs (none reserved), its devices (one plugin of
/// `machine.resource`) and its memory (1 GiB reserved on node 0) free.
pub(crate) fn node(machine: &LargeMachine, config: NodeConfig) -> Node {
    let records: Vec<CpuRecord> = machine
        .cpus
        .iter()
        .map(|p| CpuRecord {
            cpu: p.cpu,
            info: CpuInfo {
                core: p.core,
                socket: p.socket,
                numa: p.numa,
                uncore: p.uncore,
            },
        })
        .collect();
    let topology = CpuTopology::new(&records).expect("valid topology");
    let index = Arc::new(TopologyIndex::new(&topology));
    let mut cpu_policy = corral_cpumgr::StaticPolicy::new(
        Arc::clone(&index),
        2,
        &CpuSet::new(),
        StaticPolicyOptions::default(),
        config.policy,
    )
    .expect("static policy");
    let mut state = CpuState::default();
    cpu_policy.start(&mut state).expect("start");
    let cpus = Arc::new(Cpus(Mutex::new((cpu_policy, state))));

    let ids: Vec<usize> = machine.nodes.iter().map(|n| n.id).collect();
    let mut device_state = DeviceState::new(ids.clone());
    device_state.plugin_connected(machine.resource, PluginOptions::default());
    let listed: Vec<Device> = machine
        .devices
        .iter()
        .map(|d| Device::new(d.id.clone(), Some(vec![d.numa as i64])))
        .collect();
    device_state.update_devices(machine.resource, &listed);
    let devices = Arc::new(Devices {
        state: Mutex::new(device_state),
        given: Mutex::default(),
    });

    let topology_config = TopologyManagerConfig {
        policy: config.policy,
        scope: config.scope,
        options: PolicyOptions {
            prefer_closest_numa: config.prefer_closest_numa,
            max_allowable_numa_nodes: 64,
        },
    };
    let nodes: Vec<NumaNode> = machine
        .nodes
        .iter()
        .map(|n| NumaNode {
            id: n.id,
            distances: Some(n.distances.clone()),
        })
        .collect();
    let mut manager = TopologyManager::new(&topology_config, &nodes).expect("topology manager");
    manager.add_hint_provider(cpus.clone());
    manager.add_hint_provider(devices.clone());
    let memory = (config.providers == Providers::CpusDevicesAndMemory).then(|| {
        let numa_memory: BTreeMap<usize, NumaMemory> = machine
            .nodes
            .iter()
            .map(|n| {
                let memory = NumaMemory {
                    node: n.id,
                    memory_bytes: n.memory_bytes,
                    huge_pages: Vec::new(),
                };
                (n.id, memory)
            })
            .collect();
        let reserved: SystemReserved =
            BTreeMap::from([(0, BTreeMap::from([(MEMORY.to_owned(), GI)]))]);
        let default = default_machine_state(&numa_memory, &reserved).expect("machine state");
        let memory = Arc::new(Memory(Mutex::new(corral_memmgr::StaticPolicy::new(
            default,
        ))));
        manager.add_hint_provider(memory.clone());
        memory
    });
    let numa_cpus = ids
        .iter()
        .map(|&id| (id, index.cpus_in_numa_node(id)))
        .collect();
    Node {
        manager,
        cpus,
        devices,
        memory,
        numa_cpus,
    }
}

/// A Guaranteed pod of one container ([`CONTAINER`]) asking `cpus` CPUs, `memory` bytes
/// and `devices` of `resource`.
pub(crate) fn guaranteed(uid: &str, resource: &str, cpus: i64, memory: u64, devices: i64) -> Pod {
    let mut c = Container::new(CONTAINER);
    for list in [&mut c.resources.requests, &mut c.resources.limits] {
        list.cpu_millis = Some(cpus * 1000);
        list.memory_bytes = Some(memory as i64);
        list.extended.insert(resource.to_owned(), devices);
    }
    Pod {
        uid: uid.to_owned(),
        containers: vec![c],
        ..Pod::default()
    }
}

/// What the pod's container holds: its CPUs, its memory's nodes (none without the memory
/// manager) and its devices' nodes.
pub(crate) fn holdings(
    node: &Node,
    machine: &LargeMachine,
    pod: &Pod,
) -> (CpuSet, Vec<usize>, Vec<usize>) {
    let cpus = lock(&node.cpus.0)
        .1
        .cpu_set(&pod.uid, CONTAINER)
        .cloned()
        .unwrap_or_default();
    let memory = node
        .memory
        .as_ref()
        .and_then(|memory| {
            lock(&memory.0)
                .blocks(&pod.uid, CONTAINER)
                .and_then(|b| b.iter().find(|b| b.resource == MEMORY))
                .map(|b| b.numa_affinity.clone())
        })
        .unwrap_or_default();
    let devices = lock(&node.devices.given)
        .iter()
        .filter(|(name, _)| name == CONTAINER)
        .flat_map(|(_, reservation)| &reservation.devices)
        .filter_map(|id| machine.devices.iter().find(|d| d.id == *id).map(|d| d.numa))
        .collect();
    (cpus, memory, devices)
}

/// Give back everything the pod's container holds, so the node is as [`node`] built it.
pub(crate) fn release(node: &Node, pod: &Pod) {
    {
        let mut g = lock(&node.cpus.0);
        let (policy, state) = &mut *g;
        policy.remove_container(state, &pod.uid, CONTAINER);
    }
    let given = std::mem::take(&mut *lock(&node.devices.given));
    let mut devices = lock(&node.devices.state);
    for (_, reservation) in &given {
        devices.release(reservation);
    }
    if let Some(memory) = &node.memory {
        lock(&memory.0).remove_container(&pod.uid, CONTAINER);
    }
}
