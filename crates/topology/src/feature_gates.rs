//! The kubelet's feature gates that change what corral's resource managers decide or accept,
//! with their v1.37 maturity and defaults, parsed from a KubeletConfiguration's
//! `featureGates` map the way the kubelet's `featuregate.SetFromMap` does.
//!
//! # The gates, as of v1.37
//!
//! | gate | v1.37 | default | since | locked | depends on |
//! |---|---|---|---|---|---|
//! | `CPUManagerPolicyAlphaOptions` | alpha | off | 1.23 | no | |
//! | `CPUManagerPolicyBetaOptions` | beta | on | 1.23 | no | |
//! | `CPUManagerPolicyOptions` | GA | on | 1.33 | yes | |
//! | `TopologyManagerPolicyAlphaOptions` | alpha | off | 1.26 | no | |
//! | `TopologyManagerPolicyBetaOptions` | beta | on | 1.28 (beta off 1.26–1.27) | no | |
//! | `TopologyManagerPolicyOptions` | GA | on | 1.32 | yes | |
//! | `PodLevelResources` | beta | on | 1.34 (alpha 1.32) | no | |
//! | `PodLevelResourceManagers` | beta | **on** | 1.37 (alpha 1.36) | no | `PodLevelResources` |
//! | `DisableCPUQuotaWithExclusiveCPUs` | deprecated | on | 1.37 (beta 1.33, deprecated 1.36) | **yes** | |
//! | `InPlacePodVerticalScalingExclusiveCPUs` | alpha | off | 1.32 | no | |
//! | `DRAExtendedResource` | GA | on | 1.37 (alpha 1.34, beta 1.36) | **yes** | |
//! | `ResourceHealthStatus` | beta | on | 1.36 (alpha 1.31) | no | |
//! | `ResourceHealthStatusMessage` | beta | on | 1.36 | no | `ResourceHealthStatus` |
//!
//! What changed from v1.36: `PodLevelResourceManagers` is beta and on, so pods with
//! `spec.resources` are aligned at pod scope by default; `DisableCPUQuotaWithExclusiveCPUs`
//! can no longer be turned off; `DRAExtendedResource` and `TopologyManagerPolicyOptions` are
//! locked on; and a gate turned on while a gate it depends on is off is refused (the
//! dependencies column; upstream's `AddDependencies`, enforced since v1.35, first declared for
//! these gates in v1.36/v1.37).
//!
//! `CPUManager` (removed in 1.33), `TopologyManager` (removed in 1.29) and `MemoryManager`
//! (GA and locked in 1.32, removed in 1.36) are no longer gates: v1.37 refuses them as
//! unrecognized, and so does corral ([`REMOVED_GATES`]).
//!
//! Sources: `pkg/features/kube_features.go` at kubernetes/kubernetes 45b76a34 (2026-07-23, the
//! 1.37 line after 1.37.0-beta.0; no v1.37.0 tag is in the project's store):
//! `defaultVersionedKubernetesFeatureGates` for the versioned specs above (`PodLevelResourceManagers`
//! `{1.36 Alpha false}, {1.37 Beta true}`; `DisableCPUQuotaWithExclusiveCPUs` `{1.37 Deprecated
//! true LockToDefault}` "remove in 1.38"; `DRAExtendedResource` `{1.37 GA true LockToDefault}`;
//! `TopologyManagerPolicyOptions` `{1.32 GA true LockToDefault}` "remove in 1.37", still
//! registered) and `defaultKubernetesFeatureGateDependencies` for the last column. Gates of
//! v1.37 that corral reads nothing from (`MemoryQoS`, `HugepageAwareEviction`,
//! `InPlacePodVerticalScalingExclusiveMemory`, `PodLevelResourcesFixDefaulting`, …) are names it
//! does not model (below). `PodLevelResourcesFixKubeletQOSClass` (beta, on in 1.37) is
//! applied, not modelled: [`Pod::qos_class`](crate::Pod::qos_class) always follows the fixed
//! rule.
//!
//! # Errors (upstream's texts)
//!
//! `k8s.io/component-base/featuregate` `unsafeSetFromMap` (component-base 349fbe06) refuses a
//! name it does not know with `unrecognized feature gate: NAME` (and stops there), a locked
//! gate set away from its value with `cannot set feature gate NAME to false, feature is locked
//! to true`; only when neither happened does it check dependencies: `NAME is enabled, but
//! depends on features that are disabled: [DEP]`. Several errors are returned as one
//! `[first, second]` (`utilerrors.NewAggregate`). Go walks the map in random order; corral
//! walks it in name order, which is one of the orders Go may take.
//!
//! # Names corral does not model
//!
//! The kubelet knows a few hundred gates and refuses every other name. corral models the
//! gates above and could only refuse the rest by carrying upstream's whole list, which would
//! go stale with every release. A kubelet config commonly sets gates of other parts of the
//! kubelet, so corral accepts any other name and lists it in [`FeatureGates::ignored`]:
//! `corral config check` prints them and `corral run` logs them, so a misspelt gate is seen,
//! not silently dropped. Only the names v1.37 is known to refuse (the removed gates above)
//! are errors.

