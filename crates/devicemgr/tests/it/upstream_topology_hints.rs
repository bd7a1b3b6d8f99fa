//! Upstream `pkg/kubelet/cm/devicemanager/topology_hints_test.go`, ported as facts through
//! the synchronous core: container and pod hints, topology-aligned device choice, the
//! parameters of `GetPreferredAllocation`, and the pod's device requests.
//!
//! Upstream builds its manager by filling `allDevices`, `healthyDevices` and
//! `allocatedDevices` directly; here the same state comes from
//! [`DeviceState::plugin_connected`] / [`DeviceState::update_devices`] (a plugin's list),
//! [`DeviceState::record_allocation`] (a container's allocation) and [`DeviceState::reserve`]
//! (devices allocated outside any container).

use std::collections::{BTreeMap, BTreeSet};

use corral_devicemgr::{
    AllocationRequest, ContainerAllocation, Device, DeviceState, PluginOptions, ToAllocate,
};
use corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse;
use corral_topology::{Container, NumaMask, Pod, TopologyHint};

fn numa(id: &str, node: i64) -> Device {
    Device::new(id, Some(vec![node]))
}

fn plain(id: &str) -> Device {
    Device::new(id, None)
}

fn mask(ids: &[usize]) -> NumaMask {
    NumaMask::new(ids.iter().copied()).unwrap()
}

fn hint(ids: &[usize], preferred: bool) -> TopologyHint {
    TopologyHint {
        numa_affinity: Some(mask(ids)),
        preferred,
    }
}

/// Upstream compares hints after sorting both sides; so do we.
fn sorted(hints: Option<Vec<TopologyHint>>) -> Option<Vec<TopologyHint>> {
    hints.map(|mut h| {
        h.sort_by_key(|h| (h.numa_affinity, h.preferred));
        h
    })
}

fn container(name: &str, limits: &[(&str, i64)]) -> Container {
    let mut c = Container::new(name);
    for (r, n) in limits {
        c.resources.limits.extended.insert((*r).to_owned(), *n);
    }
    c
}

fn pod(uid: &str, init: Vec<Container>, app: Vec<Container>) -> Pod {
    Pod {
        uid: uid.into(),
        init_containers: init,
        containers: app,
        ..Pod::default()
    }
}

