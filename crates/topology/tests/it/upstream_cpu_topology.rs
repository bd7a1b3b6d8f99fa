//! Ported from upstream `pkg/kubelet/cm/cpumanager/topology/topology_test.go`.
//!
//! `Test_Discover` feeds cadvisor `MachineInfo`; corral discovers from sysfs instead, so each
//! machine is rebuilt here from the same per-core facts (NUMA node, socket, threads, uncore
//! cache) with upstream's derivation — core id = lowest thread id, uncore id = the core's first
//! L3 id or else its socket id (upstream `getUncoreCacheID`, `Test_getUncoreCacheID`) — and
//! the counts and per-CPU placement corral derives are checked against upstream's expectations.
//! The `CPUDetails` tables build a topology from the listed CPUs (unlisted fields 0).

use corral_topology::{CpuInfo, CpuRecord, CpuSet, CpuTopology, TopologyCounts, TopologyError};

/// One cadvisor core: socket, threads, uncore cache ids.
struct Core {
    socket: usize,
    threads: Vec<usize>,
    uncore: Vec<usize>,
}

fn core(socket: usize, threads: &[usize], uncore: &[usize]) -> Core {
    Core {
        socket,
        threads: threads.to_vec(),
        uncore: uncore.to_vec(),
    }
}

/// Upstream `getUncoreCacheID`.
fn uncore_id(core: &Core) -> usize {
    core.uncore.first().copied().unwrap_or(core.socket)
}

/// Per-CPU records from cadvisor-shaped NUMA nodes (upstream `Discover`'s walk).
fn machine(nodes: &[(usize, Vec<Core>)]) -> Result<CpuTopology, TopologyError> {
    let mut records = Vec::new();
    for (numa, cores) in nodes {
        for core in cores {
            let core_id = core.threads.iter().copied().min().expect("threads");
            for &cpu in &core.threads {
                records.push(CpuRecord {
                    cpu,
                    info: CpuInfo {
                        core: core_id,
                        socket: core.socket,
                        numa: *numa,
                        uncore: uncore_id(core),
                    },
                });
            }
        }
    }
    CpuTopology::new(&records)
}

fn counts(cpus: usize, sockets: usize, cores: usize, numa: usize, uncore: usize) -> TopologyCounts {
    TopologyCounts {
        num_cpus: cpus,
        num_cores: cores,
        num_sockets: sockets,
        num_numa_nodes: numa,
        num_uncore_caches: uncore,
    }
}

/// Check every CPU of `topo` against `expected(cpu)`.
fn check_details(name: &str, topo: &CpuTopology, expected: impl Fn(usize) -> CpuInfo) {
    for cpu in topo.all_cpus().iter() {
        assert_eq!(topo.cpu(cpu), Some(expected(cpu)), "{name}: CPU {cpu}");
    }
}

/// Upstream `Test_Discover` "OneSocketHT" and "EmptyUncoreCache" (the same machine, with and
/// without L3 information).
#[test]
fn discover_one_socket_ht() {
    for (name, uncore) in [("OneSocketHT", &[0][..]), ("EmptyUncoreCache", &[][..])] {
        let cores = (0..4).map(|c| core(0, &[c, c + 4], uncore)).collect();
        let topo = machine(&[(0, cores)]).expect(name);
        assert_eq!(topo.counts(), counts(8, 1, 4, 1, 1), "{name}");
        check_details(name, &topo, |cpu| CpuInfo::new(cpu % 4, 0, 0, 0));
    }
}

/// Upstream `Test_Discover` "DualSocketMultiNumaPerSocketHT" (dual Xeon Gold 6230).
#[test]
fn discover_dual_socket_multi_numa_per_socket_ht() {
    let nodes: Vec<(usize, Vec<Core>)> = (0..4)
        .map(|numa| {
            let cores = (0..10)
                .map(|i| {
                    let cpu = numa * 10 + i;
                    core(numa / 2, &[cpu, cpu + 40], &[0])
                })
                .collect();
            (numa, cores)
        })
        .collect();
    let topo = machine(&nodes).expect("machine");
    assert_eq!(topo.counts(), counts(80, 2, 40, 4, 1));
    check_details("DualSocketMultiNumaPerSocketHT", &topo, |cpu| {
        let c = cpu % 40;
        CpuInfo::new(c, c / 20, c / 10, 0)
    });
}

