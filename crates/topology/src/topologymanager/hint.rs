//! [`TopologyHint`] and the shapes hint providers return.

use std::collections::BTreeMap;

use crate::NumaMask;

/// A NUMA affinity with a preference flag (upstream `topologymanager.TopologyHint`).
///
/// `numa_affinity: None` is upstream's nil mask: "any NUMA node". The zero value
/// (`TopologyHint::default()`, nil and not preferred) is what upstream's store returns for a
/// container it has no affinity for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TopologyHint {
    /// The NUMA nodes, or `None` for no constraint.
    pub numa_affinity: Option<NumaMask>,
    /// Whether this affinity is a preferred (optimal) one for the resource.
    pub preferred: bool,
}

impl TopologyHint {
    /// A hint with the given affinity and preference.
    pub const fn new(numa_affinity: Option<NumaMask>, preferred: bool) -> Self {
        TopologyHint {
            numa_affinity,
            preferred,
        }
    }

    /// Upstream `IsEqual`: same preference and same affinity (nil equals only nil).
    pub fn is_equal(&self, other: &TopologyHint) -> bool {
        self == other
    }

    /// Upstream `LessThan`: preferred sorts first, then the narrower affinity. A nil affinity
    /// counts as the empty mask here (upstream would dereference nil).
    pub fn less_than(&self, other: &TopologyHint) -> bool {
        if self.preferred != other.preferred {
            return self.preferred;
        }
        let mine = self.numa_affinity.unwrap_or_default();
        mine.is_narrower_than(other.numa_affinity.unwrap_or_default())
    }
}

/// Hints of one provider, per resource name. A `None` list means "no preference for this
/// resource" (upstream nil); `Some(vec![])` means "this resource cannot be satisfied".
pub type ResourceHints = BTreeMap<String, Option<Vec<TopologyHint>>>;

/// What one provider returned: `None` (or an empty map) means "no preference at all".
pub type ProviderHints = Option<ResourceHints>;