/// One row of upstream's `topologyHintTestCase`.
struct HintCase {
    description: &'static str,
    pod: Pod,
    devices: Vec<(&'static str, Vec<Device>)>,
    /// pod uid → container → resource → devices.
    allocated: Vec<(&'static str, &'static str, &'static str, Vec<&'static str>)>,
    expected: Vec<(&'static str, Option<Vec<TopologyHint>>)>,
}

fn one_container(resources: &[(&str, i64)]) -> Pod {
    pod(
        "fakePod",
        vec![],
        vec![container("fakeContainer", resources)],
    )
}

fn two_per_node() -> Vec<Device> {
    vec![
        numa("Dev1", 0),
        numa("Dev2", 0),
        numa("Dev3", 1),
        numa("Dev4", 1),
    ]
}

fn interleaved() -> Vec<Device> {
    vec![
        numa("Dev1", 0),
        numa("Dev2", 1),
        numa("Dev3", 0),
        numa("Dev4", 1),
    ]
}

fn node0_node1_both() -> Vec<TopologyHint> {
    vec![hint(&[0], true), hint(&[1], true), hint(&[0, 1], false)]
}

/// Upstream `getCommonTestCases`.
fn common_cases() -> Vec<HintCase> {
    vec![
        HintCase {
            description: "Single Request, no alignment",
            pod: one_container(&[("testdevice", 1)]),
            devices: vec![("testdevice", vec![plain("Dev1"), plain("Dev2")])],
            allocated: vec![],
            expected: vec![("testdevice", None)],
        },
        HintCase {
            description: "Single Request, only one with alignment",
            pod: one_container(&[("testdevice", 1)]),
            devices: vec![("testdevice", vec![plain("Dev1"), numa("Dev2", 1)])],
            allocated: vec![],
            expected: vec![(
                "testdevice",
                Some(vec![hint(&[1], true), hint(&[0, 1], false)]),
            )],
        },
        HintCase {
            description: "Single Request, one device per socket",
            pod: one_container(&[("testdevice", 1)]),
            devices: vec![("testdevice", vec![numa("Dev1", 0), numa("Dev2", 1)])],
            allocated: vec![],
            expected: vec![("testdevice", Some(node0_node1_both()))],
        },
        HintCase {
            description: "Request for 2, one device per socket",
            pod: one_container(&[("testdevice", 2)]),
            devices: vec![("testdevice", vec![numa("Dev1", 0), numa("Dev2", 1)])],
            allocated: vec![],
            expected: vec![("testdevice", Some(vec![hint(&[0, 1], true)]))],
        },
        HintCase {
            description: "Request for 2, 2 devices per socket",
            pod: one_container(&[("testdevice", 2)]),
            devices: vec![("testdevice", interleaved())],
            allocated: vec![],
            expected: vec![("testdevice", Some(node0_node1_both()))],
        },
        HintCase {
            description: "Request for 2, optimal on 1 NUMA node, forced cross-NUMA",
            pod: one_container(&[("testdevice", 2)]),
            devices: vec![("testdevice", interleaved())],
            allocated: vec![(
                "fakePod",
                "fakeOtherContainer",
                "testdevice",
                vec!["Dev1", "Dev2"],
            )],
            expected: vec![("testdevice", Some(vec![hint(&[0, 1], false)]))],
        },
        HintCase {
            description: "2 device types, mixed configuration",
            pod: one_container(&[("testdevice1", 2), ("testdevice2", 1)]),
            devices: vec![
                ("testdevice1", interleaved()),
                ("testdevice2", vec![numa("Dev1", 0)]),
            ],
            allocated: vec![],
            expected: vec![
                ("testdevice1", Some(node0_node1_both())),
                (
                    "testdevice2",
                    Some(vec![hint(&[0], true), hint(&[0, 1], false)]),
                ),
            ],
        },
        HintCase {
            description: "Single device type, more requested than available",
            pod: one_container(&[("testdevice", 6)]),
            devices: vec![("testdevice", two_per_node())],
            allocated: vec![],
            expected: vec![("testdevice", Some(vec![]))],
        },
        HintCase {
            description: "Single device type, all already allocated to container",
            pod: one_container(&[("testdevice", 2)]),
            devices: vec![("testdevice", vec![numa("Dev1", 0), numa("Dev2", 0)])],
            allocated: vec![(
                "fakePod",
                "fakeContainer",
                "testdevice",
                vec!["Dev1", "Dev2"],
            )],
            expected: vec![(
                "testdevice",
                Some(vec![hint(&[0], true), hint(&[0, 1], false)]),
            )],
        },
        HintCase {
            description: "Single device type, less already allocated to container than requested",
            pod: one_container(&[("testdevice", 4)]),
            devices: vec![("testdevice", two_per_node())],
            allocated: vec![(
                "fakePod",
                "fakeContainer",
                "testdevice",
                vec!["Dev1", "Dev2"],
            )],
            expected: vec![("testdevice", Some(vec![]))],
        },
        HintCase {
            description: "Single device type, more already allocated to container than requested",
            pod: one_container(&[("testdevice", 2)]),
            devices: vec![("testdevice", two_per_node())],
            allocated: vec![(
                "fakePod",
                "fakeContainer",
                "testdevice",
                vec!["Dev1", "Dev2", "Dev3", "Dev4"],
            )],
            expected: vec![("testdevice", Some(vec![]))],
        },
    ]
}

/// Upstream `getPodScopeTestCases`.
fn pod_scope_cases() -> Vec<HintCase> {
    let both = || {
        vec![
            ("testdevice1", two_per_node()),
            ("testdevice2", two_per_node()),
        ]
    };
    vec![
        HintCase {
            description: "2 device types, user container only",
            pod: pod(
                "fakePod",
                vec![],
                vec![
                    container("fakeContainer1", &[("testdevice1", 2)]),
                    container("fakeContainer2", &[("testdevice2", 2)]),
                    container("fakeContainer3", &[("notRegistered", 2)]),
                ],
            ),
            devices: both(),
            allocated: vec![],
            expected: vec![
                ("testdevice1", Some(node0_node1_both())),
                ("testdevice2", Some(node0_node1_both())),
            ],
        },
        HintCase {
            description: "2 device types, request resources for init containers and user container",
            pod: pod(
                "fakePod",
                vec![
                    container("", &[("testdevice1", 1), ("testdevice2", 1)]),
                    container("", &[("testdevice1", 1), ("testdevice2", 2)]),
                ],
                vec![
                    container("fakeContainer1", &[("testdevice1", 1), ("testdevice2", 1)]),
                    container("fakeContainer2", &[("testdevice1", 1), ("testdevice2", 1)]),
                    container("fakeContainer3", &[("notRegistered", 1)]),
                ],
            ),
            devices: both(),
            allocated: vec![],
            expected: vec![
                ("testdevice1", Some(node0_node1_both())),
                ("testdevice2", Some(node0_node1_both())),
            ],
        },
        HintCase {
            description: "2 device types, user container only, optimal on 1 NUMA node, forced cross-NUMA",
            pod: pod(
                "fakePod",
                vec![],
                vec![
                    container("fakeContainer1", &[("testdevice1", 1), ("testdevice2", 1)]),
                    container("fakeContainer2", &[("testdevice1", 1), ("testdevice2", 1)]),
                    container("fakeContainer3", &[("notRegistered", 1)]),
                ],
            ),
            devices: both(),
            allocated: vec![
                (
                    "fakeOtherPod",
                    "fakeOtherContainer",
                    "testdevice1",
                    vec!["Dev1", "Dev3"],
                ),
                (
                    "fakeOtherPod",
                    "fakeOtherContainer",
                    "testdevice2",
                    vec!["Dev1", "Dev3"],
                ),
            ],
            expected: vec![
                ("testdevice1", Some(vec![hint(&[0, 1], false)])),
                ("testdevice2", Some(vec![hint(&[0, 1], false)])),
            ],
        },
    ]
}

fn state_for(case: &HintCase) -> DeviceState {
    let mut state = DeviceState::new(vec![0, 1]);
    for (resource, devices) in &case.devices {
        state.plugin_connected(resource, PluginOptions::default());
        state.update_devices(resource, devices);
    }
    for (pod_uid, container, resource, devices) in &case.allocated {
        // Upstream's `constructDevices` puts every device under NUMA node 0 and sets
        // `allocatedDevices` by hand; an allocation with a response counts as allocated.
        let allocation = ContainerAllocation {
            devices: BTreeMap::from([(0, devices.iter().map(|d| (*d).to_owned()).collect())]),
            response: Some(ContainerAllocateResponse::default()),
        };
        state.record_allocation(pod_uid, container, resource, allocation);
    }
    state
}

#[test]
fn get_topology_hints() {
    // Upstream TestGetTopologyHints (topology_hints_test.go), all of getCommonTestCases.
    // Upstream's expectations are compared after sorting both sides, as here.
    let cases = common_cases();
    assert_eq!(cases.len(), 11);
    for case in cases {
        let mut state = state_for(&case);
        // Upstream's only active pod is the case's pod: nothing is freed first.
        let active = BTreeSet::from([case.pod.uid.clone()]);
        assert!(state.remove_inactive_pods(&active).is_empty());
        let container = &case.pod.containers[0];
        let hints = state.hints_for_container(&case.pod.uid, container);
        for (resource, expected) in &case.expected {
            assert_eq!(
                sorted(hints.get(*resource).cloned().flatten()),
                sorted(expected.clone()),
                "{}: {resource}",
                case.description
            );
            assert!(hints.contains_key(*resource), "{}", case.description);
        }
    }
}

#[test]
fn get_pod_topology_hints() {
    // Upstream TestGetPodTopologyHints (topology_hints_test.go): getCommonTestCases plus
    // getPodScopeTestCases. Upstream's active pods are the pod and "fakeOtherPod", so no
    // allocation is freed before the hints are computed.
    let cases: Vec<HintCase> = common_cases()
        .into_iter()
        .chain(pod_scope_cases())
        .collect();
    assert_eq!(cases.len(), 14);
    for case in cases {
        let mut state = state_for(&case);
        let active = BTreeSet::from([case.pod.uid.clone(), "fakeOtherPod".to_owned()]);
        assert!(state.remove_inactive_pods(&active).is_empty());
        let hints = state.hints_for_pod(&case.pod);
        for (resource, expected) in &case.expected {
            assert!(hints.contains_key(*resource), "{}", case.description);
            assert_eq!(
                sorted(hints[*resource].clone()),
                sorted(expected.clone()),
                "{}: {resource}",
                case.description
            );
        }
        assert!(
            !hints.contains_key("notRegistered"),
            "{}: resources no plugin registered get no hints",
            case.description
        );
    }
}

/// One row of upstream TestTopologyAlignedAllocation.
struct AlignedCase {
    description: &'static str,
    request: usize,
    devices: Vec<Device>,
    affinity: &'static [usize],
    /// The plugin's `GetPreferredAllocation` answer (`None`: the plugin offers none).
    preferred: Option<&'static [&'static str]>,
    expected_preferred: &'static [&'static str],
    expected_alignment: &'static [(i64, usize)],
}

