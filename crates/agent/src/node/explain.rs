//! Why a pod was refused: for the container (or, at pod scope, the pod) that failed, what
//! each NUMA node had free of every resource it asks for, as the managers held them when the
//! decision was taken, each hint provider's hints and the merged best hint. Built under the
//! decision lock, only for a refusal, from the hints the topology manager already merged
//! ([`RejectedHints`]): an admission pays nothing for it.

use std::collections::BTreeSet;

use corral_topology::topologymanager::{HintSet, RejectedHints, TopologyHint};
use corral_topology::{Container, Pod, ResourceList};
use serde::Serialize;

use super::Node;
use super::numa_resources::NumaNodeResources;

/// A family of hints over more NUMA nodes than this is not listed (its list is
/// exponential in the nodes): the explanation says so instead.
const MAX_LISTED_NODES: usize = 10;

/// At most this many hints are listed in one explanation, over all its providers and
/// resources (a resource whose hints would pass it is not listed): 10 NUMA nodes give
/// over 1,000 hints per resource, and a pod may ask for every device resource the node
/// has, which would grow the admission API's answer, the log line and NRI's error text
/// without bound.
pub(crate) const MAX_LISTED_HINTS: usize = 2048;

/// Why a pod was refused, as far as NUMA alignment goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Explanation {
    /// The container whose hints were merged; `None` at pod scope (one merge for the pod).
    pub(crate) container: Option<String>,
    /// Per NUMA node, what it had of each resource asked for (CPUs, memory and huge pages
    /// with the static memory policy, devices), when the decision was taken.
    pub(crate) numa_nodes: Vec<NumaNodeResources>,
    /// Each hint provider's hints, in the order the topology manager asks them.
    pub(crate) providers: Vec<ProviderHintsView>,
    /// The merged best hint.
    pub(crate) best_hint: HintView,
    /// Whether the policy admitted the best hint (a refusal then came from a provider's
    /// allocation, e.g. `SMTAlignmentError`).
    pub(crate) policy_admitted: bool,
}

/// One provider's hints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ProviderHintsView {
    /// `cpu manager`, `device manager`, `dra`, `kubelet devices`, `memory manager`.
    pub(crate) provider: String,
    /// Per resource it gave hints for; empty: no preference for anything.
    pub(crate) resources: Vec<ResourceHintsView>,
}

/// A provider's hints for one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ResourceHintsView {
    /// The resource.
    pub(crate) resource: String,
    /// `None`: no preference; `Some([])`: it cannot be satisfied anywhere.
    pub(crate) hints: Option<Vec<HintView>>,
    /// The hints were too many to list (a family over more than `MAX_LISTED_NODES` nodes,
    /// or more than the explanation's `MAX_LISTED_HINTS` had left): `hints` holds none.
    pub(crate) not_listed: bool,
}

/// A topology hint, with NUMA nodes as the OS numbers them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct HintView {
    /// The NUMA nodes; `None`: any node.
    pub(crate) numa_affinity: Option<Vec<usize>>,
    /// Whether the provider prefers it.
    pub(crate) preferred: bool,
}

impl Node {
    /// The explanation of `pod`'s refusal, with the decision lock held and before the
    /// refused decision is given back (the managers as the decision saw them); `None` when
    /// no hints were merged (a refusal before the topology manager, or the `none` policy).
    pub(super) fn explain(&self, pod: &Pod, hints: &RejectedHints) -> Explanation {
        let wanted = wanted_resources(pod, hints);
        let mut budget = MAX_LISTED_HINTS;
        Explanation {
            container: hints.container.clone(),
            numa_nodes: self
                .numa_resources()
                .into_iter()
                .map(|node| node.only(&wanted))
                .collect(),
            providers: hints
                .providers
                .iter()
                .map(|(provider, sets)| ProviderHintsView {
                    provider: provider.clone(),
                    resources: sets
                        .iter()
                        .flatten()
                        .map(|(resource, set)| {
                            self.resource_hints(resource, set.as_ref(), &mut budget)
                        })
                        .collect(),
                })
                .collect(),
            best_hint: self.hint_view(&hints.merged.best_hint),
            policy_admitted: hints.merged.admit,
        }
    }

