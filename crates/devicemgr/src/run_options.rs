//! [`RunContainerOptions`]: what a container needs to use its devices — every resource's
//! allocate response merged as upstream's `deviceRunContainerOptions` does: the first
//! setting of an env var, device node, mount or annotation wins (a conflicting later one is
//! logged and dropped), CDI devices are de-duplicated by name. Resources are merged in name
//! order and map entries in key order, so the result is deterministic.

use std::collections::{BTreeMap, BTreeSet};

use corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse;

use crate::pod_devices::ResourceAllocations;

/// An environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// A bind mount (upstream `kubecontainer.Mount`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Name (upstream uses the container path).
    pub name: String,
    /// Path in the container.
    pub container_path: String,
    /// Path on the host.
    pub host_path: String,
    /// Read-only.
    pub read_only: bool,
}

/// A device node (upstream `kubecontainer.DeviceInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceNode {
    /// Path on the host.
    pub path_on_host: String,
    /// Path in the container.
    pub path_in_container: String,
    /// cgroup permissions (`rwm`).
    pub permissions: String,
}

/// An annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    /// Key.
    pub name: String,
    /// Value.
    pub value: String,
}

/// The merged runtime settings of a container's devices (upstream
/// `DeviceRunContainerOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunContainerOptions {
    /// Environment variables.
    pub envs: Vec<EnvVar>,
    /// Mounts.
    pub mounts: Vec<Mount>,
    /// Device nodes.
    pub devices: Vec<DeviceNode>,
    /// Annotations.
    pub annotations: Vec<Annotation>,
    /// Fully qualified CDI device names.
    pub cdi_devices: Vec<String>,
}

#[derive(Default)]
struct Seen {
    envs: BTreeMap<String, String>,
    devices: BTreeMap<String, String>,
    mounts: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    cdi: BTreeSet<String>,
}

fn sorted(map: &std::collections::HashMap<String, String>) -> Vec<(&String, &String)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort();
    entries
}

/// Whether `key` is new in `seen` (then it is recorded with `value`); a repeat with
/// another value calls `conflict` with the value kept (the first setting wins).
fn first_setting(
    seen: &mut BTreeMap<String, String>,
    key: &str,
    value: &str,
    conflict: impl FnOnce(&str),
) -> bool {
    match seen.get(key) {
        Some(kept) => {
            if kept != value {
                conflict(kept);
            }
            false
        }
        None => {
            seen.insert(key.to_owned(), value.to_owned());
            true
        }
    }
}

impl RunContainerOptions {
    /// Merge the allocate responses of a container's resources.
    pub fn merge(resources: &ResourceAllocations) -> RunContainerOptions {
        let mut opts = RunContainerOptions::default();
        let mut seen = Seen::default();
        for (resource, allocation) in resources {
            if let Some(response) = &allocation.response {
                opts.add(resource, response, &mut seen);
            }
        }
        opts
    }

    fn add(&mut self, resource: &str, resp: &ContainerAllocateResponse, seen: &mut Seen) {
        for (k, v) in sorted(&resp.envs) {
            let conflict = |kept: &str| {
                tracing::warn!(resource, env = %k, kept, dropped = %v,
                    "environment variable has conflicting setting");
            };
            if first_setting(&mut seen.envs, k, v, conflict) {
                self.envs.push(EnvVar {
                    name: k.clone(),
                    value: v.clone(),
                });
            }
        }
        for dev in &resp.devices {
            let conflict = |kept: &str| {
                tracing::warn!(resource, container_path = %dev.container_path, kept,
                    dropped = %dev.host_path, "container device has conflicting mapping host devices");
            };
            if first_setting(
                &mut seen.devices,
                &dev.container_path,
                &dev.host_path,
                conflict,
            ) {
                self.devices.push(DeviceNode {
                    path_on_host: dev.host_path.clone(),
                    path_in_container: dev.container_path.clone(),
                    permissions: dev.permissions.clone(),
                });
            }
        }
        for mount in &resp.mounts {
            let conflict = |kept: &str| {
                tracing::warn!(resource, container_path = %mount.container_path, kept,
                    dropped = %mount.host_path, "container mount has conflicting mapping host mounts");
            };
            if first_setting(
                &mut seen.mounts,
                &mount.container_path,
                &mount.host_path,
                conflict,
            ) {
                self.mounts.push(Mount {
                    name: mount.container_path.clone(),
                    container_path: mount.container_path.clone(),
                    host_path: mount.host_path.clone(),
                    read_only: mount.read_only,
                });
            }
        }
        for (k, v) in sorted(&resp.annotations) {
            let conflict = |kept: &str| {
                tracing::warn!(resource, annotation = %k, kept, dropped = %v,
                    "annotation has conflicting setting");
            };
            if first_setting(&mut seen.annotations, k, v, conflict) {
                self.annotations.push(Annotation {
                    name: k.clone(),
                    value: v.clone(),
                });
            }
        }
        for cdi in &resp.cdi_devices {
            if seen.cdi.insert(cdi.name.clone()) {
                self.cdi_devices.push(cdi.name.clone());
            }
        }
    }
}
