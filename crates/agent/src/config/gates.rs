//! `featureGates`: the kubelet's feature gates corral models, with v1.36's defaults and
//! maturity (`corral_topology::FeatureGates`). The map is parsed as the kubelet's
//! `featuregate.SetFromMap` does (a gate v1.36 removed is unrecognized, a locked gate keeps
//! its value, upstream's messages); a name corral does not model is accepted and reported
//! (`config check` prints it, `run` logs it); a gate corral does not implement cannot be
//! turned on.

use std::collections::BTreeMap;

use corral_topology::{Feature, FeatureGates};

use super::{ConfigErrors, ConfigSource};

impl ConfigSource {
    /// The gates in force. A map the kubelet would refuse, or turning on a gate corral does
    /// not implement, is an error under `featureGates`; the defaults stand in for the rest
    /// of the validation.
    pub(super) fn feature_gates(&self, errors: &mut ConfigErrors) -> FeatureGates {
        let Some(map) = &self.feature_gates else {
            return FeatureGates::v1_37_defaults();
        };
        let gates = match FeatureGates::from_map(map) {
            Ok(gates) => gates,
            Err(err) => {
                errors.push(
                    "featureGates",
                    &gates_text(map),
                    &format!(
                        "gates v1.36 knows, locked ones at their value, e.g. PodLevelResourceManagers: true ({err})"
                    ),
                );
                return FeatureGates::v1_37_defaults();
            }
        };
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

/// Gates as the kubelet's `--feature-gates` flag takes them: `Name=true,Other=false`.
fn gates_text(map: &BTreeMap<String, bool>) -> String {
    let pairs: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn upstream_refusals_are_reported_under_the_key() {
        let (gates, errors) = gates(&[("MemoryManager", true), ("PodLevelResources", false)]);
        assert_eq!(gates, FeatureGates::default());
        assert_eq!(errors.0.len(), 1);
        assert_eq!(errors.0[0].key, "featureGates");
        assert_eq!(
            errors.0[0].value,
            "MemoryManager=true,PodLevelResources=false"
        );
        assert!(
            errors.0[0]
                .accepted
                .ends_with("(unrecognized feature gate: MemoryManager)"),
            "{}",
            errors.0[0].accepted
        );
        let (_, errors) = super::tests::gates(&[("CPUManagerPolicyOptions", false)]);
        assert!(errors.0[0].accepted.ends_with(
            "(cannot set feature gate CPUManagerPolicyOptions to false, feature is locked to true)"
        ));
    }
}
