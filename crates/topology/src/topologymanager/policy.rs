//! The four topology manager policies (upstream `policy_*.go`), their names and options.
//!
//! A [`Policy`] is a plain value: its name, the machine's [`NumaInfo`] and its
//! [`PolicyOptions`]. [`Policy::merge`] is upstream `Policy.Merge`; it returns the same hint
//! and admit decision as upstream on every input, computed by [`crate::topologymanager::merge`]
//! without walking every combination of hints.
//!
//! Option visibility (upstream `CheckPolicyOptionAvailable`): an option of alpha level needs
//! the `TopologyManagerPolicyAlphaOptions` feature gate, one of beta level
//! `TopologyManagerPolicyBetaOptions`, a GA one no gate ([`check_option_level`]). In v1.36
//! both options are GA ([`option_maturity`]): `prefer-closest-numa-nodes` since 1.32 and
//! `max-allowable-numa-nodes` since 1.35 (the website's topology manager page, store id
//! 71166490115), so neither gate changes what v1.36 accepts; the gate checks are kept for
//! the levels upstream's tests exercise with test-only options. An unknown option is refused
//! with upstream's message. Upstream's `policy_options.go` read: store ids 248019065 (both
//! options beta, the capitalised gate messages corral prints) and 68702486064 (v1.38: both
//! GA, an alpha `numa-allocation-strategy`, the gate messages lower-cased); no alpha or beta
//! option exists in v1.36, so its wording of those messages cannot be observed.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::str::FromStr;

use super::family::{ProviderHintSets, hint_lists};
use super::hint::{ProviderHints, TopologyHint};
use super::merge::{MaskOrder, merge_filtered, reference_merge_filtered};
use super::merge_sets::{filter_provider_sets, merge_inputs, single_numa_lists};
use super::numa_info::{NumaDistances, NumaInfo};
use crate::{Feature, FeatureGates, Maturity};

/// The policy names kubelet config uses.
///
/// # Example
///
/// ```
/// use corral_topology::PolicyName;
///
/// let name: PolicyName = "single-numa-node".parse()?;
/// assert_eq!(name, PolicyName::SingleNumaNode);
/// assert_eq!(name.as_str(), "single-numa-node");
/// assert!("strict".parse::<PolicyName>().is_err());
/// # Ok::<(), corral_topology::PolicyConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum PolicyName {
    /// `none`: no alignment, every pod admitted, no affinity.
    None,
    /// `best-effort`: the best hint, always admitted.
    BestEffort,
    /// `restricted`: the best hint, admitted only when preferred.
    Restricted,
    /// `single-numa-node`: only single-node (or don't-care) preferred hints, admitted only
    /// when one fits.
    SingleNumaNode,
}

impl PolicyName {
    /// Every policy, in upstream's documentation order.
    pub const ALL: [PolicyName; 4] = [
        PolicyName::None,
        PolicyName::BestEffort,
        PolicyName::Restricted,
        PolicyName::SingleNumaNode,
    ];
}

enum_strings! {
    /// The kubelet config string.
    PolicyName {
        None => "none",
        BestEffort => "best-effort",
        Restricted => "restricted",
        SingleNumaNode => "single-numa-node",
    }
}

