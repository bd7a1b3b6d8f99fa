//! A real machine whose NUMA node ids reach 73 (hwloc's `48amd64-4pa2n6c-sparse`: nodes
//! `0-2,33-34,45,72-73`, six CPUs each). Upstream's 64-bit masks cannot hold those ids and
//! corral used to refuse the machine ("NUMA node id 72 is out of range"); the topology now
//! gives its nodes dense mask bits 0–7 and reports OS ids through `numa_ids()`.

use std::collections::BTreeMap;
use std::path::Path;

use std::sync::Arc;

use corral_topology::topologymanager::{TopologyManager, TopologyManagerConfig};
use corral_topology::{
    Container, CpuSet, CpuTopology, NumaIds, NumaMask, Pod, TopologyHint, discover,
};

use crate::support::recorder::Recorder;

const OS_IDS: [usize; 8] = [0, 1, 2, 33, 34, 45, 72, 73];

fn sparse() -> CpuTopology {
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sysfs/48amd64-4pa2n6c-sparse");
    discover(&root).expect("the sparse machine is discovered")
}

#[test]
fn sparse_ids_get_dense_bits_and_keep_their_cpus_and_distances() {
    let topo = sparse();
    let ids = topo.numa_ids();
    assert!(!ids.is_identity());
    assert_eq!(ids.os_ids(), &OS_IDS);
    assert_eq!(topo.numa_nodes(), &[0, 1, 2, 3, 4, 5, 6, 7]);
    // Node with OS id OS_IDS[k] holds CPUs 6k..6k+5 (the fixture's truth).
    let details = topo.details();
    for (k, &os) in OS_IDS.iter().enumerate() {
        let bit = ids.bit(os).expect("a node of the machine");
        assert_eq!(bit, k);
        let want: CpuSet = (6 * k..6 * k + 6).collect();
        assert_eq!(details.cpus_in_numa_nodes([bit]), want, "node {os}");
        for cpu in want.iter() {
            assert_eq!(topo.cpu(cpu).map(|i| ids.os_id(i.numa)), Some(Ok(os)));
        }
    }
    // Distances follow the nodes: node 72 is 10 from itself, 16 from 73, 22 from 45.
    assert_eq!(topo.numa_distance(6, 6), Some(10));
    assert_eq!(topo.numa_distance(6, 7), Some(16));
    assert_eq!(topo.numa_distance(6, 5), Some(22));
    let nodes = topo.numa_nodes_for_manager();
    assert_eq!(
        nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert_eq!(
        nodes[6].distances.as_deref(),
        Some(&[16, 22, 16, 22, 16, 22, 10, 16][..]),
        "row of node 72, indexed by bit"
    );
    // The JSON document speaks OS ids.
    let doc: serde_json::Value = serde_json::from_str(&topo.to_json()).expect("valid JSON");
    assert_eq!(doc["cpus"][36]["numa"], 72);
    assert_eq!(doc["cpus"][47]["numa"], 73);
    assert_eq!(doc["numa_nodes"], serde_json::json!(OS_IDS));
    assert_eq!(
        doc["numa_distances"]["72"],
        serde_json::json!([16, 22, 16, 22, 16, 22, 10, 16])
    );
}

/// A provider standing for one resource: it prefers exactly the masks given as OS ids and
/// records the affinity the manager stored when it allocates.
fn wants(resource: &str, ids: &NumaIds, os_masks: &[&[usize]]) -> Arc<Recorder> {
    let hints = os_masks
        .iter()
        .map(|os| {
            let mask = ids
                .mask_of(os.iter().copied())
                .expect("nodes of the machine");
            TopologyHint::new(Some(mask), true)
        })
        .collect();
    Arc::new(Recorder::new(Some(BTreeMap::from([(
        resource.to_owned(),
        Some(hints),
    )]))))
}

fn pod() -> Pod {
    Pod {
        uid: "pod".into(),
        containers: vec![Container::new("c")],
        ..Pod::default()
    }
}

fn manager(topo: &CpuTopology, policy: &str, options: &[(&str, &str)]) -> TopologyManager {
    let options = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let config =
        TopologyManagerConfig::from_strings(policy, "container", &options).expect("config");
    TopologyManager::new(&config, &topo.numa_nodes_for_manager())
        .expect("the topology manager takes the sparse machine")
}

#[test]
fn single_numa_node_admission_lands_on_node_72() {
    let topo = sparse();
    let ids = topo.numa_ids();
    let mut manager = manager(&topo, "single-numa-node", &[]);
    // CPUs fit on node 72 or 73 and 33; the device only on 72 or 73.
    let cpu = wants("cpu", ids, &[&[72], &[33]]);
    let gpu = wants("example.com/gpu", ids, &[&[72], &[73]]);
    manager.add_hint_provider(cpu.clone());
    manager.add_hint_provider(gpu.clone());
    let result = manager.admit(&pod());
    assert!(result.admit, "{result:?}");
    let affinity = manager.affinity("pod", "c");
    assert!(affinity.preferred);
    let mask = affinity.numa_affinity.expect("a NUMA affinity");
    assert_eq!(mask, NumaMask::from_u64(1 << 6), "the bit of node 72");
    assert_eq!(ids.os_ids_of(mask), Ok(vec![72]));
    let stored = cpu.last_seen().expect("allocated");
    assert_eq!(stored, affinity, "providers see the same (bit) affinity");
}

#[test]
fn prefer_closest_reads_the_distances_of_the_real_nodes() {
    let topo = sparse();
    let ids = topo.numa_ids();
    // Two-node answers only: {33, 72} (distance 22) or {72, 73} (distance 16).
    let wants = |ids| wants("cpu", ids, &[&[33, 72], &[72, 73]]);
    let mut plain = manager(&topo, "best-effort", &[]);
    plain.add_hint_provider(wants(ids));
    assert!(plain.admit(&pod()).admit);
    let mask = plain.affinity("pod", "c").numa_affinity.expect("affinity");
    assert_eq!(
        ids.os_ids_of(mask),
        Ok(vec![33, 72]),
        "lower mask value without the option"
    );
    let mut closest = manager(
        &topo,
        "best-effort",
        &[("prefer-closest-numa-nodes", "true")],
    );
    closest.add_hint_provider(wants(ids));
    assert!(closest.admit(&pod()).admit);
    let mask = closest
        .affinity("pod", "c")
        .numa_affinity
        .expect("affinity");
    assert_eq!(ids.os_ids_of(mask), Ok(vec![72, 73]), "the closer pair");
}

#[test]
fn topologies_below_64_are_numbered_as_upstream() {
    // Sparse but below 64: bits are the ids, exactly upstream.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sysfs");
    for name in [
        "16ia64-8n2s",
        "32em64t-2n8c+dax+nvme+mic+dimms",
        "fakeheteromemtiers",
    ] {
        let topo = discover(&root.join(name)).expect(name);
        assert!(topo.numa_ids().is_identity(), "{name}");
        assert_eq!(topo.numa_ids().os_ids(), topo.numa_nodes(), "{name}");
    }
}
