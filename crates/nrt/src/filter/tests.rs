//! The filter against scheduler-plugins' own filter tables (pkg/noderesourcetopology/
//! filter_test.go at 903da7df: TestNodeResourceTopology, TestNodeResourceTopologyMultiContainer
//! PodScope, TestNodeResourceTopologyMultiContainerContainerScope), ported as data, then the rules
//! those tables leave out, then a property.

use proptest::prelude::*;

use super::*;
use crate::object::{AttributeInfo, Quantity, ResourceInfo, Zone};

/// A resource list as upstream's tables write it: name and quantity string.
type Res = &'static [(&'static str, &'static str)];

const NIC: &str = "vendor/nic1";
const NIC_NO_NUMA: &str = "vendor.com/old-nic-model";
const EXTENDED: &str = "namespace/extended";
const HP2M: &str = "hugepages-2Mi";

fn list(res: Res) -> ResourceList {
    res.iter()
        .map(|(name, q)| (name.to_string(), Amount::parse(q).unwrap()))
        .collect()
}

/// A zone as upstream's `MakeTopologyResInfo` builds it: capacity and available, no allocatable.
fn zone(name: &str, resources: &[(&str, &str, &str)]) -> Zone {
    Zone {
        name: name.to_owned(),
        zone_type: "Node".to_owned(),
        resources: resources
            .iter()
            .map(|(res, capacity, available)| ResourceInfo {
                name: res.to_string(),
                capacity: Quantity(capacity.to_string()),
                allocatable: Quantity("0".into()),
                available: Quantity(available.to_string()),
            })
            .collect(),
        ..Zone::default()
    }
}

fn nrt(name: &str, legacy_policy: &str, zones: Vec<Zone>) -> NodeResourceTopology {
    let mut nrt = NodeResourceTopology::named(name);
    nrt.topology_policies = vec![legacy_policy.to_owned()];
    nrt.zones = zones;
    nrt
}

/// A node: its NRT and its allocatable (the zones' resources plus `extra`, as upstream's
/// `makeResourceListFromZones` and the table's `node` lists give it).
fn node(nrt: NodeResourceTopology, extra: &[&str]) -> (NodeResourceTopology, NodeAllocatable) {
    let zone_names = nrt
        .zones
        .iter()
        .flat_map(|z| z.resources.iter().map(|r| r.name.clone()))
        .collect::<Vec<_>>();
    let allocatable = NodeAllocatable::new(
        zone_names
            .iter()
            .map(String::as_str)
            .chain(extra.iter().copied()),
    );
    (nrt, allocatable)
}

/// How a table builds a pod's containers from its request list.
#[derive(Clone, Copy)]
enum Shape {
    /// `makePodByResourceList`: one container, limits = requests.
    Same,
    /// `makePodByResourceListWithManyContainers`: n containers, limits = requests.
    Many(usize),
    /// `makePodWithReqByResourceList`: one container, no limits.
    RequestsOnly,
    /// `makePodWithReqAndLimitByResourceList`: one container with these limits.
    Limits(Res),
}

/// A pod whose QoS class is computed from requests and limits, as upstream's `GetPodQOS`.
fn pod(init: &[(ResourceList, ResourceList)], app: &[(ResourceList, ResourceList)]) -> PodRequests {
    let qos = QosClass::of_containers(app.iter().chain(init).map(|(r, l)| (r, l)));
    let containers = |list: &[(ResourceList, ResourceList)]| {
        list.iter()
            .enumerate()
            .map(|(i, (requests, _))| Container {
                name: format!("cnt-{}", i + 1),
                sidecar: false,
                requests: requests.clone(),
            })
            .collect::<Vec<_>>()
    };
    PodRequests {
        qos,
        init_containers: containers(init),
        containers: containers(app),
        overhead: ResourceList::new(),
    }
}

fn shaped(requests: Res, shape: Shape) -> PodRequests {
    let r = list(requests);
    let app = match shape {
        Shape::Same => vec![(r.clone(), r)],
        Shape::Many(n) => vec![(r.clone(), r); n],
        Shape::RequestsOnly => vec![(r, ResourceList::new())],
        Shape::Limits(limits) => vec![(r, list(limits))],
    };
    pod(&[], &app)
}