/// Why a policy name, scope name or policy option was refused.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{PolicyConfigError, PolicyOptions};
///
/// let typo = BTreeMap::from([("prefer-closest-numa-node".to_owned(), "true".to_owned())]);
/// assert!(matches!(PolicyOptions::from_map(&typo), Err(PolicyConfigError::UnknownOption(_))));
/// let not_bool = BTreeMap::from([("prefer-closest-numa-nodes".to_owned(), "yes".to_owned())]);
/// assert!(matches!(PolicyOptions::from_map(&not_bool), Err(PolicyConfigError::BadBool { .. })));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyConfigError {
    /// Not one of `none`, `best-effort`, `restricted`, `single-numa-node`.
    #[error("unknown policy: {0:?}")]
    UnknownPolicy(String),
    /// Not one of `container`, `pod`.
    #[error("unknown scope: {0:?}")]
    UnknownScope(String),
    /// An option name upstream does not know.
    #[error("unknown Topology Manager Policy option: {0:?}")]
    UnknownOption(String),
    /// An alpha option with `TopologyManagerPolicyAlphaOptions` off (upstream's text up to
    /// v1.37; v1.38 lower-cases it).
    #[error("Topology Manager Policy Alpha-level Options not enabled, but option {0:?} provided")]
    AlphaOptionsNotEnabled(String),
    /// A beta option with `TopologyManagerPolicyBetaOptions` off (as above).
    #[error("Topology Manager Policy Beta-level Options not enabled, but option {0:?} provided")]
    BetaOptionsNotEnabled(String),
    /// `prefer-closest-numa-nodes` with a value Go's `strconv.ParseBool` rejects
    /// (upstream's wrapped error text).
    #[error(
        "bad value for option {option:?}: strconv.ParseBool: parsing {value:?}: invalid syntax"
    )]
    BadBool {
        /// The option name.
        option: String,
        /// The value given.
        value: String,
    },
    /// `max-allowable-numa-nodes` that `strconv.Atoi` refuses (upstream's wrapped error
    /// text).
    #[error(
        "unable to convert policy option to integer {option:?}: strconv.Atoi: parsing {value:?}: {}",
        if *out_of_range { "value out of range" } else { "invalid syntax" }
    )]
    BadInteger {
        /// The option name.
        option: String,
        /// The value given.
        value: String,
        /// Digits beyond 64 bits (`value out of range`), else `invalid syntax`.
        out_of_range: bool,
    },
    /// `max-allowable-numa-nodes` below the default of 8.
    #[error("the minimum value of {option:?} should not be less than {minimum}")]
    BelowMinimum {
        /// The option name.
        option: String,
        /// The minimum (8).
        minimum: usize,
    },
}

impl FromStr for PolicyName {
    type Err = PolicyConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyName::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| PolicyConfigError::UnknownPolicy(s.to_owned()))
    }
}

/// Option name: prefer the set of closest NUMA nodes among equally wide ones.
pub const PREFER_CLOSEST_NUMA_NODES: &str = "prefer-closest-numa-nodes";
/// Option name: raise the limit of NUMA nodes a machine may have.
pub const MAX_ALLOWABLE_NUMA_NODES: &str = "max-allowable-numa-nodes";
/// Upstream's default (and minimum) for `max-allowable-numa-nodes`.
pub const DEFAULT_MAX_ALLOWABLE_NUMA_NODES: usize = 8;

/// Parsed topology manager policy options (upstream `PolicyOptions`).
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::PolicyOptions;
///
/// assert_eq!(PolicyOptions::default().max_allowable_numa_nodes, 8);
/// let map = BTreeMap::from([
///     ("prefer-closest-numa-nodes".to_owned(), "true".to_owned()),
///     ("max-allowable-numa-nodes".to_owned(), "16".to_owned()),
/// ]);
/// let options = PolicyOptions::from_map(&map)?;
/// assert!(options.prefer_closest_numa);
/// assert_eq!(options.max_allowable_numa_nodes, 16);
/// let unknown = BTreeMap::from([("no-such-option".to_owned(), "true".to_owned())]);
/// assert!(PolicyOptions::from_map(&unknown).is_err());
/// # Ok::<(), corral_topology::PolicyConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyOptions {
    /// `prefer-closest-numa-nodes`.
    pub prefer_closest_numa: bool,
    /// `max-allowable-numa-nodes` (default 8).
    pub max_allowable_numa_nodes: usize,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        PolicyOptions {
            prefer_closest_numa: false,
            max_allowable_numa_nodes: DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
        }
    }
}

