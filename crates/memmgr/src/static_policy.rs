//! The static policy (upstream `policy_static.go`, container scope): hints, allocation with
//! the topology manager's affinity, init-container memory reuse, release.

use std::collections::BTreeMap;

use corral_topology::topologymanager::TopologyHint;
use corral_topology::{Container, NumaMask, Pod, PodLevelResources};

use crate::error::{AllocateError, RestoreError};
use corral_topology::topologymanager::{HintFamily, HintSet};

use crate::hints::{
    MemoryHintSets, MemoryHints, Requested, calculate_hint_family, calculate_hints,
    family_hint_sets, regenerate_hints, same_set,
};

/// Where a container's (or pod's) memory hints come from.
enum Plan {
    /// Already decided (no preference, regenerated from held blocks, or refused).
    Done(Option<MemoryHints>),
    /// Every fitting set of nodes for this request.
    Calculate(Requested),
}
use crate::machine_state::{Assignments, Block, MEMORY, MachineState};
use crate::restore::restore_machine_state_with_pods;

mod log;

/// Per mask, per resource: memory the pod's regular init containers hold and its later
/// containers may reuse (upstream `initContainersReusableMemory` of the pod being admitted;
/// in memory only, as upstream).
type Reusable = BTreeMap<NumaMask, BTreeMap<String, u64>>;

/// The static policy's state: the machine state and every container's blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticPolicy {
    state: MachineState,
    pub(crate) assignments: Assignments,
    /// The pod being admitted and what its init containers leave reusable.
    reusable: Option<(String, Reusable)>,
    /// Pod UID → the pod's blocks, for pods managed at pod level (upstream
    /// `PodMemoryAssignments`).
    pub(crate) pod_blocks: BTreeMap<String, Vec<Block>>,
    /// How pods with pod-level resources are treated (`PodLevelResourceManagers`).
    pub(crate) pod_level: PodLevelResources,
}

/// What a container requests of memory and huge pages.
pub fn requested(container: &Container) -> Requested {
    let requests = &container.resources.requests;
    let mut out = Requested::new();
    if let Some(memory) = requests.memory_bytes.and_then(|b| u64::try_from(b).ok()) {
        out.insert(MEMORY.to_owned(), memory);
    }
    for (name, &value) in &requests.extended {
        if name.starts_with("hugepages-")
            && let Ok(value) = u64::try_from(value)
        {
            out.insert(name.clone(), value);
        }
    }
    out
}

/// Upstream `getPodRequestedResources`, for pod scope: per resource, the larger of what the
/// long-running containers (app containers and sidecars) hold together and the most any
/// regular init container needs beside the sidecars started before it. As upstream, only
/// resources some app container requests are counted (a type only init containers ask
/// for is dropped).
pub fn pod_requested(pod: &Pod) -> Requested {
    let mut init_max = Requested::new();
    let mut sidecars = Requested::new();
    for init in &pod.init_containers {
        for (resource, size) in requested(init) {
            let sidecar = sidecars.entry(resource.clone()).or_default();
            if init.is_restartable() {
                *sidecar = sidecar.saturating_add(size);
            } else {
                let need = sidecar.saturating_add(size);
                let max = init_max.entry(resource).or_default();
                *max = (*max).max(need);
            }
        }
    }
    let mut apps = Requested::new();
    for app in &pod.containers {
        for (resource, size) in requested(app) {
            let sum = apps.entry(resource).or_default();
            *sum = sum.saturating_add(size);
        }
    }
    apps.into_iter()
        .map(|(resource, app)| {
            let long_running = app.saturating_add(sidecars.get(&resource).copied().unwrap_or(0));
            let init = init_max.get(&resource).copied().unwrap_or(0);
            (resource, long_running.max(init))
        })
        .collect()
}

impl StaticPolicy {
    /// A policy on a machine with nothing assigned.
    pub fn new(default: MachineState) -> StaticPolicy {
        StaticPolicy {
            state: default,
            assignments: Assignments::new(),
            reusable: None,
            pod_blocks: BTreeMap::new(),
            pod_level: PodLevelResources::default(),
        }
    }

    /// A policy restored from a checkpoint's state and assignments, checked against the
    /// machine's `default` state ([`restore_machine_state`](crate::restore_machine_state)).
    pub fn restore(
        restored: &MachineState,
        assignments: Assignments,
        default: MachineState,
    ) -> Result<StaticPolicy, RestoreError> {
        StaticPolicy::restore_with_pods(restored, assignments, BTreeMap::new(), default)
    }

