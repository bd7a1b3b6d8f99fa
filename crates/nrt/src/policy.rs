//! The topology manager's configuration as the scheduler plugin reads it from a
//! NodeResourceTopology: the deprecated `topologyPolicies` first, then the top-level attributes
//! `topologyManagerPolicy`, `topologyManagerScope` and `topologyManagerMaxNUMANodes`, each valid
//! one overriding (scheduler-plugins `pkg/noderesourcetopology/nodeconfig/topologymanager.go`,
//! `TopologyManagerFromNodeResourceTopology`).

use crate::object::{ATTRIBUTE_POLICY, ATTRIBUTE_SCOPE, NodeResourceTopology};

/// The top-level attribute naming the largest NUMA node count the topology manager handles.
pub const ATTRIBUTE_MAX_NUMA_NODES: &str = "topologyManagerMaxNUMANodes";
/// The topology manager's default `maxNUMANodes`, assumed when the object does not say.
pub const DEFAULT_MAX_NUMA_NODES: u32 = 8;
/// The largest `topologyManagerMaxNUMANodes` the plugin accepts; larger values are capped.
pub const LIMIT_MAX_NUMA_NODES: u32 = 1024;

/// A topology manager policy, spelled as the kubelet's configuration spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// `none`.
    None,
    /// `best-effort`.
    BestEffort,
    /// `restricted`.
    Restricted,
    /// `single-numa-node`.
    SingleNumaNode,
}

impl Policy {
    /// The kubelet's spelling, as in the `topologyManagerPolicy` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::BestEffort => "best-effort",
            Policy::Restricted => "restricted",
            Policy::SingleNumaNode => "single-numa-node",
        }
    }

    /// The policy spelled `value`, exactly (case matters, as upstream's `IsValidPolicy`).
    pub fn from_attribute(value: &str) -> Option<Policy> {
        [
            Policy::None,
            Policy::BestEffort,
            Policy::Restricted,
            Policy::SingleNumaNode,
        ]
        .into_iter()
        .find(|p| p.as_str() == value)
    }
}

/// A topology manager scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `container`: each container aligned on its own.
    Container,
    /// `pod`: all the pod's containers aligned together.
    Pod,
}

impl Scope {
    /// The kubelet's spelling, as in the `topologyManagerScope` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Container => "container",
            Scope::Pod => "pod",
        }
    }

    /// The scope spelled `value`, exactly.
    pub fn from_attribute(value: &str) -> Option<Scope> {
        [Scope::Container, Scope::Pod]
            .into_iter()
            .find(|s| s.as_str() == value)
    }
}

/// What the scheduler plugin believes the node's topology manager does.
///
/// # Example
///
/// ```
/// use corral_nrt::{AttributeInfo, NodeResourceTopology, Policy, Scope, TopologyManagerConfig};
///
/// let mut nrt = NodeResourceTopology::named("worker-1");
/// nrt.topology_policies = vec!["BestEffortPodLevel".into()];
/// nrt.attributes.push(AttributeInfo::new("topologyManagerPolicy", "single-numa-node"));
/// let conf = TopologyManagerConfig::of(&nrt);
/// assert_eq!(conf.policy, Policy::SingleNumaNode); // the attribute wins
/// assert_eq!(conf.scope, Scope::Pod); // from the legacy field
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TopologyManagerConfig {
    /// The policy.
    pub policy: Policy,
    /// The scope.
    pub scope: Scope,
    /// The largest NUMA node count the topology manager handles.
    pub max_numa_nodes: u32,
}

impl Default for TopologyManagerConfig {
    /// Upstream's `TopologyManagerDefaults`: `none`, `container`, 8 NUMA nodes.
    fn default() -> Self {
        Self {
            policy: Policy::None,
            scope: Scope::Container,
            max_numa_nodes: DEFAULT_MAX_NUMA_NODES,
        }
    }
}

