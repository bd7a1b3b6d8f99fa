//! The kubelet's feature gates that change what corral's resource managers decide or accept,
//! with their v1.36 maturity and defaults, parsed from a KubeletConfiguration's
//! `featureGates` map the way the kubelet's `featuregate.SetFromMap` does.
//!
//! # The gates, as of v1.36
//!
//! | gate | v1.36 | default | since | locked |
//! |---|---|---|---|---|
//! | `CPUManagerPolicyAlphaOptions` | alpha | off | 1.23 | no |
//! | `CPUManagerPolicyBetaOptions` | beta | on | 1.23 | no |
//! | `CPUManagerPolicyOptions` | GA | on | 1.33 | yes |
//! | `TopologyManagerPolicyAlphaOptions` | alpha | off | 1.26 | no |
//! | `TopologyManagerPolicyBetaOptions` | beta | on | 1.28 (beta off 1.26–1.27) | no |
//! | `TopologyManagerPolicyOptions` | GA | on | 1.32 | no |
//! | `PodLevelResources` | beta | on | 1.34 (alpha 1.32) | no |
//! | `PodLevelResourceManagers` | alpha | off | 1.36 | no |
//! | `DisableCPUQuotaWithExclusiveCPUs` | beta | on | 1.33 | no |
//! | `InPlacePodVerticalScalingExclusiveCPUs` | alpha | off | 1.32 | no |
//! | `DRAExtendedResource` | beta | on | 1.36 (alpha 1.34) | no |
//! | `ResourceHealthStatus` | beta | on | 1.36 (alpha 1.31) | no |
//! | `ResourceHealthStatusMessage` | beta | on | 1.36 | no |
//!
//! `CPUManager` (removed in 1.33), `TopologyManager` (removed in 1.29) and `MemoryManager`
//! (GA and locked in 1.32, removed in 1.36) are no longer gates: v1.36 refuses them as
//! unrecognized, and so does corral ([`REMOVED_GATES`]).
//!
//! Sources (the project's search index of public repositories): `pkg/features/kube_features.go`
//! of the v1.36 development branch (store id 378079260: the versioned specs above, the
//! `MemoryManager` entry still present, no `CPUManager` or `TopologyManager`); the website's
//! feature-gate pages (`PodLevelResourceManagers` alpha from 1.36, store id 52406034925;
//! `MemoryManager` stable 1.32–1.35 then removed, id 68710109469; `CPUManager` removed after
//! 1.32, id 70714444356) and upstream PRs #136381 (MemoryManager gate removed in the 1.36
//! cycle), #129296 (CPUManager gate removed for 1.33) and #139351 (1.37 cycle: locks
//! `DisableCPUQuotaWithExclusiveCPUs`, still unlocked in 1.36). One page of the website gives
//! `DisableCPUQuotaWithExclusiveCPUs` a "deprecated" stage from 1.36 (id 68488183557); the
//! v1.36 source read here has it beta, and either way it defaults on and may be turned off.
//! `CPUManagerPolicyOptions` was marked "remove in 1.36" upstream; whether the final v1.36
//! still registers it could not be read, so corral keeps it (locked to true).
//! `ResourceHealthStatus` and `ResourceHealthStatusMessage` (both beta and on in 1.36) come
//! from the generated kube-scheduler reference of 1.36 (id 52070109846); the 1.35 source has
//! `ResourceHealthStatus` alpha since 1.31 (id 378079260).
//!
//! # Errors (upstream's texts)
//!
//! `k8s.io/component-base/featuregate` `SetFromMap` (store id 894139668) refuses a name it
//! does not know with `unrecognized feature gate: NAME` (and stops there), a locked gate set
//! away from its value with `cannot set feature gate NAME to false, feature is locked to
//! true`, and returns several errors as one `[first, second]` (`utilerrors.NewAggregate`).
//! Go walks the map in random order; corral walks it in name order, which is one of the
//! orders Go may take.
//!
//! # Names corral does not model
//!
//! The kubelet knows a few hundred gates and refuses every other name. corral models the
//! gates above and could only refuse the rest by carrying upstream's whole list, which would
//! go stale with every release. A kubelet config commonly sets gates of other parts of the
//! kubelet, so corral accepts any other name and lists it in [`FeatureGates::ignored`]:
//! `corral config check` prints them and `corral run` logs them, so a misspelt gate is seen,
//! not silently dropped. Only the names v1.36 is known to refuse (the removed gates above)
//! are errors.

