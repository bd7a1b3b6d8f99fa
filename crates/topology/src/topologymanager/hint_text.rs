//! Hint sets printed as the kubelet logs its hints: klog renders a provider's
//! `map[string][]TopologyHint` as JSON (`"TopologyHints" hints={"cpu":[…]}`), each hint as
//! [`TopologyHint`]'s `Display` does.

use std::fmt;

use super::family::{HintSet, Preferred, ProviderHintSets};
use super::hint::TopologyHint;

/// A [`HintFamily`](super::HintFamily) over at most this many NUMA nodes is printed as its
/// list (at most 255 hints); a wider one as a summary, since its list grows as 2^nodes.
pub const LISTED_FAMILY_NODES: usize = 8;

impl fmt::Display for HintSet {
    /// As klog prints a `[]TopologyHint`: `[{"NUMANodeAffinity":1,"Preferred":true},…]`. A
    /// family over more than [`LISTED_FAMILY_NODES`] nodes is not listed:
    /// `"family of NUMA nodes 0-15, preferred size 2"` (a JSON string, so the value stays
    /// JSON), read from the family's description without a search.
    ///
    /// # Example
    ///
    /// ```
    /// use corral_topology::topologymanager::HintSet;
    /// use corral_topology::{NumaMask, TopologyHint};
    ///
    /// let hints = HintSet::List(vec![
    ///     TopologyHint::new(Some(NumaMask::new([1])?), true),
    ///     TopologyHint::new(Some(NumaMask::new([0, 1])?), false),
    /// ]);
    /// assert_eq!(
    ///     hints.to_string(),
    ///     r#"[{"NUMANodeAffinity":2,"Preferred":true},{"NUMANodeAffinity":3,"Preferred":false}]"#
    /// );
    /// assert_eq!(HintSet::List(vec![]).to_string(), "[]");
    /// # Ok::<(), corral_topology::NumaMaskError>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HintSet::List(list) => write_list(f, list),
            HintSet::Family(family) if family.universe().count() <= LISTED_FAMILY_NODES => {
                write_list(f, &family.to_hints())
            }
            HintSet::Family(family) => {
                write!(
                    f,
                    "\"family of NUMA nodes {}",
                    NodeRanges(family.universe())
                )?;
                // No search here: a log line must not spend the decision's budget.
                match family.preferred_rule() {
                    Preferred::Size(size) => write!(f, ", preferred size {size}\""),
                    Preferred::SizeOrSockets { size, .. } => {
                        write!(f, ", preferred size {size} or socket-aligned\"")
                    }
                }
            }
        }
    }
}

fn write_list(f: &mut fmt::Formatter<'_>, hints: &[TopologyHint]) -> fmt::Result {
    f.write_str("[")?;
    for (i, hint) in hints.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{hint}")?;
    }
    f.write_str("]")
}

/// A mask's bits as ranges: `0-3,6`.
struct NodeRanges(crate::NumaMask);

impl fmt::Display for NodeRanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits: Vec<usize> = self.0.iter().collect();
        let mut first = true;
        let mut i = 0;
        while i < bits.len() {
            let start = bits[i];
            while i + 1 < bits.len() && bits[i + 1] == bits[i] + 1 {
                i += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            match bits[i] == start {
                true => write!(f, "{start}")?,
                false => write!(f, "{start}-{}", bits[i])?,
            }
            i += 1;
        }
        Ok(())
    }
}

/// One provider's hints as the kubelet logs them (`"TopologyHints" hints=…`): `null` for no
/// preference at all, otherwise a JSON object by resource, `null` for a resource without a
/// preference and the [`HintSet`]'s text for the others.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::topologymanager::{HintSet, show_provider_hints};
/// use corral_topology::{NumaMask, TopologyHint};
///
/// let node0 = TopologyHint::new(Some(NumaMask::new([0])?), true);
/// let hints = Some(BTreeMap::from([
///     ("cpu".to_owned(), Some(HintSet::List(vec![node0]))),
///     ("memory".to_owned(), None),
/// ]));
/// assert_eq!(
///     show_provider_hints(&hints).to_string(),
///     r#"{"cpu":[{"NUMANodeAffinity":1,"Preferred":true}],"memory":null}"#
/// );
/// assert_eq!(show_provider_hints(&None).to_string(), "null");
/// # Ok::<(), corral_topology::NumaMaskError>(())
/// ```
pub fn show_provider_hints(hints: &ProviderHintSets) -> impl fmt::Display + '_ {
    ShowProviderHints(hints)
}

struct ShowProviderHints<'a>(&'a ProviderHintSets);

impl fmt::Display for ShowProviderHints<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(resources) = self.0 else {
            return f.write_str("null");
        };
        f.write_str("{")?;
        for (i, (name, set)) in resources.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            // Resource names are Kubernetes names (no quote or backslash), but escape anyway.
            write!(f, "\"{}\":", name.escape_default())?;
            match set {
                Some(set) => write!(f, "{set}")?,
                None => f.write_str("null")?,
            }
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NumaMask;
    use crate::topologymanager::{Demand, HintFamily};

    #[test]
    fn a_small_family_prints_its_list_and_a_wide_one_a_summary() {
        let ids: Vec<usize> = (0..3).collect();
        let all = NumaMask::new(ids.iter().copied()).unwrap();
        let free = Demand::per_node([(0, 4), (1, 4), (2, 8)], 6);
        let small = HintFamily::upward(&ids, all, NumaMask::EMPTY, vec![free], Preferred::Size(1));
        let set = HintSet::Family(small.clone());
        assert_eq!(
            set.to_string(),
            HintSet::List(small.to_hints()).to_string(),
            "listed as upstream's generator lists it"
        );

        let ids: Vec<usize> = (0..16).collect();
        let all = NumaMask::new(ids.iter().copied()).unwrap();
        let free = Demand::per_node(ids.iter().map(|&n| (n, 4)), 6);
        let wide = HintFamily::upward(&ids, all, NumaMask::EMPTY, vec![free], Preferred::Size(2));
        let text = HintSet::Family(wide).to_string();
        assert_eq!(text, r#""family of NUMA nodes 0-15, preferred size 2""#);
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(parsed.is_string());
    }

    #[test]
    fn provider_hints_are_json() {
        let node1 = TopologyHint::new(Some(NumaMask::new([1]).unwrap()), true);
        let hints = Some(
            [
                ("cpu".to_owned(), Some(HintSet::List(vec![node1]))),
                ("example.com/gpu".to_owned(), Some(HintSet::List(vec![]))),
                ("memory".to_owned(), None),
            ]
            .into_iter()
            .collect(),
        );
        let text = show_provider_hints(&hints).to_string();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({
                "cpu": [{"NUMANodeAffinity": 2, "Preferred": true}],
                "example.com/gpu": [],
                "memory": null,
            })
        );
        assert_eq!(
            show_provider_hints(&Some(Default::default())).to_string(),
            "{}"
        );
    }

    #[test]
    fn node_ranges_join_runs() {
        let mask = NumaMask::new([0, 1, 2, 3, 6, 8, 9]).unwrap();
        assert_eq!(NodeRanges(mask).to_string(), "0-3,6,8-9");
    }
}
