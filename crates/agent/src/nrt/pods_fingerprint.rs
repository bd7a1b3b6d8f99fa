//! The `nodeTopologyPodsFingerprint` corral publishes: podfingerprint's `pfp0v001` over the
//! admitted pods that hold exclusive resources, method `with-exclusive-resources` (what
//! resource-topology-exporter publishes by default). The scheduler plugin recomputes it over
//! the pods it bound to the node, kept by its own `resourcerequests.AreExclusiveForPod`; when
//! the two agree it trusts the object's `available` again. corral sees every pod that holds
//! exclusive resources (it decides them), but not every pod: hence not the method `all`.
//!
//! `AreExclusiveForPod` (scheduler-plugins `pkg/noderesourcetopology/resourcerequests`, read at
//! 903da7df): a pod holds exclusive resources when one of its app or sidecar containers asks for
//! - a resource that is not native (a device resource) and the object lists it in a zone,
//!   in any quantity (zero too);
//! - being Guaranteed: a whole number of CPUs above zero, or memory or huge pages above zero.

use std::collections::BTreeSet;

use corral_nrt::PodFingerprint;
use corral_topology::{Container, Pod, QosClass};

/// The fingerprint over the pods of `pods` that hold exclusive resources, device resources
/// counting when in `listed` (the resources the object's zones list).
pub(crate) fn exclusive_pods_fingerprint<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    listed: &BTreeSet<String>,
) -> String {
    let mut fingerprint = PodFingerprint::new();
    for pod in pods {
        if is_exclusive(pod, listed) {
            fingerprint.add(&pod.namespace, &pod.name);
        }
    }
    fingerprint.sign()
}

/// `AreExclusiveForPod`.
fn is_exclusive(pod: &Pod, listed: &BTreeSet<String>) -> bool {
    let guaranteed = pod.qos_class() == QosClass::Guaranteed;
    let sidecars = pod.init_containers.iter().filter(|c| c.is_restartable());
    pod.containers
        .iter()
        .chain(sidecars)
        .any(|c| container_is_exclusive(c, guaranteed, listed))
}

fn container_is_exclusive(
    container: &Container,
    guaranteed: bool,
    listed: &BTreeSet<String>,
) -> bool {
    let requests = &container.resources.requests;
    let limits = &container.resources.limits;
    let amount = |name: &str| requests.get(name).or_else(|| limits.get(name)).unwrap_or(0);
    let names = requests.extended.keys().chain(limits.extended.keys());
    for name in names {
        if !is_native(name) {
            // Upstream `IsExclusive`: `nrtResources.Has(resource)`, whatever the quantity
            // (zero too).
            if listed.contains(name) {
                return true;
            }
        } else if guaranteed && name.starts_with("hugepages-") && amount(name) > 0 {
            return true;
        }
    }
    guaranteed && {
        let cpu = amount("cpu");
        (cpu > 0 && cpu % 1000 == 0) || amount("memory") > 0
    }
}

/// Kubernetes' `IsNativeResource`: no domain, or the `kubernetes.io` domain.
fn is_native(name: &str) -> bool {
    match name.split_once('/') {
        None => true,
        Some((domain, _)) => domain == "kubernetes.io" || domain.ends_with(".kubernetes.io"),
    }
}

#[cfg(test)]
mod tests {
    use corral_topology::ResourceList;

    use super::*;

    fn pod(name: &str, cpu: i64, memory: i64, limits_too: bool, extra: &[(&str, i64)]) -> Pod {
        let mut container = Container::new("c");
        let mut list = ResourceList {
            cpu_millis: Some(cpu),
            memory_bytes: Some(memory),
            ..ResourceList::default()
        };
        for (k, v) in extra {
            list.extended.insert((*k).to_owned(), *v);
        }
        container.resources.requests = list.clone();
        if limits_too {
            container.resources.limits = list;
        }
        Pod {
            uid: name.into(),
            namespace: "ns".into(),
            name: name.into(),
            containers: vec![container],
            ..Pod::default()
        }
    }

    // The cases of scheduler-plugins' resourcerequests `TestIsExclusive`/`AreExclusiveForPod`
    // rules, as facts: Guaranteed with whole CPUs or memory; a device only when listed.
    #[test]
    fn which_pods_count() {
        let listed = BTreeSet::from(["example.com/gpu".to_owned()]);
        let cases = [
            (pod("guaranteed-whole", 2000, 1 << 20, true, &[]), true),
            // Guaranteed with a fraction of a CPU still asks memory: exclusive (upstream counts
            // memory > 0 for Guaranteed pods).
            (pod("guaranteed-fraction", 1500, 1 << 20, true, &[]), true),
            (pod("burstable", 2000, 1 << 20, false, &[]), false),
            (
                pod("burstable-gpu", 100, 0, false, &[("example.com/gpu", 1)]),
                true,
            ),
            (
                pod(
                    "burstable-unlisted-nic",
                    100,
                    0,
                    false,
                    &[("example.com/nic", 1)],
                ),
                false,
            ),
            (
                pod(
                    "burstable-native-ext",
                    100,
                    0,
                    false,
                    &[("kubernetes.io/x", 1)],
                ),
                false,
            ),
        ];
        for (pod, want) in &cases {
            assert_eq!(is_exclusive(pod, &listed), *want, "{}", pod.name);
        }
        let all: Vec<Pod> = cases.iter().map(|(p, _)| p.clone()).collect();
        let mut expected = PodFingerprint::new();
        for (pod, want) in &cases {
            if *want {
                expected.add("ns", &pod.name);
            }
        }
        assert_eq!(exclusive_pods_fingerprint(&all, &listed), expected.sign());
    }

    #[test]
    fn native_names_are_kubernetes_own() {
        for native in [
            "cpu",
            "hugepages-2Mi",
            "kubernetes.io/x",
            "requests.kubernetes.io/y",
        ] {
            assert!(is_native(native), "{native}");
        }
        for foreign in ["example.com/gpu", "nvidia.com/gpu", "kubernetes.iox/z"] {
            assert!(!is_native(foreign), "{foreign}");
        }
    }
}
