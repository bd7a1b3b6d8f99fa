//! The accounting rule on real managers: memory and huge pages from the memory manager's
//! tables, devices per NUMA node from the device manager, the `none` CPU policy's spread
//! reservation.

use std::sync::Arc;

use corral_nrt::NodeResourceTopology;

use super::accounting::Accounting;
use crate::config::ConfigSource;
use crate::node::tests::WAIT;
use crate::node::tests_concurrent::{config, guaranteed, machine, open};
use crate::node::tests_gated_plugin::{GPU, GatedPlugin, Held};
use crate::node::{Admission, NoRuntime, Node};

const MI: u64 = 1 << 20;

/// `(capacity, allocatable, available)` of `resource` in zone `node-<zone>`.
fn counts(nrt: &NodeResourceTopology, zone: usize, resource: &str) -> (u64, u64, u64) {
    let info = nrt.zones[zone]
        .resource(resource)
        .unwrap_or_else(|| panic!("zone {zone} has no {resource}: {nrt:?}"));
    let n = |q: &corral_nrt::Quantity| q.0.parse::<u64>().unwrap();
    (n(&info.capacity), n(&info.allocatable), n(&info.available))
}

#[tokio::test]
async fn memory_and_huge_pages_come_from_the_memory_managers_tables() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "single-numa-node", "container");
    // 2 nodes × 4 CPUs, 1 GiB and 16 huge pages of 2 MiB each; 100Mi reserved on node 0.
    let node = open(&config, &machine(2, 4, 1024, 16)).await;
    let accounting = Accounting::new("n", &config.cpu_manager);
    let before = accounting.take(&node);
    assert_eq!(
        counts(&before, 0, "memory"),
        (
            1024 * MI,
            1024 * MI - 100 * MI - 32 * MI,
            1024 * MI - 132 * MI
        )
    );
    assert_eq!(
        counts(&before, 1, "hugepages-2Mi"),
        (32 * MI, 32 * MI, 32 * MI)
    );
    let pod = guaranteed(
        "p",
        serde_json::json!({"cpu": "2", "memory": "256Mi", "hugepages-2Mi": "8Mi"}),
    );
    let answer = node.admit(pod, vec![]).await.unwrap();
    assert!(matches!(answer, Admission::Admitted(_)), "{answer:?}");
    let after = accounting.take(&node);
    // Its NUMA node lost 2 CPUs, 256 MiB and 4 huge pages; the other none.
    let zone = (0..2)
        .find(|&z| counts(&after, z, "cpu").2 + 2 == counts(&before, z, "cpu").2)
        .expect("a zone lost the pod's 2 CPUs");
    assert_eq!(
        counts(&after, zone, "memory").2 + 256 * MI,
        counts(&before, zone, "memory").2
    );
    assert_eq!(
        counts(&after, zone, "hugepages-2Mi").2 + 8 * MI,
        counts(&before, zone, "hugepages-2Mi").2
    );
    let other = 1 - zone;
    for resource in ["cpu", "memory", "hugepages-2Mi"] {
        assert_eq!(
            counts(&after, other, resource),
            counts(&before, other, resource),
            "{resource}"
        );
    }
}

#[tokio::test]
async fn devices_count_in_the_zones_of_their_numa_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "single-numa-node", "container");
    let node = open(&config, &machine(2, 4, 1024, 0)).await;
    // gpu-0 and gpu-1 on node 0, gpu-2 on node 1.
    let plugin = GatedPlugin::start(&node, &[0, 0, 1], Held::Allocate, false).await;
    plugin.open();
    let accounting = Accounting::new("n", &config.cpu_manager);
    let deadline = tokio::time::Instant::now() + WAIT;
    while accounting.take(&node).zones[0].resource(GPU).is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the plugin's devices never showed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let before = accounting.take(&node);
    assert_eq!(counts(&before, 0, GPU), (2, 2, 2));
    assert_eq!(counts(&before, 1, GPU), (1, 1, 1));
    let pod = guaranteed(
        "p",
        serde_json::json!({"cpu": "1", "memory": "64Mi", GPU: "1"}),
    );
    let answer = node.admit(pod, vec![]).await.unwrap();
    assert!(matches!(answer, Admission::Admitted(_)), "{answer:?}");
    let after = accounting.take(&node);
    let taken: u64 = (0..2)
        .map(|z| counts(&before, z, GPU).2 - counts(&after, z, GPU).2)
        .sum();
    assert_eq!(taken, 1);
    plugin.stop().await;
}

#[tokio::test]
async fn the_none_cpu_policy_spreads_its_reservation_and_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let source: ConfigSource = serde_json::from_value(serde_json::json!({
        "cpuManagerPolicy": "none",
        "kubeReserved": {"cpu": "1500m"},
        "topologyManagerPolicy": "single-numa-node",
    }))
    .unwrap();
    let config = ConfigSource {
        root: Some(dir.path().to_path_buf()),
        ..source
    }
    .validate()
    .unwrap();
    let (topology, memory) = machine(3, 4, 1024, 0);
    let node = Arc::new(Node::open(&config, &topology, &memory, Arc::new(NoRuntime)).unwrap());
    node.start_devices().await.unwrap();
    let nrt = Accounting::new("n", &config.cpu_manager).take(&node);
    // 1.5 CPUs reserved: 2 whole CPUs, one from each of the lowest two nodes.
    let cpu: Vec<_> = (0..3).map(|z| counts(&nrt, z, "cpu")).collect();
    assert_eq!(cpu, [(4, 3, 3), (4, 3, 3), (4, 4, 4)]);
    // No memory policy: sysfs' memory, all of it allocatable and available.
    assert_eq!(counts(&nrt, 2, "memory"), (1024 * MI, 1024 * MI, 1024 * MI));
}