/// Upstream's verdict: `None` for success, or the status message.
fn verdict(result: &Result<Fit, Refusal>) -> Option<String> {
    result.as_ref().err().map(ToString::to_string)
}

/// TestNodeResourceTopology's five nodes.
fn table_nodes() -> Vec<(NodeResourceTopology, NodeAllocatable)> {
    let node1_zones = || {
        vec![
            zone(
                "node-0",
                &[
                    ("cpu", "20", "4"),
                    ("memory", "8Gi", "8Gi"),
                    (NIC, "30", "10"),
                ],
            ),
            zone(
                "node-1",
                &[
                    ("cpu", "30", "8"),
                    ("memory", "8Gi", "8Gi"),
                    (NIC, "30", "10"),
                ],
            ),
        ]
    };
    let pod_scope_zones = |second: &str| {
        vec![
            zone(
                "node-0",
                &[
                    ("cpu", "20", "2"),
                    ("memory", "8Gi", "4Gi"),
                    (NIC, "30", "5"),
                ],
            ),
            zone(
                second,
                &[
                    ("cpu", "30", "4"),
                    ("memory", "8Gi", "4Gi"),
                    (NIC, "30", "2"),
                ],
            ),
        ]
    };
    let node2_zones = vec![
        zone(
            "node-0",
            &[
                ("cpu", "20", "2"),
                ("memory", "8Gi", "4Gi"),
                (HP2M, "128Mi", "128Mi"),
                (NIC, "30", "5"),
            ],
        ),
        zone(
            "node-1",
            &[
                ("cpu", "30", "4"),
                ("memory", "8Gi", "4Gi"),
                (HP2M, "128Mi", "128Mi"),
                (NIC, "30", "2"),
            ],
        ),
    ];
    vec![
        node(
            nrt("node1", "SingleNUMANodeContainerLevel", node1_zones()),
            &[],
        ),
        node(
            nrt("node2", "SingleNUMANodeContainerLevel", node2_zones),
            &[NIC_NO_NUMA],
        ),
        node(
            nrt("node3", "SingleNUMANodePodLevel", pod_scope_zones("node-1")),
            &[],
        ),
        node(
            nrt(
                "badly_formed_node",
                "SingleNUMANodePodLevel",
                pod_scope_zones("node-75"),
            ),
            &[],
        ),
        node(
            nrt("extended", "SingleNUMANodeContainerLevel", node1_zones()),
            &[EXTENDED],
        ),
    ]
}

const CONTAINER: Option<&str> = Some("cannot align container");
const POD: Option<&str> = Some("cannot align pod");
const INIT: Option<&str> = Some("cannot align init container");

