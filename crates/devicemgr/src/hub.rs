//! [`Hub`]: the connected plugins (upstream `plugin/v1beta1` `server`'s clients and
//! `connectClient`/`runClient`). A valid registration takes a place under the caps, is
//! dialed, replaces the resource's previous endpoint and gets a task consuming its
//! `ListAndWatch` stream; what happens to the plugins is reported to a [`ClientHandler`]
//! (upstream's `ClientHandler`, which the manager implements). The hub knows nothing of
//! devices or allocations; the manager nothing of connections and streams.
//!
//! A re-registration bumps the resource's generation: reports of an older stream (a late
//! list, its end) are dropped, so they never touch the new plugin. Reports are made under
//! the hub's lock, in the order the hub saw them; a handler must not call back into the hub.
//!
//! Plugins' device lists are applied in turns ([`follow_lists`]): a stream applies the
//! newest of the lists it has received, then lets every other task run before it applies
//! again, and streams waiting to apply a list are served first come, first served. A plugin
//! flooding lists thus never holds a runtime thread or the locks, and a list waiting for
//! its turn is applied after at most one list of each other plugin.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use corral_proto::deviceplugin::v1beta1::ListAndWatchResponse;
use tokio::sync::watch;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;

use crate::config::DeviceManagerConfig;
use crate::device::{Device, PluginOptions};
use crate::endpoint::{DeviceLists, PluginCallError, PluginClient, StreamEnd};
use crate::locks::{Ordered, Rank};
use crate::observer::ObserverSlot;
use crate::registration::{RegistrationHandler, RegistrationLimit};
use crate::tasks::Tasks;

/// What a plugin endpoint reports to (upstream `ClientHandler`).
pub(crate) trait ClientHandler: Send + Sync + 'static {
    /// The plugin of `resource` connected with `options` (upstream `PluginConnected`);
    /// it replaces any earlier one.
    fn plugin_connected(&self, resource: &str, options: PluginOptions);
    /// The stream of the resource's plugin ended (upstream `PluginDisconnected`).
    fn plugin_disconnected(&self, resource: &str);
    /// The resource's plugin listed its devices (upstream `PluginListAndWatchReceiver`).
    fn plugin_list_and_watch_receive(&self, resource: &str, devices: &[Device]);
}

/// A connected plugin and the task consuming its stream.
struct LiveEndpoint {
    client: PluginClient,
    /// The endpoint's file name in the plugin directory (what identifies a plugin for
    /// [`DeviceManagerConfig::max_resources_per_plugin`]).
    endpoint: String,
    generation: u64,
    cancel: CancellationToken,
    /// The plugin sent at least one device list.
    listed: bool,
}

/// The connected plugins, one per resource, and the registrations being dialed.
pub(crate) struct Hub {
    config: DeviceManagerConfig,
    live: Ordered<BTreeMap<String, LiveEndpoint>>,
    /// Registrations being dialed: id → (resource, endpoint). They count against the caps.
    registering: Ordered<BTreeMap<u64, (String, String)>>,
    next_registration: AtomicU64,
    next_generation: AtomicU64,
    /// Turns of the streams applying a device list, first come, first served.
    turns: tokio::sync::Mutex<()>,
    /// The generations whose stream task is running.
    streams: Arc<watch::Sender<BTreeSet<u64>>>,
    tasks: Arc<Tasks>,
    observer: Arc<ObserverSlot>,
}

impl Hub {
    /// No plugins yet; streams are consumed on `tasks`, registrations reported to
    /// `observer`.
    pub(crate) fn new(
        config: DeviceManagerConfig,
        tasks: Arc<Tasks>,
        observer: Arc<ObserverSlot>,
    ) -> Hub {
        Hub {
            config,
            live: Ordered::new(Rank::HubPlugins, BTreeMap::new()),
            registering: Ordered::new(Rank::HubRegistering, BTreeMap::new()),
            next_registration: AtomicU64::new(0),
            next_generation: AtomicU64::new(1),
            turns: tokio::sync::Mutex::new(()),
            streams: Arc::new(watch::Sender::new(BTreeSet::new())),
            tasks,
            observer,
        }
    }

