//! Rules of upstream's filter that its tables do not pin, each from filter.go / numaresources.go
//! at 903da7df, and the property: a pod that fits a zone with room passes, and once that room is
//! taken and nothing fits, it is refused.

use super::*;

/// Two zones with cpu, memory and a device; single-numa-node at `scope`.
fn two_zones(scope: &str, zone_cpus: [&str; 2]) -> (NodeResourceTopology, NodeAllocatable) {
    let mut nrt = NodeResourceTopology::named("n");
    nrt.zones = vec![
        zone(
            "node-0",
            &[
                ("cpu", "8", zone_cpus[0]),
                ("memory", "8Gi", "8Gi"),
                (NIC, "4", "4"),
            ],
        ),
        zone(
            "node-1",
            &[
                ("cpu", "8", zone_cpus[1]),
                ("memory", "8Gi", "8Gi"),
                (NIC, "4", "4"),
            ],
        ),
    ];
    nrt.attributes = vec![
        AttributeInfo::new("topologyManagerPolicy", "single-numa-node"),
        AttributeInfo::new("topologyManagerScope", scope),
    ];
    let allocatable = NodeAllocatable::from_zones(&nrt);
    (nrt, allocatable)
}

fn one(qos: QosClass, requests: Res) -> PodRequests {
    PodRequests::new(
        qos,
        vec![Container {
            name: "c".into(),
            sidecar: false,
            requests: list(requests),
        }],
    )
}

#[test]
fn cpu_that_no_zone_lists_refuses_the_pod_whatever_its_class() {
    // cpu is native and not host-level: no zone listing it leaves no candidate.
    for scope in ["container", "pod"] {
        let (mut nrt, allocatable) = two_zones(scope, ["8", "8"]);
        for zone in &mut nrt.zones {
            zone.resources.retain(|r| r.name != "cpu");
        }
        for qos in [QosClass::Guaranteed, QosClass::Burstable] {
            let got = filter(
                &nrt,
                &allocatable,
                &one(qos, &[("cpu", "1"), ("memory", "1Gi")]),
            );
            let resource = match got {
                Err(Refusal::Container { resource, .. }) | Err(Refusal::Pod { resource }) => {
                    resource
                }
                other => panic!("{scope} {qos:?}: {other:?}"),
            };
            assert_eq!(resource, "cpu");
        }
        // Memory alone still fits: the rule is per requested resource.
        let memory_only = one(QosClass::Burstable, &[("memory", "1Gi")]);
        assert!(filter(&nrt, &allocatable, &memory_only).is_ok(), "{scope}");
    }
}

#[test]
fn a_resource_missing_from_the_node_allocatable_refuses_before_any_zone_is_read() {
    let (nrt, _) = two_zones("container", ["8", "8"]);
    // The zones list the device, the node does not: refused, naming it.
    let node = NodeAllocatable::new(["memory"]);
    let got = filter(&nrt, &node, &one(QosClass::BestEffort, &[(NIC, "1")]));
    assert_eq!(
        got,
        Err(Refusal::Container {
            kind: ContainerKind::App,
            name: "c".into(),
            resource: NIC.into()
        })
    );
    // A device the node has but no zone lists is host-level: ignored.
    let node = NodeAllocatable::new([NIC, "example.com/no-numa"]);
    let got = filter(
        &nrt,
        &node,
        &one(QosClass::BestEffort, &[("example.com/no-numa", "7")]),
    );
    assert_eq!(got, Ok(Fit::Containers(vec![0])));
}

#[test]
fn burstable_cpu_and_memory_need_only_be_listed_devices_must_fit() {
    let (nrt, allocatable) = two_zones("pod", ["1", "2"]);
    let burstable = one(QosClass::Burstable, &[("cpu", "6"), ("memory", "64Gi")]);
    assert_eq!(
        filter(&nrt, &allocatable, &burstable),
        Ok(Fit::Pod { numa: 0 })
    );
    let guaranteed = one(QosClass::Guaranteed, &[("cpu", "2"), ("memory", "1Gi")]);
    assert_eq!(
        filter(&nrt, &allocatable, &guaranteed),
        Ok(Fit::Pod { numa: 1 })
    );
    let device = one(QosClass::Burstable, &[("cpu", "6"), (NIC, "5")]);
    assert_eq!(
        verdict(&filter(&nrt, &allocatable, &device)).as_deref(),
        POD
    );
}