// TestNodeResourceTopology: (name, requests, shape, node index, expected message).
#[rustfmt::skip]
const NODE_RESOURCE_TOPOLOGY: &[(&str, Res, Shape, usize, Option<&str>)] = &[
    ("Guaranteed QoS, pod with extended resource fit",
        &[("cpu", "2"), ("memory", "2Gi"), (EXTENDED, "1"), (NIC, "3")], Shape::Same, 4, None),
    ("Guaranteed QoS, pod with extended resource no devices; pod fit",
        &[("cpu", "2"), ("memory", "2Gi"), (EXTENDED, "1")], Shape::Same, 4, None),
    ("Best effort QoS, pod fit", &[], Shape::Many(0), 0, None),
    ("Best effort QoS requesting devices, Pod Scope Topology policy; pod fit",
        &[(NIC, "5")], Shape::Same, 2, None),
    ("Best effort QoS requesting devices, Pod Scope Topology policy; pod doesn't fit",
        &[(NIC, "20")], Shape::Same, 2, POD),
    ("Best effort QoS requesting devices, Container Scope Topology policy; pod fit",
        &[(NIC, "5")], Shape::Same, 1, None),
    ("Best effort QoS requesting devices, Container Scope Topology policy; pod doesn't fit",
        &[(NIC, "20")], Shape::Same, 0, CONTAINER),
    // Upstream's name says "doesn't fit"; its expectation (and this port's) is a fit.
    ("Best effort QoS requesting devices and extended resources, Container Scope Topology policy; pod doesn't fit",
        &[(EXTENDED, "1"), (NIC, "10")], Shape::Same, 4, None),
    ("Best effort QoS, requesting CPU, memory (enough on NUMA) and devices (not enough), Container Scope Topology policy; pod doesn't fit",
        &[("cpu", "3"), ("memory", "3Gi"), (NIC, "11")],
        Shape::Limits(&[("cpu", "4"), ("memory", "4Gi"), (NIC, "11")]), 1, CONTAINER),
    ("Best effort QoS, requesting CPU, memory (enough on NUMA) and devices (not enough), Pod Scope Topology policy; pod doesn't fit",
        &[("cpu", "1"), ("memory", "1Gi"), (NIC, "6")],
        Shape::Limits(&[("cpu", "2"), ("memory", "2Gi"), (NIC, "6")]), 2, POD),
    ("Best effort QoS requesting CPU, memory (enough on NUMA) and devices, Pod Scope Topology policy; pod fit",
        &[("cpu", "1"), ("memory", "1Gi"), (NIC, "5")],
        Shape::Limits(&[("cpu", "2"), ("memory", "2Gi"), (NIC, "5")]), 2, None),
    ("Best effort QoS requesting CPU, memory (not enough on NUMA) and devices, Pod Scope Topology policy; pod fit",
        &[("cpu", "19"), ("memory", "5Gi"), (NIC, "5")],
        Shape::Limits(&[("cpu", "20"), ("memory", "6Gi"), (NIC, "5")]), 2, None),
    ("Best effort QoS requesting CPU, memory (enough on NUMA) and devices, Container Scope Topology policy; pod fit",
        &[("cpu", "3"), ("memory", "3Gi"), (NIC, "5")],
        Shape::Limits(&[("cpu", "4"), ("memory", "4Gi"), (NIC, "5")]), 1, None),
    ("Best effort QoS requesting CPU, memory (not enough on NUMA) and devices, Container Scope Topology policy; pod fit",
        &[("cpu", "5"), ("memory", "5Gi"), (NIC, "5")],
        Shape::Limits(&[("cpu", "6"), ("memory", "6Gi"), (NIC, "5")]), 1, None),
    ("Guaranteed QoS, minimal, pod fit", &[("cpu", "2"), ("memory", "2Gi")], Shape::Same, 0, None),
    // The requests are node1 zone node-1's available cpu and memory.
    ("Guaranteed QoS, minimal, saturating zone, pod fit",
        &[("cpu", "8"), ("memory", "8Gi")], Shape::Same, 0, None),
    ("Guaranteed QoS, zero quantity of unavailable resource, pod fit",
        &[("cpu", "2"), ("memory", "2Gi"), (HP2M, "0"), (NIC, "3")], Shape::Same, 0, None),
    ("Guaranteed QoS, pod fit", &[("cpu", "2"), ("memory", "2Gi"), (NIC, "3")], Shape::Same, 1, None),
    ("Guaranteed QoS, hugepages, pod fit",
        &[("cpu", "2"), ("memory", "2Gi"), (HP2M, "64Mi"), (NIC, "3")], Shape::Same, 1, None),
    ("Burstable QoS, pod fit", &[("cpu", "4"), (NIC, "3")], Shape::Same, 1, None),
    ("Burstable QoS, requesting CPU and devices (not enough), Container Scope Topology policy; pod doesn't fit",
        &[("cpu", "4"), (NIC, "11")], Shape::Same, 1, CONTAINER),
    ("Burstable QoS, requesting CPU and devices (not enough), Pod Scope Topology policy; pod doesn't fit",
        &[("cpu", "2"), (NIC, "6")], Shape::Same, 2, POD),
    ("Burstable QoS requesting CPU (enough on NUMA) and devices, Pod Scope Topology policy; pod fit",
        &[("cpu", "2"), (NIC, "5")], Shape::Same, 2, None),
    ("BurstableQoS requesting CPU (not enough on NUMA) and devices, Pod Scope Topology policy; pod fit",
        &[("cpu", "20"), (NIC, "5")], Shape::Same, 2, None),
    ("Burstable QoS requesting CPU (enough on NUMA) and devices, Container Scope Topology policy; pod fit",
        &[("cpu", "2"), (NIC, "5")], Shape::Same, 1, None),
    ("Burstable QoS requesting CPU (not enough on NUMA) and devices, Container Scope Topology policy; pod fit",
        &[("cpu", "4"), (NIC, "5")], Shape::Same, 1, None),
    ("Burstable QoS, requesting memory (enough on NUMA) and devices (not enough), Container Scope Topology policy; pod doesn't fit",
        &[("memory", "2Gi"), (NIC, "11")], Shape::Same, 1, CONTAINER),
    ("Burstable QoS, requesting memory (enough on NUMA) and devices (not enough), Pod Scope Topology policy; pod doesn't fit",
        &[("memory", "2Gi"), (NIC, "6")], Shape::Same, 2, POD),
    ("Burstable QoS requesting memory (enough on NUMA) and devices, Pod Scope Topology policy; pod fit",
        &[("memory", "2Gi"), (NIC, "5")], Shape::Same, 2, None),
    ("Burstable QoS requesting memory (not enough on NUMA) and devices, Pod Scope Topology policy; pod fit",
        &[("memory", "5Gi"), (NIC, "5")], Shape::Same, 2, None),
    ("Burstable QoS requesting memory (enough on NUMA) and devices, Container Scope Topology policy; pod fit",
        &[("memory", "4Gi"), (NIC, "5")], Shape::Same, 1, None),
    ("Burstable QoS requesting memory (not enough on NUMA) and devices, Container Scope Topology policy; pod fit",
        &[("memory", "5Gi"), (NIC, "5")], Shape::Same, 1, None),
    ("Burstable QoS, requesting CPU, memory (enough on NUMA) and devices (not enough), Container Scope Topology policy; pod doesn't fit",
        &[("cpu", "4"), ("memory", "4Gi"), (NIC, "11")], Shape::RequestsOnly, 1, CONTAINER),
    ("Burstable QoS, requesting CPU, memory (enough on NUMA) and devices (not enough), Pod Scope Topology policy; pod doesn't fit",
        &[("cpu", "2"), ("memory", "2Gi"), (NIC, "6")], Shape::RequestsOnly, 2, POD),
    ("Burstable QoS requesting CPU, memory (enough on NUMA) and devices, Pod Scope Topology policy; pod fit",
        &[("cpu", "2"), ("memory", "2Gi"), (NIC, "5")], Shape::RequestsOnly, 2, None),
    ("Burstable QoS requesting CPU, memory (not enough on NUMA) and devices, Pod Scope Topology policy; pod fit",
        &[("cpu", "20"), ("memory", "5Gi"), (NIC, "5")], Shape::RequestsOnly, 2, None),
    ("Burstable QoS requesting CPU, memory (enough on NUMA) and devices, Container Scope Topology policy; pod fit",
        &[("cpu", "4"), ("memory", "4Gi"), (NIC, "5")], Shape::RequestsOnly, 1, None),
    ("Burstable QoS requesting CPU, memory (not enough on NUMA) and devices, Container Scope Topology policy; pod fit",
        &[("cpu", "5"), ("memory", "5Gi"), (NIC, "5")], Shape::RequestsOnly, 1, None),
    ("Burstable QoS with extended resources, pod fit",
        &[(EXTENDED, "1"), ("cpu", "4"), (NIC, "3")], Shape::Same, 4, None),
    ("Guaranteed QoS, hugepages, pod doesn't fit",
        &[("cpu", "2"), ("memory", "2Gi"), (HP2M, "256Mi"), (NIC, "3")], Shape::Same, 1, CONTAINER),
    ("Guaranteed QoS, pod doesn't fit",
        &[("cpu", "9"), ("memory", "1Gi"), (NIC, "3")], Shape::Same, 0, CONTAINER),
    ("Guaranteed QoS, pod fit",
        &[("cpu", "2"), ("memory", "1Gi"), ("vendor/notexistingnic", "0")], Shape::Same, 0, None),
    ("Guaranteed QoS Topology Scope, pod doesn't fit",
        &[("cpu", "3"), ("memory", "1Gi"), ("vendor/notexistingnic", "0")], Shape::Many(3), 2, POD),
    ("Guaranteed QoS Topology Scope, minimal, pod fit",
        &[("cpu", "1"), ("memory", "1Gi")], Shape::Same, 2, None),
    // The requests are badly_formed_node zone node-0's available cpu and memory.
    ("Guaranteed QoS TopologyScope, minimal, saturating zone, pod fit",
        &[("cpu", "2"), ("memory", "4Gi")], Shape::Same, 3, None),
    ("Guaranteed QoS Topology Scope, pod fit",
        &[("cpu", "1"), ("memory", "1Gi"), ("vendor/notexistingnic", "0")], Shape::Many(3), 2, None),
    ("Guaranteed QoS Topology Scope, invalid node",
        &[("cpu", "1"), ("memory", "1Gi"), ("vendor/notexistingnic", "0")], Shape::Many(3), 3, POD),
    ("Guaranteed QoS, hugepages, non-NUMA affine NIC, pod fit",
        &[("cpu", "2"), ("memory", "2Gi"), (HP2M, "64Mi"), (NIC_NO_NUMA, "3")], Shape::Same, 1, None),
    ("Guaranteed QoS, ephemeral-storage (non-NUMA), pod fit",
        &[("cpu", "2"), ("memory", "2Gi"), ("ephemeral-storage", "100Mi")], Shape::Same, 1, None),
];

