//! Fault injection for the crash-consistency tests (feature `test-util`): a manager told
//! to crash at a `CrashPoint` stops there as a killed process would, and refuses every
//! later call. Without the feature it never crashes and [`Faults`] holds nothing.

use super::DraManagerConfig;
use crate::crash_point::CrashPoint;
use crate::error::DraManagerError;

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