use std::collections::BTreeMap;

/// A feature gate's (or a policy option's) maturity, upstream `featuregate.prerelease`.
///
/// # Example
///
/// ```
/// use corral_topology::{Feature, Maturity};
///
/// assert_eq!(Feature::TopologyManagerPolicyAlphaOptions.maturity(), Maturity::Alpha);
/// assert_eq!(Feature::TopologyManagerPolicyOptions.maturity().to_string(), "GA");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Maturity {
    /// Alpha: off by default.
    Alpha,
    /// Beta: on by default for every gate here.
    Beta,
    /// GA (stable): on; a policy option at this level needs no gate.
    Ga,
    /// Deprecated: still a gate, to be removed (upstream `featuregate.Deprecated`).
    Deprecated,
}

impl Maturity {
    /// The level as upstream writes it in `featuregate` (`ALPHA`, `BETA`, `GA`, `DEPRECATED`)
    /// and the kubelet's docs speak of it: `alpha`, `beta`, `GA`, `deprecated`.
    pub fn as_str(self) -> &'static str {
        match self {
            Maturity::Alpha => "alpha",
            Maturity::Beta => "beta",
            Maturity::Ga => "GA",
            Maturity::Deprecated => "deprecated",
        }
    }
}

impl std::fmt::Display for Maturity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kubelet feature gate corral models (the table is in [the module docs](crate::feature_gates)).
///
/// # Example
///
/// ```
/// use corral_topology::{Feature, Maturity};
///
/// let gate = Feature::from_name("PodLevelResourceManagers").expect("a modelled gate");
/// assert_eq!(gate, Feature::PodLevelResourceManagers);
/// assert!(gate.default_enabled());
/// assert_eq!(gate.depends_on(), &[Feature::PodLevelResources]);
/// assert_eq!(Feature::from_name("NoSuchGate"), None);
/// assert!(Feature::CpuManagerPolicyOptions.locked());
/// ```
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

