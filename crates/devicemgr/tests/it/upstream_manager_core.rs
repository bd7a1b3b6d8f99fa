//! Upstream `pkg/kubelet/cm/devicemanager/manager_test.go` tables that test the manager's
//! bookkeeping, ported as facts through the synchronous core ([`DeviceState`]): affinity
//! split, allocation and run options with upstream's stub plugin responses, admission
//! errors, capacity and allocatable, the checkpoint round trip, disconnect handling.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use corral_devicemgr::{
    AllocateError, AllocationRequest, ContainerAllocation, Device, DeviceState, PluginOptions,
    RunContainerOptions, ToAllocate,
};
use corral_proto::deviceplugin::v1beta1::{self as api, ContainerAllocateResponse};
use corral_topology::NumaMask;

use crate::support::allocate_response;

fn ids(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn response(
    devices: &[&str],
    mounts: &[(&str, &str)],
    envs: &[(&str, &str)],
) -> ContainerAllocateResponse {
    let devices: Vec<(&str, &str)> = devices.iter().map(|p| (*p, *p)).collect();
    allocate_response(envs, &devices, mounts, &[])
}

/// Upstream `allocateStubFunc` (the plugin of `domain1.com/resource1`).
fn stub_resource1(devices: &[String]) -> ContainerAllocateResponse {
    let mut resp = ContainerAllocateResponse::default();
    for dev in devices {
        let add = match dev.as_str() {
            "dev1" => response(
                &["/dev/aaa", "/dev/bbb"],
                &[("/container_dir1/file1", "host_dir1/file1")],
                &[],
            ),
            "dev2" => response(
                &["/dev/ccc"],
                &[("/container_dir1/file2", "host_dir1/file2")],
                &[("key1", "val1")],
            ),
            _ => continue,
        };
        resp.devices.extend(add.devices);
        resp.mounts.extend(add.mounts);
        resp.envs.extend(add.envs);
    }
    resp
}

/// Upstream `getTestManager`'s plugin of `domain2.com/resource2`.
fn stub_resource2(devices: &[String]) -> ContainerAllocateResponse {
    let mut resp = ContainerAllocateResponse::default();
    for dev in devices {
        match dev.as_str() {
            "dev3" => resp.envs.insert("key2".into(), "val2".into()),
            "dev4" => resp.envs.insert("key2".into(), "val3".into()),
            _ => None,
        };
    }
    resp
}

#[test]
fn filter_by_affinity() {
    // Upstream TestFilterByAffinity (manager_test.go). Upstream keys the device without
    // topology "devwithouttopology" while its id is "dev5"; it is never available in the
    // table, so the quirk does not matter.
    let mut state = DeviceState::new(vec![0, 1, 2]);
    state.plugin_connected("res1", PluginOptions::default());
    state.update_devices(
        "res1",
        &[
            Device::new("dev1", Some(vec![1])),
            Device::new("dev2", Some(vec![1, 2])),
            Device::new("dev3", Some(vec![2])),
            Device::new("dev4", Some(vec![2])),
            Device::new("dev5", None),
        ],
    );
    let affinity = Some(NumaMask::new([2]).unwrap());
    let cases = [
        (ids(&["dev1", "dev2"]), ids(&["dev2"]), ids(&["dev1"])),
        (
            ids(&["dev1", "dev2", "dev3", "dev4"]),
            ids(&["dev2", "dev3", "dev4"]),
            ids(&["dev1"]),
        ),
    ];
    for (available, aligned, unaligned) in cases {
        let split = state.filter_by_affinity("res1", &available, affinity);
        assert_eq!(split.aligned, aligned, "{available:?}");
        assert_eq!(split.unaligned, unaligned, "{available:?}");
        assert!(split.no_affinity.is_empty(), "{available:?}");
    }
}

/// Upstream `getTestManager` with `res1` (dev1, dev2 on NUMA 0, with topology) and `res2`
/// (dev3, dev4, without topology), both plugins without options.
fn test_manager(res1_topology: bool, res2_topology: bool) -> DeviceState {
    let mut state = DeviceState::new(vec![0]);
    for (resource, devs, topology) in [
        (RES1, ["dev1", "dev2"], res1_topology),
        (RES2, ["dev3", "dev4"], res2_topology),
    ] {
        state.plugin_connected(resource, PluginOptions::default());
        let devices: Vec<Device> = devs
            .iter()
            .map(|d| Device::new(*d, topology.then(|| vec![0])))
            .collect();
        state.update_devices(resource, &devices);
    }
    state
}

const RES1: &str = "domain1.com/resource1";
const RES2: &str = "domain2.com/resource2";

/// Upstream `Allocate` for one container on the core, with the stub plugins answering:
/// every resource is chosen, allocated and committed, or the first error is returned and
/// everything committed for the container is given back (corral's all-or-nothing).
fn allocate(
    state: &mut DeviceState,
    pod_uid: &str,
    container: &str,
    requests: &[(&str, usize)],
) -> Result<(), AllocateError> {
    let mut committed = Vec::new();
    for (resource, n) in requests {
        let request = AllocationRequest::new(pod_uid, container, resource, *n);
        match state.devices_to_allocate(&request, None) {
            Ok(ToAllocate::Devices(reservation)) => {
                let resp = if *resource == RES1 {
                    stub_resource1(&reservation.devices)
                } else {
                    stub_resource2(&reservation.devices)
                };
                state.commit(&reservation, pod_uid, container, resp);
                committed.push(*resource);
            }
            Ok(ToAllocate::Nothing) => {}
            Ok(ToAllocate::AskPlugin(ask)) => {
                panic!("the stub plugins offer no preference: {ask:?}")
            }
            Err(err) => {
                for resource in committed {
                    state.uncommit(pod_uid, container, resource);
                }
                return Err(err);
            }
        }
    }
    Ok(())
}

fn run_options(state: &DeviceState, pod_uid: &str, container: &str) -> Option<RunContainerOptions> {
    state
        .pod_devices()
        .container(pod_uid, container)
        .map(RunContainerOptions::merge)
}

#[test]
fn pod_container_device_allocation() {
    // Upstream TestPodContainerDeviceAllocation (manager_test.go): three pods in turn.
    let mut state = test_manager(true, false);
    struct Case {
        description: &'static str,
        pod: &'static str,
        requests: &'static [(&'static str, usize)],
        opts_len: Option<[usize; 3]>,
        allocated: [usize; 2],
        error: Option<&'static str>,
    }
    let cases = [
        Case {
            description: "Successful allocation of two Res1 resources and one Res2 resource",
            pod: "pod0",
            requests: &[(RES1, 2), (RES2, 1)],
            opts_len: Some([3, 2, 2]),
            allocated: [2, 1],
            error: None,
        },
        Case {
            description: "Requesting to create a pod without enough resources should fail",
            pod: "pod1",
            requests: &[(RES1, 1)],
            opts_len: None,
            allocated: [2, 1],
            error: Some(
                "requested number of devices unavailable for domain1.com/resource1. Requested: 1, Available: 0",
            ),
        },
        Case {
            description: "Successful allocation of all available Res1 resources and Res2 resources",
            pod: "pod2",
            requests: &[(RES2, 1)],
            opts_len: Some([0, 0, 1]),
            allocated: [2, 2],
            error: None,
        },
    ];
    for case in cases {
        let result = allocate(&mut state, case.pod, "c", case.requests);
        assert_eq!(
            result.err().map(|e| e.to_string()).as_deref(),
            case.error,
            "{}",
            case.description
        );
        let opts = run_options(&state, case.pod, "c");
        match case.opts_len {
            None => assert_eq!(opts, None, "{}", case.description),
            Some([devices, mounts, envs]) => {
                let opts = opts.expect(case.description);
                assert_eq!(opts.devices.len(), devices, "{}", case.description);
                assert_eq!(opts.mounts.len(), mounts, "{}", case.description);
                assert_eq!(opts.envs.len(), envs, "{}", case.description);
            }
        }
        assert_eq!(
            state.allocated_devices(RES1).len(),
            case.allocated[0],
            "{}",
            case.description
        );
        assert_eq!(
            state.allocated_devices(RES2).len(),
            case.allocated[1],
            "{}",
            case.description
        );
    }
}