fn numbered(range: std::ops::Range<usize>, node: i64) -> impl Iterator<Item = Device> {
    range.map(move |i| numa(&format!("Dev{i}"), node))
}

fn aligned_cases() -> Vec<AlignedCase> {
    let six = || {
        vec![
            numa("Dev1", 0),
            numa("Dev2", 1),
            numa("Dev3", 0),
            numa("Dev4", 1),
            numa("Dev5", 0),
            numa("Dev6", 1),
        ]
    };
    let two_hundred = || numbered(0..100, 0).chain(numbered(100..200, 1)).collect();
    let three_then_ninety_seven = || numbered(0..3, 0).chain(numbered(3..100, 1)).collect();
    vec![
        AlignedCase {
            description: "Single Request, no alignment",
            request: 1,
            devices: vec![plain("Dev1"), plain("Dev2")],
            affinity: &[0, 1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[],
        },
        AlignedCase {
            description: "Request for 1, partial alignment",
            request: 1,
            devices: vec![plain("Dev1"), numa("Dev2", 1)],
            affinity: &[1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(1, 1)],
        },
        AlignedCase {
            description: "Single Request, socket 0",
            request: 1,
            devices: vec![numa("Dev1", 0), numa("Dev2", 1)],
            affinity: &[0],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(0, 1)],
        },
        AlignedCase {
            description: "Single Request, socket 1",
            request: 1,
            devices: vec![numa("Dev1", 0), numa("Dev2", 1)],
            affinity: &[1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(1, 1)],
        },
        AlignedCase {
            description: "Request for 2, socket 0",
            request: 2,
            devices: interleaved(),
            affinity: &[0],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(0, 2)],
        },
        AlignedCase {
            description: "Request for 2, socket 1",
            request: 2,
            devices: interleaved(),
            affinity: &[1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(1, 2)],
        },
        AlignedCase {
            description: "Request for 4, unsatisfiable, prefer socket 0",
            request: 4,
            devices: six(),
            affinity: &[0],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(0, 3), (1, 1)],
        },
        AlignedCase {
            description: "Request for 4, unsatisfiable, prefer socket 1",
            request: 4,
            devices: six(),
            affinity: &[1],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(0, 1), (1, 3)],
        },
        AlignedCase {
            description: "Request for 4, multisocket",
            request: 4,
            devices: vec![
                numa("Dev1", 0),
                numa("Dev2", 1),
                numa("Dev3", 2),
                numa("Dev4", 3),
                numa("Dev5", 0),
                numa("Dev6", 1),
                numa("Dev7", 2),
                numa("Dev8", 3),
            ],
            affinity: &[1, 3],
            preferred: None,
            expected_preferred: &[],
            expected_alignment: &[(1, 2), (3, 2)],
        },
        AlignedCase {
            description: "Request for 5, socket 0, preferred aligned accepted",
            request: 5,
            devices: two_hundred(),
            affinity: &[0],
            preferred: Some(&["Dev0", "Dev19", "Dev83", "Dev42", "Dev77"]),
            expected_preferred: &["Dev0", "Dev19", "Dev83", "Dev42", "Dev77"],
            expected_alignment: &[(0, 5)],
        },
        AlignedCase {
            description: "Request for 5, socket 0, preferred aligned accepted, unaligned ignored",
            request: 5,
            devices: two_hundred(),
            affinity: &[0],
            preferred: Some(&["Dev0", "Dev19", "Dev83", "Dev150", "Dev186"]),
            expected_preferred: &["Dev0", "Dev19", "Dev83"],
            expected_alignment: &[(0, 5)],
        },
        AlignedCase {
            description: "Request for 5, socket 1, preferred aligned accepted, bogus ignored",
            request: 5,
            devices: numbered(0..100, 1).collect(),
            affinity: &[1],
            preferred: Some(&["Dev0", "Dev19", "Dev83", "bogus0", "bogus1"]),
            expected_preferred: &["Dev0", "Dev19", "Dev83"],
            expected_alignment: &[(1, 5)],
        },
        AlignedCase {
            description: "Request for 5, multisocket, preferred accepted",
            request: 5,
            devices: three_then_ninety_seven(),
            affinity: &[0],
            preferred: Some(&["Dev0", "Dev1", "Dev2", "Dev42", "Dev83"]),
            expected_preferred: &["Dev0", "Dev1", "Dev2", "Dev42", "Dev83"],
            expected_alignment: &[(0, 3), (1, 2)],
        },
        AlignedCase {
            description: "Request for 5, multisocket, preferred unaligned accepted, bogus ignored",
            request: 5,
            devices: three_then_ninety_seven(),
            affinity: &[0],
            preferred: Some(&["Dev0", "Dev1", "Dev2", "Dev42", "bogus0"]),
            expected_preferred: &["Dev0", "Dev1", "Dev2", "Dev42"],
            expected_alignment: &[(0, 3), (1, 2)],
        },
    ]
}