/// Go `strconv.ParseBool`.
fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl PolicyOptions {
    /// What [`NumaInfo::new`] must do with the nodes' distances under these options:
    /// [`NumaDistances::Require`] with `prefer-closest-numa-nodes`, else
    /// [`NumaDistances::Ignore`].
    pub fn numa_distances(&self) -> NumaDistances {
        if self.prefer_closest_numa {
            NumaDistances::Require
        } else {
            NumaDistances::Ignore
        }
    }

    /// [`from_map_gated`](Self::from_map_gated) under v1.37's default gates (which accept
    /// both of v1.37's options).
    pub fn from_map(
        options: &BTreeMap<String, String>,
    ) -> Result<PolicyOptions, PolicyConfigError> {
        PolicyOptions::from_map_gated(options, &FeatureGates::v1_37_defaults())
    }

    /// Parse the kubelet's `topologyManagerPolicyOptions` map under `gates` (upstream
    /// `NewPolicyOptions`, each option first through `CheckPolicyOptionAvailable`). Options
    /// are checked in name order, so the first error is deterministic.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use corral_topology::{Feature, FeatureGates, PolicyOptions};
    ///
    /// let map = BTreeMap::from([("max-allowable-numa-nodes".to_owned(), "16".to_owned())]);
    /// // GA in v1.36: no gate needed.
    /// let gates = FeatureGates::default().with(Feature::TopologyManagerPolicyBetaOptions, false)?;
    /// assert_eq!(PolicyOptions::from_map_gated(&map, &gates)?.max_allowable_numa_nodes, 16);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_map_gated(
        options: &BTreeMap<String, String>,
        gates: &FeatureGates,
    ) -> Result<PolicyOptions, PolicyConfigError> {
        let mut opts = PolicyOptions::default();
        for (name, value) in options {
            check_option_level(name, option_maturity(name), gates)?;
            match name.as_str() {
                PREFER_CLOSEST_NUMA_NODES => {
                    opts.prefer_closest_numa =
                        parse_go_bool(value).ok_or_else(|| PolicyConfigError::BadBool {
                            option: name.clone(),
                            value: value.clone(),
                        })?;
                }
                MAX_ALLOWABLE_NUMA_NODES => {
                    let bad = |out_of_range| PolicyConfigError::BadInteger {
                        option: name.clone(),
                        value: value.clone(),
                        out_of_range,
                    };
                    let parsed: i64 = parse_go_int(value).map_err(bad)?;
                    if parsed < DEFAULT_MAX_ALLOWABLE_NUMA_NODES as i64 {
                        return Err(PolicyConfigError::BelowMinimum {
                            option: name.clone(),
                            minimum: DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
                        });
                    }
                    opts.max_allowable_numa_nodes =
                        usize::try_from(parsed).map_err(|_| bad(true))?;
                }
                _ => return Err(PolicyConfigError::UnknownOption(name.clone())),
            }
        }
        Ok(opts)
    }
}

/// The v1.36 maturity of the topology manager option `name`, `None` for a name upstream does
/// not know: both options are GA.
pub fn option_maturity(name: &str) -> Option<Maturity> {
    match name {
        PREFER_CLOSEST_NUMA_NODES | MAX_ALLOWABLE_NUMA_NODES => Some(Maturity::Ga),
        _ => None,
    }
}

/// Upstream `CheckPolicyOptionAvailable` for an option of level `maturity` (`None`: not an
/// option upstream knows): refused when unknown, or when its level's gate is off; a GA
/// option needs no gate. [`PolicyOptions::from_map_gated`] calls it with
/// [`option_maturity`]; a test may pass any level, as upstream's tests register test-only
/// options.
///
/// ```
/// use corral_topology::{Feature, FeatureGates, Maturity};
/// use corral_topology::topologymanager::check_option_level;
///
/// let defaults = FeatureGates::default();
/// assert!(check_option_level("fancy-beta-option", Some(Maturity::Beta), &defaults).is_ok());
/// assert_eq!(
///     check_option_level("fancy-alpha-option", Some(Maturity::Alpha), &defaults).unwrap_err().to_string(),
///     "Topology Manager Policy Alpha-level Options not enabled, but option \"fancy-alpha-option\" provided"
/// );
/// ```
pub fn check_option_level(
    name: &str,
    maturity: Option<Maturity>,
    gates: &FeatureGates,
) -> Result<(), PolicyConfigError> {
    match maturity {
        None => Err(PolicyConfigError::UnknownOption(name.to_owned())),
        Some(Maturity::Alpha) if !gates.enabled(Feature::TopologyManagerPolicyAlphaOptions) => {
            Err(PolicyConfigError::AlphaOptionsNotEnabled(name.to_owned()))
        }
        Some(Maturity::Beta) if !gates.enabled(Feature::TopologyManagerPolicyBetaOptions) => {
            Err(PolicyConfigError::BetaOptionsNotEnabled(name.to_owned()))
        }
        Some(_) => Ok(()),
    }
}

/// Go `strconv.Atoi` (optional sign, ASCII digits, 64-bit range); the error is whether the
/// digits are out of range (else the syntax is invalid).
fn parse_go_int(value: &str) -> Result<i64, bool> {
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(false);
    }
    value
        .strip_prefix('+')
        .unwrap_or(value)
        .parse()
        .map_err(|_| true)
}