/// Gates the kubelet no longer knows in v1.37, with the release that removed each: v1.37
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

    /// The gate's maturity in v1.37.
    pub fn maturity(self) -> Maturity {
        match self {
            Feature::CpuManagerPolicyAlphaOptions
            | Feature::TopologyManagerPolicyAlphaOptions
            | Feature::InPlacePodVerticalScalingExclusiveCpus => Maturity::Alpha,
            Feature::CpuManagerPolicyBetaOptions
            | Feature::TopologyManagerPolicyBetaOptions
            | Feature::PodLevelResources
            | Feature::PodLevelResourceManagers
            | Feature::ResourceHealthStatus
            | Feature::ResourceHealthStatusMessage => Maturity::Beta,
            Feature::CpuManagerPolicyOptions
            | Feature::TopologyManagerPolicyOptions
            | Feature::DraExtendedResource => Maturity::Ga,
            Feature::DisableCpuQuotaWithExclusiveCpus => Maturity::Deprecated,
        }
    }

    /// The release in which the gate reached its v1.37 [`maturity`](Self::maturity) and
    /// default.
    pub fn since(self) -> &'static str {
        match self {
            Feature::CpuManagerPolicyAlphaOptions | Feature::CpuManagerPolicyBetaOptions => "1.23",
            Feature::CpuManagerPolicyOptions => "1.33",
            Feature::TopologyManagerPolicyAlphaOptions => "1.26",
            Feature::TopologyManagerPolicyBetaOptions => "1.28",
            Feature::TopologyManagerPolicyOptions
            | Feature::InPlacePodVerticalScalingExclusiveCpus => "1.32",
            Feature::PodLevelResources => "1.34",
            Feature::ResourceHealthStatus | Feature::ResourceHealthStatusMessage => "1.36",
            Feature::PodLevelResourceManagers
            | Feature::DisableCpuQuotaWithExclusiveCpus
            | Feature::DraExtendedResource => "1.37",
        }
    }

    /// The gate's v1.37 default: alpha gates off, every other one here on.
    pub fn default_enabled(self) -> bool {
        self.maturity() != Maturity::Alpha
    }

    /// Whether v1.37 locks the gate to its default (upstream `LockToDefault`).
    pub fn locked(self) -> bool {
        matches!(
            self,
            Feature::CpuManagerPolicyOptions
                | Feature::TopologyManagerPolicyOptions
                | Feature::DisableCpuQuotaWithExclusiveCpus
                | Feature::DraExtendedResource
        )
    }

    /// The modelled gates this one needs on whenever it is on (upstream
    /// `defaultKubernetesFeatureGateDependencies`, restricted to modelled gates; the others
    /// these gates name, `DynamicResourceAllocation` and `InPlacePodVerticalScaling`, are GA
    /// and locked on in v1.37, so they can never be off).
    pub fn depends_on(self) -> &'static [Feature] {
        match self {
            Feature::PodLevelResourceManagers => &[Feature::PodLevelResources],
            Feature::ResourceHealthStatusMessage => &[Feature::ResourceHealthStatus],
            _ => &[],
        }
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
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{FeatureGateError, FeatureGates};
///
/// // On while the gate it depends on is off: refused, as upstream's dependency check does.
/// let map = BTreeMap::from([
///     ("PodLevelResources".to_owned(), false),
///     ("PodLevelResourceManagers".to_owned(), true),
/// ]);
/// let err = FeatureGates::from_map(&map).unwrap_err();
/// assert!(err.to_string().contains("PodLevelResourceManagers"), "{err}");
/// assert!(matches!(
///     FeatureGates::from_map(&BTreeMap::from([("CPUManager".to_owned(), true)])),
///     Err(FeatureGateError::Unrecognized { .. })
/// ));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FeatureGateError {
    /// A name the kubelet does not know (here: a gate v1.37 no longer has).
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
    /// A gate turned on while gates it depends on are off.
    #[error("{name} is enabled, but depends on features that are disabled: [{}]", .disabled.join(" "))]
    DependencyDisabled {
        /// The gate that is on.
        name: &'static str,
        /// The gates it needs that are off, as upstream prints a Go slice.
        disabled: Vec<&'static str>,
    },
    /// More than one of the above, as upstream's aggregate error prints them.
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Several(Vec<FeatureGateError>),
}

/// The feature gates in force: v1.37's defaults, overridden by a `featureGates` map.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{Feature, FeatureGates, Maturity};
///
/// let gates = FeatureGates::v1_37_defaults();
/// assert!(gates.enabled(Feature::PodLevelResourceManagers));
/// assert!(gates.enabled(Feature::DisableCpuQuotaWithExclusiveCpus));
/// assert_eq!(Feature::PodLevelResourceManagers.maturity(), Maturity::Beta);
///
/// let map = BTreeMap::from([
///     ("PodLevelResourceManagers".to_owned(), false),
///     ("SomeOtherComponentsGate".to_owned(), true),
/// ]);
/// let gates = FeatureGates::from_map(&map)?;
/// assert!(!gates.enabled(Feature::PodLevelResourceManagers));
/// assert_eq!(gates.ignored(), ["SomeOtherComponentsGate"]);
///
/// let needs = BTreeMap::from([("PodLevelResources".to_owned(), false)]);
/// assert_eq!(
///     FeatureGates::from_map(&needs).unwrap_err().to_string(),
///     "PodLevelResourceManagers is enabled, but depends on features that are disabled: \
///      [PodLevelResources]"
/// );
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
    /// [`FeatureGates::v1_37_defaults`].
    fn default() -> Self {
        FeatureGates::v1_37_defaults()
    }
}