/// Run `devicesToAllocate` to the end, answering the plugin's preference question with
/// `preferred` (upstream's mock endpoint); returns the devices and whether the plugin was
/// asked.
fn choose(
    state: &mut DeviceState,
    request: &AllocationRequest<'_>,
    preferred: Option<&[&str]>,
) -> (Vec<String>, Option<corral_devicemgr::PreferredRequest>) {
    let answer: Option<BTreeSet<String>> =
        preferred.map(|p| p.iter().map(|s| (*s).to_owned()).collect());
    match state.devices_to_allocate(request, None).unwrap() {
        ToAllocate::Devices(reservation) => (reservation.devices, None),
        ToAllocate::AskPlugin(ask) => {
            let answer = answer.unwrap_or_default();
            match state.devices_to_allocate(request, Some(&answer)).unwrap() {
                ToAllocate::Devices(reservation) => (reservation.devices, Some(ask)),
                other => panic!("expected devices after the plugin answered, got {other:?}"),
            }
        }
        ToAllocate::Nothing => (Vec::new(), None),
    }
}

#[test]
fn topology_aligned_allocation() {
    // Upstream TestTopologyAlignedAllocation (topology_hints_test.go). Where upstream takes
    // "any" remaining device (Go map order), corral takes them in byte-wise id order; the
    // table only constrains sizes, preferred devices and per-node counts, all asserted.
    let cases = aligned_cases();
    assert_eq!(cases.len(), 14);
    for case in cases {
        let mut state = DeviceState::new(vec![0, 1, 2, 3]);
        let options = PluginOptions {
            get_preferred_allocation_available: case.preferred.is_some(),
            ..PluginOptions::default()
        };
        state.plugin_connected("resource", options);
        state.update_devices("resource", &case.devices);
        let request = AllocationRequest {
            affinity: Some(mask(case.affinity)),
            reusable: None,
            ..AllocationRequest::new("podUID", "containerName", "resource", case.request)
        };
        let (allocated, asked) = choose(&mut state, &request, case.preferred);
        assert_eq!(allocated.len(), case.request, "{}", case.description);
        assert_eq!(
            asked.is_some(),
            case.preferred.is_some(),
            "{}: the plugin is asked exactly when it offers a preference",
            case.description
        );
        let set: BTreeSet<&str> = allocated.iter().map(String::as_str).collect();
        for id in case.expected_preferred {
            assert!(set.contains(id), "{}: {id} in {set:?}", case.description);
        }
        let mut alignment: BTreeMap<i64, usize> = BTreeMap::new();
        if state.device_has_topology_alignment("resource") {
            let by_id: BTreeMap<&str, &Device> =
                case.devices.iter().map(|d| (d.id.as_str(), d)).collect();
            for id in &allocated {
                if let Some(nodes) = &by_id[id.as_str()].numa_nodes {
                    *alignment.entry(nodes[0]).or_default() += 1;
                }
            }
        }
        let expected: BTreeMap<i64, usize> = case.expected_alignment.iter().copied().collect();
        assert_eq!(alignment, expected, "{}", case.description);
    }
}

