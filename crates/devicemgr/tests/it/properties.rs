//! Property tests of the core: for any devices, placement, in-use set, request and
//! affinity, `devices_to_allocate` takes exactly the request from healthy, free devices,
//! prefers aligned devices, leaves nothing behind on error, and hints are consistent.

use std::collections::BTreeSet;

use corral_devicemgr::{AllocationRequest, Device, DeviceState, PluginOptions, ToAllocate};
use corral_topology::NumaMask;
use proptest::prelude::*;

const R: &str = "example.com/dev";

fn devices() -> impl Strategy<Value = Vec<Device>> {
    prop::collection::vec(
        (
            any::<bool>(),
            prop::option::of(prop::collection::vec(-1i64..6, 0..3)),
        ),
        0..24,
    )
    .prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (healthy, numa))| Device {
                id: format!("d{i:02}"),
                healthy: healthy || i % 3 == 0,
                numa_nodes: numa,
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn allocation_invariants(
        devices in devices(),
        in_use in prop::collection::btree_set(0usize..24, 0..8),
        request in 0usize..10,
        affinity in prop::option::of(1u64..16),
    ) {
        let mut state = DeviceState::new(vec![0, 1, 2, 3]);
        state.plugin_connected(R, PluginOptions::default());
        state.update_devices(R, &devices);
        let in_use: Vec<String> = in_use.into_iter().map(|i| format!("d{i:02}")).collect();
        state.reserve(R, &in_use);
        let before = state.allocated_devices(R);
        let available = state.available_devices(R);
        let mask = affinity.map(NumaMask::from_u64);
        let request_ = AllocationRequest { affinity: mask, ..AllocationRequest::new("p", "c", R, request) };
        match state.devices_to_allocate(&request_, None) {
            Ok(ToAllocate::Devices(r)) => {
                let picked: BTreeSet<String> = r.devices.iter().cloned().collect();
                prop_assert_eq!(picked.len(), request);
                prop_assert!(picked.is_subset(&available));
                let mut after = before.clone();
                after.extend(picked.iter().cloned());
                prop_assert_eq!(state.allocated_devices(R), after);
                // Aligned devices are preferred: if any aligned device was left out,
                // every picked device is aligned.
                let split = state.filter_by_affinity(R, &available, mask);
                if !split.aligned.is_subset(&picked) {
                    prop_assert!(picked.is_subset(&split.aligned));
                }
                state.release(&r);
                prop_assert_eq!(state.allocated_devices(R), before);
            }
            Ok(ToAllocate::Nothing) => prop_assert_eq!(request, 0),
            Ok(ToAllocate::AskPlugin(_)) => prop_assert!(false, "plugin offers no preference"),
            Err(_) => {
                prop_assert!(request > available.len() || available.is_empty());
                prop_assert_eq!(state.allocated_devices(R), before, "nothing left behind");
            }
        }
    }

    #[test]
    fn every_hint_can_hold_the_request(devices in devices(), request in 1usize..6) {
        let mut state = DeviceState::new(vec![0, 1, 2, 3]);
        state.plugin_connected(R, PluginOptions::default());
        state.update_devices(R, &devices);
        let available = state.available_devices(R);
        let hints = state.generate_device_topology_hints(R, &available, &BTreeSet::new(), request);
        for hint in &hints {
            let mask = hint.numa_affinity.expect("device hints always have a mask");
            let inside = devices.iter().filter(|d| {
                available.contains(&d.id)
                    && d.numa_nodes.iter().flatten().any(|&n| (0..64).contains(&n) && mask.is_set(n as usize))
            });
            prop_assert!(inside.count() >= request);
        }
        // Preferred means "as narrow as the narrowest mask all devices could fill": one size.
        let sizes: BTreeSet<usize> = hints
            .iter()
            .filter(|h| h.preferred)
            .map(|h| h.numa_affinity.unwrap().count())
            .collect();
        prop_assert!(sizes.len() <= 1, "{:?}", hints);
    }
}

/// A checkpoint entry: (pod, container, resource, NUMA node, device ids).
type Entry = (u8, u8, u8, i64, BTreeSet<u8>);

fn checkpoint_of(entries: &[Entry]) -> corral_checkpoint::DeviceManagerCheckpoint {
    let entries = entries
        .iter()
        .map(
            |(pod, container, resource, numa, ids)| corral_checkpoint::PodDevicesEntry {
                pod_uid: format!("pod-{pod}"),
                container_name: format!("c{container}"),
                resource_name: format!("example.com/r{resource}"),
                device_ids: Some(
                    [(*numa, Some(ids.iter().map(|i| format!("d{i}")).collect()))]
                        .into_iter()
                        .collect(),
                ),
                alloc_resp: Some(Vec::new()),
            },
        )
        .collect();
    corral_checkpoint::DeviceManagerCheckpoint {
        pod_device_entries: Some(entries),
        registered_devices: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Without pod specs, a checkpoint is refused exactly when, after later entries for the
    /// same pod, container and resource replaced earlier ones, some device of a resource
    /// is held by containers of two pods; a refused restore leaves the state untouched, an
    /// accepted one allocates exactly the listed devices.
    #[test]
    fn checkpoint_restore_refuses_exactly_devices_of_two_pods(
        entries in prop::collection::vec(
            (0u8..3, 0u8..3, 0u8..2, -1i64..2, prop::collection::btree_set(0u8..6, 0..3)),
            0..10,
        ),
    ) {
        let mut effective = std::collections::BTreeMap::new();
        for (pod, container, resource, _, ids) in &entries {
            effective.insert((*resource, *pod, *container), ids.clone());
        }
        let mut pods_of = std::collections::BTreeMap::<(u8, u8), BTreeSet<u8>>::new();
        for ((resource, pod, _), ids) in &effective {
            for id in ids {
                pods_of.entry((*resource, *id)).or_default().insert(*pod);
            }
        }
        let conflict = pods_of.values().any(|pods| pods.len() > 1);
        let mut state = DeviceState::new(vec![0, 1]);
        let result = state.restore_checkpoint(
            &checkpoint_of(&entries),
            std::path::Path::new("kubelet_internal_checkpoint"),
            std::time::Instant::now(),
        );
        prop_assert_eq!(result.is_err(), conflict, "{:?}", result);
        for resource in 0u8..2 {
            let name = format!("example.com/r{resource}");
            let want: BTreeSet<String> = if conflict {
                BTreeSet::new()
            } else {
                pods_of
                    .keys()
                    .filter(|(r, _)| *r == resource)
                    .map(|(_, id)| format!("d{id}"))
                    .collect()
            };
            prop_assert_eq!(state.allocated_devices(&name), want);
        }
        if let Err(err) = result {
            prop_assert_ne!(&err.first.pod_uid, &err.second.pod_uid);
            let held_by = |owner: &corral_devicemgr::DeviceOwner| {
                entries.iter().any(|(pod, container, resource, _, ids)| {
                    format!("pod-{pod}") == owner.pod_uid
                        && format!("c{container}") == owner.container
                        && format!("example.com/r{resource}") == err.resource
                        && ids.iter().any(|id| format!("d{id}") == err.device)
                })
            };
            prop_assert!(held_by(&err.first) && held_by(&err.second));
        }
    }
}
