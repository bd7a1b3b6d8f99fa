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
pub fn pod_guaranteed_cpus(pod: &Pod) -> usize {
    let qos = pod.qos_class();
    let mut by_init = 0;
    let mut by_sidecars = 0;
    for container in &pod.init_containers {
        if container.resources.requests.cpu_millis.is_none() {
            continue;
        }
        let requested = whole_cpus(qos, container);
        if container.is_restartable() {
            by_sidecars += requested;
        } else if by_sidecars + requested > by_init {
            by_init = by_sidecars + requested;
        }
    }
    let by_apps: usize = pod
        .containers
        .iter()
        .filter(|c| c.resources.requests.cpu_millis.is_some())
        .map(|c| whole_cpus(qos, c))
        .sum();
    by_init.max(by_apps + by_sidecars)
}