impl TopologyManagerConfig {
    /// The configuration `nrt` announces: defaults, overridden by the first entry of the
    /// deprecated `topologyPolicies` (later entries and unknown values ignored), overridden in
    /// turn by every valid attribute (invalid values ignored).
    pub fn of(nrt: &NodeResourceTopology) -> Self {
        let mut conf = Self::default();
        if let Some((policy, scope)) = nrt.topology_policies.first().and_then(|p| legacy(p)) {
            conf.policy = policy;
            conf.scope = scope;
        }
        for attr in &nrt.attributes {
            if attr.name == ATTRIBUTE_SCOPE {
                if let Some(scope) = Scope::from_attribute(&attr.value) {
                    conf.scope = scope;
                }
            } else if attr.name == ATTRIBUTE_POLICY {
                if let Some(policy) = Policy::from_attribute(&attr.value) {
                    conf.policy = policy;
                }
            } else if attr.name == ATTRIBUTE_MAX_NUMA_NODES {
                // strconv.Atoi, then IsValidMaxNUMANodes (> 1), then the cap.
                if let Ok(n) = attr.value.parse::<i64>()
                    && n > 1
                {
                    conf.max_numa_nodes =
                        u32::try_from(n.min(i64::from(LIMIT_MAX_NUMA_NODES))).unwrap_or(1);
                }
            }
        }
        conf
    }
}

