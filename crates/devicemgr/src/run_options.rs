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
            if let Some(existing) = seen.envs.get(k) {
                if existing != v {
                    tracing::warn!(resource, env = %k, kept = %existing, dropped = %v,
                        "environment variable has conflicting setting");
                }
                continue;
            }
            seen.envs.insert(k.clone(), v.clone());
            self.envs.push(EnvVar {
                name: k.clone(),
                value: v.clone(),
            });
        }
        for dev in &resp.devices {
            if let Some(existing) = seen.devices.get(&dev.container_path) {
                if *existing != dev.host_path {
                    tracing::warn!(resource, container_path = %dev.container_path, kept = %existing,
                        dropped = %dev.host_path, "container device has conflicting mapping host devices");
                }
                continue;
            }
            seen.devices
                .insert(dev.container_path.clone(), dev.host_path.clone());
            self.devices.push(DeviceNode {
                path_on_host: dev.host_path.clone(),
                path_in_container: dev.container_path.clone(),
                permissions: dev.permissions.clone(),
            });
        }
        for mount in &resp.mounts {
            if let Some(existing) = seen.mounts.get(&mount.container_path) {
                if *existing != mount.host_path {
                    tracing::warn!(resource, container_path = %mount.container_path, kept = %existing,
                        dropped = %mount.host_path, "container mount has conflicting mapping host mounts");
                }
                continue;
            }
            seen.mounts
                .insert(mount.container_path.clone(), mount.host_path.clone());
            self.mounts.push(Mount {
                name: mount.container_path.clone(),
                container_path: mount.container_path.clone(),
                host_path: mount.host_path.clone(),
                read_only: mount.read_only,
            });
        }
        for (k, v) in sorted(&resp.annotations) {
            if let Some(existing) = seen.annotations.get(k) {
                if existing != v {
                    tracing::warn!(resource, annotation = %k, kept = %existing, dropped = %v,
                        "annotation has conflicting setting");
                }
                continue;
            }
            seen.annotations.insert(k.clone(), v.clone());
            self.annotations.push(Annotation {
                name: k.clone(),
                value: v.clone(),
            });
        }
        for cdi in &resp.cdi_devices {
            if seen.cdi.insert(cdi.name.clone()) {
                self.cdi_devices.push(cdi.name.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_devices::ContainerAllocation;
    use corral_proto::deviceplugin::v1beta1::{self as api, CdiDevice, DeviceSpec};

    fn response(
        env: &[(&str, &str)],
        dev: &[(&str, &str)],
        mnt: &[(&str, &str)],
        cdi: &[&str],
    ) -> ContainerAllocateResponse {
        ContainerAllocateResponse {
            envs: env
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            devices: dev
                .iter()
                .map(|(c, h)| DeviceSpec {
                    container_path: (*c).into(),
                    host_path: (*h).into(),
                    permissions: "mrw".into(),
                })
                .collect(),
            mounts: mnt
                .iter()
                .map(|(c, h)| api::Mount {
                    container_path: (*c).into(),
                    host_path: (*h).into(),
                    read_only: true,
                })
                .collect(),
            annotations: env
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            cdi_devices: cdi
                .iter()
                .map(|n| CdiDevice { name: (*n).into() })
                .collect(),
        }
    }

    #[test]
    fn first_setting_wins() {
        // Upstream TestDeviceRunContainerOptions-style merge: duplicates are skipped,
        // conflicts keep the first value.
        let mut resources = ResourceAllocations::new();
        resources.insert(
            "a.com/r1".into(),
            ContainerAllocation {
                devices: Default::default(),
                response: Some(response(
                    &[("E", "1"), ("F", "x")],
                    &[("/dev/a", "/dev/h1")],
                    &[("/m", "/h")],
                    &["v/c=1"],
                )),
            },
        );
        resources.insert(
            "b.com/r2".into(),
            ContainerAllocation {
                devices: Default::default(),
                response: Some(response(
                    &[("E", "2"), ("G", "y")],
                    &[("/dev/a", "/dev/h2"), ("/dev/b", "/dev/hb")],
                    &[("/m", "/other")],
                    &["v/c=1", "v/c=2"],
                )),
            },
        );
        let opts = RunContainerOptions::merge(&resources);
        let envs: Vec<_> = opts
            .envs
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(envs, vec![("E", "1"), ("F", "x"), ("G", "y")]);
        assert_eq!(opts.devices.len(), 2);
        assert_eq!(opts.devices[0].path_on_host, "/dev/h1");
        assert_eq!(opts.mounts.len(), 1);
        assert_eq!(opts.mounts[0].host_path, "/h");
        assert_eq!(opts.annotations.len(), 3);
        assert_eq!(
            opts.cdi_devices,
            vec!["v/c=1".to_owned(), "v/c=2".to_owned()]
        );
    }
}
