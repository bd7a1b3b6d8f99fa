//! Upstream's test CPU topologies (`cpumanager/policy_test.go`, `topology_hints_test.go`,
//! `cpu_manager_test.go`) as plain data: where each CPU sits, and the machine's counts.
//!
//! Plain on purpose: this crate depends on no corral crate (it is every crate's
//! dev-dependency), so each consumer builds its own topology type from a [`Machine`]
//! (corral-cpumgr: `test_util::topology_index`, behind its `test-util` feature).
//!
//! ```
//! use corral_testkit::upstream_topologies::dual_socket_ht;
//!
//! let machine = dual_socket_ht();
//! assert_eq!(machine.cpus.len(), machine.counts.cpus);
//! let cpu7 = machine.cpus[7];
//! assert_eq!((cpu7.core, cpu7.socket, cpu7.numa), (1, 1, 1));
//! ```

/// Where one logical CPU sits: its id and the ids of its core, socket, NUMA node and uncore
/// (L3) cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuPlace {
    /// CPU id.
    pub cpu: usize,
    /// Core id.
    pub core: usize,
    /// Socket (package) id.
    pub socket: usize,
    /// NUMA node id.
    pub numa: usize,
    /// Uncore (L3) cache id.
    pub uncore: usize,
}

impl CpuPlace {
    /// The record as `[cpu, core, socket, numa, uncore]`.
    pub fn ids(&self) -> [usize; 5] {
        [self.cpu, self.core, self.socket, self.numa, self.uncore]
    }
}

/// A machine's counts, as upstream's `CPUTopology` states them (`NumCPUs`, `NumCores`,
/// `NumSockets`, `NumNUMANodes`, `NumUncoreCache`). Upstream divides by them, so a fixture
/// gives them explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Counts {
    /// Logical CPUs.
    pub cpus: usize,
    /// Physical cores.
    pub cores: usize,
    /// Sockets.
    pub sockets: usize,
    /// NUMA nodes.
    pub numa_nodes: usize,
    /// Uncore (L3) caches.
    pub uncore_caches: usize,
}

impl Counts {
    /// The counts as `[cpus, cores, sockets, numa_nodes, uncore_caches]`.
    pub fn values(&self) -> [usize; 5] {
        [
            self.cpus,
            self.cores,
            self.sockets,
            self.numa_nodes,
            self.uncore_caches,
        ]
    }
}

/// A test machine: its name, every CPU's place (ascending CPU ids for the fixtures here) and
/// its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Upstream's name for it (the Go variable, or the conformance file's topology name).
    pub name: String,
    /// Every CPU.
    pub cpus: Vec<CpuPlace>,
    /// The counts.
    pub counts: Counts,
}

impl Machine {
    /// Every CPU as `[cpu, core, socket, numa, uncore]`.
    pub fn cpu_ids(&self) -> impl Iterator<Item = [usize; 5]> + '_ {
        self.cpus.iter().map(CpuPlace::ids)
    }
}

/// A machine of `n` CPUs, CPU `cpu` at `place(cpu)` = (core, socket, numa), one uncore cache.
fn build(
    name: &str,
    n: usize,
    place: impl Fn(usize) -> (usize, usize, usize),
    [cpus, cores, sockets, numa_nodes]: [usize; 4],
) -> Machine {
    Machine {
        name: name.to_owned(),
        cpus: (0..n)
            .map(|cpu| {
                let (core, socket, numa) = place(cpu);
                CpuPlace {
                    cpu,
                    core,
                    socket,
                    numa,
                    uncore: 0,
                }
            })
            .collect(),
        counts: Counts {
            cpus,
            cores,
            sockets,
            numa_nodes,
            uncore_caches: 1,
        },
    }
}

/// `topoSingleSocketHT`: 1 socket, 4 cores × 2 threads; CPU n and n+4 share core n.
pub fn single_socket_ht() -> Machine {
    build("topoSingleSocketHT", 8, |cpu| (cpu % 4, 0, 0), [8, 4, 1, 1])
}

/// `topoDualSocketHT`: 2 sockets (= NUMA nodes) × 3 cores × 2 threads; core = cpu % 6,
/// socket = core % 2.
pub fn dual_socket_ht() -> Machine {
    build(
        "topoDualSocketHT",
        12,
        |cpu| {
            let core = cpu % 6;
            (core, core % 2, core % 2)
        },
        [12, 6, 2, 2],
    )
}

