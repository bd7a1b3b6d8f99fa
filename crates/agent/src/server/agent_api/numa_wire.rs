//! A refusal's explanation and the NUMA nodes' resources on the wire (`corral.v1`'s
//! `Explanation`, `NumaNode`).

use corral_proto::corral::v1 as api;

use crate::node::numa_resources::{Counts, NumaNodeResources};
use crate::node::{Explanation, HintView};

/// An explanation on the wire.
pub(super) fn explanation(explanation: Explanation) -> api::Explanation {
    api::Explanation {
        container: explanation.container.unwrap_or_default(),
        numa_nodes: explanation.numa_nodes.into_iter().map(numa_node).collect(),
        providers: explanation
            .providers
            .into_iter()
            .map(|provider| api::ProviderHints {
                provider: provider.provider,
                resources: provider
                    .resources
                    .into_iter()
                    .map(|resource| api::ResourceHints {
                        resource: resource.resource,
                        no_preference: resource.hints.is_none(),
                        hints: resource
                            .hints
                            .unwrap_or_default()
                            .into_iter()
                            .map(hint)
                            .collect(),
                        not_listed: resource.not_listed,
                    })
                    .collect(),
            })
            .collect(),
        best_hint: Some(hint(explanation.best_hint)),
        policy_admitted: explanation.policy_admitted,
    }
}

fn hint(hint: HintView) -> api::Hint {
    api::Hint {
        numa_affinity: ids(hint.numa_affinity.unwrap_or_default()),
        preferred: hint.preferred,
    }
}

fn ids(ids: Vec<usize>) -> Vec<i64> {
    ids.into_iter()
        .map(|id| i64::try_from(id).unwrap_or(i64::MAX))
        .collect()
}

/// One NUMA node's resources on the wire.
pub(super) fn numa_node(node: NumaNodeResources) -> api::NumaNode {
    let counts = |(resource, counts): (String, Counts)| api::ResourceCounts {
        resource,
        capacity: counts.capacity,
        allocatable: counts.allocatable,
        free: counts.available,
    };
    api::NumaNode {
        id: i64::try_from(node.id).unwrap_or(i64::MAX),
        cpus: node.cpus.map(|cpus| api::NumaCpus {
            total: cpus.total,
            reserved: cpus.reserved,
            exclusive: cpus.exclusive,
            free: cpus.free,
            free_cpus: cpus.free_cpus,
        }),
        memory: node.memory.into_iter().map(counts).collect(),
        devices: node.devices.into_iter().map(counts).collect(),
    }
}