#[test]
fn pod_container_device_to_allocate() {
    // Upstream TestPodContainerDeviceToAllocate (manager_test.go): the three admission
    // errors, with upstream's messages, and nothing chosen.
    const RES3: &str = "domain2.com/resource3";
    let mut state = DeviceState::new(vec![0]);
    let record =
        |state: &mut DeviceState, pod: &str, con: &str, res: &str, numa: i64, devs: &[&str]| {
            state.record_allocation(
                pod,
                con,
                res,
                ContainerAllocation {
                    devices: BTreeMap::from([(
                        numa,
                        devs.iter().map(|d| (*d).to_owned()).collect(),
                    )]),
                    response: Some(response(&["/dev/x"], &[("/home/lib", "/usr/lib")], &[])),
                },
            );
        };
    record(&mut state, "pod1", "con1", RES1, 0, &["dev1", "dev2"]);
    record(&mut state, "pod2", "con2", RES2, -1, &["dev5"]);
    record(&mut state, "pod3", "con3", RES3, -1, &["dev5"]);
    // No healthy devices for resource1; resource2 never registered; resource3's dev5 is
    // no longer healthy.
    state.plugin_connected(RES1, PluginOptions::default());
    state.update_devices(RES1, &[]);
    state.plugin_connected(RES3, PluginOptions::default());
    state.update_devices(
        RES3,
        &[Device::new("dev7", None), Device::new("dev8", None)],
    );
    let cases = [
        (
            "Admission error in case no healthy devices to allocate present",
            "pod1",
            "con1",
            RES1,
            2,
            "no healthy devices present; cannot allocate unhealthy devices domain1.com/resource1",
        ),
        (
            "Admission error in case resource is not registered",
            "pod2",
            "con2",
            RES2,
            1,
            "cannot allocate unregistered device domain2.com/resource2",
        ),
        (
            "Admission error in case resource not devices previously allocated no longer healthy",
            "pod3",
            "con3",
            RES3,
            1,
            "previously allocated devices are no longer healthy; cannot allocate unhealthy devices domain2.com/resource3",
        ),
    ];
    for (description, pod, con, resource, required, message) in cases {
        let reusable = BTreeSet::new();
        let request = AllocationRequest {
            reusable: Some(&reusable),
            ..AllocationRequest::new(pod, con, resource, required)
        };
        let before = state.allocated_devices(resource);
        let err = state.devices_to_allocate(&request, None).unwrap_err();
        assert_eq!(err.to_string(), message, "{description}");
        assert_eq!(state.allocated_devices(resource), before, "{description}");
        assert_eq!(state.reservations_in_flight(), 0, "{description}");
    }
}

