//! The checkpoint formats this crate reads and writes, and their upstream file names.

/// A kubelet checkpoint format.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{Format, CPU_MANAGER_FILE};
///
/// assert_eq!(Format::CpuManagerV4.file_name(), CPU_MANAGER_FILE);
/// assert_eq!(Format::CpuManagerV4.to_string(), "cpumanager_v4");
/// assert_eq!(Format::DraHealth.file_name(), "dra_health_state");
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Device manager `kubelet_internal_checkpoint`, current format (v1.20+): `DeviceIDs`
    /// per NUMA node.
    DeviceManagerV2,
    /// Device manager `kubelet_internal_checkpoint` written by k8s ≤ 1.19: flat `DeviceIDs`.
    DeviceManagerV1,
    /// CPU manager `cpu_manager_state`, v2 (entries per pod, then per container).
    CpuManagerV2,
    /// CPU manager `cpu_manager_state`, v1 (entries per container id).
    CpuManagerV1,
    /// CPU manager `cpu_manager_state`, v3 (v2 plus pod entries; k8s 1.36 with
    /// `PodLevelResourceManagers`).
    CpuManagerV3,
    /// CPU manager `cpu_manager_state`, v4 (k8s 1.37: the content as a `data` string).
    CpuManagerV4,
    /// Memory manager `memory_manager_state`, v1 (the only format before k8s 1.36).
    MemoryManager,
    /// Memory manager `memory_manager_state`, v2 (v1 plus pod entries; k8s 1.36 with
    /// `PodLevelResourceManagers`).
    MemoryManagerV2,
    /// Memory manager `memory_manager_state`, v3 (k8s 1.37: the content as a `data` string).
    MemoryManagerV3,
    /// DRA manager `dra_manager_state`, the format of v1.32 onwards (JSON `Data` string +
    /// CRC32); v1.35 added `ShareID` to its devices, which corral writes.
    DraV132,
    /// DRA manager `dra_manager_state`, v1.26–v1.30 format (`DRAManagerCheckpoint`,
    /// go-spew/FNV checksum), with or without resource handles.
    DraV130,
    /// DRA device health `dra_health_state` (KEP-4680, v1.31+): plain JSON, no checksum.
    DraHealth,
}

impl Format {
    /// The file name the kubelet uses for this format under its state directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Format::DeviceManagerV2 | Format::DeviceManagerV1 => DEVICE_MANAGER_FILE,
            Format::CpuManagerV1
            | Format::CpuManagerV2
            | Format::CpuManagerV3
            | Format::CpuManagerV4 => CPU_MANAGER_FILE,
            Format::MemoryManager | Format::MemoryManagerV2 | Format::MemoryManagerV3 => {
                MEMORY_MANAGER_FILE
            }
            Format::DraV132 | Format::DraV130 => DRA_MANAGER_FILE,
            Format::DraHealth => DRA_HEALTH_FILE,
        }
    }

    /// A short stable name (`devicemanager_v2`, `cpumanager_v1`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::DeviceManagerV2 => "devicemanager_v2",
            Format::DeviceManagerV1 => "devicemanager_v1",
            Format::CpuManagerV2 => "cpumanager_v2",
            Format::CpuManagerV1 => "cpumanager_v1",
            Format::CpuManagerV3 => "cpumanager_v3",
            Format::CpuManagerV4 => "cpumanager_v4",
            Format::MemoryManager => "memorymanager",
            Format::MemoryManagerV2 => "memorymanager_v2",
            Format::MemoryManagerV3 => "memorymanager_v3",
            Format::DraV132 => "dra_v132",
            Format::DraV130 => "dra_v130",
            Format::DraHealth => "dra_health",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The device manager's checkpoint file name.
pub const DEVICE_MANAGER_FILE: &str = "kubelet_internal_checkpoint";
/// The CPU manager's checkpoint file name.
pub const CPU_MANAGER_FILE: &str = "cpu_manager_state";
/// The memory manager's checkpoint file name.
pub const MEMORY_MANAGER_FILE: &str = "memory_manager_state";
/// The DRA manager's checkpoint file name.
pub const DRA_MANAGER_FILE: &str = "dra_manager_state";
/// The DRA manager's device health file name (no checksum).
pub const DRA_HEALTH_FILE: &str = "dra_health_state";
