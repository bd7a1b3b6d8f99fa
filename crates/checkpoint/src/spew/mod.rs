//! go-spew's `%#v` dump with `k8s.io/apimachinery/pkg/util/dump.ForHash` settings, as a
//! serde [`Serializer`](serde::Serializer) writing into a [`DumpSink`].
//!
//! The kubelet's checksums hash `dump.ForHash(obj)`: go-spew with `SortKeys`,
//! `DisableMethods`, `SpewKeys`, `DisablePointerAddresses` and `DisableCapacities`, printed
//! with `%#v`. This module reproduces that printer for any serde value described by a
//! [`GoType`], including the quirks that change bytes:
//!
//! - every value is preceded by `(type)` unless go-spew's "ignore next type" flag is set —
//!   it is set before slice elements, map keys and map values, and after a pointer prefix;
//! - a nil pointer printed while that flag is set leaves it set, so it *leaks* into the next
//!   value printed (a map whose last sorted value is a nil pointer makes the next struct
//!   field print without its type);
//! - pointers print as `(*T){…}` where types show and `<*>{…}` where they do not, a nil
//!   pointer as `(*T)<nil>` or `<nil>`;
//! - strings are raw (no quotes, no escapes); nil maps and slices print `<nil>`, empty
//!   ones `map[]` and `[]`; `[]byte` prints as decimal bytes `[1 2 3]`;
//! - map keys are sorted: strings byte-wise, integers numerically.
//!
//! The dump is written front to back and never revisited, so a checksum can stream it into
//! its hasher. Map order is settled before a map is printed: its keys alone are rendered
//! into a scratch buffer and checked (they usually arrive sorted, from a `BTreeMap`); a map
//! whose keys do not is printed entry by entry into side buffers, sorted, then written.
//!
//! The modules: this one holds the `Dumper` (the output and go-spew's "ignore next type"
//! flag) and its entry points; `header` writes `(type)` headers and pointer prefixes, `value`
//! prints scalars and slices, `map` prints maps (in order, or held aside and sorted),
//! `key_order` decides which of the two a map takes, and `structs` prints struct fields.
//!
//! The printing methods are `#[inline]`, and the value serializer has its own `collect_map`:
//! spread over modules, they would otherwise land in different codegen units, and the
//! checksum (the kubelet's hot path) would pay a call per map entry and struct field — about
//! 5–10% more instructions than one module compiled as a whole.

mod header;
mod key_order;
mod map;
mod structs;
mod value;

use serde::Serialize;

use crate::dump_sink::DumpSink;
use crate::gotype::GoType;
use crate::map_order::KeyOrder;
use crate::schema_mismatch::SchemaMismatch;
use key_order::{KeyProbe, map_key_order};
use map::KeysInOrder;
use value::ValueSer;

/// Dumps `value`, described by `ty`, exactly as `dump.ForHash` would print the Go value.
///
/// Pass a [`GoType::Ptr`] to dump through a pointer (`dump.ForHash(&cp)` prints
/// `(*state.CPUManagerCheckpoint){…}`).
///
/// # Example
///
/// ```
/// use corral_checkpoint::{DeviceManagerCheckpoint, dump_for_hash, fnv32a, kubelet_checksum};
/// use corral_checkpoint::formats::devicemanager::DATA;
///
/// let empty = DeviceManagerCheckpoint { pod_device_entries: None, registered_devices: None };
/// let dump = dump_for_hash(&empty, &DATA)?;
/// // What a v1.32 kubelet's `dump.ForHash(cp.Data)` prints (`devicemanager_v2/empty_nil_nil`).
/// assert_eq!(
///     dump,
///     "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)<nil> \
///      RegisteredDevices:(map[string][]string)<nil>}"
/// );
/// assert_eq!(u64::from(fnv32a(dump.as_bytes())), kubelet_checksum(&empty, &DATA)?);
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
pub fn dump_for_hash<T: Serialize + ?Sized>(
    value: &T,
    ty: &'static GoType,
) -> Result<String, crate::CheckpointError> {
    let mut out = String::with_capacity(256);
    dump_into(value, ty, &mut out)?;
    Ok(out)
}

/// Writes the [`dump_for_hash`] text of `value` into `sink`, front to back.
pub(crate) fn dump_into<T: Serialize + ?Sized, S: DumpSink>(
    value: &T,
    ty: &'static GoType,
    sink: &mut S,
) -> Result<(), crate::CheckpointError> {
    Dumper::new(sink).value(value, ty)?;
    Ok(())
}

/// go-spew's printer state: where the text goes, the "ignore next type" flag, and caches.
struct Dumper<'s, S> {
    out: &'s mut S,
    ignore_next_type: bool,
    /// `(type)` headers of slice, map and pointer types, spelled out once per dump.
    headers: Vec<(&'static GoType, Box<str>)>,
    /// Scratch for map keys while their order is checked.
    key_scratch: [String; 2],
}

impl<'s, S: DumpSink> Dumper<'s, S> {
    #[inline]
    fn new(out: &'s mut S) -> Self {
        Dumper {
            out,
            ignore_next_type: false,
            headers: Vec::new(),
            key_scratch: [String::new(), String::new()],
        }
    }

    /// A dumper into `out` whose first value prints without its type (a map key or value
    /// printed aside).
    #[inline]
    fn untyped(out: &'s mut S) -> Self {
        let mut dumper = Dumper::new(out);
        dumper.ignore_next_type = true;
        dumper
    }

    /// Prints one value of Go type `ty`.
    #[inline]
    fn value<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        ty: &'static GoType,
    ) -> Result<(), SchemaMismatch> {
        self.value_of_kind(value, ty, map_key_order(ty))
    }

    /// [`value`](Self::value) with `map_key_order(ty)` already worked out.
    #[inline]
    fn value_of_kind<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        ty: &'static GoType,
        map: Option<(&'static GoType, KeyOrder)>,
    ) -> Result<(), SchemaMismatch> {
        let map_keys = match map {
            Some((key_ty, order)) => self.keys_in_order(value, key_ty, order),
            None => KeysInOrder::Yes,
        };
        value.serialize(ValueSer {
            d: self,
            ty,
            map_keys,
        })
    }

    /// Whether `value` is nil or a map whose keys arrive in go-spew's order (so it can be
    /// printed as it comes). Anything else, errors included, takes the sorting path, which
    /// also reports the errors.
    #[inline]
    fn keys_in_order<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        key_ty: &'static GoType,
        order: KeyOrder,
    ) -> KeysInOrder {
        let [prev, cur] = std::mem::take(&mut self.key_scratch);
        let mut probe = KeyProbe::new(key_ty, order, prev, cur);
        let sorted = value.serialize(&mut probe).unwrap_or(false);
        self.key_scratch = probe.into_scratch();
        if sorted {
            KeysInOrder::Yes
        } else {
            KeysInOrder::No
        }
    }
}

#[cfg(test)]
mod tests;
