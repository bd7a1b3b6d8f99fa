//! Static policy options (upstream `policy_options.go`): names, maturity, parsing, mutual
//! incompatibilities and hardware validation, with upstream's error messages.
//!
//! As in v1.36, an alpha option needs the `CPUManagerPolicyAlphaOptions` feature gate (off
//! by default) and a beta one `CPUManagerPolicyBetaOptions` (on by default); GA options need
//! none ([`StaticPolicyOptions::from_map_gated`]). [`StaticPolicyOptions::from_map`] parses
//! with every gate on.

use std::collections::BTreeMap;

use corral_topology::{Feature, FeatureGates, PolicyName, TopologyCounts};

use crate::assignment::{CpuSortingStrategy, UncoreCacheAlignment};
use crate::hints::SocketAlignment;

/// `full-pcpus-only`: allocate whole physical cores only (GA in v1.36).
pub const FULL_PCPUS_ONLY: &str = "full-pcpus-only";
/// `distribute-cpus-across-numa`: spread evenly over NUMA nodes (beta in v1.36).
pub const DISTRIBUTE_CPUS_ACROSS_NUMA: &str = "distribute-cpus-across-numa";
/// `align-by-socket`: consider alignment at socket rather than NUMA boundary (alpha).
pub const ALIGN_BY_SOCKET: &str = "align-by-socket";
/// `distribute-cpus-across-cores`: spread threads over cores (alpha).
pub const DISTRIBUTE_CPUS_ACROSS_CORES: &str = "distribute-cpus-across-cores";
/// `strict-cpu-reservation`: keep reserved CPUs out of the shared pool (GA in v1.36).
pub const STRICT_CPU_RESERVATION: &str = "strict-cpu-reservation";
/// `prefer-align-cpus-by-uncorecache`: prefer whole uncore caches (GA in v1.36).
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

/// Upstream's maturity level of an option (v1.36).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionMaturity {
    /// Behind `CPUManagerPolicyAlphaOptions`.
    Alpha,
    /// Behind `CPUManagerPolicyBetaOptions`.
    Beta,
    /// GA: behind no gate.
    Stable,
}

/// Upstream's maturity of `name` in v1.36, `None` for an unknown option.
pub fn option_maturity(name: &str) -> Option<OptionMaturity> {
    match name {
        FULL_PCPUS_ONLY | STRICT_CPU_RESERVATION | PREFER_ALIGN_CPUS_BY_UNCORECACHE => {
            Some(OptionMaturity::Stable)
        }
        DISTRIBUTE_CPUS_ACROSS_NUMA => Some(OptionMaturity::Beta),
        ALIGN_BY_SOCKET | DISTRIBUTE_CPUS_ACROSS_CORES => Some(OptionMaturity::Alpha),
        _ => None,
    }
}