/// Upstream `Test_Discover` "DualNumaMultiSocketPerNumaHT" (the same CPUs with NUMA nodes and
/// sockets swapped: four sockets over two NUMA nodes, uncore id 1 everywhere).
#[test]
fn discover_dual_numa_multi_socket_per_numa_ht() {
    let nodes: Vec<(usize, Vec<Core>)> = (0..2)
        .map(|numa| {
            let cores = (0..20)
                .map(|i| {
                    let cpu = numa * 20 + i;
                    core(cpu / 10, &[cpu, cpu + 40], &[1])
                })
                .collect();
            (numa, cores)
        })
        .collect();
    let topo = machine(&nodes).expect("machine");
    assert_eq!(topo.counts(), counts(80, 4, 40, 2, 1));
    check_details("DualNumaMultiSocketPerNumaHT", &topo, |cpu| {
        let c = cpu % 40;
        CpuInfo::new(c, c / 10, c / 20, 1)
    });
}

/// Upstream `Test_Discover` "DualSocketNoHT".
#[test]
fn discover_dual_socket_no_ht() {
    let topo = machine(&[
        (0, vec![core(0, &[0], &[0]), core(0, &[2], &[0])]),
        (1, vec![core(1, &[1], &[0]), core(1, &[3], &[0])]),
    ])
    .expect("machine");
    assert_eq!(topo.counts(), counts(4, 2, 4, 2, 1));
    check_details("DualSocketNoHT", &topo, |cpu| {
        CpuInfo::new(cpu, cpu % 2, cpu % 2, 0)
    });
}

/// Upstream `Test_Discover` "DualSocketHT - non unique Core'ID's": cadvisor's per-socket core
/// ids repeat, the lowest thread id makes them unique.
#[test]
fn discover_dual_socket_ht_non_unique_core_ids() {
    let topo = machine(&[
        (0, (0..3).map(|c| core(0, &[c, c + 6], &[0])).collect()),
        (1, (3..6).map(|c| core(1, &[c, c + 6], &[0])).collect()),
    ])
    .expect("machine");
    assert_eq!(topo.counts(), counts(12, 2, 6, 2, 1));
    check_details("DualSocketHT", &topo, |cpu| {
        let c = cpu % 6;
        CpuInfo::new(c, c / 3, c / 3, 0)
    });
}

/// Upstream `Test_Discover` "OneSocketHT fail" (a thread listed twice) and "FailNumCores".
/// The second "OneSocketHT fail" row (a core without threads) has no per-CPU form: a record
/// always names its CPU.
#[test]
fn discover_failures() {
    let err = machine(&[(
        0,
        vec![
            core(0, &[0, 4], &[1]),
            core(0, &[1, 5], &[1]),
            core(0, &[2, 2], &[1]),
            core(0, &[3, 7], &[1]),
        ],
    )])
    .expect_err("CPU 2 twice");
    assert_eq!(err, TopologyError::DuplicateCpu { cpu: 2 });

    // FailNumCores: a machine without CPUs is refused by discovery.
    let root = tempfile::tempdir().expect("tempdir");
    let cpu_dir = root.path().join("sys/devices/system/cpu");
    std::fs::create_dir_all(&cpu_dir).expect("mkdir");
    std::fs::write(cpu_dir.join("online"), "\n").expect("write");
    let err = corral_topology::discover(root.path()).expect_err("no CPUs");
    assert!(
        matches!(err, corral_topology::DiscoveryError::NoCpus { .. }),
        "{err}"
    );
}