    /// [`restore`](Self::restore) with the pods' pod-level blocks (a v2 or v3 file's pod
    /// entries), which stand for their containers' blocks in the machine state. The blocks
    /// of a pod without container blocks are dropped: the machine state is checked without
    /// them (as upstream's `validateState`), so they hold nothing; such a file is what a
    /// kubelet leaves when it stops between writing a pod's block and its containers' (no
    /// container was given that memory), and the pod is admitted again from scratch.
    pub fn restore_with_pods(
        restored: &MachineState,
        assignments: Assignments,
        mut pod_blocks: BTreeMap<String, Vec<Block>>,
        default: MachineState,
    ) -> Result<StaticPolicy, RestoreError> {
        let state = restore_machine_state_with_pods(restored, &assignments, &pod_blocks, default)?;
        pod_blocks.retain(|pod, _| assignments.get(pod).is_some_and(|c| !c.is_empty()));
        Ok(StaticPolicy {
            state,
            assignments,
            reusable: None,
            pod_blocks,
            pod_level: PodLevelResources::default(),
        })
    }

    /// The machine state.
    pub fn machine_state(&self) -> &MachineState {
        &self.state
    }

    /// Every container's blocks.
    pub fn assignments(&self) -> &Assignments {
        &self.assignments
    }

    /// The blocks of one container.
    pub fn blocks(&self, pod_uid: &str, container: &str) -> Option<&[Block]> {
        self.assignments
            .get(pod_uid)?
            .get(container)
            .map(Vec::as_slice)
    }

    /// Upstream `GetTopologyHints`: `None` for a pod that is not Guaranteed or sets
    /// pod-level resources (memory does not care); an allocated container's own blocks;
    /// else every fitting set of nodes.
    pub fn hints_for_container(&self, pod: &Pod, container: &Container) -> Option<MemoryHints> {
        self.listed(&pod.uid, self.container_plan(pod, container))
    }

