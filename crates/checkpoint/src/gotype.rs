//! Go type descriptors: the part of Go's `reflect` that decides checkpoint bytes.
//!
//! The kubelet's checksums hash a go-spew dump, which prints Go type names
//! (`(map[string][]string)`, `(checkpoint.DevicesPerNUMA)`), and its files are written by
//! `encoding/json`, which reads struct tags (`json:"entries,omitempty"`). Rust types carry
//! neither, so each checkpoint format describes its Go types once, as static [`GoType`]
//! trees, and the generic dumper and JSON codec walk a Rust value (through serde) and the
//! descriptor side by side. A Rust struct's serde fields must be in the Go struct's field
//! order and carry the JSON names; the codecs check the names as they go.

/// Width of a Go integer type (`int` and `uint` are 64-bit on the kubelet's platforms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntWidth {
    /// `int` / `uint`
    Native,
    /// `int8` / `uint8`
    W8,
    /// `int16` / `uint16`
    W16,
    /// `int32` / `uint32`
    W32,
    /// `int64` / `uint64`
    W64,
}

impl IntWidth {
    fn bits(self) -> u32 {
        match self {
            IntWidth::Native | IntWidth::W64 => 64,
            IntWidth::W8 => 8,
            IntWidth::W16 => 16,
            IntWidth::W32 => 32,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            IntWidth::Native => "",
            IntWidth::W8 => "8",
            IntWidth::W16 => "16",
            IntWidth::W32 => "32",
            IntWidth::W64 => "64",
        }
    }

    /// Whether `v` fits a signed integer of this width.
    pub(crate) fn fits_signed(self, v: i64) -> bool {
        let bits = self.bits();
        bits == 64 || (v >= -(1i64 << (bits - 1)) && v < (1i64 << (bits - 1)))
    }

    /// Whether `v` fits an unsigned integer of this width.
    pub(crate) fn fits_unsigned(self, v: u64) -> bool {
        let bits = self.bits();
        bits == 64 || v < (1u64 << bits)
    }
}

