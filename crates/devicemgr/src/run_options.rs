//! [`RunContainerOptions`]: what a container needs to use its devices — every resource's
//! allocate response merged as upstream's `deviceRunContainerOptions` does: the first
//! setting of an env var, device node, mount or annotation wins (a conflicting later one is
//! logged and dropped), CDI devices are de-duplicated by name. Resources are merged in name
//! order and map entries in key order, so the result is deterministic.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse;

use crate::pod_devices::ResourceAllocations;

/// A name and its value: an environment variable or an annotation (upstream's
/// `kubecontainer.EnvVar` and `Annotation` have the same two fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameValue {
    /// Name (an annotation's key).
    pub name: String,
    /// Value.
    pub value: String,
}

/// An environment variable.
pub type EnvVar = NameValue;

/// An annotation.
pub type Annotation = NameValue;

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

/// The first setting of each key of one kind (env var name, container path…): a repeat with
/// another value is logged as upstream logs it and dropped.
struct FirstSettings {
    /// The kind, for the log: "environment variable", "container device"…
    what: &'static str,
    /// The conflict, as upstream words it.
    conflict: &'static str,
    kept: BTreeMap<String, String>,
}

impl FirstSettings {
    fn new(what: &'static str, conflict: &'static str) -> Self {
        let kept = BTreeMap::new();
        FirstSettings {
            what,
            conflict,
            kept,
        }
    }

    /// Whether `key` is new (then it is kept with `value`).
    fn first(&mut self, resource: &str, key: &str, value: &str) -> bool {
        match self.kept.get(key) {
            Some(kept) => {
                if kept != value {
                    let (what, conflict) = (self.what, self.conflict);
                    tracing::warn!(
                        resource,
                        what,
                        key,
                        kept,
                        dropped = value,
                        "{what} {conflict}"
                    );
                }
                false
            }
            None => {
                self.kept.insert(key.to_owned(), value.to_owned());
                true
            }
        }
    }
}

/// What the merge has kept so far, per kind of setting.
struct Seen {
    envs: FirstSettings,
    devices: FirstSettings,
    mounts: FirstSettings,
    annotations: FirstSettings,
    cdi: BTreeSet<String>,
}

impl Seen {
    fn new() -> Self {
        Seen {
            envs: FirstSettings::new("environment variable", "has conflicting setting"),
            devices: FirstSettings::new("container device", "has conflicting mapping host devices"),
            mounts: FirstSettings::new("container mount", "has conflicting mapping host mounts"),
            annotations: FirstSettings::new("annotation", "has conflicting setting"),
            cdi: BTreeSet::new(),
        }
    }
}

fn sorted(map: &HashMap<String, String>) -> Vec<(&String, &String)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort();
    entries
}

impl RunContainerOptions {
    /// Merge the allocate responses of a container's resources.
    pub fn merge(resources: &ResourceAllocations) -> RunContainerOptions {
        let mut opts = RunContainerOptions::default();
        let mut seen = Seen::new();
        for (resource, allocation) in resources {
            if let Some(response) = &allocation.response {
                opts.add(resource, response, &mut seen);
            }
        }
        opts
    }

    fn add(&mut self, resource: &str, resp: &ContainerAllocateResponse, seen: &mut Seen) {
        // Environment variables and annotations: the lists are independent, so merging them
        // before devices and mounts changes nothing.
        let named = [
            (&resp.envs, &mut seen.envs, &mut self.envs),
            (
                &resp.annotations,
                &mut seen.annotations,
                &mut self.annotations,
            ),
        ];
        for (settings, seen, out) in named {
            for (name, value) in sorted(settings) {
                if seen.first(resource, name, value) {
                    let (name, value) = (name.clone(), value.clone());
                    out.push(NameValue { name, value });
                }
            }
        }
        for dev in &resp.devices {
            if seen
                .devices
                .first(resource, &dev.container_path, &dev.host_path)
            {
                self.devices.push(DeviceNode {
                    permissions: dev.permissions.clone(),
                    path_on_host: dev.host_path.clone(),
                    path_in_container: dev.container_path.clone(),
                });
            }
        }
        for mount in &resp.mounts {
            if seen
                .mounts
                .first(resource, &mount.container_path, &mount.host_path)
            {
                self.mounts.push(Mount {
                    read_only: mount.read_only,
                    name: mount.container_path.clone(),
                    container_path: mount.container_path.clone(),
                    host_path: mount.host_path.clone(),
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