use std::collections::BTreeMap;

/// A feature gate's (or a policy option's) maturity, upstream `featuregate.prerelease`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Maturity {
    /// Alpha: off by default.
    Alpha,
    /// Beta: on by default for every gate here.
    Beta,
    /// GA (stable): on; a policy option at this level needs no gate.
    Ga,
}

impl Maturity {
    /// The level as upstream writes it in `featuregate` (`ALPHA`, `BETA`, `GA`) and the
    /// kubelet's docs speak of it: `alpha`, `beta`, `GA`.
    pub fn as_str(self) -> &'static str {
        match self {
            Maturity::Alpha => "alpha",
            Maturity::Beta => "beta",
            Maturity::Ga => "GA",
        }
    }
}

impl std::fmt::Display for Maturity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kubelet feature gate corral models (the table is in [the module docs](crate::feature_gates)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Feature {
    /// `CPUManagerPolicyAlphaOptions`: the CPU manager's alpha static policy options.
    CpuManagerPolicyAlphaOptions,
    /// `CPUManagerPolicyBetaOptions`: the CPU manager's beta static policy options.
    CpuManagerPolicyBetaOptions,
    /// `CPUManagerPolicyOptions`: `cpuManagerPolicyOptions` at all (GA, locked to true).
    CpuManagerPolicyOptions,
    /// `TopologyManagerPolicyAlphaOptions`: the topology manager's alpha policy options.
    TopologyManagerPolicyAlphaOptions,
    /// `TopologyManagerPolicyBetaOptions`: the topology manager's beta policy options.
    TopologyManagerPolicyBetaOptions,
    /// `TopologyManagerPolicyOptions`: `topologyManagerPolicyOptions` at all (GA, not
    /// locked: turned off, any option given is refused).
    TopologyManagerPolicyOptions,
    /// `PodLevelResources` (KEP-2837): pods may set `spec.resources`.
    PodLevelResources,
    /// `PodLevelResourceManagers` (KEP-5526): the topology, CPU and memory managers
    /// allocate such pods' budgets at pod scope.
    PodLevelResourceManagers,
    /// `DisableCPUQuotaWithExclusiveCPUs`: no CFS quota for containers with exclusive CPUs.
    DisableCpuQuotaWithExclusiveCpus,
    /// `InPlacePodVerticalScalingExclusiveCPUs`: resize pods with exclusive CPUs in place.
    InPlacePodVerticalScalingExclusiveCpus,
    /// `DRAExtendedResource` (KEP-5004): extended resources a pod requests may be backed by
    /// a DRA claim (`status.extendedResourceClaimStatus`) instead of a device plugin.
    DraExtendedResource,
    /// `ResourceHealthStatus` (KEP-4680): containers' `allocatedResourcesStatus` and the
    /// DRA health streams.
    ResourceHealthStatus,
    /// `ResourceHealthStatusMessage` (KEP-4680): a DRA driver's health message is shown.
    ResourceHealthStatusMessage,
}

/// Every modelled gate, in the order `corral config check` prints them.
pub const FEATURES: [Feature; 13] = [
    Feature::CpuManagerPolicyAlphaOptions,
    Feature::CpuManagerPolicyBetaOptions,
    Feature::CpuManagerPolicyOptions,
    Feature::TopologyManagerPolicyAlphaOptions,
    Feature::TopologyManagerPolicyBetaOptions,
    Feature::TopologyManagerPolicyOptions,
    Feature::PodLevelResources,
    Feature::PodLevelResourceManagers,
    Feature::DisableCpuQuotaWithExclusiveCpus,
    Feature::InPlacePodVerticalScalingExclusiveCpus,
    Feature::DraExtendedResource,
    Feature::ResourceHealthStatus,
    Feature::ResourceHealthStatusMessage,
];

/// Gates the kubelet no longer knows in v1.36, with the release that removed each: v1.36
/// refuses them (`unrecognized feature gate: NAME`), and so does [`FeatureGates::from_map`].
pub const REMOVED_GATES: [(&str, &str); 3] = [
    ("CPUManager", "1.33"),
    ("MemoryManager", "1.36"),
    ("TopologyManager", "1.29"),
];

impl Feature {
    /// The gate's name in `featureGates`.
    pub fn name(self) -> &'static str {
        match self {
            Feature::CpuManagerPolicyAlphaOptions => "CPUManagerPolicyAlphaOptions",
            Feature::CpuManagerPolicyBetaOptions => "CPUManagerPolicyBetaOptions",
            Feature::CpuManagerPolicyOptions => "CPUManagerPolicyOptions",
            Feature::TopologyManagerPolicyAlphaOptions => "TopologyManagerPolicyAlphaOptions",
            Feature::TopologyManagerPolicyBetaOptions => "TopologyManagerPolicyBetaOptions",
            Feature::TopologyManagerPolicyOptions => "TopologyManagerPolicyOptions",
            Feature::PodLevelResources => "PodLevelResources",
            Feature::PodLevelResourceManagers => "PodLevelResourceManagers",
            Feature::DisableCpuQuotaWithExclusiveCpus => "DisableCPUQuotaWithExclusiveCPUs",
            Feature::InPlacePodVerticalScalingExclusiveCpus => {
                "InPlacePodVerticalScalingExclusiveCPUs"
            }
            Feature::DraExtendedResource => "DRAExtendedResource",
            Feature::ResourceHealthStatus => "ResourceHealthStatus",
            Feature::ResourceHealthStatusMessage => "ResourceHealthStatusMessage",
        }
    }

    /// The gate's maturity in v1.36.
    pub fn maturity(self) -> Maturity {
        match self {
            Feature::CpuManagerPolicyAlphaOptions
            | Feature::TopologyManagerPolicyAlphaOptions
            | Feature::PodLevelResourceManagers
            | Feature::InPlacePodVerticalScalingExclusiveCpus => Maturity::Alpha,
            Feature::CpuManagerPolicyBetaOptions
            | Feature::TopologyManagerPolicyBetaOptions
            | Feature::PodLevelResources
            | Feature::DisableCpuQuotaWithExclusiveCpus
            | Feature::DraExtendedResource
            | Feature::ResourceHealthStatus
            | Feature::ResourceHealthStatusMessage => Maturity::Beta,
            Feature::CpuManagerPolicyOptions | Feature::TopologyManagerPolicyOptions => {
                Maturity::Ga
            }
        }
    }

    /// The release in which the gate reached its v1.36 [`maturity`](Self::maturity) and
    /// default.
    pub fn since(self) -> &'static str {
        match self {
            Feature::CpuManagerPolicyAlphaOptions | Feature::CpuManagerPolicyBetaOptions => "1.23",
            Feature::CpuManagerPolicyOptions | Feature::DisableCpuQuotaWithExclusiveCpus => "1.33",
            Feature::TopologyManagerPolicyAlphaOptions => "1.26",
            Feature::TopologyManagerPolicyBetaOptions => "1.28",
            Feature::TopologyManagerPolicyOptions
            | Feature::InPlacePodVerticalScalingExclusiveCpus => "1.32",
            Feature::PodLevelResources => "1.34",
            Feature::PodLevelResourceManagers
            | Feature::DraExtendedResource
            | Feature::ResourceHealthStatus
            | Feature::ResourceHealthStatusMessage => "1.36",
        }
    }

    /// The gate's v1.36 default: alpha gates off, every other one here on.
    pub fn default_enabled(self) -> bool {
        self.maturity() != Maturity::Alpha
    }

    /// Whether v1.36 locks the gate to its default (upstream `LockToDefault`).
    pub fn locked(self) -> bool {
        self == Feature::CpuManagerPolicyOptions
    }

    /// The gate called `name`, if corral models it.
    pub fn from_name(name: &str) -> Option<Feature> {
        FEATURES.into_iter().find(|f| f.name() == name)
    }
}