/// Upstream `Test_Discover` "UncoreOneSocketNoSMT" (AMD EPYC 7452, 4 cores per L3).
#[test]
fn discover_uncore_one_socket_no_smt() {
    let cores = (0..32).map(|c| core(0, &[c], &[c / 4])).collect();
    let topo = machine(&[(0, cores)]).expect("machine");
    assert_eq!(topo.counts(), counts(32, 1, 32, 1, 8));
    check_details("UncoreOneSocketNoSMT", &topo, |cpu| {
        CpuInfo::new(cpu, 0, 0, cpu / 4)
    });
    assert_eq!(topo.cpus_per_uncore(), 4);
}

/// Upstream `Test_Discover` "UncoreDualSocketSMT" (AMD EPYC 24-core, NPS=2).
#[test]
fn discover_uncore_dual_socket_smt() {
    let nodes: Vec<(usize, Vec<Core>)> = (0..4)
        .map(|numa| {
            let cores = (0..12)
                .map(|i| {
                    let c = numa * 12 + i;
                    core(numa / 2, &[c, c + 48], &[c / 4])
                })
                .collect();
            (numa, cores)
        })
        .collect();
    let topo = machine(&nodes).expect("machine");
    assert_eq!(topo.counts(), counts(96, 2, 48, 4, 12));
    check_details("UncoreDualSocketSMT", &topo, |cpu| {
        let c = cpu % 48;
        CpuInfo::new(c, c / 24, c / 12, c / 4)
    });
}

/// Upstream `Test_getUncoreCacheID` (3 cases).
#[test]
fn get_uncore_cache_id() {
    assert_eq!(uncore_id(&core(1, &[0], &[5, 6])), 5);
    assert_eq!(uncore_id(&core(2, &[0], &[])), 2);
    assert_eq!(uncore_id(&core(1, &[0], &[])), 1);
}

/// A topology from `cpu → (core, socket, numa, uncore)`.
fn details(cpus: &[(usize, CpuInfo)]) -> CpuTopology {
    let records: Vec<CpuRecord> = cpus
        .iter()
        .map(|&(cpu, info)| CpuRecord { cpu, info })
        .collect();
    CpuTopology::new(&records).expect("valid records")
}

fn set(ids: &[usize]) -> CpuSet {
    CpuSet::from_cpus(ids)
}

fn numa(id: usize) -> CpuInfo {
    CpuInfo::new(0, 0, id, 0)
}

fn socket(id: usize) -> CpuInfo {
    CpuInfo::new(0, id, 0, 0)
}

fn core_of(id: usize) -> CpuInfo {
    CpuInfo::new(id, 0, 0, 0)
}

fn uncore(id: usize) -> CpuInfo {
    CpuInfo::new(0, 0, 0, id)
}

/// Upstream `TestCPUDetailsKeepOnly` (2 cases).
#[test]
fn cpu_details_keep_only() {
    let topo = details(&[(0, numa(0)), (1, numa(0)), (2, numa(0))]);
    let d = topo.details();
    assert_eq!(d.keep_only(&set(&[0, 1])).cpus(), set(&[0, 1]));
    let none = d.keep_only(&set(&[3]));
    assert!(none.is_empty());
    assert_eq!(none.cpus(), CpuSet::new());
}

/// Upstream `TestCPUDetailsNUMANodes`, `TestCPUDetailsSockets`, `TestCPUDetailsCores`,
/// `TestCPUDetailsCPUs` and `TestUncoreCaches` (3 cases): the ids a view covers.
#[test]
fn cpu_details_ids() {
    let by = |f: fn(usize) -> CpuInfo| details(&[(0, f(0)), (1, f(0)), (2, f(1)), (3, f(1))]);
    assert_eq!(by(numa).details().numa_nodes(), set(&[0, 1]));
    assert_eq!(by(socket).details().sockets(), set(&[0, 1]));
    assert_eq!(by(core_of).details().cores(), set(&[0, 1]));
    assert_eq!(
        details(&[(0, numa(0)), (1, numa(0))]).details().cpus(),
        set(&[0, 1])
    );
    let caches = details(&[(0, uncore(0)), (1, uncore(1)), (2, uncore(2))]);
    assert_eq!(caches.details().uncore_caches(), set(&[0, 1, 2]));
    assert_eq!(details(&[]).details().uncore_caches(), CpuSet::new());
    let shared = details(&[(0, uncore(0)), (1, uncore(0)), (2, uncore(0))]);
    assert_eq!(shared.details().uncore_caches(), set(&[0]));
}

