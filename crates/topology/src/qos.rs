//! Pod QoS class, derived as upstream's `ComputePodQOS` (`pkg/apis/core/v1/helper/qos`).
//!
//! Only `cpu` and `memory` count, and only quantities above zero. With pod-level resources
//! (`Pod::resources` holding at least one request or limit) the class is computed from them
//! alone, as upstream does when its `PodLevelResources` feature gate is on; empty pod-level
//! resources (`{}`, `{requests: {}}`, `{limits: {}}`) do not count and the containers decide,
//! as v1.37's `PodLevelResourcesFixKubeletQOSClass` (beta, on; k/k#137150) has it. corral
//! takes no gates here and always applies both rules.
//! Quantities are compared as converted integers (millicores, bytes), so two quantities that
//! differ only below a millicore or a byte compare equal here.

use crate::pod::{Container, Pod, ResourceList};

/// A pod's quality-of-service class.
///
/// Computed by [`Pod::qos_class`](crate::Pod::qos_class).
///
/// # Example
///
/// ```
/// use corral_topology::{Container, Pod, QosClass};
///
/// let pod_of = |container: Container| Pod { uid: "u".into(), containers: vec![container], ..Pod::default() };
/// let mut app = Container::new("app");
/// assert_eq!(pod_of(app.clone()).qos_class(), QosClass::BestEffort);
///
/// app.resources.requests.cpu_millis = Some(500);
/// assert_eq!(pod_of(app.clone()).qos_class(), QosClass::Burstable);
///
/// app.resources.limits.cpu_millis = Some(500);
/// app.resources.requests.memory_bytes = Some(1 << 30);
/// app.resources.limits.memory_bytes = Some(1 << 30);
/// let pod = pod_of(app);
/// assert_eq!(pod.qos_class(), QosClass::Guaranteed);
/// assert_eq!(pod.qos_class().to_string(), "Guaranteed");
/// ```
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

enum_strings! {
    /// Upstream's string (`Guaranteed`, `Burstable`, `BestEffort`).
    QosClass {
        Guaranteed => "Guaranteed",
        Burstable => "Burstable",
        BestEffort => "BestEffort",
    }
}

/// Sums of the QoS resources (`cpu`, `memory`) over the values above zero, with which of
/// them appeared at all. Fixed arrays, no map: `qos_class` runs per container on the
/// admission path, so it must cost a few nanoseconds per container; i128 sums cannot
/// overflow (upstream adds arbitrary-precision quantities).
#[derive(Default, PartialEq, Eq)]
struct Sums {
    value: [i128; 2],
    present: [bool; 2],
}

