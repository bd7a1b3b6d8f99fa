//! `admit --dry-run` changes nothing: not a byte of the state dir (journal included), not
//! the pods, the NUMA nodes' resources, a metric or the change counter; and a dry run that
//! would admit reserves nothing for the admission after it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::tests::{admitted, pod, started};
use super::{Admission, Node};

/// Every file under `dir` with its bytes, the state journal and its mark included.
fn every_byte(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.is_file() {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// What a reader of the node sees: its pods, NUMA nodes, counters and change count.
fn seen(node: &Node) -> String {
    let topology = node.topology().metrics();
    let cpu = node.cpu().metrics();
    format!(
        "{:?}\n{:?}\nrequests {} errors {} durations {:?} alignment {:?}\npinning {} {}\nchanges {} syncs {}\naffinities {}",
        node.views(),
        node.numa_resources(),
        topology.admission_requests_total.load(Ordering::Relaxed),
        topology.admission_errors_total.load(Ordering::Relaxed),
        topology.admission_duration_ms.snapshot(),
        topology.numa_alignment,
        cpu.pinning_requests_total.load(Ordering::Relaxed),
        cpu.pinning_errors_total.load(Ordering::Relaxed),
        node.changes().count(),
        node.journal.syncs(),
        node.topology().store().pod_count(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_changes_nothing_and_reserves_nothing() {
    let (dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    admitted(&node, pod("first", &[1])).await;
    let (files, before) = (every_byte(dir.path()), seen(&node));

    let answer = node
        .admit_dry_run(pod("trial", &[7]), Vec::new(), Vec::new())
        .await
        .unwrap();
    let Admission::Admitted(tried) = answer else {
        panic!("a dry run of a pod that fits: {answer:?}");
    };
    assert!(tried.containers[0].exclusive_cpus);
    assert_eq!(tried.containers[0].numa_affinity.len(), 1);
    let refused = node
        .admit_dry_run(pod("unalignable", &[3, 9]), Vec::new(), Vec::new())
        .await
        .unwrap();
    let Admission::Rejected {
        reason,
        explanation: Some(explanation),
        ..
    } = refused
    else {
        panic!("a dry run of a pod that cannot fit: {refused:?}");
    };
    assert_eq!(reason, "TopologyAffinityError");
    assert_eq!(explanation.container.as_deref(), Some("c1"));

    assert_eq!(every_byte(dir.path()), files, "a dry run wrote");
    assert_eq!(seen(&node), before);
    assert!(node.pods().get("trial").is_none());

    // The CPUs the dry run named are free: the real admission gets them.
    let real = admitted(&node, pod("trial", &[7])).await;
    assert_eq!(real.containers[0].cpuset, tried.containers[0].cpuset);
    assert_ne!(seen(&node), before, "a real admission is seen");
    // A dry run of an admitted pod answers what it holds, as an admission does.
    let again = node
        .admit_dry_run(pod("trial", &[7]), Vec::new(), Vec::new())
        .await
        .unwrap();
    assert!(
        matches!(again, Admission::Admitted(view) if view.containers[0].cpuset == real.containers[0].cpuset)
    );
}