    /// [`hints_for_container`](Self::hints_for_container) as hint sets: fitting sets of
    /// nodes as a [`HintFamily`](corral_topology::topologymanager::HintFamily), never listed.
    pub fn hint_sets_for_container(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Option<MemoryHintSets> {
        self.as_sets(&pod.uid, self.container_plan(pod, container))
    }

    fn container_plan(&self, pod: &Pod, container: &Container) -> Plan {
        if self.skipped(pod) {
            return Plan::Done(None);
        }
        let requested = self.requested_of(pod, container);
        if let Some(blocks) = self.blocks(&pod.uid, &container.name) {
            return Plan::Done(regenerate_hints(blocks, &requested));
        }
        Plan::Calculate(requested)
    }

    /// A plan's hints as upstream's lists.
    fn listed(&self, pod_uid: &str, plan: Plan) -> Option<MemoryHints> {
        match plan {
            Plan::Done(hints) => hints,
            Plan::Calculate(requested) => Some(calculate_hints(
                &self.state,
                &requested,
                |mask, resource| self.reusable_for(pod_uid, mask, resource),
            )),
        }
    }

    /// A plan's hints as hint sets.
    fn as_sets(&self, pod_uid: &str, plan: Plan) -> Option<MemoryHintSets> {
        match plan {
            Plan::Done(hints) => hints.map(|hints| {
                hints
                    .into_iter()
                    .map(|(resource, list)| (resource, HintSet::List(list)))
                    .collect()
            }),
            Plan::Calculate(requested) => Some(family_hint_sets(
                self.hint_family(pod_uid, &requested),
                &requested,
            )),
        }
    }

    /// Every fitting set of nodes for `requested`, as a family.
    fn hint_family(&self, pod_uid: &str, requested: &Requested) -> HintFamily {
        let reusable_masks: Vec<NumaMask> = match &self.reusable {
            Some((uid, reusable)) if uid == pod_uid => reusable.keys().copied().collect(),
            _ => Vec::new(),
        };
        calculate_hint_family(
            &self.state,
            requested,
            |mask, resource| self.reusable_for(pod_uid, mask, resource),
            reusable_masks,
        )
    }

    /// Upstream `GetPodTopologyHints` (pod scope): as
    /// [`hints_for_container`](Self::hints_for_container) for the pod's whole request
    /// ([`pod_requested`]). A pod that already holds memory (after a restart) is hinted on
    /// what it holds, as v1.37 does (PR #141070): a pod managed at pod level on its
    /// pod-level blocks, any other pod on its containers' blocks summed per resource, each
    /// compared with the pod's request (v1.36 compares the first container holding blocks
    /// with the pod's request, and gives a multi-container pod no hint).
    pub fn hints_for_pod(&self, pod: &Pod) -> Option<MemoryHints> {
        self.listed(&pod.uid, self.pod_plan(pod))
    }

    /// [`hints_for_pod`](Self::hints_for_pod) as hint sets.
    pub fn hint_sets_for_pod(&self, pod: &Pod) -> Option<MemoryHintSets> {
        self.as_sets(&pod.uid, self.pod_plan(pod))
    }

    fn pod_plan(&self, pod: &Pod) -> Plan {
        if self.skipped(pod) {
            return Plan::Done(None);
        }
        let requested = self.pod_requested_of(pod);
        if let Some(refused) = self.refuse_pod_scope(pod, &requested) {
            return Plan::Done(Some(refused));
        }
        let managed = pod.is_managed_at_pod_level(self.pod_level);
        if requested.is_empty() && managed {
            return Plan::Done(None);
        }
        if let Some(blocks) = self.pod_blocks.get(&pod.uid).filter(|_| managed) {
            return Plan::Done(regenerate_hints(blocks, &requested));
        }
        if let Some(blocks) = self.pod_held_blocks(pod) {
            return Plan::Done(regenerate_hints(&blocks, &requested));
        }
        let held = pod
            .init_containers
            .iter()
            .chain(&pod.containers)
            .find_map(|c| self.blocks(&pod.uid, &c.name));
        if let Some(blocks) = held {
            return Plan::Done(regenerate_hints(blocks, &requested));
        }
        Plan::Calculate(requested)
    }

    /// What the containers of `pod` hold together, per resource one block of their summed
    /// sizes — when each resource's blocks all sit on the same nodes, as a pod-scope
    /// admission places them (upstream PR #141070: a multi-container pod's hints after a
    /// restart come from the pod's whole allocation, not from its first container's blocks
    /// compared with the pod's request). `None` when no container holds blocks, or a
    /// resource's blocks are on different nodes (then the first container decides, as
    /// v1.36).
    fn pod_held_blocks(&self, pod: &Pod) -> Option<Vec<Block>> {
        let mut summed: BTreeMap<&str, Block> = BTreeMap::new();
        let held = pod
            .init_containers
            .iter()
            .chain(&pod.containers)
            .filter_map(|c| self.blocks(&pod.uid, &c.name));
        for block in held.flatten() {
            let sum = summed
                .entry(block.resource.as_str())
                .or_insert_with(|| Block {
                    size: 0,
                    ..block.clone()
                });
            if sum.numa_affinity != block.numa_affinity {
                return None;
            }
            sum.size = sum.size.saturating_add(block.size);
        }
        (!summed.is_empty()).then(|| summed.into_values().collect())
    }

    fn reusable_for(&self, pod_uid: &str, mask: NumaMask, resource: &str) -> u64 {
        match &self.reusable {
            Some((uid, reusable)) if uid == pod_uid => reusable
                .get(&mask)
                .and_then(|r| r.get(resource))
                .copied()
                .unwrap_or(0),
            _ => 0,
        }
    }

    /// Upstream `Allocate`: the container's memory and huge pages from the nodes of
    /// `affinity` (the topology manager's decision), extended to the smallest group of
    /// nodes that holds them when it does not; nothing for a pod that is not Guaranteed
    /// or a container already allocated. On error nothing changes.
    pub fn allocate(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: TopologyHint,
    ) -> Result<(), AllocateError> {
        let _span = log::allocate_span(pod, container).entered();
        if self.skipped(pod) {
            return Ok(());
        }
        tracing::info!("Allocate");
        if let Some(blocks) = self.blocks(&pod.uid, &container.name) {
            let blocks = blocks.to_vec();
            self.update_reusable(pod, container, &blocks);
            tracing::info!("Container already present in state, skipping");
            return Ok(());
        }
        tracing::info!(hint = %affinity, "Got topology affinity");
        let requested = self.requested_of(pod, container);
        let mask = self.resolve_mask(&pod.uid, &requested, affinity)?;
        let bits = mask.get_bits();
        let mut blocks = Vec::new();
        for (resource, &size) in &requested {
            let reused = self.reusable_for(&pod.uid, mask, resource).min(size);
            self.take(&bits, resource, size - reused);
            blocks.push(Block {
                numa_affinity: bits.clone(),
                resource: resource.clone(),
                size,
            });
        }
        self.update_reusable(pod, container, &blocks);
        self.shrink_init_blocks(pod, container, &blocks);
        self.assignments
            .entry(pod.uid.clone())
            .or_default()
            .insert(container.name.clone(), blocks);
        tracing::trace!("Allocated exclusive memory");
        Ok(())
    }

    /// The nodes `requested` comes from: `affinity`'s (the topology manager's decision), or
    /// the best fitting set when it has none, extended to the smallest group of nodes that
    /// holds the request when it does not, and never breaking another group.
    pub(crate) fn resolve_mask(
        &self,
        pod_uid: &str,
        requested: &Requested,
        affinity: TopologyHint,
    ) -> Result<NumaMask, AllocateError> {
        let reusable = |mask: NumaMask, resource: &str| self.reusable_for(pod_uid, mask, resource);
        let mask = match affinity.numa_affinity {
            Some(mask) => mask,
            None => {
                let best = requested
                    .contains_key(MEMORY)
                    .then(|| self.hint_family(pod_uid, requested))
                    .and_then(|family| family.best_containing(NumaMask::EMPTY))
                    .ok_or(AllocateError::NoDefaultAffinity)?;
                if !best.preferred && affinity.preferred {
                    return Err(AllocateError::NoDefaultPreferredHint);
                }
                best.numa_affinity.ok_or(AllocateError::NoDefaultAffinity)?
            }
        };
        let mask = if self.free_holds(mask, requested, &reusable) {
            mask
        } else {
            self.extend(pod_uid, mask, affinity.preferred, requested)?
        };
        if self.violates_groups(&mask.get_bits()) {
            return Err(AllocateError::ViolatesNumaAllocation);
        }
        Ok(mask)
    }

    fn free_holds(
        &self,
        mask: NumaMask,
        requested: &Requested,
        reusable: &impl Fn(NumaMask, &str) -> u64,
    ) -> bool {
        let bits = mask.get_bits();
        requested.iter().all(|(resource, &want)| {
            // Saturating, as the hints' sums: nodes of up to 2^64 bytes each (sysfs's
            // `MemTotal`) overflowed a plain sum over two of them.
            let free = bits
                .iter()
                .filter_map(|n| self.state.get(n)?.memory.get(resource))
                .map(|t| t.free)
                .fold(0u64, u64::saturating_add);
            free.saturating_add(reusable(mask, resource)) >= want
        })
    }

    /// Upstream `extendTopologyManagerHint`: the best hint that holds `mask`'s nodes
    /// (`findBestHint` over the fitting sets holding them, asked of the family).
    fn extend(
        &self,
        pod_uid: &str,
        mask: NumaMask,
        preferred: bool,
        requested: &Requested,
    ) -> Result<NumaMask, AllocateError> {
        let best = requested
            .contains_key(MEMORY)
            .then(|| self.hint_family(pod_uid, requested))
            .and_then(|family| family.best_containing(mask))
            .ok_or(AllocateError::NoExtension)?;
        if !best.preferred && preferred {
            return Err(AllocateError::NoExtendedPreferredHint);
        }
        best.numa_affinity.ok_or(AllocateError::NoExtension)
    }

    /// Upstream `isAffinityViolatingNUMAAllocations` (multi-node sets only).
    fn violates_groups(&self, bits: &[usize]) -> bool {
        bits.len() > 1
            && bits.iter().any(|n| {
                self.state.get(n).is_some_and(|node| {
                    node.number_of_assignments > 0
                        && (node.cells.len() == 1 || !same_set(&node.cells, bits))
                })
            })
    }

    /// Upstream `updateMachineState`: every node of `bits` counts the block and joins the
    /// group; `size` bytes come from their free memory, in node order.
    pub(crate) fn take(&mut self, bits: &[usize], resource: &str, size: u64) {
        let mut left = size;
        for n in bits {
            let Some(node) = self.state.get_mut(n) else {
                continue;
            };
            node.number_of_assignments += 1;
            node.cells = bits.to_vec();
            if let Some(table) = node.memory.get_mut(resource) {
                table.reserve(&mut left);
            }
        }
    }

    /// The whole pod went (released, or its decision refused): forget what its init
    /// containers left its later containers to reuse, so the same uid admitted again is
    /// decided as for the first time. Upstream keeps it until another pod is allocated; a
    /// kubelet never admits a uid twice.
    pub fn forget_reusable(&mut self, pod_uid: &str) {
        if self
            .reusable
            .as_ref()
            .is_some_and(|(uid, _)| uid == pod_uid)
        {
            self.reusable = None;
        }
    }

    /// Upstream `updatePodReusableMemory`.
    fn update_reusable(&mut self, pod: &Pod, container: &Container, blocks: &[Block]) {
        if self
            .reusable
            .as_ref()
            .is_none_or(|(uid, _)| *uid != pod.uid)
        {
            self.reusable = Some((pod.uid.clone(), Reusable::new()));
        }
        let Some((_, reusable)) = self.reusable.as_mut() else {
            return;
        };
        let regular_init = pod
            .init_containers
            .iter()
            .any(|c| c.name == container.name && c.restart_policy.is_none());
        for block in blocks {
            let Ok(mask) = NumaMask::new(block.numa_affinity.iter().copied()) else {
                continue;
            };
            let slot = reusable
                .entry(mask)
                .or_default()
                .entry(block.resource.clone())
                .or_default();
            if regular_init {
                *slot = (*slot).max(block.size);
            } else {
                *slot = slot.saturating_sub(block.size);
            }
        }
    }

    /// Upstream `updateInitContainersMemoryBlocks`: the memory `container` reuses is taken
    /// off the earlier regular init containers' blocks of the same resource and nodes.
    fn shrink_init_blocks(&mut self, pod: &Pod, container: &Container, blocks: &[Block]) {
        let Some(pod_blocks) = self.assignments.get_mut(&pod.uid) else {
            return;
        };
        for block in blocks {
            let mut left = block.size;
            for init in &pod.init_containers {
                if init.name == container.name || left == 0 {
                    break;
                }
                if init.restart_policy.is_some() {
                    continue;
                }
                for init_block in pod_blocks.get_mut(&init.name).into_iter().flatten() {
                    let same = init_block.resource == block.resource
                        && init_block.numa_affinity == block.numa_affinity;
                    if same && init_block.size > 0 {
                        let shrink = left.min(init_block.size);
                        init_block.size -= shrink;
                        left -= shrink;
                    }
                }
            }
        }
    }

    /// Upstream `RemoveContainer`: the container's blocks go back to their nodes' free
    /// memory (a pod managed at pod level: its blocks, with its last container); a node
    /// left without assignments is its own group again.
    pub fn remove_container(&mut self, pod_uid: &str, container: &str) {
        let Some(containers) = self.assignments.get_mut(pod_uid) else {
            return;
        };
        let Some(blocks) = containers.remove(container) else {
            return;
        };
        let last = containers.is_empty();
        if last {
            self.assignments.remove(pod_uid);
        }
        if self.pod_blocks.contains_key(pod_uid) {
            if last && let Some(pod) = self.pod_blocks.remove(pod_uid) {
                self.release(pod);
            }
            return;
        }
        self.release(blocks);
    }

    /// Upstream `releaseMemory`.
    fn release(&mut self, blocks: Vec<Block>) {
        for block in blocks {
            let mut left = block.size;
            for n in &block.numa_affinity {
                let Some(node) = self.state.get_mut(n) else {
                    continue;
                };
                node.number_of_assignments = node.number_of_assignments.saturating_sub(1);
                if node.number_of_assignments == 0 {
                    node.cells = vec![*n];
                }
                if let Some(table) = node.memory.get_mut(&block.resource) {
                    table.release(&mut left);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use corral_topology::memory::NumaMemory;

    use super::*;
    use crate::machine_state::default_machine_state;

    /// Two nodes of the largest `MemTotal` sysfs can give (just under 2^64 bytes each):
    /// whether their free memory holds a request summed both past `u64::MAX` ("attempt to
    /// add with overflow"); the sum saturates and the request is placed.
    #[test]
    fn free_memory_of_huge_nodes_is_summed_without_overflow() {
        let node = |id| NumaMemory {
            node: id,
            memory_bytes: u64::MAX / 1024 * 1024,
            huge_pages: Vec::new(),
        };
        let nodes = BTreeMap::from([(0, node(0)), (1, node(1))]);
        let state = default_machine_state(&nodes, &BTreeMap::new()).unwrap();
        let mut policy = StaticPolicy::new(state);
        let mut container = Container::new("c");
        for list in [
            &mut container.resources.requests,
            &mut container.resources.limits,
        ] {
            list.cpu_millis = Some(1000);
            list.memory_bytes = Some(i64::MAX);
        }
        let pod = Pod {
            uid: "p".into(),
            containers: vec![container.clone()],
            ..Pod::default()
        };
        let both = TopologyHint {
            numa_affinity: Some(NumaMask::new([0, 1]).unwrap()),
            preferred: false,
        };
        policy.allocate(&pod, &container, both).unwrap();
        let blocks = policy.blocks("p", "c").unwrap();
        assert_eq!(blocks[0].numa_affinity, vec![0, 1]);
        assert_eq!(blocks[0].size, i64::MAX as u64);
    }
}
