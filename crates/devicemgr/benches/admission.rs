//! One whole in-process admission, no I/O: the topology manager (best-effort, container
//! scope) asks the CPU manager's static policy and the device manager's state for hint
//! families, merges them, and each allocates (4 exclusive CPUs, then 1 GPU) — the
//! synchronous cores the agent wires, as in `tests/it/large_machines.rs`. Rows:
//!
//! - `admission/256cpu-8numa/cpu+gpu`: 2 sockets × 4 nodes × 16 cores × 2 threads, a GPU
//!   per node;
//! - `admission/gb200-34numa/cpu+gpu` and `admission/synthetic64-64numa/cpu+gpu`:
//!   corral-testkit's large machines;
//! - the same with the memory manager's static policy as a third provider (`+memory`).
//!
//! Only `admit` is timed; the pod's CPUs, devices and memory are given back between
//! iterations outside the measurement, so every iteration admits into the same state.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_cpumgr::{CpuState, Policy as _, StaticPolicyOptions, TopologyIndex};
use corral_devicemgr::{Device, DeviceState, PluginOptions};
use corral_memmgr::{MEMORY, SystemReserved, default_machine_state};
use corral_testkit::large_machines::{LargeMachine, NodeSpec, gb200, synthetic64};
use corral_testkit::upstream_topologies::CpuPlace;
use corral_topology::memory::NumaMemory;
use corral_topology::topologymanager::{TopologyManager, TopologyManagerConfig};
use corral_topology::{
    Container, CpuInfo, CpuRecord, CpuSet, CpuTopology, NumaNode, Pod, PolicyName, PolicyOptions,
    ScopeName,
};
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "../tests/it/in_process.rs"]
mod in_process;
use in_process::{Cpus, Devices, Memory, lock};

const GI: u64 = 1 << 30;
const CONTAINER: &str = "app";

/// 2 sockets × 4 NUMA nodes × 16 cores × 2 threads (256 CPUs; CPU `c` and `c + 128` are
/// siblings), 64 GiB and one GPU per node; distances 10 local, 12 on the socket, 32 across.
fn machine_256cpu_8numa() -> LargeMachine {
    let cpus: Vec<CpuPlace> = (0..256)
        .map(|cpu| {
            let core = cpu % 128;
            CpuPlace {
                cpu,
                core,
                socket: core / 64,
                numa: core / 16,
                uncore: core / 16,
            }
        })
        .collect();
    let nodes = (0..8)
        .map(|id| NodeSpec {
            id,
            memory_bytes: 64 * GI,
            distances: (0..8)
                .map(|b| match (id == b, id / 4 == b / 4) {
                    (true, _) => 10,
                    (false, true) => 12,
                    (false, false) => 32,
                })
                .collect(),
            cpus: cpus
                .iter()
                .filter(|c| c.numa == id)
                .map(|c| c.cpu)
                .collect(),
        })
        .collect();
    let devices = (0..8)
        .map(|gpu| corral_testkit::large_machines::DeviceSpec {
            id: format!("gpu{gpu}"),
            numa: gpu,
        })
        .collect();
    LargeMachine {
        cpus,
        nodes,
        resource: "example.com/gpu",
        devices,
    }
}

struct Node {
    manager: TopologyManager,
    cpus: Arc<Cpus>,
    devices: Arc<Devices>,
    memory: Option<Arc<Memory>>,
}

fn node(machine: &LargeMachine, with_memory: bool) -> Node {
    let policy = PolicyName::BestEffort;
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
        index,
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
    let mut device_state = DeviceState::new(ids);
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

    let config = TopologyManagerConfig {
        policy,
        scope: ScopeName::Container,
        options: PolicyOptions {
            prefer_closest_numa: false,
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
    let memory = with_memory.then(|| {
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
    Node {
        manager,
        cpus,
        devices,
        memory,
    }
}

/// A Guaranteed pod: 4 CPUs, 4 GiB, 1 GPU.
fn guaranteed(resource: &str) -> Pod {
    let mut c = Container::new(CONTAINER);
    for list in [&mut c.resources.requests, &mut c.resources.limits] {
        list.cpu_millis = Some(4000);
        list.memory_bytes = Some(4 * GI as i64);
        list.extended.insert(resource.to_owned(), 1);
    }
    Pod {
        uid: "pod".to_owned(),
        containers: vec![c],
        ..Pod::default()
    }
}

/// Check the pod got what it asked, then give it all back.
fn release(node: &Node, pod: &Pod) {
    {
        let mut g = lock(&node.cpus.0);
        let (policy, state) = &mut *g;
        let got = state.cpu_set(&pod.uid, CONTAINER).map(CpuSet::len);
        assert_eq!(got, Some(4), "4 exclusive CPUs");
        policy.remove_container(state, &pod.uid, CONTAINER);
    }
    let given = std::mem::take(&mut *lock(&node.devices.given));
    assert_eq!(given.len(), 1, "one GPU reservation");
    let mut devices = lock(&node.devices.state);
    for (_, reservation) in &given {
        devices.release(reservation);
    }
    if let Some(memory) = &node.memory {
        lock(&memory.0).remove_container(&pod.uid, CONTAINER);
    }
}

fn admission(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission");
    for (name, machine) in [
        ("256cpu-8numa", machine_256cpu_8numa()),
        ("gb200-34numa", gb200()),
        ("synthetic64-64numa", synthetic64()),
    ] {
        for with_memory in [false, true] {
            let node = node(&machine, with_memory);
            let pod = guaranteed(machine.resource);
            let id = format!(
                "{name}/{}",
                if with_memory {
                    "cpu+gpu+memory"
                } else {
                    "cpu+gpu"
                }
            );
            group.bench_function(id, |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let started = Instant::now();
                        let result = node.manager.admit(black_box(&pod));
                        total += started.elapsed();
                        assert!(result.admit, "{result:?}");
                        release(&node, &pod);
                    }
                    total
                })
            });
        }
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)); targets = admission);
criterion_main!(benches);
