//! Where a manager told to crash stops (fault injection for the crash-consistency tests;
//! public with feature `test-util`). A leaf: the manager's fault state and its error both
//! name it.

/// A point inside an operation where a manager configured to crash there stops, as if the
/// process had been killed (fault injection for crash-consistency tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
// Public API only with `test-util`; without it, the variant names follow the public ones.
#[cfg_attr(
    not(feature = "test-util"),
    allow(unreachable_pub, clippy::enum_variant_names)
)]
pub enum CrashPoint {
    /// Prepare: after the claims are recorded in the checkpoint, before any driver call.
    AfterRecord,
    /// Prepare: after the drivers prepared, before their devices are checkpointed.
    AfterPrepare,
    /// Unprepare: after the drivers unprepared, before the claims leave the checkpoint.
    AfterUnprepare,
}
