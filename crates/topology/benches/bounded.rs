//! Decisions on adversarial inputs under the step budget (issue 29, "bounded decisions"):
//! corral-testkit's `adversarial` generators, merged by best-effort and restricted (and
//! best-effort with `prefer-closest-numa-nodes`) on 16 to 64 nodes.
//!
//! - `pulling_apart/k<k>/n<N>/<policy>`: a CPU family and a device family whose per-node
//!   amounts pull apart (each alone fits `k` nodes, both together need `k + 1`); `k` is 4
//!   and `N / 8`. Flat distances (10 local, 20 elsewhere).
//! - `near_ties/n<N>/<policy>+closest`: one CPU family of `N / 4` nodes' worth of CPUs,
//!   distances 20 or 21 at random, so many minimal sets rank nearly alike.
//! - `memory_apart/n<N>/{alone,with_cpu}/<policy>`: the memory manager's family (memory and
//!   2 MiB hugepages pulling apart, two demands in one family) alone, and merged with a CPU
//!   family pulling apart from another seed; `k = 4`.
//!
//! Each iteration builds the families (their `min_affinity_size` is a search too, run by the
//! real providers on every admission) and merges them inside one `bounded(DECISION_STEPS)`,
//! as an admission does. Before a row is measured it runs once and prints to stderr
//! `bounded: <id>: exact=.. steps=.. hint=.. preferred=.. admit=..`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use corral_testkit::adversarial::{near_ties, pulling_apart};
use corral_topology::topologymanager::{
    DECISION_STEPS, Demand, HintFamily, HintSet, Preferred, ProviderHintSets, bounded,
    min_affinity_size,
};
use corral_topology::{
    MergeResult, NumaInfo, NumaMask, NumaNode, Policy, PolicyName, PolicyOptions,
};
use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;

/// A family over `ids` as the providers build it: one or more per-node demands, preferred
/// at their minimum affinity size.
fn family(ids: &[usize], demands: Vec<Demand>) -> HintFamily {
    let size = min_affinity_size(ids, &demands);
    HintFamily::upward(
        ids,
        NumaMask::from_u64(u64::MAX),
        NumaMask::EMPTY,
        demands,
        Preferred::Size(size),
    )
}

fn per_node(amounts: &[u64], unit: u64, need: u64) -> Demand {
    Demand::per_node(
        amounts.iter().enumerate().map(|(id, &a)| (id, a * unit)),
        need * unit,
    )
}

fn provider(resource: &str, family: HintFamily) -> ProviderHintSets {
    Some(BTreeMap::from([(
        resource.to_owned(),
        Some(HintSet::Family(family)),
    )]))
}

fn policy(distances: &[Vec<u64>], name: PolicyName, closest: bool) -> Policy {
    let nodes: Vec<NumaNode> = distances
        .iter()
        .enumerate()
        .map(|(id, row)| NumaNode {
            id,
            distances: Some(row.clone()),
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

/// 10 on the diagonal, 20 elsewhere.
fn flat(nodes: usize) -> Vec<Vec<u64>> {
    (0..nodes)
        .map(|i| (0..nodes).map(|j| if i == j { 10 } else { 20 }).collect())
        .collect()
}

/// Runs `decide` once under the budget, prints what it took, then measures it (each
/// iteration under its own budget, as one admission).
fn row(group: &mut BenchmarkGroup<'_, WallTime>, id: &str, decide: impl Fn() -> MergeResult) {
    let (result, effort) = bounded(DECISION_STEPS, &decide);
    let hint = match result.best_hint.numa_affinity {
        Some(mask) => format!("{:?}", mask.get_bits()),
        None => "none".to_owned(),
    };
    eprintln!(
        "bounded: bounded/{id}: exact={} steps={} hint={hint} preferred={} admit={}",
        effort.exact, effort.steps, result.best_hint.preferred, result.admit
    );
    group.bench_function(id, |b| {
        b.iter(|| bounded(DECISION_STEPS, || black_box(decide())))
    });
}

const POLICIES: [(PolicyName, bool); 3] = [
    (PolicyName::BestEffort, false),
    (PolicyName::BestEffort, true),
    (PolicyName::Restricted, false),
];

fn label(name: PolicyName, closest: bool) -> String {
    format!("{name}{}", if closest { "+closest" } else { "" })
}

fn bench_bounded(c: &mut Criterion) {
    let mut group = c.benchmark_group("bounded");
    for nodes in [16, 32, 48, 64] {
        let ids: Vec<usize> = (0..nodes).collect();
        let mut ks = vec![4, nodes / 8];
        ks.dedup();
        for k in ks {
            let input = pulling_apart(nodes, k, 0x29 + nodes as u64 * 100 + k as u64);
            for (name, closest) in POLICIES {
                let policy = policy(&flat(nodes), name, closest);
                let id = format!("pulling_apart/k{k}/n{nodes}/{}", label(name, closest));
                row(&mut group, &id, || {
                    let cpus = family(&ids, vec![per_node(&input.first, 1, input.need_first)]);
                    let devices = family(&ids, vec![per_node(&input.second, 1, input.need_second)]);
                    policy
                        .merge_sets(&[provider("cpu", cpus), provider("example.com/dev", devices)])
                });
            }
        }
    }
    for nodes in [16, 32, 48, 64] {
        let ids: Vec<usize> = (0..nodes).collect();
        let input = near_ties(nodes, 0x29 + nodes as u64);
        for name in [PolicyName::BestEffort, PolicyName::Restricted] {
            let policy = policy(&input.distances, name, true);
            let id = format!("near_ties/n{nodes}/{}", label(name, true));
            row(&mut group, &id, || {
                let cpus = family(&ids, vec![per_node(&input.per_node_cpus, 1, input.need)]);
                policy.merge_sets(&[provider("cpu", cpus)])
            });
        }
    }
    for nodes in [16, 32, 48, 64] {
        let ids: Vec<usize> = (0..nodes).collect();
        let memory = pulling_apart(nodes, 4, 0x2900 + nodes as u64);
        let cpu = pulling_apart(nodes, 4, 0x2901 + nodes as u64);
        for with_cpu in [false, true] {
            for (name, closest) in POLICIES {
                let policy = policy(&flat(nodes), name, closest);
                let id = format!(
                    "memory_apart/n{nodes}/{}/{}",
                    if with_cpu { "with_cpu" } else { "alone" },
                    label(name, closest)
                );
                row(&mut group, &id, || {
                    // Memory in GiB, hugepages-2Mi in units of 512 MiB (256 pages).
                    let mem = per_node(&memory.first, GI, memory.need_first);
                    let huge = per_node(&memory.second, 512 * MI, memory.need_second);
                    let mut sets = vec![provider("memory", family(&ids, vec![mem, huge]))];
                    if with_cpu {
                        let cpus = family(&ids, vec![per_node(&cpu.first, 1, cpu.need_first)]);
                        sets.push(provider("cpu", cpus));
                    }
                    policy.merge_sets(&sets)
                });
            }
        }
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(10).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_millis(500)); targets = bench_bounded);
criterion_main!(benches);
