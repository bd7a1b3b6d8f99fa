//! How many exclusive CPUs a container or pod gets (upstream `guaranteedCPUs` and
//! `podGuaranteedCPUs`).

use corral_topology::{Container, Pod, QosClass};

/// Exclusive CPUs for `container`: its CPU request in whole CPUs when the pod is
/// Guaranteed and the request is an integer, else 0 (upstream `guaranteedCPUs`).
///
/// ```
/// use corral_cpumgr::guaranteed_cpus;
/// use corral_topology::{Container, Pod};
///
/// let mut c = Container::new("c");
/// for list in [&mut c.resources.requests, &mut c.resources.limits] {
///     list.cpu_millis = Some(2000);
///     list.memory_bytes = Some(1 << 20);
/// }
/// let pod = Pod { containers: vec![c.clone()], ..Pod::default() };
/// assert_eq!(guaranteed_cpus(&pod, &c), 2);
/// ```
pub fn guaranteed_cpus(pod: &Pod, container: &Container) -> usize {
    // The container's own request first: the pod's QoS class walks every container, and
    // most containers (shared pool) are settled without it, so admitting a pod stays
    // linear in its containers.
    if whole_cpus(QosClass::Guaranteed, container) == 0 {
        return 0;
    }
    whole_cpus(pod.qos_class(), container)
}

/// `guaranteed_cpus` with the pod's QoS class computed once by the caller.
fn whole_cpus(qos: QosClass, container: &Container) -> usize {
    if qos != QosClass::Guaranteed {
        return 0;
    }
    let millis = container.resources.requests.cpu_millis.unwrap_or(0);
    if millis <= 0 || millis % 1000 != 0 {
        return 0;
    }
    usize::try_from(millis / 1000).unwrap_or(0)
}

/// Exclusive CPUs for the whole pod: the larger of the biggest init container (plus the
/// sidecars started before it) and the app containers plus all sidecars (upstream
/// `podGuaranteedCPUs`).
///
/// The sums saturate: each container may ask for up to `i64::MAX / 1000` CPUs, and a few
/// thousand such containers overflowed `usize` ("attempt to add with overflow"), where Go's
/// `int` sums wrap to an arbitrary (even negative) count. No machine has `usize::MAX` CPUs,
/// so the pod is refused as too large either way.
pub fn pod_guaranteed_cpus(pod: &Pod) -> usize {
    let qos = pod.qos_class();
    let mut by_init: usize = 0;
    let mut by_sidecars: usize = 0;
    for container in &pod.init_containers {
        if container.resources.requests.cpu_millis.is_none() {
            continue;
        }
        let requested = whole_cpus(qos, container);
        if container.is_restartable() {
            by_sidecars = by_sidecars.saturating_add(requested);
        } else {
            by_init = by_init.max(by_sidecars.saturating_add(requested));
        }
    }
    let by_apps = pod
        .containers
        .iter()
        .filter(|c| c.resources.requests.cpu_millis.is_some())
        .map(|c| whole_cpus(qos, c))
        .fold(0usize, usize::saturating_add);
    by_init.max(by_apps.saturating_add(by_sidecars))
}

#[cfg(test)]
mod tests {
    use corral_topology::ContainerRestartPolicy;

    use super::*;

    /// The largest whole-CPU request a container can make (`i64::MAX` rounded down to whole
    /// millicores), Guaranteed.
    fn huge(name: String, restart_policy: Option<ContainerRestartPolicy>) -> Container {
        let mut c = Container::new(&name);
        c.restart_policy = restart_policy;
        for list in [&mut c.resources.requests, &mut c.resources.limits] {
            list.cpu_millis = Some(i64::MAX / 1000 * 1000);
            list.memory_bytes = Some(1 << 20);
        }
        c
    }

    /// 2001 containers of `i64::MAX / 1000` CPUs each sum past `usize::MAX`: the apps' sum
    /// and the sidecars' sum used to panic ("attempt to add with overflow"); they saturate.
    #[test]
    fn requests_past_usize_saturate() {
        let apps = (0..2001).map(|i| huge(format!("app{i}"), None)).collect();
        let pod = Pod {
            containers: apps,
            ..Pod::default()
        };
        assert_eq!(pod_guaranteed_cpus(&pod), usize::MAX);

        let sidecars = (0..2001)
            .map(|i| huge(format!("sidecar{i}"), Some(ContainerRestartPolicy::Always)))
            .chain([huge("init".into(), None)])
            .collect();
        let pod = Pod {
            init_containers: sidecars,
            containers: vec![huge("app".into(), None)],
            ..Pod::default()
        };
        assert_eq!(pod_guaranteed_cpus(&pod), usize::MAX);

        let pod = Pod {
            containers: vec![huge("a".into(), None), huge("b".into(), None)],
            ..Pod::default()
        };
        assert_eq!(pod_guaranteed_cpus(&pod), 2 * (i64::MAX as usize / 1000));
    }
}