/// A Go type, as far as checkpoint encoding needs it.
///
/// # Example
///
/// Upstream's v2 `state.CPUManagerCheckpoint` described by hand: a serde struct with the Go
/// field order and JSON names, and its [`GoType`] tree, dump and hash as the kubelet does.
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_checkpoint::gotype::{CHECKSUM, MAP_STRING_STRING, STRING};
/// use corral_checkpoint::{GoField, GoStruct, GoType, dump_for_hash, fnv32a};
///
/// #[derive(serde::Serialize)]
/// struct CpuCheckpoint {
///     #[serde(rename = "policyName")]
///     policy_name: String,
///     #[serde(rename = "defaultCpuSet")]
///     default_cpu_set: String,
///     entries: BTreeMap<String, BTreeMap<String, String>>,
///     checksum: u64,
/// }
///
/// static ENTRIES: GoType = GoType::Map(&STRING, &MAP_STRING_STRING);
/// static CHECKPOINT: GoType = GoType::Ptr(&GoType::Struct(&GoStruct {
///     name: "state.CPUManagerCheckpoint",
///     fields: &[
///         GoField::tagged("PolicyName", "policyName", &STRING),
///         GoField::tagged("DefaultCPUSet", "defaultCpuSet", &STRING),
///         GoField::tagged("Entries", "entries", &ENTRIES),
///         GoField::tagged("Checksum", "checksum", &CHECKSUM),
///     ],
/// }));
///
/// let empty = CpuCheckpoint {
///     policy_name: "none".into(),
///     default_cpu_set: String::new(),
///     entries: BTreeMap::new(),
///     checksum: 0,
/// };
/// let dump = dump_for_hash(&empty, &CHECKPOINT)?;
/// // The oracle's `hash_input` and checksum for `cpumanager_v2/none_policy_empty`.
/// assert_eq!(
///     dump,
///     "(*state.CPUManagerCheckpoint){PolicyName:(string)none DefaultCPUSet:(string) \
///      Entries:(map[string]map[string]string)map[] Checksum:(checksum.Checksum)0}"
/// );
/// assert_eq!(fnv32a(dump.as_bytes()), 1_353_318_690);
/// # Ok::<(), corral_checkpoint::CheckpointError>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum GoType {
    /// `bool`
    Bool,
    /// `int`, `int8` … `int64`
    Int(IntWidth),
    /// `uint`, `uint8` … `uint64`
    Uint(IntWidth),
    /// `string`
    String,
    /// `[]T` (`[]uint8` is `[]byte`: base64 in JSON)
    Slice(&'static GoType),
    /// `map[K]V`
    Map(&'static GoType, &'static GoType),
    /// `*T`
    Ptr(&'static GoType),
    /// A struct type (named, or the anonymous `struct {}`).
    Struct(&'static GoStruct),
    /// A defined (named) non-struct type: its package-qualified name and underlying type.
    Named(&'static str, &'static GoType),
}

/// A Go struct type: its package-qualified name and fields in declaration order.
#[derive(Debug)]
pub struct GoStruct {
    /// Package-qualified name as `reflect.Type.String()` prints it, e.g. `state.MemoryTable`.
    pub name: &'static str,
    /// Fields in declaration order.
    pub fields: &'static [GoField],
}

/// One exported Go struct field.
#[derive(Debug)]
pub struct GoField {
    /// The Go field name (what go-spew prints).
    pub name: &'static str,
    /// The JSON key (`json:"…"` tag name, or the Go name without a tag).
    pub json: &'static str,
    /// `omitempty` in the JSON tag.
    pub omitempty: bool,
    /// The field's type.
    pub ty: &'static GoType,
}

impl GoField {
    /// A field without a JSON tag: the JSON key is the Go name.
    pub const fn plain(name: &'static str, ty: &'static GoType) -> Self {
        GoField {
            name,
            json: name,
            omitempty: false,
            ty,
        }
    }

    /// A field with a `json:"<json>"` tag.
    pub const fn tagged(name: &'static str, json: &'static str, ty: &'static GoType) -> Self {
        GoField {
            name,
            json,
            omitempty: false,
            ty,
        }
    }

    /// A field with a `json:"<json>,omitempty"` tag.
    pub const fn omitempty(name: &'static str, json: &'static str, ty: &'static GoType) -> Self {
        GoField {
            name,
            json,
            omitempty: true,
            ty,
        }
    }
}

/// Go `bool`.
pub static BOOL: GoType = GoType::Bool;
/// Go `int`.
pub static INT: GoType = GoType::Int(IntWidth::Native);
/// Go `int64`.
pub static INT64: GoType = GoType::Int(IntWidth::W64);
/// Go `uint8`.
pub static UINT8: GoType = GoType::Uint(IntWidth::W8);
/// Go `uint32`.
pub static UINT32: GoType = GoType::Uint(IntWidth::W32);
/// Go `uint64`.
pub static UINT64: GoType = GoType::Uint(IntWidth::W64);
/// Go `string`.
pub static STRING: GoType = GoType::String;
/// Go `[]byte`.
pub static BYTES: GoType = GoType::Slice(&UINT8);
/// Go `[]string`.
pub static STRING_SLICE: GoType = GoType::Slice(&STRING);
/// Go `[]int`.
pub static INT_SLICE: GoType = GoType::Slice(&INT);
/// Go `map[string][]string`.
pub static MAP_STRING_STRINGS: GoType = GoType::Map(&STRING, &STRING_SLICE);
/// Go `map[string]string`.
pub static MAP_STRING_STRING: GoType = GoType::Map(&STRING, &STRING);
/// Go `struct {}`.
pub static EMPTY_STRUCT: GoType = GoType::Struct(&GoStruct {
    name: "struct {}",
    fields: &[],
});
/// `checksum.Checksum` (`uint64`) from `pkg/kubelet/checkpointmanager/checksum`.
pub static CHECKSUM: GoType = GoType::Named("checksum.Checksum", &UINT64);
/// `types.UID` from `k8s.io/apimachinery/pkg/types`.
pub static TYPES_UID: GoType = GoType::Named("types.UID", &STRING);
/// `sets.Set[string]` (`map[string]sets.Empty`, `sets.Empty` being `struct{}`).
pub static STRING_SET: GoType = GoType::Named(
    "sets.Set[string]",
    &GoType::Map(
        &STRING,
        &GoType::Named(
            "sets.Empty",
            &GoType::Struct(&GoStruct {
                name: "struct {}",
                fields: &[],
            }),
        ),
    ),
);

impl GoType {
    /// The type with defined names peeled off (`reflect.Type.Kind()`'s view).
    pub fn underlying(&self) -> &GoType {
        let mut ty = self;
        while let GoType::Named(_, inner) = ty {
            ty = inner;
        }
        ty
    }

    /// Whether this is `[]byte` (after peeling names).
    pub fn is_bytes(&self) -> bool {
        matches!(self.underlying(), GoType::Slice(elem) if matches!(elem.underlying(), GoType::Uint(IntWidth::W8)))
    }

    /// Appends the type's name as `reflect.Type.String()` prints it.
    pub fn write_name(&self, out: &mut String) {
        match self {
            GoType::Bool => out.push_str("bool"),
            GoType::Int(w) => {
                out.push_str("int");
                out.push_str(w.suffix());
            }
            GoType::Uint(w) => {
                out.push_str("uint");
                out.push_str(w.suffix());
            }
            GoType::String => out.push_str("string"),
            GoType::Slice(elem) => {
                out.push_str("[]");
                elem.write_name(out);
            }
            GoType::Map(key, value) => {
                out.push_str("map[");
                key.write_name(out);
                out.push(']');
                value.write_name(out);
            }
            GoType::Ptr(elem) => {
                out.push('*');
                elem.write_name(out);
            }
            GoType::Struct(s) => out.push_str(s.name),
            GoType::Named(name, _) => out.push_str(name),
        }
    }

    /// The type's name as `reflect.Type.String()` prints it.
    pub fn name(&self) -> String {
        let mut out = String::new();
        self.write_name(&mut out);
        out
    }

    /// The struct descriptor, if the underlying type is a struct.
    pub fn as_struct(&self) -> Option<&'static GoStruct> {
        match self.underlying() {
            GoType::Struct(s) => Some(s),
            _ => None,
        }
    }
}

impl std::fmt::Display for GoType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut name = String::new();
        self.write_name(&mut name);
        f.write_str(&name)
    }
}