    /// Whether the resource's plugin is connected and has listed its devices.
    pub(crate) fn plugin_ready(&self, resource: &str) -> bool {
        self.live.lock().get(resource).is_some_and(|e| e.listed)
    }

    /// The client of the resource's connected plugin.
    pub(crate) fn client(&self, resource: &str) -> Option<PluginClient> {
        self.live.lock().get(resource).map(|e| e.client.clone())
    }

    /// Wait until the stream tasks of plugins that are no longer connected — replaced,
    /// disconnected, or stopped by [`disconnect_all`](Self::disconnect_all) — have ended,
    /// with whatever they had to report.
    pub(crate) async fn retired_streams_ended(&self) {
        let mut running = self.streams.subscribe();
        loop {
            {
                let live = self.live.lock();
                let retired = running
                    .borrow_and_update()
                    .iter()
                    .any(|g| !live.values().any(|e| e.generation == *g));
                if !retired {
                    return;
                }
            }
            if running.changed().await.is_err() {
                return;
            }
        }
    }

    /// Stop following every plugin (their streams end without a report).
    pub(crate) fn disconnect_all(&self) {
        for endpoint in std::mem::take(&mut *self.live.lock()).into_values() {
            endpoint.cancel.cancel();
        }
    }

    /// Take a place for registering `resource` at `endpoint` under the caps on resources
    /// per plugin and in total; registered resources and registrations in flight count,
    /// and a resource already registered keeps its place (a re-registration replaces it).
    /// The place is held until the returned slot is dropped; by then the resource is live
    /// (and counted as such) or the registration failed.
    fn reserve(
        self: &Arc<Self>,
        resource: &str,
        endpoint: &str,
    ) -> Result<RegistrationSlot, RegistrationLimit> {
        let live = self.live.lock();
        let mut registering = self.registering.lock();
        let mut owners: BTreeMap<&str, &str> = live
            .iter()
            .map(|(r, e)| (r.as_str(), e.endpoint.as_str()))
            .collect();
        for (r, e) in registering.values() {
            owners.insert(r, e);
        }
        let before = owners.len();
        let of_plugin = owners.values().filter(|e| **e == endpoint).count();
        let new_to_plugin = owners.get(resource) != Some(&endpoint);
        owners.insert(resource, endpoint);
        let max = self.config.max_resources_per_plugin;
        if new_to_plugin && of_plugin >= max {
            return Err(RegistrationLimit::PerPlugin {
                resource: resource.to_owned(),
                endpoint: endpoint.to_owned(),
                registered: of_plugin,
                max,
            });
        }
        let max = self.config.max_resources;
        if owners.len() > before && before >= max {
            return Err(RegistrationLimit::Total {
                resource: resource.to_owned(),
                registered: before,
                max,
            });
        }
        let id = self.next_registration.fetch_add(1, Ordering::Relaxed);
        registering.insert(id, (resource.to_owned(), endpoint.to_owned()));
        Ok(RegistrationSlot {
            hub: Arc::clone(self),
            id,
        })
    }

