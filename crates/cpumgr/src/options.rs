//! Static policy options (upstream `policy_options.go`): names, maturity, parsing, mutual
//! incompatibilities and hardware validation, with upstream's error messages.
//!
//! The options are checked against the kubelet's feature gates
//! ([`corral_topology::FeatureGates`], v1.36's defaults unless the config's `featureGates`
//! sets them), as v1.36's `CheckPolicyOptionAvailable` does: an alpha option needs
//! `CPUManagerPolicyAlphaOptions` (alpha, off by default), a beta one
//! `CPUManagerPolicyBetaOptions` (beta, on by default), a GA one no gate
//! ([`StaticPolicyOptions::from_map_gated`]). [`StaticPolicyOptions::from_map`] parses with
//! both gates on.
//!
//! The v1.36 levels ([`option_maturity`]): `full-pcpus-only` GA since 1.33,
//! `strict-cpu-reservation` GA since 1.35, `prefer-align-cpus-by-uncorecache` GA since 1.36
//! (KEP-4800), `distribute-cpus-across-numa` beta, `align-by-socket` and
//! `distribute-cpus-across-cores` alpha (the website's CPU management policies page, store
//! ids 62104581371 and 52182011618). The messages and the four incompatible pairs are those
//! of upstream's `policy_options.go` (store id 135551090, commit 7ed31812; its option sets
//! predate 1.35, its texts and checks are unchanged since).

use std::collections::BTreeMap;

use corral_topology::{Feature, FeatureGates, Maturity, PolicyName, TopologyCounts};

use crate::assignment::{CpuSortingStrategy, UncoreCacheAlignment};
use crate::hints::SocketAlignment;

/// `full-pcpus-only`: allocate whole physical cores only (GA since v1.33: no gate).
pub const FULL_PCPUS_ONLY: &str = "full-pcpus-only";
/// `distribute-cpus-across-numa`: spread evenly over NUMA nodes (beta in v1.36:
/// `CPUManagerPolicyBetaOptions`, on by default).
pub const DISTRIBUTE_CPUS_ACROSS_NUMA: &str = "distribute-cpus-across-numa";
/// `align-by-socket`: consider alignment at socket rather than NUMA boundary (alpha in v1.36:
/// `CPUManagerPolicyAlphaOptions`, off by default).
pub const ALIGN_BY_SOCKET: &str = "align-by-socket";
/// `distribute-cpus-across-cores`: spread threads over cores (alpha in v1.36:
/// `CPUManagerPolicyAlphaOptions`, off by default).
pub const DISTRIBUTE_CPUS_ACROSS_CORES: &str = "distribute-cpus-across-cores";
/// `strict-cpu-reservation`: keep reserved CPUs out of the shared pool (GA since v1.35: no
/// gate).
pub const STRICT_CPU_RESERVATION: &str = "strict-cpu-reservation";
/// `prefer-align-cpus-by-uncorecache`: prefer whole uncore caches (GA since v1.36: no gate).
pub const PREFER_ALIGN_CPUS_BY_UNCORECACHE: &str = "prefer-align-cpus-by-uncorecache";

/// Every option name upstream knows, alphabetically.
pub const ALL_OPTIONS: [&str; 6] = [
    ALIGN_BY_SOCKET,
    DISTRIBUTE_CPUS_ACROSS_CORES,
    DISTRIBUTE_CPUS_ACROSS_NUMA,
    FULL_PCPUS_ONLY,
    PREFER_ALIGN_CPUS_BY_UNCORECACHE,
    STRICT_CPU_RESERVATION,
];

/// Upstream's maturity level of an option: [`Maturity`]'s `Alpha` (behind
/// `CPUManagerPolicyAlphaOptions`), `Beta` (behind `CPUManagerPolicyBetaOptions`) or `Ga`
/// (behind no gate).
pub type OptionMaturity = Maturity;

