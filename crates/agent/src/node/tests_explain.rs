//! A refusal's explanation: the NUMA nodes as the refused decision saw them, each
//! provider's hints and the merge; an admission has none.

use super::Admission;
use super::tests::{admitted, pod, started};

fn total_free(nodes: &[super::numa_resources::NumaNodeResources]) -> u64 {
    nodes
        .iter()
        .filter_map(|n| n.cpus.as_ref())
        .map(|c| c.free)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_explains_each_numa_node_and_the_hints() {
    let (_dir, _config, node) =
        started("32em64t-2n8c+dax+nvme+mic+dimms", "single-numa-node", &[]).await;
    admitted(&node, pod("first", &[1, 1])).await;
    let free_before = total_free(&node.numa_resources());
    assert_eq!(free_before, 16 - 1 - 2, "CPU 0 reserved, 2 held");
    // c0 fits a node and is allocated; c1 needs more CPUs than a node has (8 each).
    let answer = node
        .admit(pod("second", &[3, 9]), Vec::new())
        .await
        .unwrap();
    let Admission::Rejected {
        reason,
        explanation: Some(explanation),
        ..
    } = answer
    else {
        panic!("not a refusal with an explanation: {answer:?}");
    };
    assert_eq!(reason, "TopologyAffinityError");
    assert_eq!(explanation.container.as_deref(), Some("c1"));
    // As the decision saw them: c0's 3 CPUs were held then; given back since.
    let ids: Vec<usize> = explanation.numa_nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, [0, 1]);
    assert_eq!(total_free(&explanation.numa_nodes), free_before - 3);
    assert_eq!(total_free(&node.numa_resources()), free_before);
    for numa in &explanation.numa_nodes {
        let cpus = numa.cpus.as_ref().expect("cpu was asked for");
        assert_eq!(cpus.total, 8);
        assert_eq!(cpus.reserved, u64::from(numa.id == 0));
        assert_eq!(cpus.total - cpus.reserved - cpus.exclusive, cpus.free);
        let listed: corral_topology::CpuSet = cpus.free_cpus.parse().unwrap();
        assert_eq!(listed.len() as u64, cpus.free);
        assert!(numa.memory.is_empty(), "no static memory policy: {numa:?}");
    }
    let providers: Vec<&str> = explanation
        .providers
        .iter()
        .map(|p| p.provider.as_str())
        .collect();
    assert_eq!(
        providers,
        ["cpu manager", "device manager", "dra", "memory manager"]
    );
    let cpu = &explanation.providers[0].resources;
    assert_eq!(cpu.len(), 1);
    assert_eq!(cpu[0].resource, "cpu");
    let hints = cpu[0]
        .hints
        .as_ref()
        .expect("the CPU manager has hints for cpu");
    assert!(!hints.is_empty());
    assert!(
        hints
            .iter()
            .all(|h| h.numa_affinity.as_deref() == Some(&[0, 1][..])),
        "9 CPUs fit only both nodes: {hints:?}"
    );
    assert!(!explanation.policy_admitted);
    assert!(!explanation.best_hint.preferred);
    let line = explanation.to_string();
    for part in [
        "container c1: NUMA 0 free cpu=",
        "hints: cpu manager cpu=[{0,1}",
        "best hint",
    ] {
        assert!(line.contains(part), "{part:?} not in {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_by_an_allocation_says_the_policy_admitted_the_hint() {
    let (_dir, _config, node) =
        started("16em64t-4s2c2t", "none", &[("full-pcpus-only", "true")]).await;
    let answer = node.admit(pod("odd", &[3]), Vec::new()).await.unwrap();
    let Admission::Rejected {
        reason,
        explanation,
        ..
    } = answer
    else {
        panic!("admitted: {answer:?}");
    };
    assert_eq!(reason, "SMTAlignmentError");
    // The `none` topology policy merges no hints: nothing to explain.
    assert!(explanation.is_none(), "{explanation:?}");
}

/// Under the static memory policy an explanation shows each node's free memory of the
/// types asked for (not the others), and the memory manager's hints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_for_memory_shows_each_nodes_free_memory() {
    use super::tests_concurrent::{config, guaranteed, machine, open};
    const MI: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let node = open(
        &config(dir.path(), "single-numa-node", "container"),
        &machine(2, 4, 1024, 8),
    )
    .await;
    let answer = node
        .admit(
            guaranteed("big", serde_json::json!({"cpu": "1", "memory": "1536Mi"})),
            Vec::new(),
        )
        .await
        .unwrap();
    let Admission::Rejected {
        explanation: Some(explanation),
        ..
    } = answer
    else {
        panic!("not a refusal with an explanation: {answer:?}");
    };
    let free: Vec<u64> = explanation
        .numa_nodes
        .iter()
        .map(|n| n.memory["memory"].available)
        .collect();
    // Each node: 1024 MiB less its 16 MiB of huge pages; node 0 less 100 MiB reserved.
    assert_eq!(
        free,
        [(1024 - 16 - 100) * MI, (1024 - 16) * MI],
        "{explanation:?}"
    );
    assert!(
        explanation
            .numa_nodes
            .iter()
            .all(|n| !n.memory.contains_key("hugepages-2Mi")),
        "huge pages were not asked for: {explanation:?}"
    );
    let memory = explanation
        .providers
        .iter()
        .find(|p| p.provider == "memory manager")
        .unwrap();
    let hints = memory.resources[0].hints.as_ref().unwrap();
    assert_eq!(memory.resources[0].resource, "memory");
    assert!(
        hints
            .iter()
            .all(|h| h.numa_affinity.as_deref() == Some(&[0, 1][..])),
        "{hints:?}"
    );
}
