//! `memory_manager_state` files written by the upstream v1.32.10 kubelet memory manager
//! (`testdata/upstream/memory_manager_state_v1.32.json`: its static policy run through its
//! public API on explicit machines — allocate, start, remove — with the file after each
//! step). corral replays every step and must write the same bytes (checksum included) and
//! fail the same steps with upstream's messages; a manager started on each upstream file
//! restores and verifies it.

use crate::support::state_file;
use std::collections::BTreeMap;

use corral_checkpoint::MEMORY_MANAGER_FILE;
use corral_memmgr::{MemoryManager, MemoryManagerConfig, MemoryPolicy, MemoryReservation};
use corral_topology::memory::{HugePages, NumaMemory};
use corral_topology::topologymanager::TopologyHint;
use corral_topology::{
    AffinityStore, Container, ContainerRestartPolicy, HintProvider, NumaMask, Pod, Quantity,
    QuantitySum, ResourceList, parse_bytes, parse_cpu_millis,
};
use serde_json::Value;

const FILE: &str = "testdata/upstream/memory_manager_state_v1.32.json";

fn machine(doc: &Value) -> BTreeMap<usize, NumaMemory> {
    doc["machine"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let id = node["id"].as_u64().unwrap() as usize;
            let huge_pages = node["huge_pages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| HugePages {
                    page_size_kib: p["page_size_kib"].as_u64().unwrap(),
                    count: p["count"].as_u64().unwrap(),
                })
                .collect();
            let memory = NumaMemory {
                node: id,
                memory_bytes: node["memory"].as_u64().unwrap(),
                huge_pages,
            };
            (id, memory)
        })
        .collect()
}

fn config(doc: &Value) -> MemoryManagerConfig {
    let node_allocatable_reservation = doc["node_allocatable_reservation"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(resource, text)| {
            let mut sum = QuantitySum::new(None);
            sum.add(&Quantity::parse(text.as_str().unwrap()).unwrap())
                .unwrap();
            (resource.clone(), sum)
        })
        .collect();
    let reserved_memory = doc["reserved_memory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let limits = entry["limits"].as_object().unwrap();
            let limits = limits
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap()));
            MemoryReservation::new(entry["numaNode"].as_u64().unwrap() as usize, limits).unwrap()
        })
        .collect();
    MemoryManagerConfig {
        policy: MemoryPolicy::Static,
        reserved_memory,
        node_allocatable_reservation,
        ..Default::default()
    }
}

fn resources(list: &Value) -> ResourceList {
    let mut out = ResourceList::default();
    for (name, text) in list.as_object().into_iter().flatten() {
        let text = text.as_str().unwrap();
        match name.as_str() {
            "cpu" => out.cpu_millis = Some(parse_cpu_millis(text).unwrap()),
            "memory" => out.memory_bytes = Some(parse_bytes(text).unwrap()),
            other => {
                out.extended
                    .insert(other.to_owned(), parse_bytes(text).unwrap());
            }
        }
    }
    out
}

fn containers(list: &Value) -> Vec<Container> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut container = Container::new(c["name"].as_str().unwrap());
            container.resources.requests = resources(&c["requests"]);
            container.resources.limits = resources(&c["limits"]);
            if c["restartPolicy"] == "Always" {
                container.restart_policy = Some(ContainerRestartPolicy::Always);
            }
            container
        })
        .collect()
}

fn pod(step: &Value) -> Pod {
    let pod = &step["pod"];
    Pod {
        uid: pod["uid"].as_str().unwrap().to_owned(),
        name: pod["name"].as_str().unwrap().to_owned(),
        namespace: pod["namespace"].as_str().unwrap().to_owned(),
        init_containers: containers(&pod["init_containers"]),
        containers: containers(&pod["containers"]),
        ..Pod::default()
    }
}

fn read(dir: &std::path::Path) -> String {
    String::from_utf8(std::fs::read(dir.join(MEMORY_MANAGER_FILE)).unwrap()).unwrap()
}

/// A manager for `doc`'s machine started on the state in `dir`.
fn started(doc: &Value, dir: &std::path::Path) -> MemoryManager {
    let manager = MemoryManager::new(&config(doc), &machine(doc)).unwrap();
    manager.start(state_file(dir)).unwrap();
    manager
}

/// One machine's run: every file byte-identical to upstream's.
fn replay(doc: &Value) {
    let name = doc["name"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manager = started(doc, dir.path());
    assert_eq!(
        read(dir.path()),
        doc["start_file"].as_str().unwrap(),
        "{name}: start"
    );
    let store = AffinityStore::new();
    let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
    let mut ids: BTreeMap<String, (String, String)> = BTreeMap::new();
    for step in doc["steps"].as_array().unwrap() {
        let what = format!("{name}: {}", step["name"].as_str().unwrap());
        let pod = pod(step);
        pods.insert(pod.uid.clone(), pod.clone());
        let container_name = step["container"].as_str().unwrap().to_owned();
        let result = match step["action"].as_str().unwrap() {
            "allocate" => {
                // Upstream's Allocate first removes the state of pods no longer active.
                let active: Vec<Pod> = step["active_pods"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|uid| pods.get(uid.as_str().unwrap()).cloned())
                    .collect();
                manager.remove_stale_state(&active).unwrap();
                let numa_affinity = step["affinity"].as_array().map(|ids| {
                    NumaMask::new(ids.iter().map(|n| n.as_u64().unwrap() as usize)).unwrap()
                });
                let hint = TopologyHint {
                    numa_affinity,
                    preferred: step["preferred"].as_bool().unwrap_or(false),
                };
                store.set_affinity(&pod.uid, &container_name, hint);
                let container = pod.container(&container_name).unwrap().clone();
                manager
                    .allocate(&pod, &container, &store)
                    .map(drop)
                    .map_err(|e| std::error::Error::source(&e).unwrap().to_string())
            }
            "add" => {
                let id = step["container_id"].as_str().unwrap().to_owned();
                ids.insert(id, (pod.uid.clone(), container_name.clone()));
                manager
                    .container_started(&pod, &container_name)
                    .map_err(|e| e.to_string())
            }
            "remove" => {
                let id = step["container_id"].as_str().unwrap();
                let (uid, name) = ids.remove(id).unwrap();
                manager
                    .remove_container(&uid, &name)
                    .map_err(|e| e.to_string())
            }
            other => panic!("{what}: unknown action {other}"),
        };
        assert_eq!(result.err().as_deref(), step["error"].as_str(), "{what}");
        assert_eq!(read(dir.path()), step["file"].as_str().unwrap(), "{what}");
        // A manager started on upstream's file restores and verifies it.
        let copy = tempfile::tempdir().unwrap();
        std::fs::write(
            copy.path().join(MEMORY_MANAGER_FILE),
            step["file"].as_str().unwrap(),
        )
        .unwrap();
        let restarted = started(doc, copy.path());
        assert_eq!(
            restarted.assignments(),
            manager.assignments(),
            "{what}: restart"
        );
    }
}

#[test]
fn every_upstream_file_is_written_byte_for_byte_and_restores() {
    let doc = corral_testkit::conformance_topology::load_testdata(FILE);
    let mut machines = vec![doc.clone()];
    machines.extend(doc["other_machines"].as_array().unwrap().iter().cloned());
    let mut steps = 0;
    for machine in &machines {
        replay(machine);
        steps += machine["steps"].as_array().map_or(0, Vec::len);
    }
    assert!(machines.len() >= 3 && steps >= 20, "{steps} steps");
}
