//! Memory discovery against every real-machine dump in `testdata/sysfs` (and
//! `CORRAL_SYSFS_DIR`'s held-out dumps when set): every NUMA node the CPU discovery finds,
//! memory-only ones included, has its memory and huge pages; per-node memory adds up to the
//! machine's `MemTotal` (1 % below to 5 % above: boot-time reservations), and per-node huge pages to the machine's pages of that
//! size, wherever the dump has both; memory-only nodes hold memory and no CPU.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use corral_topology::discover;
use corral_topology::sysfs::discover_memory;

fn dumps() -> Vec<PathBuf> {
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sysfs")];
    if let Some(extra) = std::env::var_os("CORRAL_SYSFS_DIR") {
        dirs.push(PathBuf::from(extra));
    }
    let mut dumps: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .map(|entry| entry.path())
        .filter(|path| path.join("truth.json").is_file())
        .collect();
    dumps.sort();
    dumps
}

/// The machine's `MemTotal` in bytes, from the dump's `/proc/meminfo`.
fn machine_mem_total(dump: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dump.join("proc/meminfo")).ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The machine's huge page counts by size in KiB, from `/sys/kernel/mm/hugepages`.
fn machine_huge_pages(dump: &Path) -> BTreeMap<u64, u64> {
    let dir = dump.join("sys/kernel/mm/hugepages");
    let mut pages = BTreeMap::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let size = name.trim_start_matches("hugepages-").trim_end_matches("kB");
        let count = std::fs::read_to_string(entry.path().join("nr_hugepages")).unwrap();
        let count = count.trim_matches(|c: char| c.is_whitespace() || c == '\0');
        pages.insert(size.parse().unwrap(), count.parse().unwrap());
    }
    pages
}

#[test]
fn every_dump_has_memory_on_every_numa_node() {
    let mut with_memory = 0;
    for dump in dumps() {
        let name = dump.file_name().unwrap().to_string_lossy().into_owned();
        let memory = discover_memory(&dump).unwrap_or_else(|e| panic!("{name}: {e}"));
        let topology = discover(&dump).unwrap_or_else(|e| panic!("{name}: {e}"));
        let nodes: Vec<usize> = memory.keys().copied().collect();
        assert_eq!(nodes, topology.numa_ids().os_ids(), "{name}: NUMA nodes");
        let per_node: u64 = memory.values().map(|n| n.memory_bytes).sum();
        if per_node > 0 {
            with_memory += 1;
        }
        // A node's MemTotal and the machine's are counted a little differently (boot-time
        // reservations): the sum is within 1 % below and 5 % above the machine's, wherever
        // the dump has both.
        if let Some(total) = machine_mem_total(&dump).filter(|_| per_node > 0) {
            let (low, high) = (total / 100 * 99, total / 100 * 105);
            let within = (low..=high).contains(&per_node);
            assert!(within, "{name}: nodes {per_node}, machine {total}");
        }
        let machine_pages = machine_huge_pages(&dump);
        let node_dirs_have_pages = memory.values().any(|n| !n.huge_pages.is_empty());
        if node_dirs_have_pages && !machine_pages.is_empty() {
            let mut summed: BTreeMap<u64, u64> = BTreeMap::new();
            for page in memory.values().flat_map(|n| &n.huge_pages) {
                *summed.entry(page.page_size_kib).or_default() += page.count;
            }
            assert_eq!(
                summed, machine_pages,
                "{name}: huge pages per node vs machine"
            );
        }
    }
    assert!(
        with_memory >= 8,
        "only {with_memory} dumps with per-node memory"
    );
}

#[test]
fn memory_only_nodes_have_memory_and_no_cpus() {
    let dump =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sysfs/fakeheteromemtiers");
    let memory = discover_memory(&dump).unwrap();
    let topology = discover(&dump).unwrap();
    let with_cpus: Vec<usize> = topology
        .all_cpus()
        .iter()
        .filter_map(|cpu| topology.cpu(cpu))
        .map(|info| topology.numa_ids().os_id(info.numa).unwrap())
        .collect();
    let cpu_less: Vec<usize> = memory
        .keys()
        .copied()
        .filter(|node| !with_cpus.contains(node))
        .collect();
    assert!(
        !cpu_less.is_empty(),
        "fakeheteromemtiers has memory-only nodes"
    );
    for node in cpu_less {
        assert!(
            memory[&node].memory_bytes > 0,
            "memory-only node {node} has memory"
        );
    }
}