impl std::fmt::Display for Feature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a `featureGates` map was refused. The messages are upstream's exact texts
/// (`featuregate.unsafeSetFromMap`, `utilerrors.NewAggregate`), which the unit tests assert.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FeatureGateError {
    /// A name the kubelet does not know (here: a gate v1.36 no longer has).
    #[error("unrecognized feature gate: {name}")]
    Unrecognized {
        /// The name given.
        name: String,
    },
    /// A locked gate set away from its locked value.
    #[error("cannot set feature gate {name} to {value}, feature is locked to {locked_to}")]
    Locked {
        /// The gate.
        name: &'static str,
        /// The value given.
        value: bool,
        /// The value it is locked to.
        locked_to: bool,
    },
    /// More than one of the above, as upstream's aggregate error prints them.
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Several(Vec<FeatureGateError>),
}

/// The feature gates in force: v1.36's defaults, overridden by a `featureGates` map.
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{Feature, FeatureGates, Maturity};
///
/// let gates = FeatureGates::v1_36_defaults();
/// assert!(!gates.enabled(Feature::PodLevelResourceManagers));
/// assert!(gates.enabled(Feature::DisableCpuQuotaWithExclusiveCpus));
/// assert_eq!(Feature::CpuManagerPolicyBetaOptions.maturity(), Maturity::Beta);
///
/// let map = BTreeMap::from([
///     ("PodLevelResourceManagers".to_owned(), true),
///     ("SomeOtherComponentsGate".to_owned(), true),
/// ]);
/// let gates = FeatureGates::from_map(&map)?;
/// assert!(gates.enabled(Feature::PodLevelResourceManagers));
/// assert_eq!(gates.ignored(), ["SomeOtherComponentsGate"]);
///
/// // Upstream's refusals, word for word.
/// let locked = BTreeMap::from([("CPUManagerPolicyOptions".to_owned(), false)]);
/// assert_eq!(
///     FeatureGates::from_map(&locked).unwrap_err().to_string(),
///     "cannot set feature gate CPUManagerPolicyOptions to false, feature is locked to true"
/// );
/// let removed = BTreeMap::from([("CPUManager".to_owned(), true)]);
/// assert_eq!(
///     FeatureGates::from_map(&removed).unwrap_err().to_string(),
///     "unrecognized feature gate: CPUManager"
/// );
/// # Ok::<(), corral_topology::FeatureGateError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates {
    /// The modelled gates the map set, with their values (defaults included).
    given: BTreeMap<Feature, bool>,
    /// Names given that corral does not model.
    ignored: Vec<String>,
}

