//! Which version of `cpu_manager_state` / `memory_manager_state` a kubelet restores, in the
//! order each release tries them (`restoreState` in the managers' `state_checkpoint.go`).

use super::Checkpoint;
use super::cpumanager::{CpuManagerCheckpoint, CpuManagerCheckpointV1};
use super::cpumanager_pod::{CpuManagerCheckpointV3, CpuManagerCheckpointV4};
use super::memorymanager::MemoryManagerCheckpoint;
use super::memorymanager_pod::{MemoryManagerCheckpointV2, MemoryManagerCheckpointV3};
use crate::error::{CheckpointError, Result};

/// Whose restore order to follow.
///
/// # Example
///
/// A v1.37 file read by each release: v1.37 reads its `data`; v1.32 reads the copy at the
/// top level, kept for older readers with checksum 0, which they accept unchecked.
///
/// ```
/// use corral_checkpoint::{CpuManagerState, RestoreOrder, restore_cpu_manager_state_as};
///
/// // Conformance vector `cpumanager_v4/none_policy_empty`.
/// let v4 = br#"{"policyName":"none","defaultCpuSet":"","checksum":0,"data":"{\"policyName\":\"none\",\"defaultCpuSet\":\"\"}","dataChecksum":3028111495}"#;
/// assert!(matches!(restore_cpu_manager_state_as(v4, RestoreOrder::V137)?, CpuManagerState::V4(_)));
/// assert!(matches!(restore_cpu_manager_state_as(v4, RestoreOrder::Any)?, CpuManagerState::V4(_)));
/// assert!(matches!(restore_cpu_manager_state_as(v4, RestoreOrder::V132)?, CpuManagerState::V1(_)));
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestoreOrder {
    /// k8s 1.32: CPU v1, then v2; memory v1 (a recorded 0 refused).
    V132,
    /// k8s 1.36 with `PodLevelResourceManagers` off (its default): CPU v2, then v1;
    /// memory v1 (a recorded 0 accepted).
    V136,
    /// k8s 1.36 with `PodLevelResourceManagers` on: CPU v3, v2, v1; memory v2, v1.
    V136PodLevel,
    /// k8s 1.37: CPU v4, v3, v2; memory v3, v2, v1. A file whose `data` or `dataChecksum`
    /// is set is read as the newest version only (no fallback), as upstream.
    V137,
    /// Every version corral reads, newest first: v1.37's order, then CPU v1 (which 1.36
    /// still migrates). What corral's managers restore with, whatever they write.
    Any,
}

/// A restored `cpu_manager_state`, by the version that read it.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{CpuManagerState, RestoreOrder, restore_cpu_manager_state_as};
///
/// // Conformance vector `cpumanager_v2/static_default_only`.
/// let v2 = br#"{"policyName":"static","defaultCpuSet":"0-7","checksum":14413152}"#;
/// match restore_cpu_manager_state_as(v2, RestoreOrder::V137)? {
///     CpuManagerState::V2(state) => assert_eq!(state.default_cpu_set, "0-7"),
///     other => panic!("read as {}", other.version()),
/// }
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CpuManagerState {
    /// The file read as v1 (it still needs [`CpuManagerCheckpointV1::to_current`]).
    V1(CpuManagerCheckpointV1),
    /// The file read as v2.
    V2(CpuManagerCheckpoint),
    /// The file read as v3 (pod entries).
    V3(CpuManagerCheckpointV3),
    /// The file read as v4 (k8s 1.37).
    V4(CpuManagerCheckpointV4),
}

/// A restored `memory_manager_state`, by the version that read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryManagerState {
    /// The file read as v1.
    V1(MemoryManagerCheckpoint),
    /// The file read as v2 (pod entries).
    V2(MemoryManagerCheckpointV2),
    /// The file read as v3 (k8s 1.37).
    V3(MemoryManagerCheckpointV3),
}

impl CpuManagerState {
    /// `v1` … `v4`: the version that read the file.
    pub fn version(&self) -> &'static str {
        match self {
            CpuManagerState::V1(_) => "v1",
            CpuManagerState::V2(_) => "v2",
            CpuManagerState::V3(_) => "v3",
            CpuManagerState::V4(_) => "v4",
        }
    }
}

impl MemoryManagerState {
    /// `v1` … `v3`.
    pub fn version(&self) -> &'static str {
        match self {
            MemoryManagerState::V1(_) => "v1",
            MemoryManagerState::V2(_) => "v2",
            MemoryManagerState::V3(_) => "v3",
        }
    }
}

/// Reads `cpu_manager_state` as the kubelet's `restoreState` does in k8s 1.32: v1 if it
/// decodes and verifies as v1, else v2; when both fail, the v2 error is returned.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{CpuManagerState, restore_cpu_manager_state};
///
/// // Conformance vectors `cpumanager_v1_legacy/empty` and `cpumanager_v2/none_policy_empty`:
/// // the same content under each version's checksum, and the version that reads it.
/// let v1 = br#"{"policyName":"none","defaultCpuSet":"","checksum":3242152201}"#;
/// let v2 = br#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#;
/// assert!(matches!(restore_cpu_manager_state(v1)?, CpuManagerState::V1(_)));
/// let restored = restore_cpu_manager_state(v2)?;
/// assert_eq!(restored.version(), "v2");
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
pub fn restore_cpu_manager_state(bytes: &[u8]) -> Result<CpuManagerState> {
    restore_cpu_manager_state_as(bytes, RestoreOrder::V132)
}