/// The deprecated `topologyPolicies` values (noderesourcetopology-api `TopologyManagerPolicy`).
fn legacy(value: &str) -> Option<(Policy, Scope)> {
    Some(match value {
        "SingleNUMANodePodLevel" => (Policy::SingleNumaNode, Scope::Pod),
        "SingleNUMANodeContainerLevel" => (Policy::SingleNumaNode, Scope::Container),
        "BestEffortPodLevel" => (Policy::BestEffort, Scope::Pod),
        "BestEffortContainerLevel" => (Policy::BestEffort, Scope::Container),
        "RestrictedPodLevel" => (Policy::Restricted, Scope::Pod),
        "RestrictedContainerLevel" => (Policy::Restricted, Scope::Container),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::AttributeInfo;

    fn nrt(policies: &[&str], attrs: &[(&str, &str)]) -> NodeResourceTopology {
        let mut nrt = NodeResourceTopology::named("n");
        nrt.topology_policies = policies.iter().map(|p| p.to_string()).collect();
        nrt.attributes = attrs
            .iter()
            .map(|(n, v)| AttributeInfo::new(n, v))
            .collect();
        nrt
    }

    fn conf(policy: Policy, scope: Scope, max_numa_nodes: u32) -> TopologyManagerConfig {
        TopologyManagerConfig {
            policy,
            scope,
            max_numa_nodes,
        }
    }

    const D: u32 = DEFAULT_MAX_NUMA_NODES;

    /// Attributes as (name, value).
    type Attrs = &'static [(&'static str, &'static str)];

    // scheduler-plugins nodeconfig/topologymanager_test.go, TestConfigFromNRT (903da7df).
    #[test]
    fn config_from_nrt() {
        use Policy::*;
        use Scope::*;
        let cases: &[(&str, &[&str], Attrs, TopologyManagerConfig)] = &[
            ("nil", &[], &[], TopologyManagerConfig::default()),
            (
                "policies-single",
                &["BestEffortPodLevel"],
                &[],
                conf(BestEffort, Pod, D),
            ),
            (
                "policies-ignore-after-first",
                &["RestrictedContainerLevel", "BestEffortPodLevel"],
                &[],
                conf(Restricted, Container, D),
            ),
            (
                "attributes-partial-policy-only",
                &[],
                &[("topologyManagerPolicy", "restricted")],
                conf(Restricted, Container, D),
            ),
            (
                "attributes-overrides-policy-partial",
                &["BestEffortPodLevel"],
                &[("topologyManagerScope", "container")],
                conf(BestEffort, Container, D),
            ),
            (
                "attributes-overrides-policy-full",
                &["BestEffortPodLevel"],
                &[
                    ("topologyManagerScope", "container"),
                    ("topologyManagerPolicy", "restricted"),
                ],
                conf(Restricted, Container, D),
            ),
        ];
        for (name, policies, attrs, want) in cases {
            assert_eq!(
                TopologyManagerConfig::of(&nrt(policies, attrs)),
                *want,
                "{name}"
            );
        }
    }

    // TestConfigFromAttributes, over the defaults (upstream starts from a zero value).
    #[test]
    fn config_from_attributes() {
        use Policy::*;
        use Scope::*;
        let cases: &[(&str, Attrs, TopologyManagerConfig)] = &[
            (
                "no-policy",
                &[("topologyManagerScope", "pod")],
                conf(None, Pod, D),
            ),
            (
                "no-scope",
                &[("topologyManagerPolicy", "restricted")],
                conf(Restricted, Container, D),
            ),
            (
                "complete-case-2",
                &[
                    ("topologyManagerScope", "pod"),
                    ("topologyManagerPolicy", "single-numa-node"),
                ],
                conf(SingleNumaNode, Pod, D),
            ),
            (
                "error-case-1",
                &[
                    ("topologyManagerScope", "Pod"),
                    ("topologyManagerPolicy", "single-numa-node"),
                ],
                conf(SingleNumaNode, Container, D),
            ),
            (
                "error-case-2",
                &[
                    ("topologyManagerScope", "Container"),
                    ("topologyManagerPolicy", "restricted"),
                ],
                conf(Restricted, Container, D),
            ),
            (
                "invalid-nodes-string",
                &[("topologyManagerMaxNUMANodes", "A")],
                conf(None, Container, D),
            ),
            (
                "invalid-nodes-zero",
                &[("topologyManagerMaxNUMANodes", "0")],
                conf(None, Container, D),
            ),
            (
                "invalid-nodes-negative",
                &[("topologyManagerMaxNUMANodes", "-2")],
                conf(None, Container, D),
            ),
            (
                "valid-nodes",
                &[("topologyManagerMaxNUMANodes", "16")],
                conf(None, Container, 16),
            ),
            (
                "valid-nodes-upper-bound",
                &[("topologyManagerMaxNUMANodes", "65535")],
                conf(None, Container, LIMIT_MAX_NUMA_NODES),
            ),
        ];
        for (name, attrs, want) in cases {
            assert_eq!(TopologyManagerConfig::of(&nrt(&[], attrs)), *want, "{name}");
        }
    }

    // TestConfigFromPolicies: unknown legacy values change nothing.
    #[test]
    fn unknown_legacy_policy_is_ignored() {
        assert_eq!(
            TopologyManagerConfig::of(&nrt(&["foobar"], &[])),
            TopologyManagerConfig::default()
        );
        assert_eq!(
            TopologyManagerConfig::of(&nrt(&["SingleNUMANodeContainerLevel"], &[])),
            conf(Policy::SingleNumaNode, Scope::Container, D)
        );
    }

    // TestIsValidPolicy / TestIsValidScope: exact spellings only.
    #[test]
    fn spellings_are_exact() {
        for bad in [
            "",
            "None",
            "BestEffort",
            "Restricted",
            "single-NUMA-node",
            "SingleNUMANode",
        ] {
            assert_eq!(Policy::from_attribute(bad), Option::None, "{bad}");
        }
        for good in ["none", "best-effort", "restricted", "single-numa-node"] {
            assert_eq!(Policy::from_attribute(good).map(Policy::as_str), Some(good));
        }
        for bad in ["", "POD", "Container"] {
            assert_eq!(Scope::from_attribute(bad), Option::None, "{bad}");
        }
        assert_eq!(Scope::from_attribute("pod"), Some(Scope::Pod));
        assert_eq!(Scope::from_attribute("container"), Some(Scope::Container));
    }
}