    /// `budget`: the hints the explanation may still list; those listed are taken from it.
    fn resource_hints(
        &self,
        resource: &str,
        set: Option<&HintSet>,
        budget: &mut usize,
    ) -> ResourceHintsView {
        let too_many = |set: &HintSet| matches!(set, HintSet::Family(f) if f.universe().count() > MAX_LISTED_NODES);
        let mut not_listed = set.is_some_and(too_many);
        let hints = set.map(|set| {
            if not_listed {
                return Vec::new();
            }
            let list = set.to_hints();
            if list.len() > *budget {
                not_listed = true;
                return Vec::new();
            }
            *budget -= list.len();
            list.iter().map(|h| self.hint_view(h)).collect()
        });
        ResourceHintsView {
            resource: resource.to_owned(),
            hints,
            not_listed,
        }
    }

    fn hint_view(&self, hint: &TopologyHint) -> HintView {
        HintView {
            numa_affinity: hint.numa_affinity.map(|mask| self.os_numa_ids(mask)),
            preferred: hint.preferred,
        }
    }
}

/// The resources the failed container (or, `None`, the pod) asks for, and those any
/// provider gave hints for.
fn wanted_resources(pod: &Pod, hints: &RejectedHints) -> BTreeSet<String> {
    let mut wanted = BTreeSet::new();
    let mut add = |list: &ResourceList| {
        if list.cpu_millis.is_some() {
            wanted.insert("cpu".to_owned());
        }
        if list.memory_bytes.is_some() {
            wanted.insert("memory".to_owned());
        }
        wanted.extend(list.extended.keys().cloned());
    };
    let containers: Vec<&Container> = match &hints.container {
        Some(name) => pod.container(name).into_iter().collect(),
        None => pod.all_containers().map(|(_, c)| c).collect(),
    };
    for container in containers {
        add(&container.resources.requests);
        add(&container.resources.limits);
    }
    if hints.container.is_none()
        && let Some(resources) = &pod.resources
    {
        add(&resources.requests);
        add(&resources.limits);
    }
    for (_, sets) in &hints.providers {
        wanted.extend(sets.iter().flatten().map(|(name, _)| name.clone()));
    }
    wanted
}

impl std::fmt::Display for HintView {
    /// `{0,1}` or `{any}`, then `*` when preferred.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.numa_affinity {
            Some(ids) => {
                let ids: Vec<String> = ids.iter().map(usize::to_string).collect();
                write!(f, "{{{}}}", ids.join(","))?;
            }
            None => f.write_str("{any}")?,
        }
        if self.preferred {
            f.write_str("*")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Explanation {
    /// One line, for a log line or a runtime's error text: per NUMA node what was free,
    /// each provider's hints (`*`: preferred) and the best hint, e.g.
    /// `container app: NUMA 0 free cpu=2 (2-3); NUMA 1 free cpu=0; hints: cpu manager
    /// cpu=[{0}* {0,1}]; best hint {0,1} (refused by the policy)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.container {
            Some(name) => write!(f, "container {name}: ")?,
            None => f.write_str("pod: ")?,
        }
        for (at, node) in self.numa_nodes.iter().enumerate() {
            if at > 0 {
                f.write_str("; ")?;
            }
            write!(f, "NUMA {} free", node.id)?;
            if let Some(cpus) = &node.cpus {
                write!(f, " cpu={}", cpus.free)?;
                if !cpus.free_cpus.is_empty() {
                    write!(f, " ({})", cpus.free_cpus)?;
                }
            }
            for (name, counts) in node.memory.iter().chain(&node.devices) {
                write!(f, " {name}={}", counts.available)?;
            }
        }
        f.write_str("; hints:")?;
        for provider in &self.providers {
            if provider.resources.is_empty() {
                continue;
            }
            write!(f, " {}", provider.provider)?;
            for resource in &provider.resources {
                write!(f, " {}=", resource.resource)?;
                match &resource.hints {
                    None => f.write_str("any")?,
                    Some(_) if resource.not_listed => f.write_str("[not listed]")?,
                    Some(hints) => {
                        let hints: Vec<String> = hints.iter().map(HintView::to_string).collect();
                        write!(f, "[{}]", hints.join(" "))?;
                    }
                }
            }
        }
        write!(f, "; best hint {}", self.best_hint)?;
        if !self.policy_admitted {
            f.write_str(" (refused by the policy)")?;
        }
        Ok(())
    }
}