    /// Dial a registering plugin, read its options, make it the resource's endpoint
    /// (stopping any previous one) and start consuming its stream.
    async fn connect<H: ClientHandler>(
        self: &Arc<Self>,
        handler: &Arc<H>,
        resource: &str,
        endpoint: &str,
    ) -> Result<(), PluginCallError> {
        let socket = self.config.plugin_dir.join(endpoint);
        let client = PluginClient::connect(resource, &socket, &self.config).await?;
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        {
            let mut live = self.live.lock();
            let previous = live.insert(
                resource.to_owned(),
                LiveEndpoint {
                    client: client.clone(),
                    endpoint: endpoint.to_owned(),
                    generation,
                    cancel: cancel.clone(),
                    listed: false,
                },
            );
            if let Some(previous) = previous {
                tracing::info!(resource, old = %previous.client.socket.display(),
                    new = %socket.display(), "device plugin re-registered; replacing its endpoint");
                previous.cancel.cancel();
            }
            handler.plugin_connected(resource, client.options);
        }
        tracing::info!(resource, socket = %socket.display(),
            pre_start_required = client.options.pre_start_required,
            preferred_allocation = client.options.get_preferred_allocation_available,
            "device plugin connected");
        let hub = Arc::clone(self);
        let handler = Arc::clone(handler);
        let running = StreamRunning::new(&self.streams, generation);
        self.tasks.spawn(async move {
            let _running = running;
            let why = tokio::select! {
                () = cancel.cancelled() => return,
                why = hub.follow(&*handler, &client, generation) => why,
            };
            hub.on_stream_end(&*handler, &client.resource, generation, &why.to_string());
        });
        Ok(())
    }

    /// Follow the plugin's `ListAndWatch` stream until it stops; why it stopped.
    async fn follow(
        &self,
        handler: &impl ClientHandler,
        client: &PluginClient,
        generation: u64,
    ) -> StreamEnd {
        let poll = self.config.socket_poll_interval;
        let max = self.config.max_devices_per_plugin;
        let mut lists = match client.list_and_watch(poll, max).await {
            Ok(lists) => lists,
            Err(why) => return why,
        };
        follow_lists(&mut lists, &self.turns, |list| {
            self.on_list(handler, &client.resource, generation, list);
        })
        .await
    }

    /// A device list from the plugin of `generation`.
    fn on_list(
        &self,
        handler: &impl ClientHandler,
        resource: &str,
        generation: u64,
        list: &ListAndWatchResponse,
    ) {
        let devices: Vec<Device> = list.devices.iter().map(Device::from).collect();
        let mut live = self.live.lock();
        let Some(endpoint) = live
            .get_mut(resource)
            .filter(|e| e.generation == generation)
        else {
            return;
        };
        endpoint.listed = true;
        handler.plugin_list_and_watch_receive(resource, &devices);
    }

    /// The stream of the plugin of `generation` ended: unless a newer plugin replaced it,
    /// it is disconnected.
    fn on_stream_end(
        &self,
        handler: &impl ClientHandler,
        resource: &str,
        generation: u64,
        why: &str,
    ) {
        {
            let mut live = self.live.lock();
            if live
                .get(resource)
                .is_none_or(|e| e.generation != generation)
            {
                return;
            }
            live.remove(resource);
            handler.plugin_disconnected(resource);
        }
        tracing::warn!(resource, reason = why, "device plugin endpoint stopped");
    }
}

/// Apply the device lists of one plugin's stream with `apply` until the stream stops; why
/// it stopped. Each list applied is the newest received ([`DeviceLists::next`]), applied
/// in its turn among the streams waiting on `turns` (first come, first served); after each,
/// every other task gets to run first. (A gRPC stream's buffered messages are read without
/// yielding to the runtime, so without these turns a plugin flooding lists would hold a
/// runtime thread and the locks `apply` takes, applying thousands of stale lists while the
/// other plugins' lists wait.)
async fn follow_lists<S>(
    lists: &mut DeviceLists<S>,
    turns: &tokio::sync::Mutex<()>,
    mut apply: impl FnMut(&ListAndWatchResponse),
) -> StreamEnd
where
    S: Stream<Item = Result<ListAndWatchResponse, tonic::Status>> + Unpin,
{
    loop {
        let list = match lists.next().await {
            Ok(list) => list,
            Err(why) => return why,
        };
        {
            let _turn = turns.lock().await;
            apply(&list);
        }
        tokio::task::yield_now().await;
    }
}

/// A stream task's generation, counted as running until the task ends.
struct StreamRunning {
    streams: Arc<watch::Sender<BTreeSet<u64>>>,
    generation: u64,
}

