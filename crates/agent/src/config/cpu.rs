//! The CPU manager's part of the configuration: the CPU reservation (`reservedSystemCPUs`,
//! `kubeReserved.cpu`, `systemReserved.cpu`) and the CPU manager's own check of its
//! configuration, each error under the key that holds the value.

use std::collections::BTreeMap;

use corral_cpumgr::{OptionsError, PolicyError};

use super::{ConfigErrors, ConfigSource, options_text};

impl ConfigErrors {
    /// `kubeReserved.cpu + systemReserved.cpu` in millicores (`None` when neither is set).
    /// A sum past `i64::MAX` is an error on `systemReserved.cpu`: the kubelet adds the two
    /// as arbitrary-precision quantities, and its `MilliValue` of the sum no longer fits.
    pub(super) fn reserved_cpu_sum(
        &mut self,
        kube: Option<i64>,
        system: Option<i64>,
        config: &ConfigSource,
    ) -> Option<i64> {
        if kube.is_none() && system.is_none() {
            return None;
        }
        let sum = kube.unwrap_or(0).checked_add(system.unwrap_or(0));
        if sum.is_none() {
            let cpu = config
                .system_reserved
                .as_ref()
                .and_then(|map| map.get("cpu"));
            self.push(
                "systemReserved.cpu",
                cpu.map_or("", String::as_str),
                "a CPU quantity whose sum with kubeReserved.cpu fits 64-bit millicores",
            );
        }
        sum
    }

    /// `key.cpu` in millicores, `None` when the map has no `cpu`.
    pub(super) fn reserved_cpu(
        &mut self,
        key: &str,
        value: Option<&BTreeMap<String, String>>,
    ) -> Option<i64> {
        let cpu = value.and_then(|map| map.get("cpu"))?;
        match corral_topology::parse_cpu_millis(cpu) {
            Ok(millis) if millis >= 0 => Some(millis),
            Ok(_) => {
                self.push(
                    &format!("{key}.cpu"),
                    cpu,
                    "a non-negative CPU quantity like \"500m\" or \"1\"",
                );
                None
            }
            Err(err) => {
                self.push(
                    &format!("{key}.cpu"),
                    cpu,
                    &format!("a CPU quantity like \"500m\" or \"1\" ({err})"),
                );
                None
            }
        }
    }

    /// The CPU manager's own check of its configuration
    /// ([`corral_cpumgr::CpuManagerConfig::validate`]), its error under the key that holds
    /// the value, with the CPU manager's message (the one `run` would stop with).
    pub(super) fn cpu_manager(
        &mut self,
        config: &corral_cpumgr::CpuManagerConfig,
        source: &ConfigSource,
    ) {
        let Err(err) = config.validate() else {
            return;
        };
        let message = crate::error_text::error_chain(&err);
        let cause = match &err {
            corral_cpumgr::CpuManagerError::Policy { source, .. } => Some(source.as_ref()),
            _ => None,
        };
        let options = || options_text(&config.policy_options);
        let reservation = || {
            let map = |m: Option<&BTreeMap<String, String>>| {
                m.and_then(|m| m.get("cpu")).cloned().unwrap_or_default()
            };
            format!(
                "{}/{}/{}",
                source.reserved_system_cpus.as_deref().unwrap_or(""),
                map(source.kube_reserved.as_ref()),
                map(source.system_reserved.as_ref()),
            )
        };
        let levels: Vec<String> = corral_cpumgr::ALL_OPTIONS
            .iter()
            .map(|name| match corral_cpumgr::option_maturity(name) {
                Some(level) => format!("{name} ({level})"),
                None => (*name).to_owned(),
            })
            .collect();
        let options_accepted = format!(
            "with the static policy: {} set to true or false, in compatible combinations, alpha ones only with featureGates CPUManagerPolicyAlphaOptions: true, beta ones not with CPUManagerPolicyBetaOptions: false; with the none policy: no option",
            levels.join(", ")
        );
        let (key, value, accepted) = match cause {
            Some(PolicyError::UnknownPolicy { .. }) => (
                "cpuManagerPolicy",
                config.policy.clone(),
                "\"none\", \"static\"".to_owned(),
            ),
            Some(PolicyError::Options(OptionsError::AlignBySocketWithSingleNumaNode)) => (
                "cpuManagerPolicyOptions/topologyManagerPolicy",
                format!("{}/{}", options(), config.topology_manager_policy),
                "align-by-socket with a topology manager policy other than single-numa-node"
                    .to_owned(),
            ),
            Some(PolicyError::Options(_)) => ("cpuManagerPolicyOptions", options(), options_accepted),
            Some(PolicyError::NoReservation | PolicyError::ZeroReservation) => (
                "reservedSystemCPUs/kubeReserved.cpu/systemReserved.cpu",
                reservation(),
                "with the static policy, reserved CPUs: a reservedSystemCPUs set, or kubeReserved.cpu + systemReserved.cpu above zero".to_owned(),
            ),
            Some(PolicyError::Reservation { .. }) => (
                "reservedSystemCPUs/kubeReserved.cpu/systemReserved.cpu",
                reservation(),
                "a reservedSystemCPUs set of as many CPUs as the reservation".to_owned(),
            ),
            _ => (
                "cpuManagerPolicy",
                config.policy.clone(),
                "a configuration the CPU manager accepts".to_owned(),
            ),
        };
        self.push(key, &value, &format!("{accepted} ({message})"));
    }
}