/// One attempt: the version read, or its error.
type Attempt<S> = fn(&[u8]) -> Result<S>;

/// Tries `attempts` in order; the first that reads wins. When none does, the first
/// checksum mismatch is returned (the file was that version, damaged), else the first
/// error (the newest version's).
fn first_that_reads<S>(bytes: &[u8], attempts: &[Attempt<S>]) -> Result<S> {
    let mut errors = Vec::new();
    for attempt in attempts {
        match attempt(bytes) {
            Ok(state) => return Ok(state),
            Err(err) => errors.push(err),
        }
    }
    let pick = errors
        .iter()
        .position(CheckpointError::is_checksum_mismatch)
        .unwrap_or(0);
    Err(errors.swap_remove(pick))
}

/// Whether a file that failed as a `data`-carrying version still must not fall back:
/// its `data` is set or its `dataChecksum` is not 0.
fn has_data(bytes: &[u8], data: fn(&[u8]) -> Result<(String, u64)>) -> bool {
    data(bytes).is_ok_and(|(data, checksum)| !data.is_empty() || checksum != 0)
}

/// Reads `cpu_manager_state` in `order` (see [`RestoreOrder`]).
///
/// # Example
///
/// ```
/// use corral_checkpoint::{Checkpoint, CpuManagerCheckpointV3, CpuManagerState, RestoreOrder};
/// use corral_checkpoint::restore_cpu_manager_state_as;
///
/// // As the kubelet builds it: empty (not nil) maps, which a reader's constructor yields.
/// let v3 = CpuManagerCheckpointV3 {
///     policy_name: "none".into(),
///     entries: Some(Default::default()),
///     pod_entries: Some(Default::default()),
///     ..Default::default()
/// };
/// let file = v3.encode()?;
/// let state = restore_cpu_manager_state_as(&file, RestoreOrder::V136PodLevel)?;
/// assert!(matches!(state, CpuManagerState::V3(_)));
/// // With the gate off, v1.36 reads only v2 and v1: a v3 file is refused.
/// assert!(restore_cpu_manager_state_as(&file, RestoreOrder::V136).is_err());
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
pub fn restore_cpu_manager_state_as(bytes: &[u8], order: RestoreOrder) -> Result<CpuManagerState> {
    let v1: Attempt<CpuManagerState> =
        |b| CpuManagerCheckpointV1::decode(b).map(CpuManagerState::V1);
    let v2: Attempt<CpuManagerState> = |b| CpuManagerCheckpoint::decode(b).map(CpuManagerState::V2);
    let v3: Attempt<CpuManagerState> =
        |b| CpuManagerCheckpointV3::decode(b).map(CpuManagerState::V3);
    match order {
        // v1 if it reads, else v2 or v2's error (upstream reports v2's).
        RestoreOrder::V132 => v1(bytes).or_else(|_| v2(bytes)),
        RestoreOrder::V136 => first_that_reads(bytes, &[v2, v1]),
        RestoreOrder::V136PodLevel => first_that_reads(bytes, &[v3, v2, v1]),
        RestoreOrder::V137 | RestoreOrder::Any => match CpuManagerCheckpointV4::decode(bytes) {
            Ok(v4) => Ok(CpuManagerState::V4(v4)),
            Err(err) if has_data(bytes, CpuManagerCheckpointV4::data_field) => Err(err),
            Err(_) if order == RestoreOrder::Any => first_that_reads(bytes, &[v3, v2, v1]),
            Err(_) => first_that_reads(bytes, &[v3, v2]),
        },
    }
}

/// Reads `memory_manager_state` in `order` (see [`RestoreOrder`]).
///
/// # Example
///
/// ```
/// use corral_checkpoint::{MemoryManagerState, RestoreOrder, restore_memory_manager_state};
///
/// // Conformance vector `memorymanager_v3/none_empty`: v1.37's bytes.
/// let v3 = br#"{"policyName":"None","machineState":{},"checksum":4236770233,"data":"{\"policyName\":\"None\",\"machineState\":{}}","dataChecksum":3093843326}"#;
/// let restored = restore_memory_manager_state(v3, RestoreOrder::V137)?;
/// assert!(matches!(restored, MemoryManagerState::V3(_)));
/// // v1.32 reads the v1 copy at the top level, with v1's checksum.
/// let old = restore_memory_manager_state(v3, RestoreOrder::V132)?;
/// assert_eq!(old.version(), "v1");
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
pub fn restore_memory_manager_state(
    bytes: &[u8],
    order: RestoreOrder,
) -> Result<MemoryManagerState> {
    let v1: Attempt<MemoryManagerState> =
        |b| MemoryManagerCheckpoint::decode_v136(b).map(|(v, _)| MemoryManagerState::V1(v));
    let v2: Attempt<MemoryManagerState> =
        |b| MemoryManagerCheckpointV2::decode(b).map(MemoryManagerState::V2);
    match order {
        RestoreOrder::V132 => MemoryManagerCheckpoint::decode(bytes).map(MemoryManagerState::V1),
        RestoreOrder::V136 => v1(bytes),
        RestoreOrder::V136PodLevel => first_that_reads(bytes, &[v2, v1]),
        RestoreOrder::V137 | RestoreOrder::Any => match MemoryManagerCheckpointV3::decode(bytes) {
            Ok(v3) => Ok(MemoryManagerState::V3(v3)),
            Err(err) if has_data(bytes, MemoryManagerCheckpointV3::data_field) => Err(err),
            Err(_) => first_that_reads(bytes, &[v2, v1]),
        },
    }
}
