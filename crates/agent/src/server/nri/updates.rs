//! The container changes corral asks of the runtime: a container's cpuset (its CPUs, and
//! the memory nodes the memory manager pinned its memory to), and no CFS quota for a
//! container with exclusive CPUs (`DisableCPUQuotaWithExclusiveCPUs`).

use corral_cpumgr::CfsQuota;
use corral_proto::nri::api;

/// What the runtime does when it cannot apply an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnFailure {
    /// Go on (an update answered within an event: the event itself succeeds).
    Ignore,
    /// Report it back as failed (an unsolicited update the caller checks).
    Report,
}

/// A container's cpuset: its CPUs, and its memory nodes (`cpuset.mems`; empty leaves them
/// as they are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Cpuset {
    /// `cpuset.cpus`.
    pub(super) cpus: String,
    /// `cpuset.mems`.
    pub(super) mems: String,
    /// The CFS quota: [`CfsQuota::Unlimited`] sets `cpu.quota` -1.
    pub(super) quota: CfsQuota,
}

/// Linux resources that set the cpuset (and, for exclusive CPUs, lift the quota).
pub(super) fn cpu_resources(cpuset: Cpuset) -> api::LinuxResources {
    let quota = match cpuset.quota {
        CfsQuota::Unlimited => Some(api::OptionalInt64 { value: -1 }),
        _ => None,
    };
    api::LinuxResources {
        cpu: Some(api::LinuxCpu {
            cpus: cpuset.cpus,
            mems: cpuset.mems,
            quota,
            ..api::LinuxCpu::default()
        }),
        ..api::LinuxResources::default()
    }
}

/// An update of `container_id`'s cpuset.
pub(super) fn cpuset_update(
    container_id: &str,
    cpuset: Cpuset,
    on_failure: OnFailure,
) -> api::ContainerUpdate {
    api::ContainerUpdate {
        container_id: container_id.to_owned(),
        linux: Some(api::LinuxContainerUpdate {
            resources: Some(cpu_resources(cpuset)),
        }),
        ignore_failure: on_failure == OnFailure::Ignore,
    }
}
