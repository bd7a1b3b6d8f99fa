//! [`CpuState`]: the shared pool and the exclusive assignments (upstream `stateMemory`).

use std::collections::BTreeMap;

use corral_checkpoint::{CpuManagerCheckpoint, CpuManagerCheckpointV3, PodCpuEntry};

use super::file::CpuStateFile;

/// Which `cpu_manager_state` version to write: the configuration decides (v3 while
/// `PodLevelResourceManagers` is on, as upstream).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CpuStateFileVersion {
    /// v2 (every kubelet up to 1.36 with the gate off).
    #[default]
    V2,
    /// v3 (1.36 with `PodLevelResourceManagers` on).
    V3,
}
use corral_topology::CpuSet;

/// Exclusive assignments: pod UID → container name → CPUs (upstream
/// `ContainerCPUAssignments`).
pub type ContainerCpuAssignments = BTreeMap<String, BTreeMap<String, CpuSet>>;

/// The CPU manager's state: the default (shared) CPU set and the exclusive assignments.
///
/// ```
/// use corral_cpumgr::CpuState;
/// use corral_topology::CpuSet;
///
/// let mut state = CpuState::default();
/// state.set_default_cpu_set(CpuSet::from_range(0, 7));
/// state.set_cpu_set("pod", "c", CpuSet::from_iter([2, 3]));
/// assert_eq!(state.cpu_set_or_default("pod", "c").to_string(), "2-3");
/// assert_eq!(state.cpu_set_or_default("pod", "other").to_string(), "0-7");
/// state.delete("pod", "c");
/// assert!(state.assignments().is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuState {
    default_cpu_set: CpuSet,
    assignments: ContainerCpuAssignments,
    /// Pod UID → the pod's CPUs, for pods whose resources are managed at pod level
    /// (`PodLevelResourceManagers`; upstream `PodCPUAssignments`).
    pod_cpus: BTreeMap<String, CpuSet>,
}

impl CpuState {
    /// A state with the given shared pool and assignments.
    pub fn new(default_cpu_set: CpuSet, assignments: ContainerCpuAssignments) -> CpuState {
        CpuState {
            default_cpu_set,
            assignments,
            pod_cpus: BTreeMap::new(),
        }
    }

    /// Upstream `GetCPUSet`: the container's exclusive CPUs, if it has an entry.
    pub fn cpu_set(&self, pod_uid: &str, container: &str) -> Option<&CpuSet> {
        self.assignments.get(pod_uid)?.get(container)
    }

    /// Upstream `GetDefaultCPUSet`.
    pub fn default_cpu_set(&self) -> &CpuSet {
        &self.default_cpu_set
    }

    /// Upstream `GetCPUSetOrDefault`.
    pub fn cpu_set_or_default(&self, pod_uid: &str, container: &str) -> &CpuSet {
        self.cpu_set(pod_uid, container)
            .unwrap_or(&self.default_cpu_set)
    }

    /// Upstream `GetCPUAssignments`.
    pub fn assignments(&self) -> &ContainerCpuAssignments {
        &self.assignments
    }

    /// Upstream `SetCPUSet`.
    pub fn set_cpu_set(&mut self, pod_uid: &str, container: &str, cpus: CpuSet) {
        self.assignments
            .entry(pod_uid.to_owned())
            .or_default()
            .insert(container.to_owned(), cpus);
    }

    /// Upstream `SetDefaultCPUSet`.
    pub fn set_default_cpu_set(&mut self, cpus: CpuSet) {
        self.default_cpu_set = cpus;
    }

    /// Upstream `SetCPUAssignments`.
    pub fn set_assignments(&mut self, assignments: ContainerCpuAssignments) {
        self.assignments = assignments;
    }

    /// Upstream `Delete`: drop the container's entry, and the pod's once empty.
    pub fn delete(&mut self, pod_uid: &str, container: &str) {
        if let Some(pod) = self.assignments.get_mut(pod_uid) {
            pod.remove(container);
            if pod.is_empty() {
                self.assignments.remove(pod_uid);
            }
        }
    }

    /// The pod's CPUs, when its resources are managed at pod level.
    pub fn pod_cpu_set(&self, pod_uid: &str) -> Option<&CpuSet> {
        self.pod_cpus.get(pod_uid)
    }

    /// Every pod's CPUs (pods managed at pod level).
    pub fn pod_cpu_sets(&self) -> &BTreeMap<String, CpuSet> {
        &self.pod_cpus
    }

    /// Record the pod's CPUs (upstream `SetPodCPUSet`).
    pub fn set_pod_cpu_set(&mut self, pod_uid: &str, cpus: CpuSet) {
        self.pod_cpus.insert(pod_uid.to_owned(), cpus);
    }

    /// Forget the pod's CPUs (upstream `DeletePod`).
    pub fn delete_pod(&mut self, pod_uid: &str) {
        self.pod_cpus.remove(pod_uid);
    }

    /// Upstream `ClearState`.
    pub fn clear(&mut self) {
        *self = CpuState::default();
    }

    /// Every exclusively assigned CPU.
    pub fn exclusive_cpus(&self) -> CpuSet {
        let mut out = CpuSet::new();
        for containers in self.assignments.values() {
            for cpus in containers.values() {
                out.union_with(cpus);
            }
        }
        out
    }

    /// The file a kubelet writes for this state in `version` (upstream `storeState`,
    /// `storeStateV2` / `storeStateV3`); pod-level CPUs are only in v3.
    pub fn to_file(&self, policy_name: &str, version: CpuStateFileVersion) -> CpuStateFile {
        let v2 = self.to_checkpoint(policy_name);
        match version {
            CpuStateFileVersion::V2 => CpuStateFile::V2(v2),
            CpuStateFileVersion::V3 => CpuStateFile::V3(CpuManagerCheckpointV3 {
                policy_name: v2.policy_name,
                default_cpu_set: v2.default_cpu_set,
                entries: v2.entries,
                pod_entries: Some(
                    self.pod_cpus
                        .iter()
                        .map(|(pod, cpus)| {
                            let cpu_set = cpus.to_string();
                            (pod.clone(), PodCpuEntry { cpu_set })
                        })
                        .collect(),
                ),
            }),
        }
    }

    /// The v2 checkpoint a kubelet writes for this state (upstream `storeStateV2`).
    pub fn to_checkpoint(&self, policy_name: &str) -> CpuManagerCheckpoint {
        let entries = self
            .assignments
            .iter()
            .map(|(pod, containers)| {
                let containers = containers
                    .iter()
                    .map(|(name, cpus)| (name.clone(), cpus.to_string()))
                    .collect();
                (pod.clone(), Some(containers))
            })
            .collect();
        CpuManagerCheckpoint {
            policy_name: policy_name.to_owned(),
            default_cpu_set: self.default_cpu_set.to_string(),
            entries: Some(entries),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream `TestCheckpointStateStore` shape (state_checkpoint_test.go): what is stored
    /// is what a kubelet writes.
    #[test]
    fn checkpoint_of_state() {
        let mut state = CpuState::default();
        state.set_default_cpu_set("0-1,4-7".parse().unwrap());
        state.set_cpu_set("pod", "container1", "2-3".parse().unwrap());
        let cp = state.to_checkpoint("static");
        assert_eq!(
            cp.hash_input().unwrap(),
            "(*state.CPUManagerCheckpoint){PolicyName:(string)static DefaultCPUSet:(string)0-1,4-7 Entries:(map[string]map[string]string)map[pod:map[container1:2-3]] Checksum:(checksum.Checksum)0}"
        );
        state.clear();
        assert_eq!(state, CpuState::default());
    }
}
