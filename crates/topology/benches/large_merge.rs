//! The merge over hint families on large machines (corral-testkit's `large_machines`): a
//! GB200-like tray (2 CPU nodes + 32 memory-only nodes) and 64 nodes, with a CPU family (4
//! CPUs), a GPU family (1 device) and a memory family (4 GiB: one node; or wider than any
//! node, where no preferred merge exists and the non-preferred search runs), for every
//! policy. Upstream would walk 2³⁴ and 2⁶⁴ sets of nodes per provider; the target is under
//! 1 ms per decision.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use corral_testkit::large_machines::{LargeMachine, gb200, synthetic64};
use corral_topology::topologymanager::{
    Demand, HintFamily, HintSet, Preferred, ProviderHintSets, min_affinity_size,
};
use corral_topology::{NumaInfo, NumaMask, NumaNode, Policy, PolicyName, PolicyOptions};
use criterion::{Criterion, criterion_group, criterion_main};

const GI: u64 = 1 << 30;

fn family(ids: &[usize], per_node: Vec<(usize, u64)>, need: u64) -> HintFamily {
    let demand = Demand::per_node(per_node, need);
    let size = min_affinity_size(ids, std::slice::from_ref(&demand));
    HintFamily::upward(
        ids,
        NumaMask::from_u64(u64::MAX),
        NumaMask::EMPTY,
        vec![demand],
        Preferred::Size(size),
    )
}

fn providers(machine: &LargeMachine, memory: u64) -> Vec<ProviderHintSets> {
    let ids: Vec<usize> = machine.nodes.iter().map(|n| n.id).collect();
    let cpu_ids: Vec<usize> = machine
        .nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| n.id)
        .collect();
    let cpus = family(
        &cpu_ids,
        machine
            .nodes
            .iter()
            .map(|n| (n.id, n.cpus.len() as u64))
            .collect(),
        4,
    );
    let mut gpus: BTreeMap<usize, u64> = BTreeMap::new();
    for d in &machine.devices {
        *gpus.entry(d.numa).or_default() += 1;
    }
    let gpus = family(&ids, gpus.into_iter().collect(), 1);
    let memory = family(
        &ids,
        machine
            .nodes
            .iter()
            .map(|n| (n.id, n.memory_bytes))
            .collect(),
        memory,
    );
    let one = |name: &str, f: HintFamily| {
        Some(BTreeMap::from([(
            name.to_owned(),
            Some(HintSet::Family(f)),
        )]))
    };
    vec![
        one("cpu", cpus),
        one(machine.resource, gpus),
        one("memory", memory),
    ]
}

fn policy(machine: &LargeMachine, name: PolicyName, closest: bool) -> Policy {
    let nodes: Vec<NumaNode> = machine
        .nodes
        .iter()
        .map(|n| NumaNode {
            id: n.id,
            distances: Some(n.distances.clone()),
        })
        .collect();
    let options = PolicyOptions {
        prefer_closest_numa: closest,
        max_allowable_numa_nodes: 64,
    };
    Policy::new(
        name,
        NumaInfo::new(&nodes, options.numa_distances()).expect("machine"),
        options,
    )
}

fn large_merge(c: &mut Criterion) {
    let mut group = c.benchmark_group("large_merge");
    for (label, machine, wide) in [
        ("gb200", gb200(), 600 * GI),
        ("numa64", synthetic64(), 12 * GI),
    ] {
        for (fit, memory) in [("node", 4 * GI), ("wide", wide)] {
            let sets = providers(&machine, memory);
            for (name, closest) in [
                (PolicyName::BestEffort, false),
                (PolicyName::BestEffort, true),
                (PolicyName::Restricted, false),
                (PolicyName::SingleNumaNode, false),
            ] {
                let policy = policy(&machine, name, closest);
                let id = format!(
                    "{label}/{fit}/{name}{}",
                    if closest { "+closest" } else { "" }
                );
                group.bench_function(id, |b| b.iter(|| policy.merge_sets(black_box(&sets))));
            }
        }
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(20).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_millis(700)); targets = large_merge);
criterion_main!(benches);