/// The result of a merge: the best hint and whether the policy admits it.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{NumaInfo, NumaMask, Policy, PolicyName, PolicyOptions, TopologyHint};
///
/// // The CPUs fit only on both nodes together: restricted takes the hint, but refuses it.
/// let both = TopologyHint::new(Some(NumaMask::new([0, 1])?), false);
/// let cpu = BTreeMap::from([("cpu".to_owned(), Some(vec![both]))]);
/// let policy = Policy::new(PolicyName::Restricted, NumaInfo::from_ids([0, 1])?, PolicyOptions::default());
/// let result = policy.merge(&[Some(cpu)]);
/// assert_eq!(result.best_hint, both);
/// assert!(!result.admit);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeResult {
    /// The merged hint (upstream's first return value).
    pub best_hint: TopologyHint,
    /// Whether the pod (or container) may be admitted with it.
    pub admit: bool,
}

/// A topology manager policy bound to a machine's NUMA nodes.
///
/// # Example
///
/// ```
/// use corral_topology::{NumaInfo, NumaMask, Policy, PolicyName, PolicyOptions, TopologyHint};
/// use std::collections::BTreeMap;
///
/// let numa = NumaInfo::from_ids([0, 1])?;
/// let policy = Policy::new(PolicyName::Restricted, numa, PolicyOptions::default());
/// let node0 = TopologyHint::new(Some(NumaMask::new([0])?), true);
/// let both = TopologyHint::new(Some(NumaMask::new([0, 1])?), false);
/// let cpu = BTreeMap::from([("cpu".to_owned(), Some(vec![node0, both]))]);
/// let result = policy.merge(&[Some(cpu), None]);
/// assert_eq!(result.best_hint, node0);
/// assert!(result.admit);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    name: PolicyName,
    numa_info: NumaInfo,
    options: PolicyOptions,
}

/// A merge over filtered hint lists (fast or exhaustive).
pub(crate) type Merger = fn(&[Cow<'_, [TopologyHint]>], NumaMask, &MaskOrder<'_>) -> TopologyHint;

/// The single preferred "don't care" hint for providers without a preference.
const NO_PREFERENCE: &[TopologyHint] = &[TopologyHint::new(None, true)];
/// The single non-preferred hint for resources that cannot be satisfied.
const CANNOT_SATISFY: &[TopologyHint] = &[TopologyHint::new(None, false)];

/// Upstream `filterProvidersHints`: one hint list per (provider, resource), resources in
/// name order.
pub(crate) fn filter_providers_hints(providers: &[ProviderHints]) -> Vec<Cow<'_, [TopologyHint]>> {
    let mut all = Vec::with_capacity(providers.len());
    for provider in providers {
        match provider {
            Some(resources) if !resources.is_empty() => {
                for hints in resources.values() {
                    all.push(match hints {
                        None => Cow::Borrowed(NO_PREFERENCE),
                        Some(list) if list.is_empty() => Cow::Borrowed(CANNOT_SATISFY),
                        Some(list) => Cow::Borrowed(list.as_slice()),
                    });
                }
            }
            _ => all.push(Cow::Borrowed(NO_PREFERENCE)),
        }
    }
    all
}

/// Upstream `filterSingleNumaHints`: keep preferred hints that are nil or name one node.
pub(crate) fn filter_single_numa_hints<'a>(
    lists: Vec<Cow<'a, [TopologyHint]>>,
) -> Vec<Cow<'a, [TopologyHint]>> {
    lists
        .into_iter()
        .map(|list| {
            let keep =
                |h: &TopologyHint| h.preferred && h.numa_affinity.is_none_or(|m| m.count() == 1);
            if list.iter().all(keep) {
                list
            } else {
                Cow::Owned(list.iter().copied().filter(keep).collect())
            }
        })
        .collect()
}

impl Policy {
    /// A policy for the machine described by `numa_info`.
    pub fn new(name: PolicyName, numa_info: NumaInfo, options: PolicyOptions) -> Policy {
        Policy {
            name,
            numa_info,
            options,
        }
    }

    /// The policy's name.
    pub fn name(&self) -> PolicyName {
        self.name
    }

    /// The machine's NUMA nodes.
    pub fn numa_info(&self) -> &NumaInfo {
        &self.numa_info
    }

    /// The options in force.
    pub fn options(&self) -> PolicyOptions {
        self.options
    }

    /// Upstream `IsAlignmentGuaranteed`: only `single-numa-node` guarantees alignment.
    pub fn is_alignment_guaranteed(&self) -> bool {
        self.name == PolicyName::SingleNumaNode
    }