impl Default for FeatureGates {
    /// [`FeatureGates::v1_36_defaults`].
    fn default() -> Self {
        FeatureGates::v1_36_defaults()
    }
}

impl FeatureGates {
    /// Every gate at its v1.36 default.
    pub fn v1_36_defaults() -> FeatureGates {
        FeatureGates {
            given: BTreeMap::new(),
            ignored: Vec::new(),
        }
    }

    /// v1.36's defaults with `map`'s values (upstream `SetFromMap`): a removed gate is
    /// refused and ends the walk, a locked gate set away from its value is refused (the walk
    /// goes on), any other name corral does not model is [ignored](Self::ignored).
    pub fn from_map(map: &BTreeMap<String, bool>) -> Result<FeatureGates, FeatureGateError> {
        let mut gates = FeatureGates::v1_36_defaults();
        let mut errors = Vec::new();
        for (name, &value) in map {
            match Feature::from_name(name) {
                Some(feature) => {
                    if let Err(err) = gates.set(feature, value) {
                        errors.push(err);
                    }
                }
                None if REMOVED_GATES.iter().any(|(removed, _)| removed == name) => {
                    errors.push(FeatureGateError::Unrecognized { name: name.clone() });
                    break;
                }
                None => gates.ignored.push(name.clone()),
            }
        }
        match errors.len() {
            0 => Ok(gates),
            1 => Err(errors.remove(0)),
            _ => Err(FeatureGateError::Several(errors)),
        }
    }