#[test]
fn get_preferred_allocation_parameters() {
    // Upstream TestGetPreferredAllocationParameters (topology_hints_test.go). Upstream's
    // loop checks the available set twice and never the must-include set; the table's
    // must-include column is asserted here too.
    struct Case {
        description: &'static str,
        request: usize,
        devices: Vec<Device>,
        allocated: &'static [&'static str],
        reusable: &'static [&'static str],
        expected_available: &'static [&'static str],
        expected_must_include: &'static [&'static str],
    }
    let eight_on_0 = || numbered(0..8, 0).collect::<Vec<_>>();
    let four_and_four = || {
        numbered(0..4, 0)
            .chain(numbered(4..8, 1))
            .collect::<Vec<_>>()
    };
    let all = &[
        "Dev0", "Dev1", "Dev2", "Dev3", "Dev4", "Dev5", "Dev6", "Dev7",
    ];
    let cases = vec![
        Case {
            description: "Request for 1, socket 0, 0 already allocated, 0 reusable",
            request: 1,
            devices: numbered(0..4, 0).collect(),
            allocated: &[],
            reusable: &[],
            expected_available: &["Dev0", "Dev1", "Dev2", "Dev3"],
            expected_must_include: &[],
        },
        Case {
            description: "Request for 4, socket 0, 2 already allocated, 2 reusable",
            request: 4,
            devices: eight_on_0(),
            allocated: &["Dev0", "Dev5"],
            reusable: &["Dev0", "Dev5"],
            expected_available: all,
            expected_must_include: &["Dev0", "Dev5"],
        },
        Case {
            description: "Request for 4, socket 0, 4 already allocated, 2 reusable",
            request: 4,
            devices: eight_on_0(),
            allocated: &["Dev0", "Dev5", "Dev4", "Dev1"],
            reusable: &["Dev0", "Dev5"],
            expected_available: &["Dev0", "Dev2", "Dev3", "Dev5", "Dev6", "Dev7"],
            expected_must_include: &["Dev0", "Dev5"],
        },
        Case {
            description: "Request for 6, multisocket, 2 already allocated, 2 reusable",
            request: 6,
            devices: four_and_four(),
            allocated: &["Dev1", "Dev6"],
            reusable: &["Dev1", "Dev6"],
            expected_available: all,
            expected_must_include: &["Dev0", "Dev1", "Dev2", "Dev3", "Dev6"],
        },
        Case {
            description: "Request for 6, multisocket, 4 already allocated, 2 reusable",
            request: 6,
            devices: four_and_four(),
            allocated: &["Dev0", "Dev1", "Dev6", "Dev7"],
            reusable: &["Dev1", "Dev6"],
            expected_available: &["Dev1", "Dev2", "Dev3", "Dev4", "Dev5", "Dev6"],
            expected_must_include: &["Dev1", "Dev2", "Dev3", "Dev6"],
        },
    ];
    for case in cases {
        let mut state = DeviceState::new(vec![0, 1]);
        state.plugin_connected(
            "resource",
            PluginOptions {
                get_preferred_allocation_available: true,
                ..PluginOptions::default()
            },
        );
        state.update_devices("resource", &case.devices);
        let allocated: Vec<String> = case.allocated.iter().map(|s| (*s).to_owned()).collect();
        state.reserve("resource", &allocated);
        let reusable: BTreeSet<String> = case.reusable.iter().map(|s| (*s).to_owned()).collect();
        let request = AllocationRequest {
            affinity: Some(mask(&[0])),
            reusable: Some(&reusable),
            ..AllocationRequest::new("podUID", "containerName", "resource", case.request)
        };
        let before = state.allocated_devices("resource");
        let ToAllocate::AskPlugin(ask) = state.devices_to_allocate(&request, None).unwrap() else {
            panic!(
                "{}: expected a GetPreferredAllocation call",
                case.description
            );
        };
        assert_eq!(
            ask.available, case.expected_available,
            "{}",
            case.description
        );
        assert_eq!(
            ask.must_include, case.expected_must_include,
            "{}",
            case.description
        );
        assert_eq!(ask.size, case.request, "{}", case.description);
        assert_eq!(
            state.allocated_devices("resource"),
            before,
            "{}: asking the plugin takes nothing",
            case.description
        );
        // Upstream's mock answers nil: the choice still completes from the aligned and
        // remaining devices.
        let ToAllocate::Devices(reservation) = state
            .devices_to_allocate(&request, Some(&BTreeSet::new()))
            .unwrap()
        else {
            panic!("{}: expected devices", case.description);
        };
        assert_eq!(
            reservation.devices.len(),
            case.request,
            "{}",
            case.description
        );
        for id in case.reusable {
            assert!(
                reservation.devices.iter().any(|d| d == id),
                "{}: reusable {id} is taken first",
                case.description
            );
        }
    }
}

