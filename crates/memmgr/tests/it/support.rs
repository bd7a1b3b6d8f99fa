//! What the static policy's tests share: machines, Guaranteed containers and their pods,
//! hints, and reads of one node's table.

use std::collections::BTreeMap;

use corral_checkpoint::{CheckpointStore, MEMORY_MANAGER_FILE, StateFile};
use corral_memmgr::{MEMORY, MachineState, StaticPolicy, SystemReserved, default_machine_state};
use corral_topology::memory::{HugePages, NumaMemory};
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{Container, NumaMask, Pod, ResourceList};

/// A mebibyte, in bytes (upstream's `mb`).
pub(crate) const MI: u64 = 1 << 20;
/// A gibibyte, in bytes (upstream's `gb`).
pub(crate) const GI: u64 = 1 << 30;
/// The resource of 1 GiB huge pages.
pub(crate) const HP1G: &str = "hugepages-1Gi";
/// The resource of 2 MiB huge pages.
pub(crate) const HP2M: &str = "hugepages-2Mi";

/// `nodes` NUMA nodes of `memory_bytes` each (huge pages included), each with `pages`
/// pages of `page_size_kib`.
pub(crate) fn numa_memory(
    nodes: usize,
    memory_bytes: u64,
    page_size_kib: u64,
    pages: u64,
) -> BTreeMap<usize, NumaMemory> {
    (0..nodes)
        .map(|node| {
            let huge_pages = vec![HugePages {
                page_size_kib,
                count: pages,
            }];
            let memory = NumaMemory {
                node,
                memory_bytes,
                huge_pages,
            };
            (node, memory)
        })
        .collect()
}

/// `nodes` NUMA nodes of `memory` bytes each and `pages` 1 GiB pages, nothing reserved.
pub(crate) fn machine(nodes: usize, memory: u64, pages: u64) -> MachineState {
    let memory = numa_memory(nodes, memory + pages * GI, 1 << 20, pages);
    default_machine_state(&memory, &SystemReserved::new()).unwrap()
}

/// Sets `resource` (`memory` or an extended resource such as huge pages) to `bytes`.
pub(crate) fn set(list: &mut ResourceList, resource: &str, bytes: u64) {
    let value = i64::try_from(bytes).unwrap();
    if resource == MEMORY {
        list.memory_bytes = Some(value);
    } else {
        list.extended.insert(resource.to_owned(), value);
    }
}

/// A Guaranteed container: one CPU and `resources` (name, bytes), requests equal to limits.
pub(crate) fn guaranteed(name: &str, resources: &[(&str, u64)]) -> Container {
    let mut c = Container::new(name);
    for list in [&mut c.resources.requests, &mut c.resources.limits] {
        list.cpu_millis = Some(1000);
        for &(resource, bytes) in resources {
            set(list, resource, bytes);
        }
    }
    c
}

/// A Guaranteed container asking `memory` bytes and `huge_pages` bytes of 1 GiB pages.
pub(crate) fn container(name: &str, memory: u64, huge_pages: u64) -> Container {
    if huge_pages > 0 {
        guaranteed(name, &[(MEMORY, memory), (HP1G, huge_pages)])
    } else {
        guaranteed(name, &[(MEMORY, memory)])
    }
}

/// A pod `uid` of init containers `init` and app containers `app`.
pub(crate) fn pod(uid: &str, init: Vec<Container>, app: Vec<Container>) -> Pod {
    Pod {
        uid: uid.into(),
        name: uid.into(),
        namespace: "default".into(),
        init_containers: init,
        containers: app,
        ..Pod::default()
    }
}

/// A hint for `nodes`.
pub(crate) fn hint(nodes: &[usize], preferred: bool) -> TopologyHint {
    TopologyHint {
        numa_affinity: Some(NumaMask::new(nodes.iter().copied()).unwrap()),
        preferred,
    }
}

/// Free bytes of `resource` on `node`.
pub(crate) fn free(policy: &StaticPolicy, node: usize, resource: &str) -> u64 {
    policy.machine_state()[&node].memory[resource].free
}

/// Reserved bytes of `resource` on `node`.
pub(crate) fn reserved(policy: &StaticPolicy, node: usize, resource: &str) -> u64 {
    policy.machine_state()[&node].memory[resource].reserved
}

/// `memory_manager_state` in `dir`, written durably at once (no journal).
pub(crate) fn state_file(dir: impl AsRef<std::path::Path>) -> StateFile {
    let store = CheckpointStore::open(dir).expect("open the state dir");
    StateFile::in_store(&store, MEMORY_MANAGER_FILE).expect("a valid key")
}