impl StreamRunning {
    fn new(streams: &Arc<watch::Sender<BTreeSet<u64>>>, generation: u64) -> StreamRunning {
        streams.send_modify(|running| {
            running.insert(generation);
        });
        StreamRunning {
            streams: Arc::clone(streams),
            generation,
        }
    }
}

impl Drop for StreamRunning {
    fn drop(&mut self) {
        self.streams.send_modify(|running| {
            running.remove(&self.generation);
        });
    }
}

/// A place taken under the registration caps while a plugin is dialed; given back on drop.
pub(crate) struct RegistrationSlot {
    hub: Arc<Hub>,
    id: u64,
}

impl Drop for RegistrationSlot {
    fn drop(&mut self) {
        self.hub.registering.lock().remove(&self.id);
    }
}

/// The hub as the registration server sees it, connecting plugins that report to `H`.
pub(crate) struct HubRegistrations<H> {
    /// The hub.
    pub(crate) hub: Arc<Hub>,
    /// Where the plugins report.
    pub(crate) handler: Arc<H>,
}

impl<H: ClientHandler> RegistrationHandler for HubRegistrations<H> {
    type Slot = RegistrationSlot;

    fn reserve(
        &self,
        resource: &str,
        endpoint: &str,
    ) -> Result<RegistrationSlot, RegistrationLimit> {
        self.hub.reserve(resource, endpoint)
    }

    fn registered(&self, resource: &str) {
        if let Some(observer) = self.hub.observer.get() {
            observer.plugin_registered(resource);
        }
    }

    async fn connect(&self, resource: &str, endpoint: &str) -> Result<(), PluginCallError> {
        self.hub.connect(&self.handler, resource, endpoint).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::endpoint::MAX_LISTS_PER_TAKE;
    use crate::endpoint::tests::{Received, list};
    use crate::locks::lock;

    /// A plugin's stream that has received `n` lists already (`<name>-<i>`, always ready,
    /// as a flooding plugin's stream is), then ends.
    fn flood(name: &str, n: usize) -> DeviceLists<Received> {
        let items = (0..n)
            .map(|i| Ok(list(&format!("{name}-{i}"), 1)))
            .collect();
        let stream = Received {
            items,
            then_pending: false,
        };
        let socket = std::env::temp_dir();
        DeviceLists::new(stream, name, &socket, Duration::from_secs(3600), 10)
    }

    /// Two plugins flooding lists at once take turns: each applies one list, then the other
    /// does. A current-thread runtime runs one task at a time, so the order of the
    /// applications depends on no clock. (Without turns the first stream applied every
    /// list it had before the second applied one.)
    #[tokio::test]
    async fn flooding_streams_take_turns() {
        let turns = Arc::new(tokio::sync::Mutex::new(()));
        let applied = Arc::new(Mutex::new(Vec::<String>::new()));
        let takes = 10;
        let n = takes * MAX_LISTS_PER_TAKE;
        let streams: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|name| {
                let (turns, applied) = (Arc::clone(&turns), Arc::clone(&applied));
                tokio::spawn(async move {
                    let mut lists = flood(name, n);
                    follow_lists(&mut lists, &turns, |list| {
                        lock(&applied).push(list.devices[0].id.clone());
                    })
                    .await
                })
            })
            .collect();
        for stream in streams {
            assert_eq!(stream.await.unwrap(), StreamEnd::Ended);
        }
        let applied = lock(&applied).clone();
        assert_eq!(
            applied.len(),
            2 * takes,
            "one application per take: {applied:?}"
        );
        // At every point, neither plugin is more than one application ahead of the other.
        let mut ahead = 0i64;
        for id in &applied {
            ahead += if id.starts_with('a') { 1 } else { -1 };
            assert!(ahead.abs() <= 1, "a plugin got ahead: {applied:?}");
        }
        for name in ["a", "b"] {
            let newest = format!("{name}-{}", n - 1);
            assert!(applied.contains(&newest), "{newest} applied: {applied:?}");
        }
    }
}
