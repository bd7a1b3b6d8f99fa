//! [`TopologyHint`] and the shapes hint providers return.

use std::collections::BTreeMap;
use std::fmt;

use crate::{NumaIds, NumaMask};

/// A NUMA affinity with a preference flag (upstream `topologymanager.TopologyHint`).
///
/// `numa_affinity: None` is upstream's nil mask: "any NUMA node". The zero value
/// (`TopologyHint::default()`, nil and not preferred) is what upstream's store returns for a
/// container it has no affinity for.
///
/// # Example
///
/// ```
/// use corral_topology::{NumaMask, TopologyHint};
///
/// let node0 = TopologyHint::new(Some(NumaMask::new([0])?), true);
/// let both = TopologyHint::new(Some(NumaMask::new([0, 1])?), true);
/// let any = TopologyHint::new(None, true);
/// assert!(node0.less_than(&both), "narrower sorts first");
/// assert!(both.less_than(&TopologyHint::new(Some(NumaMask::new([0])?), false)), "preferred first");
/// // Printed as the kubelet logs it.
/// assert_eq!(node0.to_string(), r#"{"NUMANodeAffinity":1,"Preferred":true}"#);
/// assert_eq!(any.to_string(), r#"{"NUMANodeAffinity":null,"Preferred":true}"#);
/// # Ok::<(), corral_topology::NumaMaskError>(())
/// ```
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

impl fmt::Display for TopologyHint {
    /// As the kubelet logs a hint: upstream's `TopologyHint` has no `String` method, and its
    /// structured log (`"Best TopologyHint" bestHint=…`) renders the struct as JSON, the
    /// mask as its integer value and a nil mask as `null` (as kubelet log lines quoted in
    /// kubernetes/kubernetes#136431 show). For what the bits stand for on a machine with
    /// dense NUMA bits, use [`show`](Self::show).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.numa_affinity {
            Some(mask) => write!(f, "{{\"NUMANodeAffinity\":{}", mask.as_u64())?,
            None => f.write_str("{\"NUMANodeAffinity\":null")?,
        }
        write!(f, ",\"Preferred\":{}}}", self.preferred)
    }
}

impl TopologyHint {
    /// The hint as its `Display` prints it, followed on a
    /// machine with dense NUMA bits by the OS ids of its nodes (as [`NumaIds::show`]).
    ///
    /// # Example
    ///
    /// ```
    /// use corral_topology::{NumaIds, NumaMask, TopologyHint};
    ///
    /// let hint = TopologyHint::new(Some(NumaMask::new([0, 1])?), true);
    /// assert_eq!(hint.to_string(), r#"{"NUMANodeAffinity":3,"Preferred":true}"#);
    /// assert_eq!(hint.show(&NumaIds::new([0, 1])?).to_string(), hint.to_string());
    ///
    /// let sparse = NumaIds::new([0, 72])?;
    /// assert_eq!(
    ///     hint.show(&sparse).to_string(),
    ///     r#"{"NUMANodeAffinity":3,"Preferred":true} (dense bits: NUMA nodes 0,72)"#
    /// );
    /// // "Any node" has nothing to translate.
    /// let any = TopologyHint::new(None, false);
    /// assert_eq!(any.show(&sparse).to_string(), r#"{"NUMANodeAffinity":null,"Preferred":false}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn show<'a>(&'a self, ids: &'a NumaIds) -> impl fmt::Display + 'a {
        ShowHint { hint: self, ids }
    }
}

/// What [`TopologyHint::show`] returns.
struct ShowHint<'a> {
    hint: &'a TopologyHint,
    ids: &'a NumaIds,
}

impl fmt::Display for ShowHint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.hint)?;
        match self.hint.numa_affinity {
            Some(mask) => self.ids.write_dense_suffix(f, mask),
            None => Ok(()),
        }
    }
}

/// Hints of one provider, per resource name. A `None` list means "no preference for this
/// resource" (upstream nil); `Some(vec![])` means "this resource cannot be satisfied".
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{NumaInfo, NumaMask, Policy, PolicyName, PolicyOptions, ResourceHints, TopologyHint};
///
/// let policy = Policy::new(PolicyName::Restricted, NumaInfo::from_ids([0, 1])?, PolicyOptions::default());
/// let node1 = TopologyHint::new(Some(NumaMask::new([1])?), true);
/// let fits: ResourceHints = BTreeMap::from([("example.com/nic".to_owned(), Some(vec![node1]))]);
/// let no_preference: ResourceHints = BTreeMap::from([("memory".to_owned(), None)]);
/// let impossible: ResourceHints = BTreeMap::from([("example.com/gpu".to_owned(), Some(vec![]))]);
/// assert!(policy.merge(&[Some(fits.clone()), Some(no_preference)]).admit);
/// assert_eq!(policy.merge(&[Some(fits.clone()), None]).best_hint, node1);
/// assert!(!policy.merge(&[Some(fits), Some(impossible)]).admit);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type ResourceHints = BTreeMap<String, Option<Vec<TopologyHint>>>;

/// What one provider returned: `None` (or an empty map) means "no preference at all".
pub type ProviderHints = Option<ResourceHints>;