/// Upstream `TestCPUDetailsNUMANodesInSockets` (4 cases, one machine of the "poorly designed
/// mainboards" kind with two NUMA nodes per socket).
#[test]
fn cpu_details_numa_nodes_in_sockets() {
    let one_per_socket = details(&[
        (0, CpuInfo::new(0, 0, 0, 0)),
        (1, CpuInfo::new(0, 1, 0, 0)),
        (2, CpuInfo::new(0, 2, 1, 0)),
        (3, CpuInfo::new(0, 3, 1, 0)),
    ]);
    let poorly_designed = details(&[
        (0, CpuInfo::new(0, 0, 0, 0)),
        (1, CpuInfo::new(0, 0, 1, 0)),
        (2, CpuInfo::new(0, 1, 2, 0)),
        (3, CpuInfo::new(0, 1, 3, 0)),
    ]);
    let d = one_per_socket.details();
    assert_eq!(d.numa_nodes_in_sockets([0, 1, 2]), set(&[0, 1]));
    assert_eq!(d.numa_nodes_in_sockets([4]), CpuSet::new());
    let d = poorly_designed.details();
    assert_eq!(d.numa_nodes_in_sockets([0]), set(&[0, 1]));
    assert_eq!(d.numa_nodes_in_sockets([3]), CpuSet::new());
}

/// The "ids in other ids" tables (2 cases each): upstream `TestCPUDetailsCPUsInSockets`,
/// `TestCPUDetailsSocketsInNUMANodes`, `TestCPUDetailsCoresInNUMANodes`,
/// `TestCPUDetailsCoresInSockets`, `TestCPUDetailsCPUsInNUMANodes`,
/// `TestCPUDetailsCPUsInCores`.
#[test]
fn cpu_details_ids_in_ids() {
    let topo = details(&[
        (0, socket(0)),
        (1, socket(0)),
        (2, socket(1)),
        (3, socket(2)),
    ]);
    assert_eq!(topo.details().cpus_in_sockets([0, 1]), set(&[0, 1, 2]));
    assert_eq!(topo.details().cpus_in_sockets([3]), CpuSet::new());

    let topo = details(&[
        (0, CpuInfo::new(0, 0, 0, 0)),
        (1, CpuInfo::new(0, 1, 0, 0)),
        (2, CpuInfo::new(0, 2, 1, 0)),
        (3, CpuInfo::new(0, 3, 2, 0)),
    ]);
    assert_eq!(
        topo.details().sockets_in_numa_nodes([0, 1]),
        set(&[0, 1, 2])
    );
    assert_eq!(topo.details().sockets_in_numa_nodes([3]), CpuSet::new());

    let topo = details(&[
        (0, CpuInfo::new(0, 0, 0, 0)),
        (1, CpuInfo::new(1, 0, 0, 0)),
        (2, CpuInfo::new(2, 0, 1, 0)),
        (3, CpuInfo::new(3, 0, 2, 0)),
    ]);
    assert_eq!(topo.details().cores_in_numa_nodes([0, 1]), set(&[0, 1, 2]));
    assert_eq!(topo.details().cores_in_numa_nodes([3]), CpuSet::new());

    let topo = details(&[
        (0, CpuInfo::new(0, 0, 0, 0)),
        (1, CpuInfo::new(1, 0, 0, 0)),
        (2, CpuInfo::new(2, 1, 0, 0)),
        (3, CpuInfo::new(3, 2, 0, 0)),
    ]);
    assert_eq!(topo.details().cores_in_sockets([0, 1]), set(&[0, 1, 2]));
    assert_eq!(topo.details().cores_in_sockets([3]), CpuSet::new());

    let topo = details(&[(0, numa(0)), (1, numa(0)), (2, numa(1)), (3, numa(2))]);
    assert_eq!(topo.details().cpus_in_numa_nodes([0, 1]), set(&[0, 1, 2]));
    assert_eq!(topo.details().cpus_in_numa_nodes([3]), CpuSet::new());

    let topo = details(&[
        (0, core_of(0)),
        (1, core_of(0)),
        (2, core_of(1)),
        (3, core_of(2)),
    ]);
    assert_eq!(topo.details().cpus_in_cores([0, 1]), set(&[0, 1, 2]));
    assert_eq!(topo.details().cpus_in_cores([3]), CpuSet::new());
}

