//! Whole-node admissions on machines with many NUMA nodes (corral-testkit's
//! `large_machines`: a GB200-like tray with 32 memory-only nodes, and 64 nodes): the
//! topology manager over the CPU manager's static policy, the device manager's state and the
//! memory manager's static policy — the synchronous cores the managers expose, as hint
//! providers answering with hint families. A Guaranteed pod asking CPUs, a GPU and memory is
//! admitted under every policy, both scopes, with and without prefer-closest-numa-nodes,
//! and gets all three from one node where the policy aligns. Upstream would refuse these
//! machines (more than 8 nodes) or walk 2³⁴ and 2⁶⁴ sets of nodes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use corral_cpumgr::{CpuState, Policy as _, StaticPolicyOptions, TopologyIndex};
use corral_devicemgr::{Device, DeviceState, PluginOptions};
use corral_memmgr::{MEMORY, SystemReserved, default_machine_state};
use corral_testkit::large_machines::{LargeMachine, gb200, synthetic64};

use crate::in_process::{Cpus, Devices, Memory, lock};
use corral_topology::memory::NumaMemory;
use corral_topology::topologymanager::{TopologyManager, TopologyManagerConfig};
use corral_topology::{
    Container, CpuInfo, CpuRecord, CpuSet, CpuTopology, NumaMask, NumaNode, Pod, PolicyName,
    PolicyOptions, ScopeName,
};

const GI: i64 = 1 << 30;

struct Node {
    manager: TopologyManager,
    cpus: Arc<Cpus>,
    devices: Arc<Devices>,
    memory: Arc<Memory>,
    /// CPUs per NUMA node.
    numa_cpus: BTreeMap<usize, CpuSet>,
}

fn node(machine: &LargeMachine, policy: PolicyName, scope: ScopeName, closest: bool) -> Node {
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
        policy,
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

    let numa_memory: BTreeMap<usize, NumaMemory> = machine
        .nodes
        .iter()
        .map(|n| {
            (
                n.id,
                NumaMemory {
                    node: n.id,
                    memory_bytes: n.memory_bytes,
                    huge_pages: Vec::new(),
                },
            )
        })
        .collect();
    let reserved: SystemReserved =
        BTreeMap::from([(0, BTreeMap::from([(MEMORY.to_owned(), GI as u64)]))]);
    let default = default_machine_state(&numa_memory, &reserved).expect("machine state");
    let memory = Arc::new(Memory(Mutex::new(corral_memmgr::StaticPolicy::new(
        default,
    ))));

    let config = TopologyManagerConfig {
        policy,
        scope,
        options: PolicyOptions {
            prefer_closest_numa: closest,
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
    let mut manager = TopologyManager::new(&config, &nodes).expect("topology manager");
    manager.add_hint_provider(cpus.clone());
    manager.add_hint_provider(devices.clone());
    manager.add_hint_provider(memory.clone());
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

fn guaranteed(uid: &str, resource: &str, cpus: i64, memory: i64, gpus: i64) -> Pod {
    let mut c = Container::new("app");
    for list in [&mut c.resources.requests, &mut c.resources.limits] {
        list.cpu_millis = Some(cpus * 1000);
        list.memory_bytes = Some(memory);
        list.extended.insert(resource.to_owned(), gpus);
    }
    Pod {
        uid: uid.to_owned(),
        containers: vec![c],
        ..Pod::default()
    }
}

/// What the container got: its CPUs, its memory's nodes, its devices' nodes.
fn holdings(node: &Node, machine: &LargeMachine, pod: &Pod) -> (CpuSet, Vec<usize>, Vec<usize>) {
    let cpus = lock(&node.cpus.0)
        .1
        .cpu_set(&pod.uid, "app")
        .cloned()
        .unwrap_or_default();
    let memory = lock(&node.memory.0)
        .blocks(&pod.uid, "app")
        .and_then(|b| b.iter().find(|b| b.resource == MEMORY))
        .map(|b| b.numa_affinity.clone())
        .unwrap_or_default();
    let devices = lock(&node.devices.given)
        .iter()
        .filter(|(name, _)| name == "app")
        .flat_map(|(_, reservation)| &reservation.devices)
        .filter_map(|id| machine.devices.iter().find(|d| d.id == *id).map(|d| d.numa))
        .collect();
    (cpus, memory, devices)
}

fn admit_everywhere(machine: &LargeMachine) {
    for policy in PolicyName::ALL {
        for scope in [ScopeName::Container, ScopeName::Pod] {
            for closest in [false, true] {
                let node = node(machine, policy, scope, closest);
                let pod = guaranteed("pod", machine.resource, 4, 4 * GI, 1);
                let started = Instant::now();
                let result = node.manager.admit(&pod);
                let took = started.elapsed();
                let what = format!("{policy} {scope:?} closest={closest}: {took:?}");
                assert!(result.admit, "{what}: {result:?}");
                let (cpus, memory, devices) = holdings(&node, machine, &pod);
                assert_eq!(cpus.len(), 4, "{what}");
                assert_eq!(devices.len(), 1, "{what}");
                if policy == PolicyName::None {
                    continue;
                }
                let hint = node.manager.affinity("pod", "app");
                assert!(hint.preferred, "{what}: {hint:?}");
                let mask = hint.numa_affinity.expect("a node");
                assert_eq!(mask.count(), 1, "{what}: {hint:?}");
                let numa = mask.iter().next().expect("one node");
                assert!(cpus.is_subset_of(&node.numa_cpus[&numa]), "{what}: {cpus}");
                assert_eq!(memory, vec![numa], "{what}");
                assert_eq!(devices, vec![numa], "{what}");
                eprintln!("{} {what}, node {numa}", machine.resource);
            }
        }
    }
}

#[test]
fn gb200_admits_an_aligned_pod_under_every_policy() {
    admit_everywhere(&gb200());
}

#[test]
fn synthetic64_admits_an_aligned_pod_under_every_policy() {
    admit_everywhere(&synthetic64());
}

/// Memory that no single node holds: no preferred merge exists, the best non-preferred one
/// is found among the intersections of the three families (best-effort admits it).
#[test]
fn memory_wider_than_a_node_is_admitted_best_effort() {
    for (machine, memory) in [(gb200(), 600 * GI), (synthetic64(), 12 * GI)] {
        for closest in [false, true] {
            let node = node(
                &machine,
                PolicyName::BestEffort,
                ScopeName::Container,
                closest,
            );
            let pod = guaranteed("wide", machine.resource, 4, memory, 1);
            let started = Instant::now();
            let result = node.manager.admit(&pod);
            eprintln!(
                "{} wide closest={closest}: {:?}",
                machine.resource,
                started.elapsed()
            );
            assert!(result.admit, "{result:?}");
            let hint = node.manager.affinity("wide", "app");
            assert!(!hint.preferred, "{hint:?}");
            let (cpus, memory_nodes, devices) = holdings(&node, &machine, &pod);
            assert_eq!(cpus.len(), 4);
            assert_eq!(devices.len(), 1);
            assert!(memory_nodes.len() > 1, "{memory_nodes:?}");
            let merged = hint.numa_affinity.expect("a mask");
            let memory_mask = NumaMask::new(memory_nodes.iter().copied()).expect("mask");
            assert_eq!(
                memory_mask.and(merged),
                merged,
                "memory extends the affinity"
            );
        }
    }
}