/// Upstream's maturity of `name` in v1.36, `None` for an unknown option.
///
/// ```
/// use corral_cpumgr::{OptionMaturity, option_maturity};
///
/// assert_eq!(option_maturity("prefer-align-cpus-by-uncorecache"), Some(OptionMaturity::Ga));
/// assert_eq!(option_maturity("distribute-cpus-across-numa"), Some(OptionMaturity::Beta));
/// assert_eq!(option_maturity("align-by-socket"), Some(OptionMaturity::Alpha));
/// assert_eq!(option_maturity("no-such-option"), None);
/// ```
pub fn option_maturity(name: &str) -> Option<OptionMaturity> {
    match name {
        FULL_PCPUS_ONLY | STRICT_CPU_RESERVATION | PREFER_ALIGN_CPUS_BY_UNCORECACHE => {
            Some(Maturity::Ga)
        }
        DISTRIBUTE_CPUS_ACROSS_NUMA => Some(Maturity::Beta),
        ALIGN_BY_SOCKET | DISTRIBUTE_CPUS_ACROSS_CORES => Some(Maturity::Alpha),
        _ => None,
    }
}

/// Why static policy options were refused. Every message is upstream's exact text (the
/// conformance suite `policy_options` and the tests compare them byte for byte).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// An option upstream does not know.
    #[error("unknown CPU Manager Policy option: {name:?}")]
    Unknown {
        /// The option given.
        name: String,
    },
    /// An alpha option without `CPUManagerPolicyAlphaOptions`.
    #[error("CPU Manager Policy Alpha-level Options not enabled, but option {name:?} provided")]
    AlphaNotEnabled {
        /// The option given.
        name: String,
    },
    /// A beta option with `CPUManagerPolicyBetaOptions` off.
    #[error("CPU Manager Policy Beta-level Options not enabled, but option {name:?} provided")]
    BetaNotEnabled {
        /// The option given.
        name: String,
    },
    /// A value `strconv.ParseBool` refuses.
    #[error("bad value for option {name:?}: strconv.ParseBool: parsing {value:?}: invalid syntax")]
    BadValue {
        /// The option.
        name: String,
        /// The value given.
        value: String,
    },
    /// Two options that cannot be combined.
    #[error("static policy options {first} and {second} can not be used at the same time")]
    Incompatible {
        /// The first option (upstream's order).
        first: &'static str,
        /// The second option.
        second: &'static str,
    },
    /// `align-by-socket` with the topology manager's `single-numa-node` policy (upstream's
    /// message, typo included).
    #[error(
        "Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option"
    )]
    AlignBySocketWithSingleNumaNode,
    /// `align-by-socket` on a machine with more sockets than NUMA nodes.
    #[error(
        "Align by socket is not compatible with hardware where number of sockets are more than number of NUMA"
    )]
    AlignBySocketHardware,
    /// The `none` policy takes no option.
    #[error("None policy: received unsupported options={options}")]
    NoneWithOptions {
        /// The options, as Go prints a map (`map[a:b c:d]`).
        options: String,
    },
}

/// The parsed static policy options (upstream `StaticPolicyOptions`).
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_cpumgr::StaticPolicyOptions;
///
/// let map = BTreeMap::from([("full-pcpus-only".to_owned(), "true".to_owned())]);
/// let opts = StaticPolicyOptions::from_map(&map)?;
/// assert!(opts.full_physical_cpus_only);
/// let bad = BTreeMap::from([("no-such-option".to_owned(), "true".to_owned())]);
/// assert_eq!(
///     StaticPolicyOptions::from_map(&bad).unwrap_err().to_string(),
///     "unknown CPU Manager Policy option: \"no-such-option\""
/// );
/// # Ok::<(), corral_cpumgr::OptionsError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaticPolicyOptions {
    /// `full-pcpus-only`.
    pub full_physical_cpus_only: bool,
    /// `distribute-cpus-across-numa`.
    pub distribute_cpus_across_numa: bool,
    /// `align-by-socket`.
    pub align_by_socket: bool,
    /// `distribute-cpus-across-cores`.
    pub distribute_cpus_across_cores: bool,
    /// `strict-cpu-reservation`.
    pub strict_cpu_reservation: bool,
    /// `prefer-align-cpus-by-uncorecache`.
    pub prefer_align_by_uncore_cache: bool,
}

