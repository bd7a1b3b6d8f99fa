//! `corral-checkpoint`: checkpoint files a kubelet would accept, and reads the kubelet's.
//!
//! The kubelet's resource managers remember their assignments in JSON files under its state
//! directory, each protected by a checksum. This crate writes and reads those files byte for
//! byte as the kubelet does (Kubernetes v1.37, plus the older layouts still found on nodes),
//! so corral and a kubelet can take over each other's state:
//!
//! | file | type | checksum |
//! |---|---|---|
//! | `kubelet_internal_checkpoint` | [`DeviceManagerCheckpoint`] (legacy: [`DeviceManagerCheckpointV1`]) | FNV-32a of a go-spew dump |
//! | `cpu_manager_state` | [`CpuManagerCheckpointV4`] (v1.37), [`CpuManagerCheckpointV3`] (v1.36 with pod entries), [`CpuManagerCheckpoint`] (v2), [`CpuManagerCheckpointV1`] | FNV-32a of a go-spew dump (v1, v2: 0 accepted; v4: of its `data` string) |
//! | `memory_manager_state` | [`MemoryManagerCheckpointV3`] (v1.37), [`MemoryManagerCheckpointV2`] (v1.36 with pod entries), [`MemoryManagerCheckpoint`] (v1) | FNV-32a of a go-spew dump (v3: of its `data` string) |
//! | `dra_manager_state` | [`DraManagerCheckpoint`] (v1.26–1.30: [`DraManagerCheckpointV130`]) | CRC32 of the `Data` string |
//! | `dra_health_state` | [`DraHealthState`] | none (plain JSON) |
//!
//! The pieces, each usable alone:
//! - [`CheckpointStore`]: upstream's `CheckpointManager` over a directory, with atomic and
//!   durable writes (temp file, fsync, rename, fsync of the directory); opening one removes
//!   the temporary files of writers that crashed mid-write;
//! - [`StateFile`]: the one way a manager loads its state file at start and stages each
//!   change (in a store, through its [`Journal`] if it has one, or in memory);
//! - [`dump_for_hash`]: go-spew's `%#v` dump with `dump.ForHash` settings for any serde value
//!   described by a [`GoType`], and [`fnv32a`] / [`crc32_ieee`];
//! - a Go-compatible JSON layer: `encoding/json` output (escaping, key order, `omitempty`,
//!   base64) and input rules (case-insensitive keys, last duplicate wins, merging into the
//!   kubelet's constructed values, `null` vs missing);
//! - [`inspect`]: detect a file's format, verify it and return the typed value.
//!
//! Reading never falls back silently: a missing file, bad JSON, a value of the wrong shape
//! and a checksum mismatch are distinct [`CheckpointError`] variants.
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use corral_checkpoint::{Checkpoint, CheckpointStore, CpuManagerCheckpoint, CPU_MANAGER_FILE};
//!
//! # fn main() -> Result<(), corral_checkpoint::CheckpointError> {
//! let dir = tempfile::tempdir().expect("temp dir");
//! let store = CheckpointStore::open(dir.path())?;
//!
//! let state = CpuManagerCheckpoint {
//!     policy_name: "static".into(),
//!     default_cpu_set: "0-1,4-7".into(),
//!     entries: Some(BTreeMap::from([(
//!         "pod".into(),
//!         Some(BTreeMap::from([("container1".into(), "2-3".into())])),
//!     )])),
//! };
//! store.create(CPU_MANAGER_FILE, &state)?;
//!
//! // The exact v2 bytes a v1.32–v1.36 kubelet writes (v1.37 still reads them), and reads back.
//! let bytes = store.read_bytes(CPU_MANAGER_FILE)?;
//! assert!(bytes.starts_with(br#"{"policyName":"static","defaultCpuSet":"0-1,4-7","entries":"#));
//! let back: CpuManagerCheckpoint = store.get(CPU_MANAGER_FILE)?;
//! assert_eq!(back, state);
//!
//! // A flipped byte is a typed error naming both checksums, never a silent default.
//! let mut corrupt = bytes.clone();
//! let at = corrupt.iter().position(|&b| b == b'2').expect("a digit");
//! corrupt[at] = b'9';
//! let err = CpuManagerCheckpoint::decode(&corrupt).unwrap_err();
//! assert!(err.is_checksum_mismatch());
//!
//! // Inspecting detects the format from the bytes (and optionally the file name).
//! let inspected = corral_checkpoint::inspect(&bytes, Some(CPU_MANAGER_FILE))?;
//! assert_eq!(inspected.format, corral_checkpoint::Format::CpuManagerV2);
//! # Ok(())
//! # }
//! ```
//!
//! It knows nothing of gRPC or tokio.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod checksum;
mod decimal;
mod dump_sink;
mod error;
mod format;
pub mod formats;
mod go_serializer;
mod gojson;
pub mod gotype;
mod hash;
mod inspect;
pub mod journal;
mod journal_error;
mod map_order;
mod schema_mismatch;
mod spew;
mod state_file;
mod store;

pub use checksum::kubelet_checksum;
pub use error::{CheckpointError, Result};
pub use format::{
    CPU_MANAGER_FILE, DEVICE_MANAGER_FILE, DRA_HEALTH_FILE, DRA_MANAGER_FILE, Format,
    MEMORY_MANAGER_FILE,
};
pub use formats::cpumanager::{CpuEntries, CpuManagerCheckpoint, CpuManagerCheckpointV1};
pub use formats::cpumanager_pod::{
    CpuManagerCheckpointV3, CpuManagerCheckpointV4, PodCpuEntries, PodCpuEntry,
};
pub use formats::devicemanager::{DeviceManagerCheckpoint, DevicesPerNuma, PodDevicesEntry};
pub use formats::devicemanager_v1::{DeviceManagerCheckpointV1, PodDevicesEntryV1};
pub use formats::dra::{
    ClaimInfoState, Device, DraManagerCheckpoint, DraManagerCheckpointFile, DriverState,
};
pub use formats::dra_health::{DeviceHealth, DraHealthState, DriverHealthState};
pub use formats::dra_v130::{ClaimInfoStateV130, DraManagerCheckpointV130, ResourceHandle};
pub use formats::memorymanager::{Block, MemoryManagerCheckpoint, MemoryTable, NumaNodeState};
pub use formats::memorymanager_pod::{
    MemoryManagerCheckpointV2, MemoryManagerCheckpointV3, PodMemoryEntries, PodMemoryEntry,
};
pub use formats::restore::{
    CpuManagerState, MemoryManagerState, RestoreOrder, restore_cpu_manager_state,
    restore_cpu_manager_state_as, restore_memory_manager_state,
};
pub use formats::{Checkpoint, CheckpointValue, ChecksumVerification};
pub use gotype::{GoField, GoStruct, GoType, IntWidth};
pub use hash::{crc32_ieee, fnv32a};
pub use inspect::{Inspected, inspect};
pub use journal::{Journal, JournalError, JournalOptions, Managed, Recovery};
pub use spew::dump_for_hash;
pub use state_file::StateFile;
pub use store::{CheckpointStore, StoreOptions, validate_key};