#[test]
fn upstream_node_resource_topology_table() {
    let nodes = table_nodes();
    assert_eq!(NODE_RESOURCE_TOPOLOGY.len(), 49);
    for (name, requests, shape, index, want) in NODE_RESOURCE_TOPOLOGY {
        let (nrt, allocatable) = &nodes[*index];
        let got = filter(nrt, allocatable, &shaped(requests, *shape));
        assert_eq!(verdict(&got).as_deref(), *want, "{name}: {got:?}");
    }
}

#[test]
fn upstream_table_qos_classes_are_those_upstream_names() {
    // The tables name the QoS class their pod builders produce; the port computes it.
    let class = |requests, shape| shaped(requests, shape).qos;
    assert_eq!(
        class(&[("cpu", "2"), ("memory", "2Gi"), (NIC, "3")], Shape::Same),
        QosClass::Guaranteed
    );
    assert_eq!(
        class(&[("cpu", "4"), (NIC, "3")], Shape::Same),
        QosClass::Burstable
    );
    assert_eq!(class(&[(NIC, "5")], Shape::Same), QosClass::BestEffort);
    assert_eq!(
        class(&[("cpu", "2"), ("memory", "2Gi")], Shape::RequestsOnly),
        QosClass::Burstable
    );
    assert_eq!(
        class(
            &[("cpu", "1"), ("memory", "1Gi")],
            Shape::Limits(&[("cpu", "2"), ("memory", "2Gi")])
        ),
        QosClass::Burstable
    );
}

