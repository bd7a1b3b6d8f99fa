//! [`CpuManagerConfig`]: the CPU manager's configuration and the checks
//! [`CpuManager::new`](super::CpuManager::new) runs before it looks at the machine.

use std::collections::BTreeMap;
use std::time::Duration;

use corral_topology::{CpuSet, FeatureGates, PolicyName};

use super::error::CpuManagerError;
use crate::options::StaticPolicyOptions;
use crate::policy::{NonePolicy, PolicyError};

/// The CPU manager's configuration (the kubelet's `cpuManagerPolicy`,
/// `cpuManagerPolicyOptions`, `cpuManagerReconcilePeriod`, CPU reservation and
/// `reservedSystemCPUs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuManagerConfig {
    /// `none` or `static`.
    pub policy: String,
    /// Static policy options by name.
    pub policy_options: BTreeMap<String, String>,
    /// How often the agent should call [`CpuManager::reconcile_once`](crate::CpuManager::reconcile_once).
    pub reconcile_period: Duration,
    /// `systemReserved.cpu + kubeReserved.cpu` in millicores; `None` when not given (the
    /// static policy then needs `reserved_system_cpus`).
    pub reserved_cpu_millis: Option<i64>,
    /// `reservedSystemCPUs`: explicit reserved CPUs (empty = choose by topology).
    pub reserved_system_cpus: CpuSet,
    /// The topology manager's policy (`align-by-socket` is refused with `single-numa-node`).
    pub topology_manager_policy: PolicyName,
    /// The kubelet's feature gates (v1.36 defaults): which options may be used.
    pub feature_gates: FeatureGates,
}

impl Default for CpuManagerConfig {
    fn default() -> Self {
        CpuManagerConfig {
            policy: "none".to_owned(),
            policy_options: BTreeMap::new(),
            reconcile_period: Duration::from_secs(10),
            reserved_cpu_millis: None,
            reserved_system_cpus: CpuSet::new(),
            topology_manager_policy: PolicyName::None,
            feature_gates: FeatureGates::default(),
        }
    }
}

impl CpuManagerConfig {
    /// Check everything [`CpuManager::new`](crate::CpuManager::new) refuses without looking at the machine: the
    /// policy name; the options (names, values, combinations; the `none` policy takes none;
    /// `align-by-socket` not with the topology manager's `single-numa-node`); the static
    /// policy's reservation (given, above zero, and an explicit `reserved_system_cpus` of
    /// the reserved size). Errors are the ones [`CpuManager::new`](crate::CpuManager::new) returns, which runs this
    /// first: a configuration that passes can still be refused there only for the machine
    /// (too few CPUs, an unknown reserved CPU, `align-by-socket` on more sockets than NUMA
    /// nodes).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use corral_cpumgr::CpuManagerConfig;
    ///
    /// let config = CpuManagerConfig {
    ///     policy: "static".into(),
    ///     policy_options: BTreeMap::from([("bogus".into(), "true".into())]),
    ///     reserved_cpu_millis: Some(1000),
    ///     ..CpuManagerConfig::default()
    /// };
    /// let err = config.validate().unwrap_err();
    /// let cause = std::error::Error::source(&err).unwrap();
    /// assert_eq!(cause.to_string(), "unknown CPU Manager Policy option: \"bogus\"");
    /// ```
    pub fn validate(&self) -> Result<(), CpuManagerError> {
        self.checked_policy().map(|_| ())
    }

    /// The policy to build, once [`validate`](Self::validate)'s checks passed.
    pub(super) fn checked_policy(&self) -> Result<CheckedPolicy, CpuManagerError> {
        let wrap = |source| CpuManagerError::Policy {
            policy: self.policy.clone(),
            source: Box::new(source),
        };
        match self.policy.as_str() {
            "none" => {
                NonePolicy::new(&self.policy_options).map_err(|e| wrap(e.into()))?;
                Ok(CheckedPolicy::None)
            }
            "static" => {
                let millis = match self.reserved_cpu_millis {
                    Some(m) => m,
                    None if !self.reserved_system_cpus.is_empty() => {
                        self.reserved_system_cpus.len() as i64 * 1000
                    }
                    None => return Err(wrap(PolicyError::NoReservation)),
                };
                if millis <= 0 {
                    return Err(wrap(PolicyError::ZeroReservation));
                }
                // Upstream `int(math.Ceil(float64(millis) / 1000))`, exactly and without
                // `millis + 999` (which overflowed at `i64::MAX`).
                let whole = millis / 1000 + i64::from(millis % 1000 != 0);
                let num_reserved = usize::try_from(whole).unwrap_or(usize::MAX);
                let options =
                    StaticPolicyOptions::from_map_gated(&self.policy_options, &self.feature_gates)
                        .map_err(|e| wrap(e.into()))?;
                options
                    .validate_policy(self.topology_manager_policy)
                    .map_err(|e| wrap(e.into()))?;
                let explicit = &self.reserved_system_cpus;
                if !explicit.is_empty() && explicit.len() != num_reserved {
                    return Err(wrap(PolicyError::Reservation {
                        reserved: explicit.to_string(),
                        wanted: num_reserved,
                    }));
                }
                Ok(CheckedPolicy::Static {
                    num_reserved,
                    options,
                })
            }
            other => Err(wrap(PolicyError::UnknownPolicy {
                name: other.to_owned(),
            })),
        }
    }
}

/// A policy [`CpuManagerConfig::checked_policy`] accepted, still to be built on the machine.
pub(super) enum CheckedPolicy {
    /// The `none` policy.
    None,
    /// The `static` policy with this many reserved CPUs and these options.
    Static {
        num_reserved: usize,
        options: StaticPolicyOptions,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserved(millis: i64) -> usize {
        let config = CpuManagerConfig {
            policy: "static".into(),
            reserved_cpu_millis: Some(millis),
            ..CpuManagerConfig::default()
        };
        match config.checked_policy() {
            Ok(CheckedPolicy::Static { num_reserved, .. }) => num_reserved,
            Ok(CheckedPolicy::None) => panic!("static expected"),
            Err(err) => panic!("{err}"),
        }
    }

    /// The whole CPUs of a reservation round up, as upstream's `math.Ceil`; at `i64::MAX`
    /// millicores the rounding used to overflow (`millis + 999`).
    #[test]
    fn the_reservation_rounds_up_to_whole_cpus_without_overflow() {
        assert_eq!(reserved(1), 1);
        assert_eq!(reserved(1000), 1);
        assert_eq!(reserved(1001), 2);
        assert_eq!(reserved(1500), 2);
        assert_eq!(reserved(i64::MAX), 9_223_372_036_854_776);
        assert_eq!(reserved(i64::MAX - 807), 9_223_372_036_854_775);
    }
}