#[test]
fn fractional_cpu_compares_as_a_quantity() {
    let (nrt, allocatable) = two_zones("container", ["1", "2"]);
    let pod = one(QosClass::Guaranteed, &[("cpu", "1500m"), ("memory", "1Gi")]);
    assert_eq!(
        filter(&nrt, &allocatable, &pod),
        Ok(Fit::Containers(vec![1]))
    );
    let (nrt, allocatable) = two_zones("container", ["1", "1"]);
    assert_eq!(
        verdict(&filter(&nrt, &allocatable, &pod)).as_deref(),
        CONTAINER
    );
}

#[test]
fn only_single_numa_node_is_filtered() {
    let huge = one(QosClass::Guaranteed, &[("cpu", "100"), ("memory", "1Gi")]);
    for policy in [Policy::Restricted, Policy::BestEffort, Policy::None] {
        for scope in ["container", "pod"] {
            let (mut nrt, allocatable) = two_zones(scope, ["8", "8"]);
            nrt.attributes[0].value = policy.as_str().into();
            assert_eq!(
                filter(&nrt, &allocatable, &huge),
                Ok(Fit::NotAligned(policy))
            );
        }
    }
    // No attributes and no legacy policy: the default `none`.
    let (mut nrt, allocatable) = two_zones("pod", ["8", "8"]);
    nrt.attributes.clear();
    assert_eq!(
        filter(&nrt, &allocatable, &huge),
        Ok(Fit::NotAligned(Policy::None))
    );
    // The legacy field alone selects the handler.
    nrt.topology_policies = vec!["SingleNUMANodePodLevel".into()];
    assert_eq!(verdict(&filter(&nrt, &allocatable, &huge)).as_deref(), POD);
}

#[test]
fn best_effort_pods_pass_unless_they_ask_for_extended_resources() {
    let (nrt, allocatable) = two_zones("container", ["0", "0"]);
    let native = one(QosClass::BestEffort, &[("ephemeral-storage", "1Ti")]);
    assert_eq!(filter(&nrt, &allocatable, &native), Ok(Fit::BestEffort));
    // Even a zero request of an extended resource makes the pod filtered.
    let zero_device = one(QosClass::BestEffort, &[(NIC, "0")]);
    assert_eq!(
        filter(&nrt, &allocatable, &zero_device),
        Ok(Fit::Containers(vec![0]))
    );
    let prefixed_native = one(QosClass::BestEffort, &[("kubernetes.io/batch-cpu", "1")]);
    assert_eq!(
        filter(&nrt, &allocatable, &prefixed_native),
        Ok(Fit::BestEffort)
    );
}

#[test]
fn sidecars_are_checked_like_init_containers_and_named_as_sidecars() {
    let (nrt, allocatable) = two_zones("container", ["2", "2"]);
    let mut pod = one(QosClass::Guaranteed, &[("cpu", "2"), ("memory", "1Gi")]);
    pod.init_containers.push(Container {
        name: "proxy".into(),
        sidecar: true,
        requests: list(&[("cpu", "3"), ("memory", "1Gi")]),
    });
    let got = filter(&nrt, &allocatable, &pod);
    assert_eq!(
        verdict(&got).as_deref(),
        Some("cannot align sidecar container")
    );
    // A fitting sidecar takes nothing: the app container still gets node-0's two CPUs.
    pod.init_containers[0].requests = list(&[("cpu", "2"), ("memory", "1Gi")]);
    assert_eq!(
        filter(&nrt, &allocatable, &pod),
        Ok(Fit::Containers(vec![0]))
    );
}