/// Go's `strconv.ParseBool`.
pub(crate) fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A map as Go's `%v` prints it.
pub(crate) fn go_map_string(map: &BTreeMap<String, String>) -> String {
    let inner: Vec<String> = map.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", inner.join(" "))
}

impl StaticPolicyOptions {
    /// The field of the option called `name`.
    fn flag_mut(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            FULL_PCPUS_ONLY => &mut self.full_physical_cpus_only,
            DISTRIBUTE_CPUS_ACROSS_NUMA => &mut self.distribute_cpus_across_numa,
            ALIGN_BY_SOCKET => &mut self.align_by_socket,
            DISTRIBUTE_CPUS_ACROSS_CORES => &mut self.distribute_cpus_across_cores,
            STRICT_CPU_RESERVATION => &mut self.strict_cpu_reservation,
            PREFER_ALIGN_CPUS_BY_UNCORECACHE => &mut self.prefer_align_by_uncore_cache,
            _ => return None,
        })
    }

    /// Whether the option called `name` is on.
    fn flag(mut self, name: &str) -> bool {
        self.flag_mut(name).is_some_and(|on| *on)
    }

    /// [`from_map_gated`](Self::from_map_gated) with every option's gate on.
    pub fn from_map(options: &BTreeMap<String, String>) -> Result<Self, OptionsError> {
        // Neither gate is locked, so setting them cannot fail.
        let gates = FeatureGates::v1_37_defaults()
            .with(Feature::CpuManagerPolicyAlphaOptions, true)
            .and_then(|gates| gates.with(Feature::CpuManagerPolicyBetaOptions, true))
            .unwrap_or_default();
        StaticPolicyOptions::from_map_gated(options, &gates)
    }

    /// Parse the kubelet's `cpuManagerPolicyOptions` under `gates` (upstream
    /// `NewStaticPolicyOptions` with `CheckPolicyOptionAvailable`); options are checked in
    /// name order (upstream walks a Go map, in random order), then the incompatible pairs in
    /// upstream's order.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use corral_cpumgr::StaticPolicyOptions;
    /// use corral_topology::FeatureGates;
    ///
    /// let gates = FeatureGates::v1_37_defaults();
    /// let ga = BTreeMap::from([("strict-cpu-reservation".to_owned(), "true".to_owned())]);
    /// assert!(StaticPolicyOptions::from_map_gated(&ga, &gates)?.strict_cpu_reservation);
    /// let alpha = BTreeMap::from([("align-by-socket".to_owned(), "true".to_owned())]);
    /// assert_eq!(
    ///     StaticPolicyOptions::from_map_gated(&alpha, &gates).unwrap_err().to_string(),
    ///     "CPU Manager Policy Alpha-level Options not enabled, but option \"align-by-socket\" provided"
    /// );
    /// # Ok::<(), corral_cpumgr::OptionsError>(())
    /// ```
    pub fn from_map_gated(
        options: &BTreeMap<String, String>,
        gates: &FeatureGates,
    ) -> Result<Self, OptionsError> {
        let mut opts = StaticPolicyOptions::default();
        for (name, value) in options {
            let name_owned = || name.clone();
            match option_maturity(name) {
                None => return Err(OptionsError::Unknown { name: name_owned() }),
                Some(Maturity::Alpha) if !gates.enabled(Feature::CpuManagerPolicyAlphaOptions) => {
                    return Err(OptionsError::AlphaNotEnabled { name: name_owned() });
                }
                Some(Maturity::Beta) if !gates.enabled(Feature::CpuManagerPolicyBetaOptions) => {
                    return Err(OptionsError::BetaNotEnabled { name: name_owned() });
                }
                Some(_) => {}
            }
            let parsed = parse_go_bool(value).ok_or_else(|| OptionsError::BadValue {
                name: name.clone(),
                value: value.clone(),
            })?;
            if let Some(flag) = opts.flag_mut(name) {
                *flag = parsed;
            }
        }
        // Upstream's incompatible pairs, in its order.
        let incompatible = [
            (FULL_PCPUS_ONLY, DISTRIBUTE_CPUS_ACROSS_CORES),
            (DISTRIBUTE_CPUS_ACROSS_NUMA, DISTRIBUTE_CPUS_ACROSS_CORES),
            (
                PREFER_ALIGN_CPUS_BY_UNCORECACHE,
                DISTRIBUTE_CPUS_ACROSS_CORES,
            ),
            (
                PREFER_ALIGN_CPUS_BY_UNCORECACHE,
                DISTRIBUTE_CPUS_ACROSS_NUMA,
            ),
        ];
        for (first, second) in incompatible {
            if opts.flag(first) && opts.flag(second) {
                return Err(OptionsError::Incompatible { first, second });
            }
        }
        Ok(opts)
    }

    /// Check the options against the machine and the topology manager policy (upstream
    /// `ValidateStaticPolicyOptions`): [`validate_policy`](Self::validate_policy), then the
    /// machine's counts.
    pub fn validate(
        &self,
        counts: TopologyCounts,
        topology_manager_policy: PolicyName,
    ) -> Result<(), OptionsError> {
        self.validate_policy(topology_manager_policy)?;
        if self.align_by_socket && counts.num_sockets > counts.num_numa_nodes {
            return Err(OptionsError::AlignBySocketHardware);
        }
        Ok(())
    }

    /// The part of [`validate`](Self::validate) that needs no machine: the options against
    /// the topology manager policy (`align-by-socket` is refused with `single-numa-node`).
    /// A configuration check runs this before any machine is at hand.
    pub fn validate_policy(&self, topology_manager_policy: PolicyName) -> Result<(), OptionsError> {
        if self.align_by_socket && topology_manager_policy == PolicyName::SingleNumaNode {
            return Err(OptionsError::AlignBySocketWithSingleNumaNode);
        }
        Ok(())
    }

    /// The sorting strategy `takeByTopology` uses (`spread` with
    /// `distribute-cpus-across-cores`).
    pub fn sorting_strategy(&self) -> CpuSortingStrategy {
        if self.distribute_cpus_across_cores {
            CpuSortingStrategy::Spread
        } else {
            CpuSortingStrategy::Packed
        }
    }

    /// Whether `takeByTopologyNUMAPacked` prefers whole uncore caches
    /// (`prefer-align-cpus-by-uncorecache`).
    pub fn uncore_cache_alignment(&self) -> UncoreCacheAlignment {
        if self.prefer_align_by_uncore_cache {
            UncoreCacheAlignment::Prefer
        } else {
            UncoreCacheAlignment::Ignore
        }
    }

    /// Whether hints spanning the fewest sockets are preferred too (`align-by-socket`).
    pub fn socket_alignment(&self) -> SocketAlignment {
        if self.align_by_socket {
            SocketAlignment::Prefer
        } else {
            SocketAlignment::Ignore
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Upstream's tables (TestPolicyDefaultsAvailable, TestPolicyOptionsAvailable,
    // TestPolicyOptionsCompatibility, TestValidateStaticPolicyOptions) are ported in
    // tests/it/upstream_policy_options.rs; these are the helpers' own facts.

    #[test]
    fn go_parse_bool_spellings() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(t), Some(true), "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(f), Some(false), "{f}");
        }
        for bad in ["", "yes", "on", "tRUE", " true"] {
            assert_eq!(parse_go_bool(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn go_map_printing() {
        let map: BTreeMap<String, String> = [("b", "2"), ("a", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(go_map_string(&map), "map[a:1 b:2]");
        assert_eq!(go_map_string(&BTreeMap::new()), "map[]");
    }

    /// Every option has a level and a field; the level decides the gate.
    #[test]
    fn every_option_has_a_level_and_a_field() {
        for name in ALL_OPTIONS {
            assert!(option_maturity(name).is_some(), "{name}");
            assert!(
                StaticPolicyOptions::default().flag_mut(name).is_some(),
                "{name}"
            );
        }
        let mut sorted = ALL_OPTIONS;
        sorted.sort_unstable();
        assert_eq!(sorted, ALL_OPTIONS);
    }
}