#[test]
fn devices_to_allocate_conflict_with_update_allocated_devices() {
    // Upstream TestDevicesToAllocateConflictWithUpdateAllocatedDevices (manager_test.go):
    // stale pods are freed (allocated sets regenerated) while the plugin answers
    // GetPreferredAllocation; the device chosen from its answer is still granted. In corral
    // nothing is marked while the plugin is asked, so there is nothing to lose.
    let resource = "domain1.com/resource";
    let mut state = DeviceState::new(vec![0]);
    state.plugin_connected(
        resource,
        PluginOptions {
            get_preferred_allocation_available: true,
            ..PluginOptions::default()
        },
    );
    state.update_devices(resource, &[Device::new("deviceID", None)]);
    state.record_allocation(
        "podToRemove",
        "containerToRemove",
        resource,
        ContainerAllocation::default(),
    );
    let request = AllocationRequest {
        reusable: None,
        ..AllocationRequest::new("podToAllocate", "containerToAllocate", resource, 1)
    };
    let ToAllocate::AskPlugin(ask) = state.devices_to_allocate(&request, None).unwrap() else {
        panic!("expected a GetPreferredAllocation call");
    };
    assert_eq!(ask.available, ["deviceID"]);
    // "UpdateAllocatedDevices" runs while the plugin is answering.
    assert_eq!(
        state.remove_inactive_pods(&BTreeSet::new()),
        ["podToRemove"]
    );
    let answer = ids(&["deviceID"]);
    let ToAllocate::Devices(reservation) =
        state.devices_to_allocate(&request, Some(&answer)).unwrap()
    else {
        panic!("expected devices");
    };
    assert_eq!(reservation.devices, ["deviceID"]);
}

fn capacity_of(
    state: &mut DeviceState,
    now: Instant,
    grace: Duration,
) -> corral_devicemgr::Capacity {
    state.capacity(now, grace)
}

