//! Pod QoS class, derived as upstream's `ComputePodQOS` (`pkg/apis/core/v1/helper/qos`).
//!
//! Only `cpu` and `memory` count, and only quantities above zero. With pod-level resources
//! (`Pod::resources` set) the class is computed from them alone, as upstream does when its
//! `PodLevelResources` feature gate is on; corral has no gates and always applies that rule.
//! Quantities are compared as converted integers (millicores, bytes), so two quantities that
//! differ only below a millicore or a byte compare equal here.

use std::collections::BTreeMap;
use std::fmt;

use crate::pod::{Pod, ResourceList};

/// A pod's quality-of-service class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum QosClass {
    /// Every container limits cpu and memory and requests equal limits.
    Guaranteed,
    /// Some requests or limits, but not guaranteed.
    Burstable,
    /// No cpu or memory request or limit anywhere.
    BestEffort,
}

impl QosClass {
    /// Upstream's string (`Guaranteed`, `Burstable`, `BestEffort`).
    pub const fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The supported QoS resources of `list` with a value above zero.
fn qos_resources(list: &ResourceList) -> impl Iterator<Item = (&'static str, i64)> {
    [("cpu", list.cpu_millis), ("memory", list.memory_bytes)]
        .into_iter()
        .filter_map(|(name, value)| value.filter(|v| *v > 0).map(|v| (name, v)))
}

fn accumulate(into: &mut BTreeMap<&'static str, i64>, list: &ResourceList) {
    for (name, value) in qos_resources(list) {
        *into.entry(name).or_insert(0) += value;
    }
}

impl Pod {
    /// The QoS class (upstream `ComputePodQOS`).
    pub fn qos_class(&self) -> QosClass {
        let mut requests = BTreeMap::new();
        let mut limits = BTreeMap::new();
        let mut guaranteed = true;
        if let Some(pod_level) = &self.resources {
            accumulate(&mut requests, &pod_level.requests);
            if !pod_level.limits.is_empty() {
                accumulate(&mut limits, &pod_level.limits);
                if qos_resources(&pod_level.limits).count() < 2 {
                    guaranteed = false;
                }
            }
        } else {
            for container in self.containers.iter().chain(&self.init_containers) {
                accumulate(&mut requests, &container.resources.requests);
                accumulate(&mut limits, &container.resources.limits);
                if qos_resources(&container.resources.limits).count() < 2 {
                    guaranteed = false;
                }
            }
        }
        if requests.is_empty() && limits.is_empty() {
            return QosClass::BestEffort;
        }
        if guaranteed
            && requests
                .iter()
                .any(|(name, req)| limits.get(name) != Some(req))
        {
            guaranteed = false;
        }
        if guaranteed && requests.len() == limits.len() {
            QosClass::Guaranteed
        } else {
            QosClass::Burstable
        }
    }
}