impl Sums {
    fn add(&mut self, list: &ResourceList) {
        for (i, value) in [list.cpu_millis, list.memory_bytes].into_iter().enumerate() {
            if let Some(v) = value.filter(|v| *v > 0) {
                self.value[i] += i128::from(v);
                self.present[i] = true;
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.present == [false, false]
    }
}

/// Whether `list` limits both `cpu` and `memory` (with values above zero).
fn limits_both(list: &ResourceList) -> bool {
    list.cpu_millis.is_some_and(|v| v > 0) && list.memory_bytes.is_some_and(|v| v > 0)
}

impl Pod {
    /// The QoS class (upstream `ComputePodQOS`).
    pub fn qos_class(&self) -> QosClass {
        let mut requests = Sums::default();
        let mut limits = Sums::default();
        let mut guaranteed = true;
        let pod_level = self
            .resources
            .as_ref()
            .filter(|r| !r.requests.is_empty() || !r.limits.is_empty());
        if let Some(pod_level) = pod_level {
            requests.add(&pod_level.requests);
            if !pod_level.limits.is_empty() {
                limits.add(&pod_level.limits);
                guaranteed &= limits_both(&pod_level.limits);
            }
        } else {
            for container in self.containers.iter().chain(&self.init_containers) {
                requests.add(&container.resources.requests);
                limits.add(&container.resources.limits);
                guaranteed &= limits_both(&container.resources.limits);
            }
        }
        if requests.is_empty() && limits.is_empty() {
            return QosClass::BestEffort;
        }
        // Upstream: every request equals its limit, and as many limits as requests.
        let equal = (0..2).all(|i| {
            !requests.present[i] || (limits.present[i] && requests.value[i] == limits.value[i])
        });
        let counts = |s: &Sums| s.present.iter().filter(|p| **p).count();
        if guaranteed && equal && counts(&requests) == counts(&limits) {
            QosClass::Guaranteed
        } else {
            QosClass::Burstable
        }
    }
}

impl Container {
    /// Whether the container alone would be Guaranteed (upstream
    /// `IsContainerEquivalentQOSGuaranteed`): its CPU and memory requests are set, above zero
    /// and equal to their limits. Pod-level resource managers give exclusive CPUs and memory
    /// only to such containers.
    ///
    /// ```
    /// use corral_topology::Container;
    ///
    /// let mut c = Container::new("app");
    /// c.resources.requests.cpu_millis = Some(1000);
    /// c.resources.limits.cpu_millis = Some(1000);
    /// assert!(!c.is_equivalent_guaranteed()); // no memory request
    /// c.resources.requests.memory_bytes = Some(1 << 20);
    /// c.resources.limits.memory_bytes = Some(1 << 20);
    /// assert!(c.is_equivalent_guaranteed());
    /// ```
    pub fn is_equivalent_guaranteed(&self) -> bool {
        let (requests, limits) = (&self.resources.requests, &self.resources.limits);
        let equal = |request: Option<i64>, limit: Option<i64>| {
            request.is_some_and(|r| r != 0) && request == limit
        };
        equal(requests.cpu_millis, limits.cpu_millis)
            && equal(requests.memory_bytes, limits.memory_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Container, ResourceRequirements};

    fn container(req: (Option<i64>, Option<i64>), lim: (Option<i64>, Option<i64>)) -> Container {
        let mut c = Container::new("c");
        c.resources.requests.cpu_millis = req.0;
        c.resources.requests.memory_bytes = req.1;
        c.resources.limits.cpu_millis = lim.0;
        c.resources.limits.memory_bytes = lim.1;
        c
    }

    fn pod(containers: Vec<Container>) -> Pod {
        Pod {
            containers,
            ..Pod::default()
        }
    }

    /// Facts of upstream `TestComputePodQOS` (pkg/apis/core/v1/helper/qos/qos_test.go).
    #[test]
    fn compute_pod_qos() {
        let guaranteed = container((Some(100), Some(100)), (Some(100), Some(100)));
        let burstable = container((Some(100), None), (None, None));
        assert_eq!(
            pod(vec![guaranteed.clone()]).qos_class(),
            QosClass::Guaranteed
        );
        // Limits without requests: the API server defaults requests to limits before upstream
        // computes QoS; the undefaulted pod is Burstable (request and limit counts differ).
        assert_eq!(
            pod(vec![container((None, None), (Some(100), Some(100)))]).qos_class(),
            QosClass::Burstable
        );
        assert_eq!(
            pod(vec![guaranteed.clone(), burstable]).qos_class(),
            QosClass::Burstable
        );
        assert_eq!(
            pod(vec![container((None, None), (None, None))]).qos_class(),
            QosClass::BestEffort
        );
        // Zero quantities do not count.
        assert_eq!(
            pod(vec![container((Some(0), Some(0)), (Some(0), None))]).qos_class(),
            QosClass::BestEffort
        );
        // Only cpu and memory count.
        let mut gpu = Container::new("gpu");
        gpu.resources
            .limits
            .extended
            .insert("example.com/gpu".into(), 1);
        assert_eq!(pod(vec![gpu]).qos_class(), QosClass::BestEffort);
        // Limits without memory are not guaranteed.
        assert_eq!(
            pod(vec![container((Some(100), None), (Some(100), None))]).qos_class(),
            QosClass::Burstable
        );
        // Init containers count too.
        let mut p = pod(vec![guaranteed.clone()]);
        p.init_containers
            .push(container((Some(10), None), (None, None)));
        assert_eq!(p.qos_class(), QosClass::Burstable);
        // Requests differing from limits.
        assert_eq!(
            pod(vec![container(
                (Some(50), Some(100)),
                (Some(100), Some(100))
            )])
            .qos_class(),
            QosClass::Burstable
        );
    }

    #[test]
    fn pod_level_resources_decide_alone() {
        let mut p = pod(vec![container((Some(1), None), (None, None))]);
        let mut level = ResourceRequirements::default();
        level.limits.cpu_millis = Some(1000);
        level.limits.memory_bytes = Some(1 << 20);
        level.requests = level.limits.clone();
        p.resources = Some(level.clone());
        assert_eq!(p.qos_class(), QosClass::Guaranteed);
        level.limits.memory_bytes = None;
        level.requests.memory_bytes = None;
        p.resources = Some(level);
        assert_eq!(p.qos_class(), QosClass::Burstable);
        // k/k#137150 (PodLevelResourcesFixKubeletQOSClass, on in v1.37): empty pod-level
        // resources leave the class to the containers; the pod in k/k#135082 (`resources: {}`
        // beside a Guaranteed container) is Guaranteed, no longer BestEffort.
        p.resources = Some(ResourceRequirements::default());
        assert_eq!(p.qos_class(), QosClass::Burstable);
        let mut guaranteed = container((Some(100), Some(50 << 20)), (Some(100), Some(50 << 20)));
        guaranteed.name = "pause".into();
        let mut p = pod(vec![guaranteed]);
        p.resources = Some(ResourceRequirements::default());
        assert_eq!(p.qos_class(), QosClass::Guaranteed);
        let mut only_other = ResourceRequirements::default();
        only_other
            .requests
            .extended
            .insert("hugepages-2Mi".into(), 2 << 20);
        p.resources = Some(only_other);
        assert_eq!(p.qos_class(), QosClass::BestEffort);
        assert_eq!(QosClass::Guaranteed.to_string(), "Guaranteed");
    }

    #[test]
    fn only_requests_equal_to_limits_are_equivalent_guaranteed() {
        let both = (Some(1000), Some(1));
        assert!(container(both, both).is_equivalent_guaranteed());
        assert!(!container(both, (Some(1000), None)).is_equivalent_guaranteed());
        assert!(!container(both, (Some(2000), Some(1))).is_equivalent_guaranteed());
        let zero = (Some(0), Some(1));
        assert!(!container(zero, zero).is_equivalent_guaranteed());
    }
}