    /// Set `feature` to `enabled`; a locked gate refuses any other value than its own.
    pub fn set(&mut self, feature: Feature, enabled: bool) -> Result<(), FeatureGateError> {
        if feature.locked() && enabled != feature.default_enabled() {
            return Err(FeatureGateError::Locked {
                name: feature.name(),
                value: enabled,
                locked_to: feature.default_enabled(),
            });
        }
        self.given.insert(feature, enabled);
        Ok(())
    }

    /// `self` with `feature` set to `enabled` (see [`set`](Self::set)).
    pub fn with(mut self, feature: Feature, enabled: bool) -> Result<Self, FeatureGateError> {
        self.set(feature, enabled)?;
        Ok(self)
    }

    /// Whether `feature` is on.
    pub fn enabled(&self, feature: Feature) -> bool {
        self.given
            .get(&feature)
            .copied()
            .unwrap_or_else(|| feature.default_enabled())
    }

    /// Whether `feature` is at its v1.36 default.
    pub fn is_default(&self, feature: Feature) -> bool {
        self.enabled(feature) == feature.default_enabled()
    }

    /// The names given that corral does not model (accepted, without effect).
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// The warnings upstream logs for the gates given (`Setting GA feature gate NAME=VALUE.
    /// It will be removed in a future release.` for every GA gate the map sets).
    pub fn warnings(&self) -> Vec<String> {
        self.given
            .iter()
            .filter(|(feature, _)| feature.maturity() == Maturity::Ga)
            .map(|(feature, value)| {
                format!(
                    "Setting GA feature gate {}={value}. It will be removed in a future release.",
                    feature.name()
                )
            })
            .collect()
    }

