//! Registered plugins by driver name ([`PluginStore`], upstream `DRAPluginManager`'s
//! store): a driver may have several plugins (one per registration socket, e.g. during a
//! rolling update); calls go to the most recently registered one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use super::client::DraPluginClient;
use super::error::EndpointAlreadyRegistered;

#[derive(Debug, Clone)]
struct Entry {
    registration_socket: PathBuf,
    client: DraPluginClient,
}

/// Plugins by driver name, each list in registration order.
#[derive(Debug, Default)]
pub struct PluginStore {
    drivers: RwLock<BTreeMap<String, Vec<Entry>>>,
}

impl PluginStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Vec<Entry>>> {
        self.drivers.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Vec<Entry>>> {
        self.drivers.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Register `client` for its driver from `registration_socket`, replacing an earlier
    /// registration from the same socket. Another socket's plugin cannot take over an
    /// endpoint already registered for the driver (upstream: "endpoint already registered").
    pub fn add(
        &self,
        registration_socket: &Path,
        client: DraPluginClient,
    ) -> Result<(), EndpointAlreadyRegistered> {
        let mut drivers = self.write();
        let list = drivers.entry(client.driver().to_owned()).or_default();
        list.retain(|e| e.registration_socket != registration_socket);
        if list
            .iter()
            .any(|e| e.client.endpoint() == client.endpoint())
        {
            return Err(EndpointAlreadyRegistered {
                driver: client.driver().to_owned(),
                endpoint: client.endpoint().to_path_buf(),
            });
        }
        list.push(Entry {
            registration_socket: registration_socket.to_path_buf(),
            client,
        });
        Ok(())
    }

    /// Drop the plugin registered from `registration_socket`; returns its driver.
    pub fn remove_by_socket(&self, registration_socket: &Path) -> Option<String> {
        let mut drivers = self.write();
        let mut removed = None;
        drivers.retain(|driver, list| {
            let before = list.len();
            list.retain(|e| e.registration_socket != registration_socket);
            if list.len() != before {
                removed = Some(driver.clone());
            }
            !list.is_empty()
        });
        removed
    }

    /// The plugin to call for `driver`: the newest registration.
    pub fn get(&self, driver: &str) -> Option<DraPluginClient> {
        self.read()
            .get(driver)
            .and_then(|l| l.last())
            .map(|e| e.client.clone())
    }

    /// Registered driver names, sorted.
    pub fn drivers(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Number of plugins registered for `driver`.
    pub fn plugin_count(&self, driver: &str) -> usize {
        self.read().get(driver).map_or(0, Vec::len)
    }
}