#[test]
fn pod_scope_counts_overhead_and_the_largest_init_container() {
    let (nrt, allocatable) = two_zones("pod", ["4", "2"]);
    let mut pod = one(QosClass::Guaranteed, &[("cpu", "2"), ("memory", "1Gi")]);
    pod.containers.push(pod.containers[0].clone());
    assert_eq!(filter(&nrt, &allocatable, &pod), Ok(Fit::Pod { numa: 0 }));
    pod.overhead = list(&[("cpu", "100m")]);
    assert_eq!(verdict(&filter(&nrt, &allocatable, &pod)).as_deref(), POD);
    // Container scope ignores the overhead.
    let (nrt_c, allocatable_c) = two_zones("container", ["4", "2"]);
    assert_eq!(
        filter(&nrt_c, &allocatable_c, &pod),
        Ok(Fit::Containers(vec![0, 0]))
    );

    pod.overhead.clear();
    pod.init_containers.push(Container {
        name: "init".into(),
        sidecar: false,
        requests: list(&[("cpu", "5")]),
    });
    assert_eq!(
        pod.effective_request(),
        list(&[("cpu", "5"), ("memory", "2Gi")])
    );
    assert_eq!(verdict(&filter(&nrt, &allocatable, &pod)).as_deref(), POD);
}

#[test]
fn only_node_zones_with_ids_up_to_64_count() {
    let (mut nrt, allocatable) = two_zones("pod", ["0", "0"]);
    let rich = [("cpu", "64", "64"), ("memory", "8Gi", "8Gi")];
    for (name, kind) in [
        ("node-3", "Socket"),
        ("node-65", "Node"),
        ("socket-2", "Node"),
    ] {
        let mut z = zone(name, &rich);
        z.zone_type = kind.into();
        nrt.zones.push(z);
    }
    let pod = one(QosClass::Guaranteed, &[("cpu", "1"), ("memory", "1Gi")]);
    assert_eq!(verdict(&filter(&nrt, &allocatable, &pod)).as_deref(), POD);
    nrt.zones.push(zone("node-7", &rich));
    assert_eq!(filter(&nrt, &allocatable, &pod), Ok(Fit::Pod { numa: 7 }));
}

#[test]
fn malformed_objects_are_reported_not_refused() {
    let (mut nrt, allocatable) = two_zones("container", ["2", "2"]);
    nrt.zones[1].resources[0].available = Quantity("two".into());
    let pod = one(QosClass::Guaranteed, &[("cpu", "1"), ("memory", "1Gi")]);
    assert!(matches!(
        filter(&nrt, &allocatable, &pod),
        Err(Refusal::InvalidQuantity { ref zone, ref resource, .. }) if zone == "node-1" && resource == "cpu"
    ));
    // Two zones called node-0: the first fits, taking from the second goes below zero.
    let (mut nrt, allocatable) = two_zones("container", ["2", "2"]);
    nrt.zones[1].name = "node-0".into();
    nrt.zones[1].resources[0].available = Quantity("0".into());
    nrt.zones.insert(0, nrt.zones[1].clone());
    nrt.zones[0].resources[0].available = Quantity("2".into());
    assert_eq!(
        filter(&nrt, &allocatable, &pod),
        Err(Refusal::InconsistentAccounting {
            numa: 0,
            resource: "cpu".into()
        })
    );
}

#[test]
fn qos_classes_follow_compute_pod_qos() {
    let g = (
        list(&[("cpu", "1"), ("memory", "1Gi")]),
        list(&[("cpu", "1"), ("memory", "1Gi")]),
    );
    let cpu_only = (list(&[("cpu", "1")]), list(&[("cpu", "1")]));
    let devices = (list(&[(NIC, "1")]), list(&[(NIC, "1")]));
    let empty = (ResourceList::new(), ResourceList::new());
    let of = |cs: &[&(ResourceList, ResourceList)]| {
        QosClass::of_containers(cs.iter().map(|(r, l)| (r, l)))
    };
    assert_eq!(of(&[&g, &g]), QosClass::Guaranteed);
    assert_eq!(of(&[&g, &cpu_only]), QosClass::Burstable);
    assert_eq!(of(&[&g, &empty]), QosClass::Burstable);
    assert_eq!(of(&[&devices, &empty]), QosClass::BestEffort);
    assert_eq!(of(&[]), QosClass::BestEffort);
    // Zero amounts do not count.
    let zero = (list(&[("cpu", "0")]), list(&[("cpu", "0")]));
    assert_eq!(of(&[&zero]), QosClass::BestEffort);
}