    /// How pods with pod-level resources are managed: `PodLevelResourceManagers` and
    /// `PodLevelResources` both on (as upstream checks both).
    pub fn pod_level_resources(&self) -> crate::PodLevelResources {
        if self.enabled(Feature::PodLevelResourceManagers)
            && self.enabled(Feature::PodLevelResources)
        {
            crate::PodLevelResources::Managed
        } else {
            crate::PodLevelResources::Unmanaged
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, bool)]) -> BTreeMap<String, bool> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    /// The table in the module docs, row by row.
    #[test]
    fn v136_table() {
        let rows = [
            (
                "CPUManagerPolicyAlphaOptions",
                Maturity::Alpha,
                false,
                "1.23",
                false,
            ),
            (
                "CPUManagerPolicyBetaOptions",
                Maturity::Beta,
                true,
                "1.23",
                false,
            ),
            ("CPUManagerPolicyOptions", Maturity::Ga, true, "1.33", true),
            (
                "TopologyManagerPolicyAlphaOptions",
                Maturity::Alpha,
                false,
                "1.26",
                false,
            ),
            (
                "TopologyManagerPolicyBetaOptions",
                Maturity::Beta,
                true,
                "1.28",
                false,
            ),
            (
                "TopologyManagerPolicyOptions",
                Maturity::Ga,
                true,
                "1.32",
                false,
            ),
            ("PodLevelResources", Maturity::Beta, true, "1.34", false),
            (
                "PodLevelResourceManagers",
                Maturity::Alpha,
                false,
                "1.36",
                false,
            ),
            (
                "DisableCPUQuotaWithExclusiveCPUs",
                Maturity::Beta,
                true,
                "1.33",
                false,
            ),
            (
                "InPlacePodVerticalScalingExclusiveCPUs",
                Maturity::Alpha,
                false,
                "1.32",
                false,
            ),
            // kube_features.go (store id 61706514746): alpha 1.34, beta and on 1.36.
            ("DRAExtendedResource", Maturity::Beta, true, "1.36", false),
            // The kube-scheduler reference of 1.36 (`--emulated-version` default 1.36,
            // store id 52070109846): both BETA, default=true; alpha since 1.31 before.
            ("ResourceHealthStatus", Maturity::Beta, true, "1.36", false),
            (
                "ResourceHealthStatusMessage",
                Maturity::Beta,
                true,
                "1.36",
                false,
            ),
        ];
        assert_eq!(rows.len(), FEATURES.len());
        let defaults = FeatureGates::v1_36_defaults();
        for ((name, maturity, on, since, locked), feature) in rows.into_iter().zip(FEATURES) {
            assert_eq!(Feature::from_name(name), Some(feature), "{name}");
            assert_eq!(feature.name(), name);
            assert_eq!(feature.to_string(), name);
            assert_eq!(feature.maturity(), maturity, "{name}");
            assert_eq!(feature.since(), since, "{name}");
            assert_eq!(feature.locked(), locked, "{name}");
            assert_eq!(defaults.enabled(feature), on, "{name}");
            assert!(defaults.is_default(feature));
        }
        assert_eq!(FeatureGates::default(), defaults);
        assert_eq!(
            FeatureGates::from_map(&BTreeMap::new()),
            Ok(FeatureGates::default())
        );
        assert_eq!(Maturity::Ga.to_string(), "GA");
        assert_eq!(Maturity::Alpha.as_str(), "alpha");
    }

    #[test]
    fn overrides_and_ignored_names() {
        let gates = FeatureGates::from_map(&map(&[
            ("CPUManagerPolicyAlphaOptions", true),
            ("DisableCPUQuotaWithExclusiveCPUs", false),
            ("NodeSwap", true),
            ("KubeletPSI", false),
        ]))
        .unwrap();
        assert!(gates.enabled(Feature::CpuManagerPolicyAlphaOptions));
        assert!(!gates.is_default(Feature::CpuManagerPolicyAlphaOptions));
        assert!(!gates.enabled(Feature::DisableCpuQuotaWithExclusiveCpus));
        assert_eq!(gates.ignored(), ["KubeletPSI", "NodeSwap"]);
        assert!(gates.warnings().is_empty());
        assert_eq!(
            gates.pod_level_resources(),
            crate::PodLevelResources::Unmanaged
        );
        let managed = FeatureGates::default()
            .with(Feature::PodLevelResourceManagers, true)
            .unwrap();
        assert_eq!(
            managed.pod_level_resources(),
            crate::PodLevelResources::Managed
        );
        let without_plr = managed.with(Feature::PodLevelResources, false).unwrap();
        assert_eq!(
            without_plr.pod_level_resources(),
            crate::PodLevelResources::Unmanaged
        );
    }

    /// `featuregate.unsafeSetFromMap`'s refusals and `utilerrors.NewAggregate`'s printing.
    #[test]
    fn upstream_refusals() {
        let err = |pairs: &[(&str, bool)]| FeatureGates::from_map(&map(pairs)).unwrap_err();
        for (name, _) in REMOVED_GATES {
            assert_eq!(
                err(&[(name, true)]).to_string(),
                format!("unrecognized feature gate: {name}")
            );
        }
        assert_eq!(
            err(&[("CPUManagerPolicyOptions", false)]),
            FeatureGateError::Locked {
                name: "CPUManagerPolicyOptions",
                value: false,
                locked_to: true
            }
        );
        // A locked gate at its own value is accepted, with upstream's GA warning.
        let gates = FeatureGates::from_map(&map(&[
            ("CPUManagerPolicyOptions", true),
            ("TopologyManagerPolicyOptions", false),
        ]))
        .unwrap();
        assert!(!gates.enabled(Feature::TopologyManagerPolicyOptions));
        assert_eq!(
            gates.warnings(),
            [
                "Setting GA feature gate CPUManagerPolicyOptions=true. It will be removed in a future release.",
                "Setting GA feature gate TopologyManagerPolicyOptions=false. It will be removed in a future release.",
            ]
        );
        // Several errors: locked ones are collected, an unknown name ends the walk.
        assert_eq!(
            err(&[
                ("CPUManagerPolicyOptions", false),
                ("MemoryManager", true),
                ("TopologyManager", true)
            ])
            .to_string(),
            "[cannot set feature gate CPUManagerPolicyOptions to false, feature is locked to true, unrecognized feature gate: MemoryManager]"
        );
        let mut gates = FeatureGates::default();
        assert!(gates.set(Feature::CpuManagerPolicyOptions, false).is_err());
        assert!(gates.enabled(Feature::CpuManagerPolicyOptions));
    }
}