/// Why static policy options were refused (upstream's messages).
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
        let mut gates = FeatureGates::default();
        gates.set(Feature::CpuManagerPolicyAlphaOptions, true);
        gates.set(Feature::CpuManagerPolicyBetaOptions, true);
        StaticPolicyOptions::from_map_gated(options, &gates)
    }

    /// Parse the kubelet's `cpuManagerPolicyOptions` under `gates` (upstream
    /// `NewStaticPolicyOptions` with `CheckPolicyOptionAvailable`); options are checked in
    /// name order (upstream walks a Go map, in random order).
    pub fn from_map_gated(
        options: &BTreeMap<String, String>,
        gates: &FeatureGates,
    ) -> Result<Self, OptionsError> {
        let mut opts = StaticPolicyOptions::default();
        for (name, value) in options {
            let name_owned = || name.clone();
            match option_maturity(name) {
                None => return Err(OptionsError::Unknown { name: name_owned() }),
                Some(OptionMaturity::Alpha)
                    if !gates.enabled(Feature::CpuManagerPolicyAlphaOptions) =>
                {
                    return Err(OptionsError::AlphaNotEnabled { name: name_owned() });
                }
                Some(OptionMaturity::Beta)
                    if !gates.enabled(Feature::CpuManagerPolicyBetaOptions) =>
                {
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

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Whether the options parse and go together.
    fn accepts(pairs: &[(&str, &str)]) -> bool {
        StaticPolicyOptions::from_map(&map(pairs)).is_ok()
    }

    /// Upstream `TestPolicyOptionsAvailable` / `TestPolicyOptionsCompatibility`
    /// (policy_options_test.go), with every gate on.
    #[test]
    fn availability_and_compatibility() {
        for name in ALL_OPTIONS {
            assert!(accepts(&[(name, "true")]), "{name}");
        }
        assert_eq!(
            StaticPolicyOptions::from_map(&map(&[("this-option-does-not-exist", "true")])),
            Err(OptionsError::Unknown {
                name: "this-option-does-not-exist".into()
            })
        );
        let err = StaticPolicyOptions::from_map(&map(&[
            (FULL_PCPUS_ONLY, "true"),
            (DISTRIBUTE_CPUS_ACROSS_CORES, "true"),
        ]))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "static policy options full-pcpus-only and distribute-cpus-across-cores can not be used at the same time"
        );
        assert!(!accepts(&[
            (DISTRIBUTE_CPUS_ACROSS_NUMA, "true"),
            (DISTRIBUTE_CPUS_ACROSS_CORES, "true")
        ]));
        assert!(!accepts(&[
            (PREFER_ALIGN_CPUS_BY_UNCORECACHE, "true"),
            (DISTRIBUTE_CPUS_ACROSS_NUMA, "true")
        ]));
        assert!(accepts(&[
            (PREFER_ALIGN_CPUS_BY_UNCORECACHE, "true"),
            (FULL_PCPUS_ONLY, "true")
        ]));
        // Disabled options do not clash.
        assert!(accepts(&[
            (FULL_PCPUS_ONLY, "false"),
            (DISTRIBUTE_CPUS_ACROSS_CORES, "true")
        ]));
        assert_eq!(
            StaticPolicyOptions::from_map(&map(&[(FULL_PCPUS_ONLY, "yes")]))
                .unwrap_err()
                .to_string(),
            "bad value for option \"full-pcpus-only\": strconv.ParseBool: parsing \"yes\": invalid syntax"
        );
        assert_eq!(
            option_maturity(FULL_PCPUS_ONLY),
            Some(OptionMaturity::Stable)
        );
        assert_eq!(option_maturity("x"), None);
    }

    /// Upstream `TestPolicyOptionsAvailable` (policy_options_test.go) with v1.36's levels:
    /// every option under every combination of the two gates.
    #[test]
    fn availability_under_every_gate_combination() {
        for (alpha, beta) in [(false, false), (false, true), (true, false), (true, true)] {
            let mut gates = FeatureGates::default();
            gates.set(Feature::CpuManagerPolicyAlphaOptions, alpha);
            gates.set(Feature::CpuManagerPolicyBetaOptions, beta);
            for name in ALL_OPTIONS {
                let got = StaticPolicyOptions::from_map_gated(&map(&[(name, "true")]), &gates);
                let want = match option_maturity(name) {
                    Some(OptionMaturity::Alpha) if !alpha => Err(OptionsError::AlphaNotEnabled {
                        name: name.to_owned(),
                    }),
                    Some(OptionMaturity::Beta) if !beta => Err(OptionsError::BetaNotEnabled {
                        name: name.to_owned(),
                    }),
                    _ => Ok(()),
                };
                assert_eq!(got.map(drop), want, "{name} alpha={alpha} beta={beta}");
            }
        }
        // The v1.36 defaults: alpha off, beta on.
        let defaults = FeatureGates::default();
        let with =
            |name: &str| StaticPolicyOptions::from_map_gated(&map(&[(name, "true")]), &defaults);
        assert!(with(DISTRIBUTE_CPUS_ACROSS_NUMA).is_ok());
        assert_eq!(
            with(ALIGN_BY_SOCKET).unwrap_err().to_string(),
            "CPU Manager Policy Alpha-level Options not enabled, but option \"align-by-socket\" provided"
        );
    }

    /// Upstream `TestValidateStaticPolicyOptions` (policy_options_test.go).
    #[test]
    fn validate_align_by_socket() {
        let opts = StaticPolicyOptions {
            align_by_socket: true,
            ..Default::default()
        };
        let dual = TopologyCounts {
            num_cpus: 12,
            num_cores: 6,
            num_sockets: 2,
            num_numa_nodes: 2,
            num_uncore_caches: 1,
        };
        assert!(opts.validate(dual, PolicyName::BestEffort).is_ok());
        assert_eq!(
            opts.validate(dual, PolicyName::SingleNumaNode),
            Err(OptionsError::AlignBySocketWithSingleNumaNode)
        );
        let more_sockets = TopologyCounts {
            num_numa_nodes: 1,
            ..dual
        };
        assert_eq!(
            opts.validate(more_sockets, PolicyName::None),
            Err(OptionsError::AlignBySocketHardware)
        );
        assert!(
            StaticPolicyOptions::default()
                .validate(more_sockets, PolicyName::SingleNumaNode)
                .is_ok()
        );
    }
}
