//! Shared test support: pods as upstream's `makePod` / `makeMultiContainerPod` build them,
//! and the modules below.

use corral_cpumgr::{ContainerCpuAssignments, CpuState};
use corral_topology::{Container, ContainerRestartPolicy, CpuSet, Pod};

pub(crate) mod harness;
pub(crate) mod static_cases;
pub(crate) mod topologies;

/// A CPU set from the list format.
pub(crate) fn set(s: &str) -> CpuSet {
    s.parse().unwrap()
}

/// Upstream `mockState{assignments, defaultCPUSet}`.
pub(crate) fn state(default: &str, assignments: &[(&str, &str, &str)]) -> CpuState {
    let mut a = ContainerCpuAssignments::new();
    for (pod, c, cpus) in assignments {
        a.entry((*pod).to_owned())
            .or_default()
            .insert((*c).to_owned(), set(cpus));
    }
    CpuState::new(set(default), a)
}

/// An error and its sources, `: `-separated, as the agent prints them (`Display`s here do
/// not repeat their source).
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A container with CPU request/limit (millicores) and 1G of memory.
pub(crate) fn container(name: &str, request: i64, limit: i64) -> Container {
    let mut c = Container::new(name);
    c.resources.requests.cpu_millis = Some(request);
    c.resources.limits.cpu_millis = Some(limit);
    c.resources.requests.memory_bytes = Some(1_000_000_000);
    c.resources.limits.memory_bytes = Some(1_000_000_000);
    c
}

/// Upstream `makePod(podUID, containerName, request, limit)`.
pub(crate) fn make_pod(uid: &str, name: &str, request: i64, limit: i64) -> Pod {
    Pod {
        uid: uid.into(),
        name: uid.into(),
        namespace: "default".into(),
        containers: vec![container(name, request, limit)],
        ..Pod::default()
    }
}

/// Upstream `makeMultiContainerPod`: `initContainer-N` and `appContainer-N`.
pub(crate) fn make_multi_container_pod(uid: &str, init: &[(i64, i64)], apps: &[(i64, i64)]) -> Pod {
    Pod {
        uid: uid.into(),
        name: uid.into(),
        namespace: "default".into(),
        init_containers: init
            .iter()
            .enumerate()
            .map(|(i, &(r, l))| container(&format!("initContainer-{i}"), r, l))
            .collect(),
        containers: apps
            .iter()
            .enumerate()
            .map(|(i, &(r, l))| container(&format!("appContainer-{i}"), r, l))
            .collect(),
        ..Pod::default()
    }
}

/// Upstream `makeMultiContainerPodWithOptions`: init containers with `Some(Always)` are
/// sidecars.
pub(crate) fn make_pod_with_sidecars(uid: &str, init: &[(i64, bool)], apps: &[i64]) -> Pod {
    let mut pod = make_multi_container_pod(
        uid,
        &init.iter().map(|&(r, _)| (r, r)).collect::<Vec<_>>(),
        &apps.iter().map(|&r| (r, r)).collect::<Vec<_>>(),
    );
    for (c, &(_, sidecar)) in pod.init_containers.iter_mut().zip(init) {
        if sidecar {
            c.restart_policy = Some(ContainerRestartPolicy::Always);
        }
    }
    pod
}