#[test]
fn update_capacity_allocatable() {
    // Upstream TestUpdateCapacityAllocatable (manager_test.go), step by step.
    let grace = Duration::from_secs(300);
    let t0 = Instant::now();
    let r1 = "domain1.com/resource1";
    let r2 = "resource2";
    let healthy = |id: &str| Device::new(id, None);
    let unhealthy = |id: &str| Device {
        healthy: false,
        ..Device::new(id, None)
    };
    let mut state = DeviceState::new(vec![0]);
    state.plugin_connected(r1, PluginOptions::default());

    // Two healthy, one unhealthy.
    let mut devs = vec![healthy("Device1"), healthy("Device2"), unhealthy("Device3")];
    state.update_devices(r1, &devs);
    let c = capacity_of(&mut state, t0, grace);
    assert_eq!((c.capacity[r1], c.allocatable[r1]), (3, 2));
    assert!(c.removed.is_empty());

    // Deleting an unhealthy device changes capacity, not allocatable.
    state.update_devices(r1, &devs[..2]);
    let c = capacity_of(&mut state, t0, grace);
    assert_eq!((c.capacity[r1], c.allocatable[r1]), (2, 2));
    assert!(c.removed.is_empty());

    // A healthy device turning unhealthy reduces allocatable by one.
    devs[1].healthy = false;
    state.update_devices(r1, &devs);
    let c = capacity_of(&mut state, t0, grace);
    assert_eq!((c.capacity[r1], c.allocatable[r1]), (3, 1));
    assert!(c.removed.is_empty());

    // Deleting a healthy device reduces both.
    state.update_devices(r1, &devs[1..]);
    let c = capacity_of(&mut state, t0, grace);
    assert_eq!((c.capacity[r1], c.allocatable[r1]), (2, 0));
    assert!(c.removed.is_empty());

    // Another resource.
    state.plugin_connected(r2, PluginOptions::default());
    state.update_devices(r2, &devs);
    let c = capacity_of(&mut state, t0, grace);
    assert_eq!(c.capacity.len(), 2);
    assert_eq!((c.capacity[r2], c.allocatable[r2]), (3, 1));
    assert!(c.removed.is_empty());

    // resource1's endpoint stopped longer than the grace period ago: removed, and gone
    // from the healthy and unhealthy maps and the endpoints.
    state.plugin_disconnected(r1, t0);
    let later = t0 + grace + Duration::from_secs(10);
    let c = capacity_of(&mut state, later, grace);
    assert_eq!(c.removed, [r1]);
    assert!(!c.capacity.contains_key(r1) && !c.allocatable.contains_key(r1));
    assert_eq!(c.capacity[r2], 3);
    assert!(!state.is_registered(r1));
    assert!(state.unhealthy_devices(r1).is_empty());
    assert!(!state.resources().contains(&r1.to_owned()));
    assert_eq!(state.endpoint(r1), None);
    assert!(state.endpoint(r2).is_some());

    // resource2's endpoint stops: its devices become unhealthy at once.
    state.plugin_disconnected(r2, later);
    let c = capacity_of(&mut state, later, grace);
    assert_eq!((c.capacity[r2], c.allocatable[r2]), (3, 0));
    assert!(c.removed.is_empty());

    // Checkpoint and restore: a stopped endpoint for resource2, capacity zero, still a
    // device-plugin resource (so pods asking for it are rejected, not started).
    let checkpoint = state.to_checkpoint();
    let mut restored = DeviceState::new(vec![0]);
    restored
        .restore_checkpoint(&checkpoint, Path::new("kubelet_internal_checkpoint"), later)
        .unwrap();
    assert!(restored.endpoint(r2).is_some());
    assert_eq!(restored.endpoint(r1), None);
    let c = capacity_of(&mut restored, later, grace);
    assert_eq!((c.capacity[r2], c.allocatable[r2]), (0, 0));
    assert!(c.removed.is_empty());
    assert!(restored.is_device_plugin_resource(r2));
}

