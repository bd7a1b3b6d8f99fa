//! The manager's view of DRA drivers ([`DriverClients`]): is a driver registered, and call
//! its NodePrepareResources / NodeUnprepareResources with a batch of claims. The plugin
//! registry implements it over gRPC; tests implement it in memory.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use crate::claim::ClaimRef;
use crate::claim_info::PreparedDevice;
use crate::error::DriverCallError;

/// Per claim uid, the devices a driver prepared or the driver's error for the claim.
pub type PrepareResults = BTreeMap<String, Result<Vec<PreparedDevice>, DriverClaimError>>;

/// Per claim uid, success or the driver's error for the claim.
pub type UnprepareResults = BTreeMap<String, Result<(), DriverClaimError>>;

/// A driver's error for one claim of a call that succeeded as a whole (the `error` field of
/// its answer for the claim), as the driver worded it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DriverClaimError {
    /// The driver's message.
    pub message: String,
}

impl From<String> for DriverClaimError {
    fn from(message: String) -> Self {
        DriverClaimError { message }
    }
}

impl From<&str> for DriverClaimError {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

/// The DRA drivers the manager can call.
///
/// Implementations return the driver's answer as given: the manager checks that it covers
/// every claim sent and no other.
pub trait DriverClients: Send + Sync {
    /// Whether a plugin of `driver` is registered now.
    fn is_registered(&self, driver: &str) -> bool;

    /// NodePrepareResources for a batch of claims of one pod.
    fn node_prepare_resources(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> impl Future<Output = Result<PrepareResults, DriverCallError>> + Send;

    /// NodeUnprepareResources for a batch of claims of one pod.
    fn node_unprepare_resources(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> impl Future<Output = Result<UnprepareResults, DriverCallError>> + Send;
}

impl<T: DriverClients> DriverClients for Arc<T> {
    fn is_registered(&self, driver: &str) -> bool {
        (**self).is_registered(driver)
    }

    fn node_prepare_resources(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> impl Future<Output = Result<PrepareResults, DriverCallError>> + Send {
        (**self).node_prepare_resources(driver, claims)
    }

    fn node_unprepare_resources(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> impl Future<Output = Result<UnprepareResults, DriverCallError>> + Send {
        (**self).node_unprepare_resources(driver, claims)
    }
}
