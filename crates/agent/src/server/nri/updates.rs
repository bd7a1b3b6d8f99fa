//! The container changes corral asks of the runtime: a container's cpuset.

use corral_proto::nri::api;

/// What the runtime does when it cannot apply an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnFailure {
    /// Go on (an update answered within an event: the event itself succeeds).
    Ignore,
    /// Report it back as failed (an unsolicited update the caller checks).
    Report,
}

/// Linux resources that set only the cpuset.
pub(super) fn cpu_resources(cpus: String) -> api::LinuxResources {
    api::LinuxResources {
        cpu: Some(api::LinuxCpu {
            cpus,
            ..api::LinuxCpu::default()
        }),
        ..api::LinuxResources::default()
    }
}

/// An update of `container_id`'s cpuset to `cpus`.
pub(super) fn cpuset_update(
    container_id: &str,
    cpus: String,
    on_failure: OnFailure,
) -> api::ContainerUpdate {
    api::ContainerUpdate {
        container_id: container_id.to_owned(),
        linux: Some(api::LinuxContainerUpdate {
            resources: Some(cpu_resources(cpus)),
        }),
        ignore_failure: on_failure == OnFailure::Ignore,
    }
}
