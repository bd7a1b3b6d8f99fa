//! Pods with pod-level resources (`spec.resources`, KEP-2837): with v1.36's default
//! `PodLevelResourceManagers` off, the static policy gives their Guaranteed containers no
//! exclusive CPUs and no hints (upstream `policy_static.go` `Allocate`,
//! `GetTopologyHints`, `GetPodTopologyHints`: "pod is using pod-level resources but the
//! PodLevelResourceManagers feature gate is not enabled").

use corral_cpumgr::Policy;
use corral_topology::{ResourceRequirements, TopologyHint};

use crate::support::static_cases::policy;
use crate::support::{make_pod, state};

fn index() -> std::sync::Arc<corral_cpumgr::TopologyIndex> {
    crate::support::topologies::index(&corral_testkit::upstream_topologies::dual_socket_ht())
}

#[test]
fn guaranteed_containers_of_pod_level_pods_stay_in_the_shared_pool() {
    let mut p = policy(index(), 1, "", &[]);
    let mut pod = make_pod("pod-level", "app", 2000, 2000);
    let mut resources = ResourceRequirements::default();
    resources.requests.cpu_millis = Some(4000);
    resources.limits.cpu_millis = Some(4000);
    resources.requests.memory_bytes = Some(2_000_000_000);
    resources.limits.memory_bytes = Some(2_000_000_000);
    pod.resources = Some(resources);
    let container = pod.containers[0].clone();
    let mut st = state("1-11", &[]);

    assert_eq!(p.hints_for_container(&st, &pod, &container), None);
    assert_eq!(p.hints_for_pod(&st, &pod), None);
    p.allocate(&mut st, &pod, &container, TopologyHint::default())
        .unwrap();
    assert!(st.cpu_set("pod-level", "app").is_none());
    assert_eq!(st.default_cpu_set().to_string(), "1-11");

    // The same pod without pod-level resources gets its two CPUs.
    pod.resources = None;
    assert!(p.hints_for_container(&st, &pod, &container).is_some());
    p.allocate(&mut st, &pod, &container, TopologyHint::default())
        .unwrap();
    assert_eq!(st.cpu_set("pod-level", "app").map(|c| c.len()), Some(2));
}
