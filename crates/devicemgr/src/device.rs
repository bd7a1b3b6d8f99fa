//! [`Device`]: one device as a plugin reports it in `ListAndWatch` (upstream
//! `pluginapi.Device`), and [`PluginOptions`], what a plugin says it supports.

use corral_proto::deviceplugin::v1beta1 as api;

/// One device of a resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Device {
    /// The plugin's id for the device, unique within its resource.
    pub id: String,
    /// Whether the plugin reports it `Healthy` (any other health string is unhealthy).
    pub healthy: bool,
    /// NUMA node ids: `None` when the plugin sent no topology (upstream nil
    /// `TopologyInfo`), `Some(vec![])` for a topology with no nodes. Ids are kept as sent,
    /// including ones the machine lacks.
    pub numa_nodes: Option<Vec<i64>>,
}

impl Device {
    /// A healthy device on the given NUMA nodes (`None`: no topology).
    pub fn new(id: impl Into<String>, numa_nodes: Option<Vec<i64>>) -> Device {
        Device {
            id: id.into(),
            healthy: true,
            numa_nodes,
        }
    }

    /// Whether the device has at least one NUMA node (upstream's test in
    /// `deviceHasTopologyAlignment`).
    pub fn has_topology(&self) -> bool {
        self.numa_nodes.as_ref().is_some_and(|n| !n.is_empty())
    }

    /// The wire form.
    pub fn to_proto(&self) -> api::Device {
        api::Device {
            id: self.id.clone(),
            health: if self.healthy {
                api::HEALTHY
            } else {
                api::UNHEALTHY
            }
            .to_owned(),
            topology: self.numa_nodes.as_ref().map(|ids| api::TopologyInfo {
                nodes: ids.iter().map(|&id| api::NumaNode { id }).collect(),
            }),
        }
    }
}

impl From<&api::Device> for Device {
    fn from(device: &api::Device) -> Device {
        Device {
            id: device.id.clone(),
            healthy: device.health == api::HEALTHY,
            numa_nodes: device
                .topology
                .as_ref()
                .map(|t| t.nodes.iter().map(|n| n.id).collect()),
        }
    }
}

/// What a plugin supports (upstream `DevicePluginOptions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginOptions {
    /// `PreStartContainer` must be called before each container start.
    pub pre_start_required: bool,
    /// The plugin answers `GetPreferredAllocation`.
    pub get_preferred_allocation_available: bool,
}

impl From<&api::DevicePluginOptions> for PluginOptions {
    fn from(options: &api::DevicePluginOptions) -> PluginOptions {
        PluginOptions {
            pre_start_required: options.pre_start_required,
            get_preferred_allocation_available: options.get_preferred_allocation_available,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_round_trip() {
        for device in [
            Device::new("a", None),
            Device::new("b", Some(vec![])),
            Device {
                id: "c".into(),
                healthy: false,
                numa_nodes: Some(vec![0, -1, 70]),
            },
        ] {
            assert_eq!(Device::from(&device.to_proto()), device);
        }
        let odd = api::Device {
            id: "d".into(),
            health: "healthy".into(),
            topology: None,
        };
        assert!(
            !Device::from(&odd).healthy,
            "health is case-sensitive as upstream"
        );
    }
}

/// One resource's devices as its plugin last listed them, and the ids pods hold
/// ([`DeviceManager::device_inventory`](crate::DeviceManager::device_inventory)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceInventory {
    /// Every device as the plugin last listed it, with its NUMA nodes.
    pub devices: Vec<Device>,
    /// The ids the manager holds healthy (upstream `GetAllocatableDevices`): a disconnected
    /// plugin's devices are not, though its last list called them healthy.
    pub healthy: std::collections::BTreeSet<String>,
    /// The ids of the devices pods hold.
    pub allocated: std::collections::BTreeSet<String>,
}