/// A container request: cpu (whole CPUs), memory (MiB), devices.
fn request_strategy() -> impl Strategy<Value = (u32, u32, u32)> {
    (1u32..6, 1u32..512, 0u32..3)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Zone `room` of `zones` holds the pod's total plus a slack smaller than the first
    /// container; every other zone is short of the first container's cpu. The pod passes; once
    /// the pod's amounts are taken from that zone nothing can hold the first container, and the
    /// same pod is refused — at both scopes.
    #[test]
    fn a_pod_passes_while_a_zone_has_room_and_is_refused_once_it_is_taken(
        containers in prop::collection::vec(request_strategy(), 1..4),
        zones in 1usize..5,
        room_pick in 0usize..4,
        slack_pick in 0u32..1000,
        others_pick in prop::collection::vec(0u32..1000, 4),
        pod_scope in any::<bool>(),
    ) {
        let room = room_pick % zones;
        let first_cpu = containers[0].0;
        let total = containers.iter().fold((0, 0, 0), |t, c| (t.0 + c.0, t.1 + c.1, t.2 + c.2));
        let slack_cpu = slack_pick % first_cpu; // < the first container's cpu
        let mut nrt = NodeResourceTopology::named("n");
        for (id, pick) in others_pick.iter().copied().enumerate().take(zones) {
            let (cpu, memory, devices) = if id == room {
                (total.0 + slack_cpu, total.1 + slack_pick, total.2 + slack_pick % 3)
            } else {
                (pick % first_cpu, pick * 4, pick % 5)
            };
            let mut z = Zone::numa_node(id);
            z.resources.push(ResourceInfo::new("cpu", 64, 64, cpu.into()));
            z.resources.push(ResourceInfo::new("memory", 1 << 40, 1 << 40, u64::from(memory) << 20));
            z.resources.push(ResourceInfo::new(NIC, 16, 16, devices.into()));
            nrt.zones.push(z);
        }
        let scope = if pod_scope { "pod" } else { "container" };
        nrt.attributes = vec![
            AttributeInfo::new("topologyManagerPolicy", "single-numa-node"),
            AttributeInfo::new("topologyManagerScope", scope),
        ];
        let node = NodeAllocatable::from_zones(&nrt);
        let pod = PodRequests::new(
            QosClass::Guaranteed,
            containers
                .iter()
                .enumerate()
                .map(|(i, (cpu, mib, devices))| {
                    Container::named(&format!("c{i}"))
                        .request("cpu", Amount::units((*cpu).into()))
                        .request("memory", Amount::units(i64::from(*mib) << 20))
                        .request(NIC, Amount::units((*devices).into()))
                })
                .collect(),
        );

        let fit = filter(&nrt, &node, &pod);
        prop_assert!(fit.is_ok(), "{fit:?}");
        if pod_scope {
            // No zone below `room` has the first container's cpu, so `room` is the one chosen.
            prop_assert_eq!(fit.unwrap(), Fit::Pod { numa: room });
        }

        // Take the pod's total out of the zone that had room, and filter the same pod again.
        let taken = &mut nrt.zones[room].resources;
        taken[0] = ResourceInfo::new("cpu", 64, 64, slack_cpu.into());
        taken[1] = ResourceInfo::new("memory", 1 << 40, 1 << 40, u64::from(slack_pick) << 20);
        taken[2] = ResourceInfo::new(NIC, 16, 16, u64::from(slack_pick % 3));
        let refused = filter(&nrt, &node, &pod);
        match refused {
            Err(Refusal::Pod { ref resource }) if pod_scope => prop_assert_eq!(resource.as_str(), "cpu"),
            Err(Refusal::Container { kind: ContainerKind::App, ref name, ref resource }) if !pod_scope => {
                prop_assert_eq!(name.as_str(), "c0");
                prop_assert_eq!(resource.as_str(), "cpu");
            }
            other => prop_assert!(false, "{scope}: {other:?}"),
        }
    }
}
