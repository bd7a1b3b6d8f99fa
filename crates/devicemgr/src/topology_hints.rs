//! The device manager as a topology-manager hint provider: container and pod hints exactly
//! as upstream's `GetTopologyHints` / `GetPodTopologyHints`, and the device requests they
//! are computed for (limits of device-plugin resources; for a pod, upstream `PodLimits`).

use std::collections::{BTreeMap, BTreeSet};

use corral_topology::topologymanager::{HintSet, ResourceHintSets};
use corral_topology::{Container, NumaIds, Pod, ResourceHints, TopologyHint};

use crate::bitset::BitSet;
use crate::hints::{self, HintInput};
use crate::resource_devices::ResourceDevices;
use crate::state::DeviceState;

/// Whether hints are wanted as upstream's list or as the family it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HintForm {
    List,
    Family,
}

/// Hint sets built as lists, as lists.
fn lists(sets: ResourceHintSets) -> ResourceHints {
    sets.into_iter()
        .map(|(name, set)| (name, set.map(|set| set.to_hints().into_owned())))
        .collect()
}

fn hint_input<'a>(
    table: &ResourceDevices,
    available: impl Iterator<Item = usize>,
    reusable: impl Iterator<Item = &'a String>,
) -> HintInput {
    let mut input = HintInput {
        all: table.placements.clone(),
        ..HintInput::default()
    };
    for i in available {
        if table.listed.contains(i) {
            input.available.add(table.slot(i).bits);
        }
    }
    for id in reusable {
        if let Some(slot) = table.slot_of(id)
            && slot.nodes.is_some()
        {
            input.reusable.add(slot.bits);
        }
    }
    input
}

/// Upstream `PodLimits` restricted to extended resources: the larger of (app containers +
/// sidecars) and the largest init container's view (itself plus the sidecars started
/// before it).
pub fn pod_limits(pod: &Pod) -> BTreeMap<String, i64> {
    let add = |into: &mut BTreeMap<String, i64>, from: &BTreeMap<String, i64>| {
        for (name, value) in from {
            *into.entry(name.clone()).or_default() += value;
        }
    };
    let max = |into: &mut BTreeMap<String, i64>, from: &BTreeMap<String, i64>| {
        for (name, value) in from {
            let entry = into.entry(name.clone()).or_insert(*value);
            *entry = (*entry).max(*value);
        }
    };
    let mut limits = BTreeMap::new();
    for container in &pod.containers {
        add(&mut limits, &container.resources.limits.extended);
    }
    let mut sidecars: BTreeMap<String, i64> = BTreeMap::new();
    let mut init: BTreeMap<String, i64> = BTreeMap::new();
    for container in &pod.init_containers {
        let own = &container.resources.limits.extended;
        let view = if container.is_restartable() {
            add(&mut sidecars, own);
            sidecars.clone()
        } else {
            let mut view = own.clone();
            add(&mut view, &sidecars);
            view
        };
        max(&mut init, &view);
    }
    add(&mut limits, &sidecars);
    max(&mut limits, &init);
    limits
}

