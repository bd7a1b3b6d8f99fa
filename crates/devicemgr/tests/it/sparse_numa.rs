//! Devices on a machine whose NUMA node ids reach 73 (hwloc's `48amd64-4pa2n6c-sparse`:
//! nodes `0-2,33-34,45,72-73`). Plugins report OS ids; the topology gives the nodes mask bits
//! 0–7 (`corral_topology::NumaIds`), and the device manager translates through the same table,
//! so hints and aligned choice land on the right nodes and an id the machine lacks meets no
//! mask, as an unknown id meets none upstream.

use std::collections::BTreeSet;
use std::path::Path;

use corral_devicemgr::{
    AllocationRequest, Device, DeviceManagerConfig, DeviceState, PluginOptions, ToAllocate,
};
use corral_topology::{CpuInfo, CpuRecord, CpuTopology, NumaMask, TopologyHint};

const GPU: &str = "example.com/gpu";

/// The fixture's machine, from its `truth.json`: every CPU on its NUMA node (OS id).
fn sparse_topology() -> CpuTopology {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/sysfs/48amd64-4pa2n6c-sparse/truth.json");
    let text = std::fs::read_to_string(path).expect("fixture truth");
    let truth: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let mut records = Vec::new();
    for (node, cpus) in truth["numa_nodes"].as_object().expect("numa_nodes") {
        let numa: usize = node.parse().expect("numeric id");
        for cpu in cpus.as_array().expect("CPU list") {
            let cpu = cpu.as_u64().expect("CPU id") as usize;
            records.push(CpuRecord {
                cpu,
                info: CpuInfo {
                    core: cpu,
                    socket: cpu / 12,
                    numa,
                    uncore: numa,
                },
            });
        }
    }
    CpuTopology::new(&records).expect("valid topology")
}

fn state() -> (DeviceState, DeviceManagerConfig) {
    let topo = sparse_topology();
    let config = DeviceManagerConfig::for_topology("/nonexistent/device-plugins", &topo);
    let mut state =
        DeviceState::new(config.numa_nodes.clone()).with_numa_ids(config.numa_ids.clone());
    state.plugin_connected(GPU, PluginOptions::default());
    state.update_devices(
        GPU,
        &[
            Device::new("gpu0", Some(vec![72])),
            Device::new("gpu1", Some(vec![73])),
            // A node this machine does not have, and the plugin API's "no node".
            Device::new("gpu2", Some(vec![5])),
            Device::new("gpu3", Some(vec![-1])),
        ],
    );
    (state, config)
}

fn ids(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn os_ids(config: &DeviceManagerConfig, mask: Option<NumaMask>) -> Vec<usize> {
    config
        .numa_ids
        .os_ids_of(mask.expect("a mask"))
        .expect("bits of the machine")
}

#[test]
fn config_for_the_sparse_topology() {
    let (state, config) = state();
    assert_eq!(config.numa_nodes, (0..8).collect::<Vec<_>>());
    assert_eq!(config.numa_ids.os_ids(), &[0, 1, 2, 33, 34, 45, 72, 73]);
    assert_eq!(state.numa_nodes(), &config.numa_nodes[..]);
    assert!(state.has_numa_node(72) && state.has_numa_node(0));
    assert!(!state.has_numa_node(5) && !state.has_numa_node(-1) && !state.has_numa_node(6));
    // Devices keep the ids their plugin reported (what podresources and the checkpoint show).
    let listed = state.all_devices(GPU);
    let gpu0 = listed.iter().find(|d| d.id == "gpu0").expect("listed");
    assert_eq!(gpu0.numa_nodes, Some(vec![72]));
}

#[test]
fn hints_for_devices_on_nodes_72_and_73() {
    let (state, config) = state();
    let available = ids(&["gpu0", "gpu1", "gpu2", "gpu3"]);
    let one = state.generate_device_topology_hints(GPU, &available, &BTreeSet::new(), 1);
    let preferred = |hints: &[TopologyHint]| -> Vec<Vec<usize>> {
        let preferred = hints.iter().filter(|h| h.preferred);
        preferred
            .map(|h| os_ids(&config, h.numa_affinity))
            .collect()
    };
    assert_eq!(preferred(&one), vec![vec![72], vec![73]]);
    // Every mask holding node 72 or 73 can serve one device: 256 - 1 - 63 of them.
    assert_eq!(one.len(), 192);
    assert!(one.iter().all(|h| {
        let os = os_ids(&config, h.numa_affinity);
        os.contains(&72) || os.contains(&73)
    }));
    let two = state.generate_device_topology_hints(GPU, &available, &BTreeSet::new(), 2);
    assert_eq!(preferred(&two), vec![vec![72, 73]]);
    // gpu2's node 5 is not on this machine: it meets no mask, so three devices never fit.
    let three = state.generate_device_topology_hints(GPU, &available, &BTreeSet::new(), 3);
    assert!(three.is_empty(), "{three:?}");
}

#[test]
fn aligned_choice_follows_the_real_node() {
    let (mut state, config) = state();
    let on_73 = config.numa_ids.mask_of([73]).expect("node 73");
    let split = state.filter_by_affinity(GPU, &ids(&["gpu0", "gpu1", "gpu2", "gpu3"]), Some(on_73));
    assert_eq!(split.aligned, ids(&["gpu1"]));
    assert_eq!(split.unaligned, ids(&["gpu0", "gpu2"]));
    assert_eq!(split.no_affinity, ids(&["gpu3"]));
    let request = AllocationRequest {
        affinity: Some(on_73),
        ..AllocationRequest::new("pod", "c", GPU, 1)
    };
    let ToAllocate::Devices(reservation) = state.devices_to_allocate(&request, None).expect("fits")
    else {
        panic!("expected devices");
    };
    assert_eq!(reservation.devices, vec!["gpu1".to_owned()]);
}

#[test]
fn a_table_given_later_translates_devices_already_listed() {
    let (_, config) = state();
    let mut state = DeviceState::new(config.numa_nodes.clone());
    state.plugin_connected(GPU, PluginOptions::default());
    state.update_devices(GPU, &[Device::new("gpu0", Some(vec![72]))]);
    let available = ids(&["gpu0"]);
    // Upstream's numbering has no bit for node 72: no mask holds the device.
    assert!(
        state
            .generate_device_topology_hints(GPU, &available, &BTreeSet::new(), 1)
            .is_empty()
    );
    let state = state.with_numa_ids(config.numa_ids.clone());
    let hints = state.generate_device_topology_hints(GPU, &available, &BTreeSet::new(), 1);
    assert_eq!(os_ids(&config, hints[0].numa_affinity), vec![72]);
    assert!(hints[0].preferred);
}
