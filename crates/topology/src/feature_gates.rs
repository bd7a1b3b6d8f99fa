//! The kubelet's feature gates that change what the resource managers decide, with their
//! v1.36 maturity and defaults (`pkg/features/kube_features.go`), parsed from a
//! KubeletConfiguration's `featureGates` map.
//!
//! The kubelet knows several hundred gates; corral models the ones its managers read (none
//! of them GA, so none is locked). Another name is accepted and reported in
//! [`FeatureGates::ignored`] (a kubelet config commonly sets gates of other components),
//! never silently: `corral config check` and the agent's start log list them.

use std::collections::BTreeMap;

/// A feature gate's maturity (upstream `featuregate.prerelease`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Maturity {
    /// Alpha: off by default.
    Alpha,
    /// Beta: on by default (for the gates here).
    Beta,
}

/// The feature gates corral's managers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Feature {
    /// `CPUManagerPolicyAlphaOptions`: alpha CPU manager static policy options.
    CpuManagerPolicyAlphaOptions,
    /// `CPUManagerPolicyBetaOptions`: beta CPU manager static policy options.
    CpuManagerPolicyBetaOptions,
    /// `TopologyManagerPolicyAlphaOptions`: alpha topology manager policy options.
    TopologyManagerPolicyAlphaOptions,
    /// `TopologyManagerPolicyBetaOptions`: beta topology manager policy options.
    TopologyManagerPolicyBetaOptions,
    /// `PodLevelResources` (KEP-2837): pods may set `spec.resources`.
    PodLevelResources,
    /// `PodLevelResourceManagers` (KEP-5526): the CPU and memory managers allocate such
    /// pods' budgets at pod scope.
    PodLevelResourceManagers,
    /// `DisableCPUQuotaWithExclusiveCPUs`: no CFS quota for exclusive CPUs.
    DisableCpuQuotaWithExclusiveCpus,
    /// `InPlacePodVerticalScalingExclusiveCPUs`: resize pods with exclusive CPUs.
    InPlacePodVerticalScalingExclusiveCpus,
}

/// Every modelled gate.
pub const FEATURES: [Feature; 8] = [
    Feature::CpuManagerPolicyAlphaOptions,
    Feature::CpuManagerPolicyBetaOptions,
    Feature::TopologyManagerPolicyAlphaOptions,
    Feature::TopologyManagerPolicyBetaOptions,
    Feature::PodLevelResources,
    Feature::PodLevelResourceManagers,
    Feature::DisableCpuQuotaWithExclusiveCpus,
    Feature::InPlacePodVerticalScalingExclusiveCpus,
];

impl Feature {
    /// The gate's name in `featureGates`.
    pub fn name(self) -> &'static str {
        match self {
            Feature::CpuManagerPolicyAlphaOptions => "CPUManagerPolicyAlphaOptions",
            Feature::CpuManagerPolicyBetaOptions => "CPUManagerPolicyBetaOptions",
            Feature::TopologyManagerPolicyAlphaOptions => "TopologyManagerPolicyAlphaOptions",
            Feature::TopologyManagerPolicyBetaOptions => "TopologyManagerPolicyBetaOptions",
            Feature::PodLevelResources => "PodLevelResources",
            Feature::PodLevelResourceManagers => "PodLevelResourceManagers",
            Feature::DisableCpuQuotaWithExclusiveCpus => "DisableCPUQuotaWithExclusiveCPUs",
            Feature::InPlacePodVerticalScalingExclusiveCpus => {
                "InPlacePodVerticalScalingExclusiveCPUs"
            }
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
            | Feature::DisableCpuQuotaWithExclusiveCpus => Maturity::Beta,
        }
    }

    /// The gate's v1.36 default: alpha gates off, the beta ones here on.
    pub fn default_enabled(self) -> bool {
        self.maturity() != Maturity::Alpha
    }

    /// The gate called `name`, if corral models it.
    pub fn from_name(name: &str) -> Option<Feature> {
        FEATURES.into_iter().find(|f| f.name() == name)
    }
}

/// The feature gates in force: v1.36's defaults, overridden by a `featureGates` map.
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{Feature, FeatureGates};
///
/// let gates = FeatureGates::default();
/// assert!(!gates.enabled(Feature::PodLevelResourceManagers));
/// assert!(gates.enabled(Feature::DisableCpuQuotaWithExclusiveCpus));
///
/// let map = BTreeMap::from([
///     ("PodLevelResourceManagers".to_owned(), true),
///     ("SomeOtherComponentsGate".to_owned(), true),
/// ]);
/// let gates = FeatureGates::from_map(&map);
/// assert!(gates.enabled(Feature::PodLevelResourceManagers));
/// assert_eq!(gates.ignored(), ["SomeOtherComponentsGate"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// Gates set away from their default.
    overrides: BTreeMap<Feature, bool>,
    /// Names given that corral does not model.
    ignored: Vec<String>,
}

impl FeatureGates {
    /// v1.36's defaults with `map`'s values (upstream `SetFromMap`).
    pub fn from_map(map: &BTreeMap<String, bool>) -> FeatureGates {
        let mut gates = FeatureGates::default();
        for (name, &value) in map {
            match Feature::from_name(name) {
                Some(feature) => gates.set(feature, value),
                None => gates.ignored.push(name.clone()),
            }
        }
        gates
    }

    /// Set `feature` to `enabled`.
    pub fn set(&mut self, feature: Feature, enabled: bool) {
        if enabled == feature.default_enabled() {
            self.overrides.remove(&feature);
        } else {
            self.overrides.insert(feature, enabled);
        }
    }

    /// Whether `feature` is on.
    pub fn enabled(&self, feature: Feature) -> bool {
        self.overrides
            .get(&feature)
            .copied()
            .unwrap_or_else(|| feature.default_enabled())
    }

    /// The names given that corral does not model (accepted, without effect).
    pub fn ignored(&self) -> &[String] {
        &self.ignored
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

    #[test]
    fn v136_defaults_and_overrides() {
        let gates = FeatureGates::default();
        for feature in FEATURES {
            assert_eq!(gates.enabled(feature), feature.maturity() == Maturity::Beta);
            assert_eq!(Feature::from_name(feature.name()), Some(feature));
        }
        let map = BTreeMap::from([
            ("CPUManagerPolicyAlphaOptions".to_owned(), true),
            ("DisableCPUQuotaWithExclusiveCPUs".to_owned(), false),
        ]);
        let gates = FeatureGates::from_map(&map);
        assert!(gates.enabled(Feature::CpuManagerPolicyAlphaOptions));
        assert!(!gates.enabled(Feature::DisableCpuQuotaWithExclusiveCpus));
        assert!(gates.ignored().is_empty());
        assert_eq!(
            gates.pod_level_resources(),
            crate::PodLevelResources::Unmanaged
        );
    }
}