/// The node both multi-container tables use; `policy` is its legacy policy value.
fn host0(policy: &str) -> (NodeResourceTopology, NodeAllocatable) {
    node(
        nrt(
            "host0",
            policy,
            vec![
                zone(
                    "node-0",
                    &[
                        ("cpu", "32", "30"),
                        ("memory", "64Gi", "60Gi"),
                        (HP2M, "384Mi", "384Mi"),
                        (NIC, "16", "16"),
                    ],
                ),
                zone(
                    "node-1",
                    &[
                        ("cpu", "32", "32"),
                        ("memory", "64Gi", "64Gi"),
                        (HP2M, "512Mi", "512Mi"),
                        (NIC, "32", "32"),
                    ],
                ),
            ],
        ),
        &[],
    )
}

/// Containers with limits = requests (`withMultiContainers`).
fn guaranteed(init: &[Res], app: &[Res]) -> PodRequests {
    let both = |r: &Res| (list(r), list(r));
    pod(
        &init.iter().map(both).collect::<Vec<_>>(),
        &app.iter().map(both).collect::<Vec<_>>(),
    )
}

// TestNodeResourceTopologyMultiContainerPodScope.
#[rustfmt::skip]
const MULTI_CONTAINER_POD_SCOPE: &[(&str, &[Res], Option<&str>)] = &[
    ("gu pod fits only on a numa node", &[
        &[("cpu", "2"), ("memory", "2Gi")],
        &[("cpu", "4"), ("memory", "8Gi")],
        &[("cpu", "26"), ("memory", "32Gi"), (HP2M, "512Mi"), (NIC, "26")],
    ], None),
    ("gu pod does not fit - not enough CPUs available on any NUMA node", &[
        &[("cpu", "2"), ("memory", "2Gi")],
        &[("cpu", "8"), ("memory", "8Gi")],
        &[("cpu", "26"), ("memory", "26Gi"), (HP2M, "52Mi"), (NIC, "26")],
    ], POD),
    ("gu pod does not fit - not enough memory available on any NUMA node", &[
        &[("cpu", "2"), ("memory", "4Gi")],
        &[("cpu", "4"), ("memory", "16Gi")],
        &[("cpu", "26"), ("memory", "52Gi"), (HP2M, "52Mi"), (NIC, "26")],
    ], POD),
    ("gu pod does not fit - not enough Hugepages available on any NUMA node", &[
        &[("cpu", "2"), ("memory", "2Gi")],
        &[("cpu", "4"), ("memory", "8Gi")],
        &[("cpu", "26"), ("memory", "32Gi"), (HP2M, "3328Mi"), (NIC, "26")],
    ], POD),
    ("gu pod does not fit - not enough devices available on any NUMA node", &[
        &[("cpu", "2"), ("memory", "2Gi")],
        &[("cpu", "4"), ("memory", "8Gi")],
        &[("cpu", "26"), ("memory", "26Gi"), (HP2M, "52Mi"), (NIC, "52")],
    ], POD),
];

