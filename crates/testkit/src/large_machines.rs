//! Machines with many NUMA nodes, as plain data: where they outgrow upstream's topology
//! manager (more than 8 nodes) and where walking every set of nodes would stall.
//!
//! - [`gb200`]: a GB200-like tray — 2 Grace sockets × 72 cores (no SMT), one CPU NUMA node
//!   per socket with 480 GiB of LPDDR5X (nodes 0–1), and 32 memory-only nodes of GPU memory
//!   (nodes 2–33, 8 per GPU, 23 GiB each), with 4 GPUs (2 per socket, reported on their
//!   socket's CPU node, as the NVIDIA device plugin does). Distances as such a tray's
//!   `node*/distance` reads: 10 local, 40 between the Grace sockets, 80 from a socket to the
//!   GPU memory behind it, 120 across, 80 among one GPU's nodes and 120 between GPUs.
//! - [`synthetic64`]: 64 NUMA nodes on 4 sockets (16 per socket), 4 cores each (256 CPUs),
//!   8 GiB per node, one GPU per 8 nodes; distances 10 local, 16 on the socket, 32 across.
//! - [`two_socket_8numa`]: 2 sockets × 4 NUMA nodes × 16 cores × 2 threads (256 CPUs; CPU
//!   `c` and `c + 128` are siblings), 64 GiB and one GPU per node; distances 10 local, 12
//!   on the socket, 32 across.
//!
//! ```
//! let tray = corral_testkit::large_machines::gb200();
//! assert_eq!(tray.cpus.len(), 144);
//! assert_eq!(tray.nodes.len(), 34);
//! assert_eq!(tray.nodes.iter().filter(|n| n.memory_only()).count(), 32);
//! ```

use crate::upstream_topologies::CpuPlace;

const GI: u64 = 1 << 30;

/// One NUMA node: id, memory, distance row (indexed by node id) and its CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Node id.
    pub id: usize,
    /// Bytes of memory.
    pub memory_bytes: u64,
    /// `node<id>/distance`, indexed by node id.
    pub distances: Vec<u64>,
    /// CPUs on the node.
    pub cpus: Vec<usize>,
}

impl NodeSpec {
    /// Whether the node has memory and no CPU.
    pub fn memory_only(&self) -> bool {
        self.cpus.is_empty() && self.memory_bytes > 0
    }
}

/// A device and the NUMA node its plugin reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    /// Device id.
    pub id: String,
    /// NUMA node (OS id).
    pub numa: usize,
}

/// A machine: its CPUs, NUMA nodes and devices of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LargeMachine {
    /// Every CPU's place.
    pub cpus: Vec<CpuPlace>,
    /// Every NUMA node, ascending ids.
    pub nodes: Vec<NodeSpec>,
    /// The device resource's name.
    pub resource: &'static str,
    /// Its devices.
    pub devices: Vec<DeviceSpec>,
}

/// `count` nodes of `memory(id)` bytes, distances `distance(a, b)`, each with the CPUs of
/// `cpus` on it.
fn nodes_of(
    cpus: &[CpuPlace],
    count: usize,
    memory: impl Fn(usize) -> u64,
    distance: impl Fn(usize, usize) -> u64,
) -> Vec<NodeSpec> {
    (0..count)
        .map(|id| NodeSpec {
            id,
            memory_bytes: memory(id),
            distances: (0..count).map(|b| distance(id, b)).collect(),
            cpus: cpus
                .iter()
                .filter(|c| c.numa == id)
                .map(|c| c.cpu)
                .collect(),
        })
        .collect()
}

/// `count` GPUs `gpu<n>`, GPU `n` on NUMA node `numa(n)`.
fn gpus(count: usize, numa: impl Fn(usize) -> usize) -> Vec<DeviceSpec> {
    (0..count)
        .map(|gpu| DeviceSpec {
            id: format!("gpu{gpu}"),
            numa: numa(gpu),
        })
        .collect()
}

/// The GB200-like tray (see the module docs).
pub fn gb200() -> LargeMachine {
    let cpus: Vec<CpuPlace> = (0..144)
        .map(|cpu| CpuPlace {
            cpu,
            core: cpu,
            socket: cpu / 72,
            numa: cpu / 72,
            uncore: cpu / 72,
        })
        .collect();
    // Node 2 + 8g + k is GPU g's k-th memory node; GPUs 0–1 sit behind socket 0.
    let gpu_of = |node: usize| (node >= 2).then(|| (node - 2) / 8);
    let socket_of = |node: usize| match gpu_of(node) {
        None => node,
        Some(gpu) => gpu / 2,
    };
    let distance = |a: usize, b: usize| -> u64 {
        if a == b {
            return 10;
        }
        match (gpu_of(a), gpu_of(b)) {
            (None, None) => 40,
            (Some(x), Some(y)) if x == y => 80,
            (Some(_), Some(_)) => 120,
            _ if socket_of(a) == socket_of(b) => 80,
            _ => 120,
        }
    };
    let memory = |id: usize| if id < 2 { 480 * GI } else { 23 * GI };
    let nodes = nodes_of(&cpus, 34, memory, distance);
    LargeMachine {
        cpus,
        nodes,
        resource: "nvidia.com/gpu",
        devices: gpus(4, |gpu| gpu / 2),
    }
}

/// The 64-node synthetic machine (see the module docs).
pub fn synthetic64() -> LargeMachine {
    let cpus: Vec<CpuPlace> = (0..256)
        .map(|cpu| CpuPlace {
            cpu,
            core: cpu,
            socket: cpu / 64,
            numa: cpu / 4,
            uncore: cpu / 4,
        })
        .collect();
    let distance = |a: usize, b: usize| match (a == b, a / 16 == b / 16) {
        (true, _) => 10,
        (false, true) => 16,
        (false, false) => 32,
    };
    let nodes = nodes_of(&cpus, 64, |_| 8 * GI, distance);
    LargeMachine {
        cpus,
        nodes,
        resource: "example.com/gpu",
        devices: gpus(8, |gpu| gpu * 8),
    }
}

/// The two-socket, 8-node machine (see the module docs).
pub fn two_socket_8numa() -> LargeMachine {
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
    let distance = |a: usize, b: usize| match (a == b, a / 4 == b / 4) {
        (true, _) => 10,
        (false, true) => 12,
        (false, false) => 32,
    };
    let nodes = nodes_of(&cpus, 8, |_| 64 * GI, distance);
    LargeMachine {
        cpus,
        nodes,
        resource: "example.com/gpu",
        devices: gpus(8, |gpu| gpu),
    }
}
