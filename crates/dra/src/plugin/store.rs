//! Registered plugins by driver name ([`PluginStore`], upstream `DRAPluginManager`'s
//! store, k8s 1.33+): a driver may have several plugins at once (one per registration
//! socket: during a rolling update the helper's `<driver>-<podUID>-reg.sock`, each with its
//! own `dra-<podUID>.sock`), kept in registration order; calls go to the most recently
//! registered one that is connected, else to the most recently registered one
//! ([`PluginStore::get_connected`]); deregistering one socket removes only its plugin.
//! Claims are keyed by driver name, never by instance, so none is lost when an instance
//! goes away.

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

    /// The plugin to call for `driver`, as upstream's `get` picks it: scanning from the
    /// newest registration to the oldest, the first that is connected; when none is, the
    /// newest.
    ///
    /// Upstream's "connected" is its gRPC connection's state, tracked by a stats handler
    /// (ConnBegin/ConnEnd); tonic exposes no such state, so corral asks the plugin's unix
    /// socket whether it accepts a connection now
    /// ([`DraPluginClient::is_connected`]), newest first, stopping at the first that does.
    pub async fn get_connected(&self, driver: &str) -> Option<DraPluginClient> {
        let newest_first: Vec<DraPluginClient> = self
            .read()
            .get(driver)?
            .iter()
            .rev()
            .map(|e| e.client.clone())
            .collect();
        if newest_first.len() > 1 {
            for client in &newest_first {
                if client.is_connected().await {
                    return Some(client.clone());
                }
            }
        }
        newest_first.into_iter().next()
    }

    /// The newest registration for `driver`, connected or not.
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

    /// The DRAPlugin endpoints registered for `driver`, in registration order.
    pub fn endpoints(&self, driver: &str) -> Vec<PathBuf> {
        self.read()
            .get(driver)
            .map(|l| {
                l.iter()
                    .map(|e| e.client.endpoint().to_path_buf())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Number of plugins registered for `driver`.
    pub fn plugin_count(&self, driver: &str) -> usize {
        self.read().get(driver).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use corral_proto::tonic::transport::Endpoint;

    use super::*;
    use crate::plugin::service::DraService;

    fn client(endpoint: &Path) -> DraPluginClient {
        let channel = Endpoint::from_static("http://[::]:1").connect_lazy();
        DraPluginClient::new(
            "drv",
            endpoint,
            DraService::V1,
            channel,
            Duration::from_secs(1),
        )
    }

    // Upstream TestGetPlugin-style: newest connected first, else newest; removing one
    // instance keeps the other; a second socket cannot take an endpoint.
    #[tokio::test]
    async fn newest_connected_instance_else_newest() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("dra-old.sock");
        let new = dir.path().join("dra-new.sock");
        let _old_listener = tokio::net::UnixListener::bind(&old).unwrap();
        let store = PluginStore::new();
        store
            .add(&dir.path().join("old-reg.sock"), client(&old))
            .unwrap();
        store
            .add(&dir.path().join("new-reg.sock"), client(&new))
            .unwrap();
        assert_eq!(store.endpoints("drv"), [old.clone(), new.clone()]);
        // The newest is not listening: the older, connected one is used.
        assert_eq!(store.get_connected("drv").await.unwrap().endpoint(), old);
        let _new_listener = tokio::net::UnixListener::bind(&new).unwrap();
        assert_eq!(store.get_connected("drv").await.unwrap().endpoint(), new);
        drop(_old_listener);
        drop(_new_listener);
        // Nobody is listening: the newest.
        assert_eq!(store.get_connected("drv").await.unwrap().endpoint(), new);

        let err = store
            .add(&dir.path().join("third-reg.sock"), client(&old))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "endpoint {} already registered for DRA driver plugin drv",
                old.display()
            )
        );
        assert_eq!(
            store.remove_by_socket(&dir.path().join("new-reg.sock")),
            Some("drv".to_owned())
        );
        assert_eq!(store.endpoints("drv"), std::slice::from_ref(&old));
        assert_eq!(store.get_connected("drv").await.unwrap().endpoint(), old);
        assert_eq!(
            store
                .get_connected("other")
                .await
                .map(|c| c.driver().to_owned()),
            None
        );
    }
}
