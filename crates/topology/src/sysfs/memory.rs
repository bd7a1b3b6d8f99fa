//! Memory and huge pages per NUMA node, as the kubelet's memory manager sees them through
//! cadvisor (`utils/sysinfo`): a node's memory is `MemTotal` of `nodeN/meminfo` in bytes,
//! its huge pages the `nr_hugepages` of each `nodeN/hugepages/hugepages-<size>kB`. Every
//! `node/nodeN` directory is a node, CPU-less (memory-only) ones included, as cadvisor lists
//! them.
//!
//! As cadvisor: a node without a `meminfo` file has 0 bytes, one without a `hugepages`
//! directory has no huge pages; a `meminfo` without `MemTotal`, or a size or count that is
//! not a number, is an error naming the file, and so are a `MemTotal` or huge pages whose
//! bytes overflow 64 bits (where Go's `uint64` arithmetic wraps). Unlike cadvisor, a machine without a `node/`
//! directory (no NUMA) is one node 0 with the machine's `MemTotal` (`/proc/meminfo`) and
//! huge pages (`/sys/kernel/mm/hugepages`), where cadvisor would report no memory at all.

use std::collections::BTreeMap;
use std::path::Path;

use super::files::{DiscoveryError, dir_entries, numbered_entries, read_trimmed};
use crate::memory::{HugePages, NumaMemory};

/// Every NUMA node's memory and huge pages under host root `root`, by node id.
///
/// ```
/// # let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
/// #     .join("../../testdata/sysfs/2pa-pcidomain32bits");
/// let nodes = corral_topology::sysfs::discover_memory(&root).unwrap();
/// let node0 = &nodes[&0];
/// assert!(node0.memory_bytes > 0);
/// assert!(node0.huge_pages.iter().any(|p| p.resource_name() == "hugepages-2Mi"));
/// ```
pub fn discover_memory(root: &Path) -> Result<BTreeMap<usize, NumaMemory>, DiscoveryError> {
    let node_dir = root.join("sys/devices/system/node");
    let ids = numbered_entries(&node_dir, "node")?;
    let mut nodes = BTreeMap::new();
    if ids.is_empty() {
        let memory_bytes = mem_total(&root.join("proc/meminfo"))?;
        let huge_pages = huge_pages(&root.join("sys/kernel/mm/hugepages"))?;
        let node = NumaMemory {
            node: 0,
            memory_bytes,
            huge_pages,
        };
        nodes.insert(0, node);
        return Ok(nodes);
    }
    for id in ids {
        let dir = node_dir.join(format!("node{id}"));
        let node = NumaMemory {
            node: id,
            memory_bytes: mem_total(&dir.join("meminfo"))?,
            huge_pages: huge_pages(&dir.join("hugepages"))?,
        };
        nodes.insert(id, node);
    }
    Ok(nodes)
}

/// `MemTotal` in bytes (a `Node N MemTotal:` line in a node's file); 0 without the file.
fn mem_total(path: &Path) -> Result<u64, DiscoveryError> {
    let Some(text) = read_trimmed(path)? else {
        return Ok(0);
    };
    let parse = |reason: &str| DiscoveryError::Parse {
        path: path.to_owned(),
        content: text.lines().next().unwrap_or_default().to_owned(),
        reason: reason.to_owned(),
    };
    let line = text
        .lines()
        .find_map(|line| line.split_once("MemTotal:").map(|(_, rest)| rest.trim()))
        .ok_or_else(|| parse("no MemTotal line"))?;
    let kib = line
        .strip_suffix("kB")
        .map(str::trim)
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| parse("MemTotal is not a number of kB"))?;
    kib.checked_mul(1024)
        .ok_or_else(|| parse("MemTotal overflows"))
}

/// The huge pages of each `hugepages-<size>kB` directory under `dir`, smallest first; none
/// without `dir`.
fn huge_pages(dir: &Path) -> Result<Vec<HugePages>, DiscoveryError> {
    let mut pages = Vec::new();
    for (name, path) in dir_entries(dir)? {
        let Some(size) = name
            .strip_prefix("hugepages-")
            .and_then(|rest| rest.strip_suffix("kB"))
        else {
            continue;
        };
        let count_file = path.join("nr_hugepages");
        let bad = |what: &str, content: &str| DiscoveryError::Parse {
            path: count_file.clone(),
            content: content.to_owned(),
            reason: what.to_owned(),
        };
        let page_size_kib = size
            .parse()
            .map_err(|_| bad("the directory's page size is not a number", &name))?;
        let count = match read_trimmed(&count_file)? {
            Some(text) => text.parse().map_err(|_| bad("not a page count", &text))?,
            None => 0,
        };
        let size = HugePages {
            page_size_kib,
            count,
        };
        // cadvisor's `PageSize * NumPages * 1024` would wrap (Go `uint64`): an error instead.
        if size.checked_bytes().is_none() {
            let content = format!("{name}: {count} pages");
            return Err(bad("the pages' bytes overflow 64 bits", &content));
        }
        pages.push(size);
    }
    pages.sort_by_key(|p| p.page_size_kib);
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_files_are_errors_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("sys/devices/system/node/node0");
        std::fs::create_dir_all(node.join("hugepages/hugepages-2048kB")).unwrap();
        std::fs::write(node.join("meminfo"), "Node 0 MemFree: 5 kB\n").unwrap();
        let err = discover_memory(dir.path()).unwrap_err();
        assert!(err.to_string().contains("meminfo"), "{err}");
        std::fs::write(node.join("meminfo"), "Node 0 MemTotal: 4 kB\n").unwrap();
        std::fs::write(node.join("hugepages/hugepages-2048kB/nr_hugepages"), "x\n").unwrap();
        let err = discover_memory(dir.path()).unwrap_err();
        assert!(err.to_string().contains("nr_hugepages"), "{err}");
        std::fs::write(node.join("hugepages/hugepages-2048kB/nr_hugepages"), "3\n").unwrap();
        let nodes = discover_memory(dir.path()).unwrap();
        assert_eq!(nodes[&0].memory_bytes, 4096);
        assert_eq!(nodes[&0].huge_pages[0].bytes(), 3 * 2048 * 1024);
    }

    /// Page sizes and counts whose bytes overflow 64 bits are errors naming the file (their
    /// bytes, `size * 1024 * count`, panicked the memory manager's machine state before).
    #[test]
    fn huge_pages_whose_bytes_overflow_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("sys/devices/system/node/node0");
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(node.join("meminfo"), "Node 0 MemTotal: 4 kB\n").unwrap();
        for (size, count) in [
            ("18014398509481984", "1"),
            ("18446744073709551615", "0"),
            ("2048", "18446744073709551615"),
        ] {
            let pages = node.join("hugepages");
            let _ = std::fs::remove_dir_all(&pages);
            let size_dir = pages.join(format!("hugepages-{size}kB"));
            std::fs::create_dir_all(&size_dir).unwrap();
            std::fs::write(size_dir.join("nr_hugepages"), count).unwrap();
            let err = discover_memory(dir.path()).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains("nr_hugepages") && text.contains("overflow"),
                "{text}"
            );
        }
        std::fs::remove_dir_all(node.join("hugepages")).unwrap();
        std::fs::write(
            node.join("meminfo"),
            "Node 0 MemTotal: 18014398509481984 kB\n",
        )
        .unwrap();
        let err = discover_memory(dir.path()).unwrap_err();
        assert!(err.to_string().contains("MemTotal overflows"), "{err}");
    }
}