/// `topoTripleSocketHT`: 3 sockets × 3 cores × 2 threads, all NUMA node 0; CPUs 0-5 are
/// socket 1, 6-11 socket 0, 12-17 socket 2.
pub fn triple_socket_ht() -> Machine {
    build(
        "topoTripleSocketHT",
        18,
        |cpu| (cpu / 2, [1, 0, 2][cpu / 6], 0),
        [18, 9, 3, 1],
    )
}

/// `topoDualSocketNoHT`: 2 sockets (= NUMA nodes) × 4 single-thread cores.
pub fn dual_socket_no_ht() -> Machine {
    build(
        "topoDualSocketNoHT",
        8,
        |cpu| (cpu, cpu / 4, cpu / 4),
        [8, 8, 2, 2],
    )
}

/// `topoDualSocketMultiNumaPerSocketHT` (dual Xeon Gold 6230): 2 sockets × 2 NUMA nodes ×
/// 10 cores × 2 threads; core = cpu % 40, socket = core / 20, NUMA = core / 10.
pub fn dual_socket_multi_numa_per_socket_ht() -> Machine {
    build(
        "topoDualSocketMultiNumaPerSocketHT",
        80,
        |cpu| (cpu % 40, cpu % 40 / 20, cpu % 40 / 10),
        [80, 40, 2, 4],
    )
}

/// `fakeTopoMultiSocketDualSocketPerNumaHT`: the previous one with sockets and NUMA nodes
/// flipped: 4 sockets of 10 cores, 2 NUMA nodes of 2 sockets.
pub fn fake_multi_socket_dual_socket_per_numa_ht() -> Machine {
    build(
        "fakeTopoMultiSocketDualSocketPerNumaHT",
        80,
        |cpu| (cpu % 40, cpu % 40 / 10, cpu % 40 / 20),
        [80, 40, 4, 2],
    )
}

/// `topoQuadSocketFourWayHT`'s cores: (socket, core, its four CPUs), transcribed from
/// upstream's table.
const QUAD_SOCKET_CORES: [(usize, usize, [usize; 4]); 72] = [
    (0, 0, [0, 169, 109, 229]),
    (0, 1, [50, 170, 110, 230]),
    (0, 64, [1, 25, 13, 38]),
    (0, 65, [2, 26, 14, 39]),
    (0, 72, [9, 33, 21, 46]),
    (0, 73, [10, 34, 22, 47]),
    (0, 8, [57, 177, 117, 237]),
    (0, 9, [58, 178, 118, 238]),
    (0, 24, [71, 191, 131, 251]),
    (0, 25, [72, 192, 132, 252]),
    (0, 32, [79, 199, 139, 259]),
    (0, 33, [80, 200, 140, 260]),
    (0, 40, [87, 207, 147, 267]),
    (0, 41, [88, 208, 148, 268]),
    (0, 48, [95, 215, 155, 275]),
    (0, 49, [96, 216, 156, 276]),
    (0, 56, [103, 223, 163, 283]),
    (0, 57, [104, 224, 164, 284]),
    (1, 66, [3, 27, 15, 40]),
    (1, 67, [4, 28, 16, 41]),
    (1, 74, [11, 35, 23, 48]),
    (1, 75, [12, 36, 24, 49]),
    (1, 2, [51, 171, 111, 231]),
    (1, 3, [52, 172, 112, 232]),
    (1, 10, [59, 179, 119, 239]),
    (1, 11, [60, 180, 120, 240]),
    (1, 18, [65, 185, 125, 245]),
    (1, 19, [66, 186, 126, 246]),
    (1, 26, [73, 193, 133, 253]),
    (1, 27, [74, 194, 134, 254]),
    (1, 34, [81, 201, 141, 261]),
    (1, 35, [82, 202, 142, 262]),
    (1, 42, [89, 209, 149, 269]),
    (1, 43, [90, 210, 150, 270]),
    (1, 50, [97, 217, 157, 277]),
    (1, 51, [98, 218, 158, 278]),
    (2, 68, [5, 29, 17, 42]),
    (2, 69, [6, 30, 18, 43]),
    (2, 4, [53, 173, 113, 233]),
    (2, 5, [54, 174, 114, 234]),
    (2, 12, [61, 181, 121, 241]),
    (2, 13, [62, 182, 122, 242]),
    (2, 20, [67, 187, 127, 247]),
    (2, 21, [68, 188, 128, 248]),
    (2, 28, [75, 195, 135, 255]),
    (2, 29, [76, 196, 136, 256]),
    (2, 36, [83, 203, 143, 263]),
    (2, 37, [84, 204, 144, 264]),
    (2, 44, [91, 211, 151, 271]),
    (2, 45, [92, 212, 152, 272]),
    (2, 52, [99, 219, 159, 279]),
    (2, 53, [100, 220, 160, 280]),
    (2, 60, [105, 225, 165, 285]),
    (2, 61, [106, 226, 166, 286]),
    (3, 70, [7, 31, 19, 44]),
    (3, 71, [8, 32, 20, 45]),
    (3, 63, [37, 168, 108, 228]),
    (3, 62, [107, 227, 167, 287]),
    (3, 6, [55, 175, 115, 235]),
    (3, 7, [56, 176, 116, 236]),
    (3, 14, [63, 183, 123, 243]),
    (3, 15, [64, 184, 124, 244]),
    (3, 22, [69, 189, 129, 249]),
    (3, 23, [70, 190, 130, 250]),
    (3, 30, [77, 197, 137, 257]),
    (3, 31, [78, 198, 138, 258]),
    (3, 38, [85, 205, 145, 265]),
    (3, 39, [86, 206, 146, 266]),
    (3, 46, [93, 213, 153, 273]),
    (3, 47, [94, 214, 154, 274]),
    (3, 54, [101, 221, 161, 281]),
    (3, 55, [102, 222, 162, 282]),
];

