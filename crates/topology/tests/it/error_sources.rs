//! Errors carry their cause as a `source()` and never repeat its message in their own
//! (the agent prints the whole chain, each cause once).

use std::error::Error as _;

use corral_topology::topologymanager::PodAdmitResult;
use corral_topology::{
    AllocationError, NumaNode, TopologyManager, TopologyManagerConfig, TopologyManagerError,
};

/// The display of `err` and of each cause in its `source()` chain.
fn chain(err: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![err.to_string()];
    let mut next = err.source();
    while let Some(cause) = next {
        out.push(cause.to_string());
        next = cause.source();
    }
    out
}

/// No message in the chain contains the message of its source.
fn assert_each_cause_once(err: &dyn std::error::Error) {
    let chain = chain(err);
    for pair in chain.windows(2) {
        assert!(
            !pair[0].contains(&pair[1]),
            "{:?} repeats its source {:?}",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn unexpected_allocation_error_carries_its_source() {
    let cause = std::io::Error::other("device plugin went away");
    let err = AllocationError::unexpected(cause);
    let source = err.source().expect("the provider's error is the source");
    assert_eq!(source.to_string(), "device plugin went away");
    assert!(source.downcast_ref::<std::io::Error>().is_some());
    assert_each_cause_once(&err);
    // The admission message is upstream's, naming the cause.
    let result = PodAdmitResult::from_allocation_error(&err);
    assert_eq!(result.reason, "UnexpectedAdmissionError");
    assert_eq!(
        result.message,
        "Allocate failed due to device plugin went away, which is unexpected"
    );
}

/// The one exception: upstream's own message, which ends with its source.
#[test]
fn topology_manager_numa_error_keeps_upstream_message() {
    let config =
        TopologyManagerConfig::from_strings("single-numa-node", "container", &Default::default())
            .expect("config");
    let twice = [0, 0].map(|id| NumaNode {
        id,
        distances: None,
    });
    let err = TopologyManager::new(&config, &twice).expect_err("node 0 listed twice");
    assert!(matches!(err, TopologyManagerError::Numa(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "cannot discover NUMA topology: NUMA node 0 is listed twice"
    );
    assert_eq!(chain(&err).len(), 2);
}

#[cfg(feature = "sysfs")]
#[test]
fn discovery_io_error_prints_each_cause_once() {
    let root = tempfile::tempdir().expect("temp dir");
    // A host root whose `sys/devices/system/cpu` is a file, not a directory.
    let cpu = root.path().join("sys/devices/system");
    std::fs::create_dir_all(&cpu).expect("dirs");
    std::fs::write(cpu.join("cpu"), "not a directory").expect("file");
    let err = corral_topology::discover(root.path()).expect_err("unreadable cpu directory");
    assert_each_cause_once(&err);
}