#[test]
fn checkpoint_round_trip() {
    // Upstream TestCheckpoint (manager_test.go): allocations (one without topology) and
    // registered resources survive writeCheckpoint + readCheckpoint. Upstream's final
    // healthy-devices comparison is against the same map it mutates; what readCheckpoint
    // really does is register every resource with no healthy device until its plugin
    // comes back, which is asserted here.
    const R1: &str = "domain1.com/resource1";
    const R2: &str = "domain2.com/resource2";
    const R3: &str = "domain2.com/resource3";
    let mut state = DeviceState::new(vec![0]);
    let mut insert = |pod: &str, con: &str, res: &str, numa: i64, devs: &[&str], resp| {
        state.record_allocation(
            pod,
            con,
            res,
            ContainerAllocation {
                devices: BTreeMap::from([(numa, devs.iter().map(|d| (*d).to_owned()).collect())]),
                response: Some(resp),
            },
        );
    };
    let mut with_cdi = response(
        &["/dev/r1dev1", "/dev/r1dev2"],
        &[("/home/r1lib1", "/usr/r1lib1")],
        &[],
    );
    with_cdi.cdi_devices = ["domain1.com/resource1=dev1", "domain1.com/resource1=dev2"]
        .iter()
        .map(|n| api::CdiDevice { name: (*n).into() })
        .collect();
    insert("pod1", "con1", R1, 0, &["dev1", "dev2"], with_cdi);
    insert(
        "pod1",
        "con1",
        R2,
        0,
        &["dev1", "dev2"],
        response(
            &["/dev/r2dev1", "/dev/r2dev2"],
            &[("/home/r2lib1", "/usr/r2lib1")],
            &[("r2devices", "dev1 dev2")],
        ),
    );
    insert(
        "pod1",
        "con2",
        R1,
        0,
        &["dev3"],
        response(&["/dev/r1dev3"], &[("/home/r1lib1", "/usr/r1lib1")], &[]),
    );
    insert(
        "pod2",
        "con1",
        R1,
        0,
        &["dev4"],
        response(&["/dev/r1dev4"], &[("/home/r1lib1", "/usr/r1lib1")], &[]),
    );
    insert(
        "pod3",
        "con3",
        R3,
        -1,
        &["dev5"],
        response(&["/dev/r3dev5"], &[("/home/r3lib1", "/usr/r3lib1")], &[]),
    );
    for (res, devs) in [
        (R1, &["dev1", "dev2", "dev3", "dev4", "dev5"][..]),
        (R2, &["dev1", "dev2"][..]),
        (R3, &["dev5"][..]),
    ] {
        state.plugin_connected(res, PluginOptions::default());
        let devices: Vec<Device> = devs.iter().map(|d| Device::new(*d, None)).collect();
        state.update_devices(res, &devices);
    }

    let checkpoint = state.to_checkpoint();
    let mut restored = DeviceState::new(vec![0]);
    restored
        .restore_checkpoint(
            &checkpoint,
            Path::new("kubelet_internal_checkpoint"),
            Instant::now(),
        )
        .unwrap();

    assert_eq!(restored.pod_devices().len(), state.pod_devices().len());
    for (pod, con, res, allocation) in state.pod_devices().entries() {
        let back = restored
            .pod_devices()
            .get(pod, con, res)
            .expect("entry restored");
        assert_eq!(back.devices, allocation.devices, "{pod}/{con}/{res}");
        let before = run_options(&state, pod, con).unwrap();
        let after = run_options(&restored, pod, con).unwrap();
        assert_eq!(before, after, "{pod}/{con}");
    }
    for res in [R1, R2, R3] {
        assert_eq!(
            restored.allocated_devices(res),
            state.allocated_devices(res),
            "{res}"
        );
        assert!(restored.is_registered(res), "{res}");
        assert!(restored.healthy_devices(res).is_empty(), "{res}");
    }
}

#[test]
fn endpoint_sync_on_disconnect() {
    // Upstream TestEndpointSyncOnDisconnect (manager_test.go, kubernetes#133702): a
    // disconnect moves every device to unhealthy and keeps the endpoint; once the grace
    // period expired, GetCapacity drops the endpoint and both device maps.
    let resource = "domain1.com/resource1";
    let grace = Duration::from_secs(300);
    let t0 = Instant::now();
    let mut state = DeviceState::new(vec![0]);
    state.plugin_connected(resource, PluginOptions::default());
    state.update_devices(
        resource,
        &[
            Device::new("Device1", None),
            Device::new("Device2", None),
            Device {
                healthy: false,
                ..Device::new("Device3", None)
            },
        ],
    );
    state.plugin_disconnected(resource, t0);
    assert!(state.endpoint(resource).is_some());
    assert!(state.is_registered(resource));
    assert!(state.healthy_devices(resource).is_empty());
    assert_eq!(state.unhealthy_devices(resource).len(), 3);

    let c = state.capacity(t0 + 2 * grace, grace);
    assert_eq!(c.removed, [resource]);
    assert_eq!(state.endpoint(resource), None);
    assert!(state.resources().is_empty());
    assert!(!state.is_registered(resource));
    assert!(state.unhealthy_devices(resource).is_empty());
}