/// Formats an integer the way Go's `strconv` does (plain decimal), without going through
/// `fmt`.
pub(crate) fn push_int(out: &mut String, v: i128) {
    out.push_str(crate::decimal::decimal(&mut [0; 40], v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_reflect_type_string() {
        assert_eq!(BYTES.name(), "[]uint8");
        assert_eq!(MAP_STRING_STRINGS.name(), "map[string][]string");
        assert_eq!(CHECKSUM.name(), "checksum.Checksum");
        assert_eq!(STRING_SET.name(), "sets.Set[string]");
        assert_eq!(GoType::Ptr(&STRING_SLICE).name(), "*[]string");
        assert_eq!(INT.name(), "int");
        assert_eq!(INT64.name(), "int64");
    }

    #[test]
    fn underlying_peels_names() {
        assert!(CHECKSUM.underlying().is_uint64());
        assert!(BYTES.is_bytes());
        assert!(!STRING_SLICE.is_bytes());
    }

    impl GoType {
        fn is_uint64(&self) -> bool {
            matches!(self, GoType::Uint(IntWidth::W64))
        }
    }

    #[test]
    fn integers_print_in_decimal() {
        for v in [
            0i128,
            7,
            -7,
            255,
            i128::from(i64::MIN),
            i128::from(u64::MAX),
            i128::MAX,
            i128::MIN,
        ] {
            let mut out = String::new();
            push_int(&mut out, v);
            assert_eq!(out, v.to_string());
        }
    }

    #[test]
    fn widths_bound_values() {
        assert!(IntWidth::W8.fits_unsigned(255));
        assert!(!IntWidth::W8.fits_unsigned(256));
        assert!(IntWidth::W32.fits_signed(-(1 << 31)));
        assert!(!IntWidth::W32.fits_signed(1 << 31));
        assert!(IntWidth::Native.fits_unsigned(u64::MAX));
    }
}