#[test]
fn get_pod_device_request() {
    // Upstream TestGetPodDeviceRequest (topology_hints_test.go). cpu and memory limits are
    // not extended resources and never count.
    fn limited(resources: &[(&str, i64)]) -> Container {
        let mut c = container("", resources);
        c.resources.limits.cpu_millis = Some(2000);
        c.resources.limits.memory_bytes = Some(1_000_000_000);
        c
    }
    struct Case {
        description: &'static str,
        pod: Pod,
        registered: &'static [&'static str],
        expected: &'static [(&'static str, usize)],
    }
    let cases = vec![
        Case {
            description: "empty pod",
            pod: Pod::default(),
            registered: &[],
            expected: &[],
        },
        Case {
            description: "Init container requests device plugin resource",
            pod: pod("p", vec![limited(&[("gpu", 2)])], vec![]),
            registered: &["gpu"],
            expected: &[("gpu", 2)],
        },
        Case {
            description: "Init containers request device plugin resource",
            pod: pod(
                "p",
                vec![limited(&[("gpu", 2)]), limited(&[("gpu", 4)])],
                vec![],
            ),
            registered: &["gpu"],
            expected: &[("gpu", 4)],
        },
        Case {
            description: "User container requests device plugin resource",
            pod: pod("p", vec![], vec![limited(&[("gpu", 2)])]),
            registered: &["gpu"],
            expected: &[("gpu", 2)],
        },
        Case {
            description: "Init containers and user containers request the same amount of device plugin resources",
            pod: pod(
                "p",
                vec![
                    limited(&[("gpu", 2), ("nic", 2)]),
                    limited(&[("gpu", 2), ("nic", 2)]),
                ],
                vec![
                    limited(&[("gpu", 1), ("nic", 1)]),
                    limited(&[("gpu", 1), ("nic", 1)]),
                ],
            ),
            registered: &["gpu", "nic"],
            expected: &[("gpu", 2), ("nic", 2)],
        },
        Case {
            description: "Init containers request more device plugin resources than user containers",
            pod: pod(
                "p",
                vec![
                    limited(&[("gpu", 2), ("nic", 1)]),
                    limited(&[("gpu", 3), ("nic", 2)]),
                ],
                vec![limited(&[("gpu", 1), ("nic", 1)]), limited(&[("gpu", 1)])],
            ),
            registered: &["gpu", "nic"],
            expected: &[("gpu", 3), ("nic", 2)],
        },
        Case {
            description: "User containers request more device plugin resources than init containers",
            pod: pod(
                "p",
                vec![
                    limited(&[("gpu", 2), ("nic", 1)]),
                    limited(&[("gpu", 2), ("nic", 1)]),
                ],
                vec![
                    limited(&[("gpu", 3), ("nic", 2)]),
                    limited(&[("gpu", 3), ("nic", 2)]),
                ],
            ),
            registered: &["gpu", "nic"],
            expected: &[("gpu", 6), ("nic", 4)],
        },
    ];
    for case in cases {
        let mut state = DeviceState::new(vec![0]);
        for resource in case.registered {
            // Upstream registers the resource with an empty healthy set.
            state.plugin_connected(resource, PluginOptions::default());
            state.update_devices(resource, &[]);
        }
        let expected: BTreeMap<String, usize> = case
            .expected
            .iter()
            .map(|(r, n)| ((*r).to_owned(), *n))
            .collect();
        assert_eq!(
            state.pod_device_requests(&case.pod),
            expected,
            "{}",
            case.description
        );
    }
}