impl FeatureGates {
    /// Every gate at its v1.37 default.
    pub fn v1_37_defaults() -> FeatureGates {
        FeatureGates {
            given: BTreeMap::new(),
            ignored: Vec::new(),
        }
    }

    /// v1.37's defaults with `map`'s values (upstream `SetFromMap`): a removed gate is
    /// refused and ends the walk, a locked gate set away from its value is refused (the walk
    /// goes on), any other name corral does not model is [ignored](Self::ignored); when none
    /// was refused, every gate that is on must have the gates it [depends
    /// on](Feature::depends_on) on too.
    pub fn from_map(map: &BTreeMap<String, bool>) -> Result<FeatureGates, FeatureGateError> {
        let mut gates = FeatureGates::v1_37_defaults();
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
        if errors.is_empty() {
            errors = gates.dependency_errors();
        }
        match errors.len() {
            0 => Ok(gates),
            1 => Err(errors.remove(0)),
            _ => Err(FeatureGateError::Several(errors)),
        }
    }

    /// Every gate that is on while a gate it depends on is off (upstream checks them after
    /// the map is taken, over its dependency map; corral in [`FEATURES`] order).
    fn dependency_errors(&self) -> Vec<FeatureGateError> {
        FEATURES
            .into_iter()
            .filter(|feature| self.enabled(*feature))
            .filter_map(|feature| {
                let disabled: Vec<&'static str> = feature
                    .depends_on()
                    .iter()
                    .filter(|dep| !self.enabled(**dep))
                    .map(|dep| dep.name())
                    .collect();
                (!disabled.is_empty()).then_some(FeatureGateError::DependencyDisabled {
                    name: feature.name(),
                    disabled,
                })
            })
            .collect()
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

    /// Whether `feature` is at its v1.37 default.
    pub fn is_default(&self, feature: Feature) -> bool {
        self.enabled(feature) == feature.default_enabled()
    }

    /// The names given that corral does not model (accepted, without effect).
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// The warnings upstream logs for the gates given (`Warning: setting GA feature gate. It
    /// will be removed in a future release.` with the gate and value, for every GA gate the map
    /// sets; the same with `deprecated` for a deprecated one).
    pub fn warnings(&self) -> Vec<String> {
        self.given
            .iter()
            .filter_map(|(feature, value)| {
                let level = match feature.maturity() {
                    Maturity::Ga => "GA",
                    Maturity::Deprecated => "deprecated",
                    Maturity::Alpha | Maturity::Beta => return None,
                };
                Some(format!(
                    "Warning: setting {level} feature gate. It will be removed in a future \
                     release. featureGate=\"{}\" value={value}",
                    feature.name()
                ))
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

    /// The table in the module docs, row by row (kube_features.go at k/k 45b76a34).
    #[test]
    fn v137_table() {
        use Maturity::{Alpha, Beta, Deprecated, Ga};
        let rows = [
            ("CPUManagerPolicyAlphaOptions", Alpha, false, "1.23", false),
            ("CPUManagerPolicyBetaOptions", Beta, true, "1.23", false),
            ("CPUManagerPolicyOptions", Ga, true, "1.33", true),
            (
                "TopologyManagerPolicyAlphaOptions",
                Alpha,
                false,
                "1.26",
                false,
            ),
            (
                "TopologyManagerPolicyBetaOptions",
                Beta,
                true,
                "1.28",
                false,
            ),
            ("TopologyManagerPolicyOptions", Ga, true, "1.32", true),
            ("PodLevelResources", Beta, true, "1.34", false),
            ("PodLevelResourceManagers", Beta, true, "1.37", false),
            (
                "DisableCPUQuotaWithExclusiveCPUs",
                Deprecated,
                true,
                "1.37",
                true,
            ),
            (
                "InPlacePodVerticalScalingExclusiveCPUs",
                Alpha,
                false,
                "1.32",
                false,
            ),
            ("DRAExtendedResource", Ga, true, "1.37", true),
            ("ResourceHealthStatus", Beta, true, "1.36", false),
            ("ResourceHealthStatusMessage", Beta, true, "1.36", false),
        ];
        assert_eq!(rows.len(), FEATURES.len());
        let defaults = FeatureGates::v1_37_defaults();
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
        assert_eq!(Maturity::Deprecated.as_str(), "deprecated");
        // v1.37 manages pods with pod-level resources by default.
        assert_eq!(
            defaults.pod_level_resources(),
            crate::PodLevelResources::Managed
        );
    }

    #[test]
    fn overrides_and_ignored_names() {
        let gates = FeatureGates::from_map(&map(&[
            ("CPUManagerPolicyAlphaOptions", true),
            ("PodLevelResourceManagers", false),
            ("NodeSwap", true),
            ("KubeletPSI", false),
        ]))
        .unwrap();
        assert!(gates.enabled(Feature::CpuManagerPolicyAlphaOptions));
        assert!(!gates.is_default(Feature::CpuManagerPolicyAlphaOptions));
        assert_eq!(gates.ignored(), ["KubeletPSI", "NodeSwap"]);
        assert!(gates.warnings().is_empty());
        assert_eq!(
            gates.pod_level_resources(),
            crate::PodLevelResources::Unmanaged
        );
        let managed = FeatureGates::default();
        assert_eq!(
            managed.pod_level_resources(),
            crate::PodLevelResources::Managed
        );
        // Both off is consistent; the managers then leave such pods to container scope.
        let neither = FeatureGates::from_map(&map(&[
            ("PodLevelResourceManagers", false),
            ("PodLevelResources", false),
        ]))
        .unwrap();
        assert_eq!(
            neither.pod_level_resources(),
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
        for name in [
            "CPUManagerPolicyOptions",
            "TopologyManagerPolicyOptions",
            "DisableCPUQuotaWithExclusiveCPUs",
            "DRAExtendedResource",
        ] {
            assert_eq!(
                err(&[(name, false)]).to_string(),
                format!("cannot set feature gate {name} to false, feature is locked to true")
            );
        }
        // A locked gate at its own value is accepted, with upstream's warnings.
        let gates = FeatureGates::from_map(&map(&[
            ("CPUManagerPolicyOptions", true),
            ("DisableCPUQuotaWithExclusiveCPUs", true),
        ]))
        .unwrap();
        assert_eq!(
            gates.warnings(),
            [
                "Warning: setting GA feature gate. It will be removed in a future release. featureGate=\"CPUManagerPolicyOptions\" value=true",
                "Warning: setting deprecated feature gate. It will be removed in a future release. featureGate=\"DisableCPUQuotaWithExclusiveCPUs\" value=true",
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

    /// Dependencies are checked only when nothing else was refused, over the final values.
    #[test]
    fn dependencies() {
        let err = |pairs: &[(&str, bool)]| FeatureGates::from_map(&map(pairs)).unwrap_err();
        assert_eq!(
            err(&[("PodLevelResources", false)]),
            FeatureGateError::DependencyDisabled {
                name: "PodLevelResourceManagers",
                disabled: vec!["PodLevelResources"]
            }
        );
        assert_eq!(
            err(&[
                ("ResourceHealthStatus", false),
                ("PodLevelResources", false)
            ])
            .to_string(),
            "[PodLevelResourceManagers is enabled, but depends on features that are disabled: [PodLevelResources], \
             ResourceHealthStatusMessage is enabled, but depends on features that are disabled: [ResourceHealthStatus]]"
        );
        // A locked refusal hides the dependency check, as upstream returns first.
        assert_eq!(
            err(&[("PodLevelResources", false), ("DRAExtendedResource", false)]).to_string(),
            "cannot set feature gate DRAExtendedResource to false, feature is locked to true"
        );
        assert!(
            FeatureGates::from_map(&map(&[
                ("ResourceHealthStatus", false),
                ("ResourceHealthStatusMessage", false)
            ]))
            .is_ok()
        );
    }
}
