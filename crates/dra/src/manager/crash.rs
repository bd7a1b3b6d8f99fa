//! Fault injection for the crash-consistency tests (feature `test-util`): a manager told
//! to crash at a [`CrashPoint`] stops there as a killed process would, and refuses every
//! later call. Without the feature it never crashes and [`Faults`] holds nothing.

use super::DraManagerConfig;
use crate::error::DraManagerError;

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

/// Where a manager is to crash, and whether it did.
#[derive(Debug, Default)]
pub(super) struct Faults {
    #[cfg(feature = "test-util")]
    at: Option<CrashPoint>,
    #[cfg(feature = "test-util")]
    crashed: Option<CrashPoint>,
}

impl Faults {
    pub(super) fn new(config: &DraManagerConfig) -> Self {
        #[cfg(feature = "test-util")]
        return Faults {
            at: config.crash_at,
            crashed: None,
        };
        #[cfg(not(feature = "test-util"))]
        {
            let _ = config;
            Faults {}
        }
    }

    /// Refuse every call once crashed.
    pub(super) fn alive(&self) -> Result<(), DraManagerError> {
        #[cfg(feature = "test-util")]
        if let Some(point) = self.crashed {
            return Err(DraManagerError::Crashed(point));
        }
        Ok(())
    }

    /// Crash here if told to.
    pub(super) fn crash_if(&mut self, point: CrashPoint) -> Result<(), DraManagerError> {
        #[cfg(feature = "test-util")]
        if self.at == Some(point) {
            tracing::warn!(?point, "injected crash");
            self.crashed = Some(point);
            return Err(DraManagerError::Crashed(point));
        }
        let _ = point;
        Ok(())
    }
}
