//! The manager's view of DRA drivers ([`DriverClients`]): is a driver registered, and call
//! its NodePrepareResources / NodeUnprepareResources with a batch of claims. The plugin
//! registry implements it over gRPC; tests implement it in memory.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use crate::claim::ClaimRef;
use crate::claim_info::PreparedDevice;
use crate::error::DriverCallError;

/// Per claim uid, the devices a driver prepared or the driver's error message.
pub type PrepareResults = BTreeMap<String, Result<Vec<PreparedDevice>, String>>;

/// Per claim uid, success or the driver's error message.
pub type UnprepareResults = BTreeMap<String, Result<(), String>>;

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
