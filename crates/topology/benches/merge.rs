//! Topology merge on 2, 4 and 8 NUMA nodes with 1–4 providers of up to 8 hints each, for
//! best-effort and restricted (and best-effort with prefer-closest on 8 nodes).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use corral_topology::{
    NumaInfo, NumaMask, NumaNode, Policy, PolicyName, PolicyOptions, ProviderHints, TopologyHint,
};
use criterion::{Criterion, criterion_group, criterion_main};

/// Up to `count` hints over `nodes` NUMA nodes: the single nodes (preferred), then pairs and
/// wider masks (not preferred), rotated by `salt` so providers differ.
fn hints(nodes: usize, count: usize, salt: usize, any_preferred: bool) -> Vec<TopologyHint> {
    let mut masks: Vec<u64> = (1u64..(1 << nodes)).collect();
    masks.sort_by_key(|m| (m.count_ones(), *m));
    let singles = masks.iter().filter(|m| m.count_ones() == 1).count();
    let mut out: Vec<TopologyHint> = masks
        .iter()
        .enumerate()
        .map(|(i, &m)| {
            TopologyHint::new(
                Some(NumaMask::from_u64(m)),
                any_preferred && i < singles && !(i + salt).is_multiple_of(3),
            )
        })
        .collect();
    let len = out.len().max(1);
    out.rotate_left(salt % len);
    out.truncate(count);
    out
}

fn policy(name: PolicyName, nodes: usize, closest: bool) -> Policy {
    let numa: Vec<NumaNode> = (0..nodes)
        .map(|a| NumaNode {
            id: a,
            distances: Some(
                (0..nodes)
                    .map(|b| {
                        if a == b {
                            10
                        } else if a / 4 == b / 4 {
                            11
                        } else {
                            21
                        }
                    })
                    .collect(),
            ),
        })
        .collect();
    let options = PolicyOptions {
        prefer_closest_numa: closest,
        ..PolicyOptions::default()
    };
    Policy::new(
        name,
        NumaInfo::new(&numa, options.numa_distances()).expect("numa"),
        options,
    )
}

fn merge_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("merge");
    for nodes in [2usize, 4, 8] {
        for providers in 1..=4usize {
            let count = 8.min((1 << nodes) - 1);
            for (name, closest, any_preferred) in [
                (PolicyName::BestEffort, false, true),
                (PolicyName::Restricted, false, true),
                (PolicyName::BestEffort, true, true),
                (PolicyName::BestEffort, false, false),
            ] {
                if (closest || !any_preferred) && nodes != 8 {
                    continue;
                }
                let input: Vec<ProviderHints> = (0..providers)
                    .map(|p| {
                        let list = hints(nodes, count, p * 5 + 1, any_preferred);
                        Some(BTreeMap::from([(format!("res-{p}"), Some(list))]))
                    })
                    .collect();
                let policy = policy(name, nodes, closest);
                let label = format!(
                    "{}{}{}/{nodes}numa/{providers}providers/{count}hints",
                    name,
                    if closest { "+closest" } else { "" },
                    if any_preferred { "" } else { "+nopreferred" }
                );
                group.bench_function(label, |b| {
                    b.iter(|| black_box(&policy).merge(black_box(&input)))
                });
            }
        }
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)); targets = merge_benches);
criterion_main!(benches);
