//! `featureGates`: the kubelet's feature gates corral's managers read, with v1.36's
//! defaults (`corral_topology::FeatureGates`). A gate corral does not implement cannot be
//! turned on; a name corral does not model is accepted and reported.

use corral_topology::{Feature, FeatureGates};

use super::{ConfigErrors, ConfigSource};

impl ConfigSource {
    /// The gates in force; turning on a gate corral does not implement is an error.
    pub(super) fn feature_gates(&self, errors: &mut ConfigErrors) -> FeatureGates {
        let gates = self
            .feature_gates
            .as_ref()
            .map(FeatureGates::from_map)
            .unwrap_or_default();
        let unsupported = Feature::InPlacePodVerticalScalingExclusiveCpus;
        if gates.enabled(unsupported) {
            errors.push(
                "featureGates",
                &format!("{}=true", unsupported.name()),
                "false: corral does not resize pods with exclusive CPUs in place; it refuses such resizes as v1.36 does with the gate off",
            );
        }
        gates
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn gates(pairs: &[(&str, bool)]) -> (FeatureGates, ConfigErrors) {
        let source = ConfigSource {
            feature_gates: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), *v))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ConfigSource::default()
        };
        let mut errors = ConfigErrors::default();
        (source.feature_gates(&mut errors), errors)
    }

    #[test]
    fn gates_default_to_v136_and_unknown_names_are_reported() {
        let (defaults, errors) = gates(&[]);
        assert!(errors.is_empty());
        assert_eq!(defaults, FeatureGates::default());
        let (set, errors) = gates(&[("PodLevelResourceManagers", true), ("Unrelated", false)]);
        assert!(errors.is_empty());
        assert!(set.enabled(Feature::PodLevelResourceManagers));
        assert_eq!(set.ignored(), ["Unrelated"]);
        let (_, errors) = gates(&[("InPlacePodVerticalScalingExclusiveCPUs", true)]);
        assert_eq!(errors.0[0].key, "featureGates");
    }
}
