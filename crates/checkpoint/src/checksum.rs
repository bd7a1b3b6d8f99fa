//! The kubelet's checksum of a checkpoint value: FNV-32a over its go-spew dump
//! (`checksum.New`, `hashutil.DeepHashObject`). Sits above the dump (`spew`) and the hash
//! primitives (`hash`); nothing below it reaches back.

use serde::Serialize;

use crate::error::Result;
use crate::gotype::GoType;
use crate::hash::Fnv32a;
use crate::spew::dump_into;

/// The kubelet's `checksum.New(value)`: FNV-32a of `dump.ForHash(value)`, widened to the
/// `uint64` that `checksum.Checksum` is. The dump streams into the hasher: equal to
/// `fnv32a(dump_for_hash(value, ty)?.as_bytes())` without building the text.
///
/// # Example
///
/// ```
/// use corral_checkpoint::{DeviceManagerCheckpoint, kubelet_checksum};
/// use corral_checkpoint::formats::devicemanager::DATA;
///
/// let empty = DeviceManagerCheckpoint { pod_device_entries: None, registered_devices: None };
/// // The checksum in a v1.32 kubelet's file (`devicemanager_v2/empty_nil_nil`).
/// assert_eq!(kubelet_checksum(&empty, &DATA)?, 1_944_006_890);
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
pub fn kubelet_checksum<T: Serialize + ?Sized>(value: &T, ty: &'static GoType) -> Result<u64> {
    let mut hasher = Fnv32a::new();
    dump_into(value, ty, &mut hasher)?;
    Ok(hasher.finish().into())
}

#[cfg(test)]
mod tests {
    use crate::hash::fnv32a;

    #[test]
    fn readme_dump_hashes_to_vector_checksum() {
        // testdata/conformance: devicemanager_v2/empty_nil_nil.
        let dump = "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)<nil> RegisteredDevices:(map[string][]string)<nil>}";
        assert_eq!(fnv32a(dump.as_bytes()), 1_944_006_890);
    }
}