#[test]
fn upstream_multi_container_pod_scope_table() {
    let (nrt, allocatable) = host0("SingleNUMANodePodLevel");
    for (name, app, want) in MULTI_CONTAINER_POD_SCOPE {
        let got = filter(&nrt, &allocatable, &guaranteed(&[], app));
        assert_eq!(verdict(&got).as_deref(), *want, "{name}: {got:?}");
    }
    // The fitting pod goes to node-1, the only zone with 512Mi of huge pages.
    let fits = guaranteed(&[], MULTI_CONTAINER_POD_SCOPE[0].1);
    assert_eq!(filter(&nrt, &allocatable, &fits), Ok(Fit::Pod { numa: 1 }));
}

/// (description, init containers, app containers, expected message).
type ContainerScopeCase = (
    &'static str,
    &'static [Res],
    &'static [Res],
    Option<&'static str>,
);

// TestNodeResourceTopologyMultiContainerContainerScope.
#[rustfmt::skip]
const MULTI_CONTAINER_CONTAINER_SCOPE: &[ContainerScopeCase] = &[
    ("[1][tier3] single container with good allocation - fit",
        &[], &[&[("cpu", "2"), ("memory", "4G")]], None),
    ("[2][tier3] single container with cpu over allocation - fit",
        &[], &[&[("cpu", "40"), ("memory", "4G")]], CONTAINER),
    ("[2][tier3] single container with memory over allocation - fit",
        &[], &[&[("cpu", "2"), ("memory", "100G")]], CONTAINER),
    ("[2][tier3] single container with cpu and memory over allocation - fit",
        &[], &[&[("cpu", "40"), ("memory", "100G")]], CONTAINER),
    ("[4][tier2] multi-containers with good allocation, spread across NUMAs - fit",
        &[], &[&[("cpu", "20"), ("memory", "40G")], &[("cpu", "20"), ("memory", "40G")]], None),
    ("[4][tier1] multi containers with good devices and hugepages allocation, spread across NUMAs - fit",
        &[], &[
            &[("cpu", "2"), ("memory", "6G"), (HP2M, "500Mi"), (NIC, "16")],
            &[("cpu", "2"), ("memory", "6G"), (HP2M, "50Mi"), (NIC, "8")],
        ], None),
    ("[7][tier1] init container with cpu over allocation, multi-containers with good allocation - not fit",
        &[&[("cpu", "40"), ("memory", "40G")]],
        &[&[("cpu", "1"), ("memory", "4G")], &[("cpu", "1"), ("memory", "4G")]], INIT),
    ("[7][tier1] init container with memory over allocation, multi-containers with good allocation - not fit",
        &[&[("cpu", "4"), ("memory", "70G")]],
        &[&[("cpu", "1"), ("memory", "4G")], &[("cpu", "1"), ("memory", "4G")]], INIT),
    ("[11][tier1] init container with good allocation, multi-containers spread across NUMAs - fit",
        &[&[("cpu", "4"), ("memory", "10G")]],
        &[&[("cpu", "20"), ("memory", "40G")], &[("cpu", "20"), ("memory", "40G")]], None),
    ("[17][tier1] multi init containers with good allocation, multi-containers spread across NUMAs - fit",
        &[&[("cpu", "4"), ("memory", "10G")], &[("cpu", "4"), ("memory", "10G")], &[("cpu", "4"), ("memory", "10G")]],
        &[&[("cpu", "20"), ("memory", "40G")], &[("cpu", "20"), ("memory", "40G")], &[("cpu", "6"), ("memory", "10G")]],
        None),
    ("[24][tier1] multi init containers with good allocation, multi-containers with over cpu allocation - not fit",
        &[&[("cpu", "30"), ("memory", "10G")], &[("cpu", "30"), ("memory", "10G")]],
        &[&[("cpu", "20"), ("memory", "40G")], &[("cpu", "20"), ("memory", "40G")], &[("cpu", "20"), ("memory", "6G")]],
        CONTAINER),
    ("[27][tier1] multi init containers with good allocation, container with cpu over allocation - not fit",
        &[&[("cpu", "30"), ("memory", "10G")], &[("cpu", "30"), ("memory", "10G")]],
        &[&[("cpu", "35"), ("memory", "40G")]], CONTAINER),
    ("[28][tier1] multi init containers with good allocation, multi-containers with good allocation - fit",
        &[&[("cpu", "30"), ("memory", "10G")], &[("cpu", "30"), ("memory", "10G")]],
        &[&[("cpu", "20"), ("memory", "40G")], &[("cpu", "20"), ("memory", "40G")]], None),
    ("[29][tier1] multi init containers when sum of their cpus requests (together) is over allocatable, multi-containers with good allocation - fit",
        &[&[("cpu", "30"), ("memory", "10G")], &[("cpu", "30"), ("memory", "10G")], &[("cpu", "30"), ("memory", "10G")]],
        &[&[("cpu", "20"), ("memory", "40G")], &[("cpu", "20"), ("memory", "40G")], &[("cpu", "2"), ("memory", "6G")]],
        None),
    ("[29][tier1] multi init containers when sum of their memory requests (together) is over allocatable, multi-containers with good allocation - fit",
        &[&[("cpu", "3"), ("memory", "50G")], &[("cpu", "3"), ("memory", "50G")], &[("cpu", "3"), ("memory", "50G")]],
        &[&[("cpu", "20"), ("memory", "40G")], &[("cpu", "20"), ("memory", "40G")], &[("cpu", "2"), ("memory", "6G")]],
        None),
    ("[32][tier1] multi init containers with over cpu allocation - not fit",
        &[&[("cpu", "40"), ("memory", "50G")], &[("cpu", "3"), ("memory", "50G")], &[("cpu", "3"), ("memory", "50G")]],
        &[&[("cpu", "20"), ("memory", "40G")], &[("cpu", "2"), ("memory", "6G")]], INIT),
    ("[32][tier1] multi init containers with over memory allocation - not fit",
        &[&[("cpu", "20"), ("memory", "50G")], &[("cpu", "40"), ("memory", "50G")], &[("cpu", "3"), ("memory", "50G")]],
        &[&[("cpu", "20"), ("memory", "40G")], &[("cpu", "2"), ("memory", "6G")]], INIT),
];