    /// How candidate masks are compared (upstream `compareNumaAffinityMasks`): by distance
    /// when prefer-closest is on, except for `single-numa-node`.
    pub(crate) fn mask_order(&self) -> MaskOrder<'_> {
        if self.name != PolicyName::SingleNumaNode && self.options.prefer_closest_numa {
            MaskOrder::Closest(&self.numa_info)
        } else {
            MaskOrder::Narrowest
        }
    }

    /// Upstream `Policy.Merge`: merge the providers' hints into the best hint and decide
    /// admission. Identical in result to upstream's exhaustive walk (see
    /// [`crate::topologymanager::reference_merge`]), but computed without enumerating every
    /// combination.
    pub fn merge(&self, providers: &[ProviderHints]) -> MergeResult {
        self.merge_with(providers, merge_filtered)
    }

    /// [`merge`](Self::merge) over hint sets: lists and [`HintFamily`](super::HintFamily)s,
    /// merged without listing the families (see `merge_sets.rs`); the same result as
    /// [`reference_merge_sets`] at any number of NUMA nodes.
    ///
    /// Its searches draw on the open [`bounded`](super::bounded) budget, or on one of
    /// [`DECISION_STEPS`](super::DECISION_STEPS) of their own.
    pub fn merge_sets(&self, providers: &[ProviderHintSets]) -> MergeResult {
        super::bounded(super::DECISION_STEPS, || {
            self.merge_sets_unbounded(providers)
        })
        .0
    }

    fn merge_sets_unbounded(&self, providers: &[ProviderHintSets]) -> MergeResult {
        let default = self.numa_info.default_affinity();
        let order = self.mask_order();
        match self.name {
            PolicyName::None => MergeResult {
                best_hint: TopologyHint::default(),
                admit: true,
            },
            PolicyName::BestEffort | PolicyName::Restricted => {
                let inputs = filter_provider_sets(providers, default);
                let best_hint = merge_inputs(&inputs, default, &order);
                MergeResult {
                    best_hint,
                    admit: self.name == PolicyName::BestEffort || best_hint.preferred,
                }
            }
            PolicyName::SingleNumaNode => {
                let lists = single_numa_lists(filter_provider_sets(providers, default));
                let filtered = filter_single_numa_hints(lists);
                let mut best_hint = merge_filtered(&filtered, default, &order);
                if best_hint.numa_affinity == Some(default) {
                    best_hint.numa_affinity = None;
                }
                MergeResult {
                    best_hint,
                    admit: best_hint.preferred,
                }
            }
        }
    }

    pub(crate) fn merge_with(&self, providers: &[ProviderHints], merger: Merger) -> MergeResult {
        let default = self.numa_info.default_affinity();
        let order = self.mask_order();
        match self.name {
            PolicyName::None => MergeResult {
                best_hint: TopologyHint::default(),
                admit: true,
            },
            PolicyName::BestEffort | PolicyName::Restricted => {
                let filtered = filter_providers_hints(providers);
                let best_hint = merger(&filtered, default, &order);
                MergeResult {
                    best_hint,
                    admit: self.name == PolicyName::BestEffort || best_hint.preferred,
                }
            }
            PolicyName::SingleNumaNode => {
                let filtered = filter_single_numa_hints(filter_providers_hints(providers));
                let mut best_hint = merger(&filtered, default, &order);
                if best_hint.numa_affinity == Some(default) {
                    best_hint.numa_affinity = None;
                }
                MergeResult {
                    best_hint,
                    admit: best_hint.preferred,
                }
            }
        }
    }
}

use crate::NumaMask;

/// Upstream `Policy.Merge` computed exactly as upstream does, walking every permutation.
///
/// Exponential in the number of providers; meant for tests and benchmarks that check
/// [`Policy::merge`] against it. The exhaustive walk lives with the policy; the fast merge
/// (`merge`) is a pure function of the filtered lists.
pub fn reference_merge(policy: &Policy, providers: &[ProviderHints]) -> MergeResult {
    policy.merge_with(providers, reference_merge_filtered)
}

/// [`reference_merge`] over hint sets, each family listed first: upstream's algorithm run to
/// completion. Exponential in the NUMA nodes and the providers; for tests.
pub fn reference_merge_sets(policy: &Policy, providers: &[ProviderHintSets]) -> MergeResult {
    let lists: Vec<ProviderHints> = providers.iter().map(hint_lists).collect();
    reference_merge(policy, &lists)
}

#[cfg(test)]
mod tests;