/// Upstream `TestCPUsInUncoreCaches` (3 cases).
#[test]
fn cpus_in_uncore_caches() {
    let topo = details(&[(0, uncore(0)), (1, uncore(0))]);
    assert_eq!(topo.details().cpus_in_uncore_caches([0]), set(&[0, 1]));
    let topo = details(&[(0, uncore(0)), (1, uncore(0)), (2, uncore(1))]);
    assert_eq!(
        topo.details().cpus_in_uncore_caches([0, 1]),
        set(&[0, 1, 2])
    );
    let topo = details(&[(0, uncore(0))]);
    assert_eq!(topo.details().cpus_in_uncore_caches([1]), CpuSet::new());
}

/// Upstream `TestUncoreInNUMANodes` (3 cases).
#[test]
fn uncore_in_numa_nodes() {
    let topo = details(&[(0, CpuInfo::new(0, 0, 0, 0)), (1, CpuInfo::new(0, 0, 0, 1))]);
    assert_eq!(topo.details().uncore_in_numa_nodes([0]), set(&[0, 1]));
    let topo = details(&[
        (0, CpuInfo::new(0, 0, 0, 0)),
        (1, CpuInfo::new(0, 0, 0, 0)),
        (20, CpuInfo::new(0, 0, 1, 1)),
        (21, CpuInfo::new(0, 0, 1, 1)),
    ]);
    assert_eq!(topo.details().uncore_in_numa_nodes([0, 1]), set(&[0, 1]));
    let topo = details(&[(0, CpuInfo::new(0, 0, 1, 0))]);
    assert_eq!(topo.details().uncore_in_numa_nodes([0]), CpuSet::new());
}

/// Upstream `TestCPUCoreID`, `TestCPUSocketID`, `TestCPUNUMANodeID` (3 cases each) on the
/// dual-socket HT machine: known CPUs and core siblings answer, unknown CPUs do not (upstream
/// returns -1 and an error; corral returns `None`).
#[test]
fn cpu_core_socket_numa_id() {
    let cpus: Vec<(usize, CpuInfo)> = (0..12)
        .map(|cpu| {
            let c = cpu % 6;
            (cpu, CpuInfo::new(c, c % 2, c % 2, 0))
        })
        .collect();
    let topo = details(&cpus).with_counts(counts(12, 2, 6, 0, 0));
    assert_eq!(topo.cpu(2).map(|i| i.core), Some(2));
    assert_eq!(topo.cpu(8).map(|i| i.core), Some(2));
    assert_eq!(topo.cpu(3).map(|i| i.socket), Some(1));
    assert_eq!(topo.cpu(9).map(|i| i.socket), Some(1));
    assert_eq!(topo.cpu(0).map(|i| i.numa), Some(0));
    assert_eq!(topo.cpu(6).map(|i| i.numa), Some(0));
    assert_eq!(topo.cpu(1000), None);
    // -2 has no `usize` form; the largest id stands for "not a CPU of the machine".
    assert_eq!(topo.cpu(usize::MAX), None);
}

/// Upstream `TestCPUsPerUncore` (3 cases), counts given explicitly as upstream's struct does.
#[test]
fn cpus_per_uncore() {
    let topo = |cpus, uncore| {
        details(&[]).with_counts(TopologyCounts {
            num_cpus: cpus,
            num_uncore_caches: uncore,
            ..TopologyCounts::default()
        })
    };
    assert_eq!(topo(8, 0).cpus_per_uncore(), 0);
    assert_eq!(topo(16, 2).cpus_per_uncore(), 8);
    assert_eq!(topo(8, 1).cpus_per_uncore(), 8);
}