#[test]
fn upstream_multi_container_container_scope_table() {
    let (nrt, allocatable) = host0("SingleNUMANodeContainerLevel");
    assert_eq!(MULTI_CONTAINER_CONTAINER_SCOPE.len(), 17);
    for (name, init, app, want) in MULTI_CONTAINER_CONTAINER_SCOPE {
        let got = filter(&nrt, &allocatable, &guaranteed(init, app));
        assert_eq!(verdict(&got).as_deref(), *want, "{name}: {got:?}");
    }
    // "[4][tier2]": the first container takes node-0, the second no longer fits there.
    let spread = guaranteed(&[], MULTI_CONTAINER_CONTAINER_SCOPE[4].2);
    assert_eq!(
        filter(&nrt, &allocatable, &spread),
        Ok(Fit::Containers(vec![0, 1]))
    );
    // "[24][tier1]": the third app container is the one refused, and says why.
    let third = guaranteed(
        MULTI_CONTAINER_CONTAINER_SCOPE[10].1,
        MULTI_CONTAINER_CONTAINER_SCOPE[10].2,
    );
    assert_eq!(
        filter(&nrt, &allocatable, &third),
        Err(Refusal::Container {
            kind: ContainerKind::App,
            name: "cnt-3".into(),
            resource: "cpu".into()
        })
    );
}

mod rules;
