//! `topologyManagerPolicy`, `topologyManagerScope`, `topologyManagerPolicyOptions`: parsed
//! by the topology manager's own [`TopologyManagerConfig::from_strings_gated`] under the
//! config's feature gates (the path `run` builds the manager from), each error under the
//! key that holds the value.

use std::collections::BTreeMap;

use corral_topology::FeatureGates;
use corral_topology::topologymanager::{PolicyConfigError, TopologyManagerConfig};

use super::{ConfigErrors, ConfigSource, options_text};

impl ConfigSource {
    /// The topology manager's configuration, or `None` with the error pushed.
    pub(super) fn topology_config(
        &self,
        feature_gates: &FeatureGates,
        errors: &mut ConfigErrors,
    ) -> Option<TopologyManagerConfig> {
        let topology_policy = self.topology_manager_policy.as_deref().unwrap_or("none");
        let topology_scope = self
            .topology_manager_scope
            .as_deref()
            .unwrap_or("container");
        let empty = BTreeMap::new();
        let given_topology_options = self.topology_manager_policy_options.as_ref();
        let topology_options = given_topology_options.unwrap_or(&empty);
        // The topology manager's own parse under the same gates `run` uses.
        match TopologyManagerConfig::from_strings_gated(
            topology_policy,
            topology_scope,
            given_topology_options,
            feature_gates,
        ) {
            Ok(config) => Some(config),
            Err(err) => {
                let (key, value, accepted) = match err {
                    PolicyConfigError::UnknownPolicy(_) => (
                        "topologyManagerPolicy",
                        topology_policy.to_owned(),
                        "\"none\", \"best-effort\", \"restricted\", \"single-numa-node\"",
                    ),
                    PolicyConfigError::UnknownScope(_) => (
                        "topologyManagerScope",
                        topology_scope.to_owned(),
                        "\"container\", \"pod\"",
                    ),
                    _ => (
                        "topologyManagerPolicyOptions",
                        options_text(topology_options),
                        "prefer-closest-numa-nodes=true|false, max-allowable-numa-nodes=N (8 or more); both GA in v1.36",
                    ),
                };
                errors.push(key, &value, &format!("{accepted} ({err})"));
                None
            }
        }
    }
}