/// `topoQuadSocketFourWayHT` (`policy_test.go`, an Intel KNL in SNC-4 mode as hwloc shows
/// it): 4 sockets (= NUMA nodes) × 18 cores × 4 threads, 288 CPUs with scattered ids.
pub fn quad_socket_four_way_ht() -> Machine {
    let mut place = vec![(0, 0, 0); 288];
    for (socket, core, cpus) in QUAD_SOCKET_CORES {
        for cpu in cpus {
            place[cpu] = (core, socket, socket);
        }
    }
    build(
        "topoQuadSocketFourWayHT",
        288,
        |cpu| place[cpu],
        [288, 72, 4, 4],
    )
}

/// The topology `topology.Discover` builds from `topology_hints_test.go`'s
/// `returnMachineInfo`: 2 sockets (= NUMA nodes) × 3 cores × 2 threads; socket 0 holds
/// CPUs 0-2 and their siblings 6-8, socket 1 holds 3-5 and 9-11 (core id = lowest thread).
pub fn hints_machine_info() -> Machine {
    build(
        "returnMachineInfo",
        12,
        |cpu| (cpu % 6, cpu % 6 / 3, cpu % 6 / 3),
        [12, 6, 2, 2],
    )
}

/// `cpu_manager_test.go`'s 4-CPU machine: 1 socket, 4 single-thread cores, NUMA node 0.
pub fn single_socket_four_cores_no_ht() -> Machine {
    build(
        "cpu_manager_test 4 CPUs",
        4,
        |cpu| (cpu, 0, 0),
        [4, 4, 1, 1],
    )
}

/// `TestReconcileState`'s machine: 2 sockets × 4 CPUs, core ids 0-3 on each socket (so CPU
/// n and n+4 share a core id), all NUMA node 0.
pub fn reconcile_dual_socket() -> Machine {
    build(
        "TestReconcileState",
        8,
        |cpu| (cpu % 4, cpu / 4, 0),
        [8, 4, 2, 1],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fixture's stated counts are the ones its CPUs show (a transcription check).
    #[test]
    fn counts_match_the_cpus() {
        for machine in [
            single_socket_ht(),
            dual_socket_ht(),
            triple_socket_ht(),
            dual_socket_no_ht(),
            dual_socket_multi_numa_per_socket_ht(),
            fake_multi_socket_dual_socket_per_numa_ht(),
            quad_socket_four_way_ht(),
            hints_machine_info(),
            single_socket_four_cores_no_ht(),
            reconcile_dual_socket(),
        ] {
            let distinct = |f: fn(&CpuPlace) -> usize| {
                let mut ids: Vec<usize> = machine.cpus.iter().map(f).collect();
                ids.sort_unstable();
                ids.dedup();
                ids.len()
            };
            let seen = Counts {
                cpus: distinct(|c| c.cpu),
                cores: distinct(|c| c.core),
                sockets: distinct(|c| c.socket),
                numa_nodes: distinct(|c| c.numa),
                uncore_caches: distinct(|c| c.uncore),
            };
            assert_eq!(seen, machine.counts, "{}", machine.name);
            assert_eq!(machine.cpus.len(), machine.counts.cpus, "{}", machine.name);
        }
    }
}