impl DeviceState {
    /// The state with `numa_ids` translating the NUMA ids plugins report (OS ids) into the
    /// mask bits of [`numa_nodes`](Self::numa_nodes) — needed only on a machine with a node
    /// id of 64 or more (see [`NumaIds`]); the default is upstream's identity. Devices
    /// already listed are translated again.
    ///
    /// ```
    /// use corral_devicemgr::{Device, DeviceState, PluginOptions};
    /// use corral_topology::{NumaIds, NumaMask};
    ///
    /// let ids = NumaIds::new([0, 72])?;
    /// let mut state = DeviceState::new(vec![0, 1]).with_numa_ids(ids);
    /// state.plugin_connected("example.com/gpu", PluginOptions::default());
    /// state.update_devices("example.com/gpu", &[Device::new("gpu0", Some(vec![72]))]);
    /// let hints = state.generate_device_topology_hints(
    ///     "example.com/gpu", &["gpu0".to_owned()].into(), &Default::default(), 1);
    /// assert_eq!(hints[0].numa_affinity, Some(NumaMask::new([1])?), "bit 1 is node 72");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_numa_ids(mut self, numa_ids: NumaIds) -> DeviceState {
        for table in self.resources.values_mut() {
            table.renumber(&numa_ids);
        }
        self.numa_ids = numa_ids;
        self
    }

    /// The table between NUMA node OS ids and mask bits.
    pub fn numa_ids(&self) -> &NumaIds {
        &self.numa_ids
    }

    /// Whether the machine has the NUMA node a plugin reports as `id` (an OS id).
    pub fn has_numa_node(&self, id: i64) -> bool {
        self.numa_ids
            .bit_of_signed(id)
            .is_some_and(|bit| self.numa_nodes.contains(&bit))
    }

    /// Upstream `generateDeviceTopologyHints` for explicit available and reusable sets.
    pub fn generate_device_topology_hints(
        &self,
        resource: &str,
        available: &BTreeSet<String>,
        reusable: &BTreeSet<String>,
        request: usize,
    ) -> Vec<TopologyHint> {
        match self.device_hint_set(resource, available, reusable, request, HintForm::List) {
            HintSet::List(list) => list,
            family => family.to_hints().into_owned(),
        }
    }

    /// [`generate_device_topology_hints`](Self::generate_device_topology_hints) as the
    /// family its list is (`to_hints()` gives the list), without walking every set of NUMA
    /// nodes.
    pub fn device_topology_hint_family(
        &self,
        resource: &str,
        available: &BTreeSet<String>,
        reusable: &BTreeSet<String>,
        request: usize,
    ) -> corral_topology::topologymanager::HintFamily {
        match self.device_hint_set(resource, available, reusable, request, HintForm::Family) {
            HintSet::Family(family) => family,
            HintSet::List(_) => unreachable!("asked for a family"),
        }
    }

    fn device_hint_set(
        &self,
        resource: &str,
        available: &BTreeSet<String>,
        reusable: &BTreeSet<String>,
        request: usize,
        form: HintForm,
    ) -> HintSet {
        let empty = ResourceDevices::default();
        let table = self.resources.get(resource).unwrap_or(&empty);
        let input = hint_input(table, table.known(available), reusable.iter());
        self.hint_set(&input, request, form)
    }

    fn hint_set(&self, input: &HintInput, request: usize, form: HintForm) -> HintSet {
        match form {
            HintForm::List => HintSet::List(hints::generate(&self.numa_nodes, input, request)),
            HintForm::Family => HintSet::Family(hints::family(&self.numa_nodes, input, request)),
        }
    }

    /// The container's device-plugin requests (its limits of device-plugin resources).
    pub fn container_device_requests(&self, container: &Container) -> BTreeMap<String, usize> {
        container
            .resources
            .limits
            .extended
            .iter()
            .filter(|(name, _)| self.is_device_plugin_resource(name))
            .map(|(name, &n)| (name.clone(), usize::try_from(n).unwrap_or(0)))
            .collect()
    }

    /// The pod's device-plugin requests (upstream `getPodDeviceRequest`).
    pub fn pod_device_requests(&self, pod: &Pod) -> BTreeMap<String, usize> {
        pod_limits(pod)
            .into_iter()
            .filter(|(name, _)| self.is_device_plugin_resource(name))
            .map(|(name, n)| (name, usize::try_from(n).unwrap_or(0)))
            .collect()
    }

    /// Upstream `GetTopologyHints` for one container (after stale pods were freed).
    pub fn hints_for_container(&self, pod_uid: &str, container: &Container) -> ResourceHints {
        lists(self.container_hint_sets(pod_uid, container, HintForm::List))
    }

    /// Upstream `GetPodTopologyHints` (after stale pods were freed).
    pub fn hints_for_pod(&self, pod: &Pod) -> ResourceHints {
        lists(self.pod_hint_sets(pod, HintForm::List))
    }

    /// [`hints_for_container`](Self::hints_for_container) as families.
    pub fn hint_sets_for_container(
        &self,
        pod_uid: &str,
        container: &Container,
    ) -> ResourceHintSets {
        self.container_hint_sets(pod_uid, container, HintForm::Family)
    }

    /// [`hints_for_pod`](Self::hints_for_pod) as families.
    pub fn hint_sets_for_pod(&self, pod: &Pod) -> ResourceHintSets {
        self.pod_hint_sets(pod, HintForm::Family)
    }

    fn container_hint_sets(
        &self,
        pod_uid: &str,
        container: &Container,
        form: HintForm,
    ) -> ResourceHintSets {
        let mut out = ResourceHintSets::new();
        for (resource, requested) in self.container_device_requests(container) {
            let held = self
                .pod_devices
                .container_devices(pod_uid, &container.name, &resource);
            let reusable = self
                .devices_to_reuse
                .get(pod_uid)
                .and_then(|r| r.get(&resource));
            let hints = self.resource_hints(&resource, requested, held, reusable, form);
            out.insert(resource, hints);
        }
        out
    }

    fn pod_hint_sets(&self, pod: &Pod, form: HintForm) -> ResourceHintSets {
        let mut out = ResourceHintSets::new();
        for (resource, requested) in self.pod_device_requests(pod) {
            let held = Some(self.pod_devices.pod_devices(&pod.uid, &resource));
            let hints = self.resource_hints(&resource, requested, held, None, form);
            out.insert(resource, hints);
        }
        out
    }

    fn resource_hints(
        &self,
        resource: &str,
        requested: usize,
        held: Option<BTreeSet<String>>,
        reusable: Option<&BTreeSet<String>>,
        form: HintForm,
    ) -> Option<HintSet> {
        if !self.device_has_topology_alignment(resource) {
            tracing::info!(resource, "Resource does not have a topology preference");
            return None;
        }
        let table = self.resources.get(resource)?;
        if let Some(held) = held.filter(|h| !h.is_empty()) {
            if held.len() != requested {
                tracing::info!(
                    resource,
                    request = requested,
                    allocated = held.len(),
                    "Resource already allocated to pod with different number than request"
                );
                return Some(HintSet::List(Vec::new()));
            }
            tracing::info!(
                resource,
                "Regenerating TopologyHints for resource already allocated to pod"
            );
            return Some(self.device_hint_set(resource, &held, &BTreeSet::new(), requested, form));
        }
        let available: BitSet = table.healthy.difference(&table.allocated);
        let empty = BTreeSet::new();
        let reusable = reusable.unwrap_or(&empty);
        let extra = reusable
            .iter()
            .filter(|id| table.index_of(id).is_none_or(|i| !available.contains(i)))
            .count();
        if available.len() + extra < requested {
            tracing::error!(
                resource,
                request = requested,
                available = available.len() + extra,
                "Unable to generate topology hints: requested number of devices unavailable"
            );
            return Some(HintSet::List(Vec::new()));
        }
        let input = hint_input(table, available.iter(), reusable.iter());
        Some(self.hint_set(&input, requested, form))
    }
}
