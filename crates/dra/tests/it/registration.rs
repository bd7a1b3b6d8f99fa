//! The registration handshake over real unix sockets: a plugin is accepted, refused for an
//! unsupported version or a wrong type (and told why), dropped when its socket goes, and
//! registered again when it restarts under the same name. Sockets are probed concurrently:
//! sockets that accept and never answer delay no live driver, a slow socket is probed once
//! at a time, and a failing socket is retried with backoff.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
use corral_dra::plugin::RpcError;
use corral_dra::sample::SampleDriverConfig;
use corral_dra::{
    DraService, PluginRegistry, RegistrationError, RegistrationEvent, RegistryConfig,
};
use corral_proto::pluginregistration::v1 as reg;
use corral_proto::tonic::{self, Request, Response, Status};
use corral_proto::uds::{SocketOptions, UdsListener};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn accepted_plugin_is_registered_and_notified() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut events = registry.subscribe();
    let mut driver = sample(&dirs, "gpu.example.com").await;
    assert_eq!(
        driver.wait_for_status(0, WAIT).await,
        Some((true, String::new()))
    );
    wait_registered(&registry, "gpu.example.com").await;
    let plugin = registry.plugin("gpu.example.com").unwrap();
    assert_eq!(
        plugin.service(),
        DraService::V1,
        "the newest service is chosen"
    );
    assert_eq!(plugin.endpoint(), driver.config().endpoint());
    let event = tokio::time::timeout(WAIT, events.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(event, RegistrationEvent::Registered { ref driver, .. } if driver == "gpu.example.com")
    );

    // The socket goes: the driver is dropped.
    driver.stop().await;
    assert!(!driver.config().registration_socket().exists());
    eventually("deregistration", || async { registry.drivers().is_empty() }).await;
    watcher.stop().await;
}

#[tokio::test]
async fn unsupported_version_is_rejected_with_reason() {
    let reason = refused("old.example.com", |c| {
        c.supported_versions = vec!["v1alpha3.Node".into()]
    })
    .await;
    assert!(
        reason.contains("none of services supported by the plugin"),
        "{reason}"
    );
    assert!(reason.contains("v1alpha3.Node"), "{reason}");
}

/// A sample driver set up by `adjust` is refused, and nothing is registered: the reason it
/// is told.
async fn refused(driver: &str, adjust: impl FnOnce(&mut SampleDriverConfig)) -> String {
    let (_dirs, registry, watcher, sample) = with_sample_config(driver, adjust).await;
    let (registered, reason) = sample.wait_for_status(0, WAIT).await.unwrap();
    assert!(!registered);
    assert!(registry.drivers().is_empty());
    watcher.stop().await;
    reason
}

#[tokio::test]
async fn wrong_type_is_rejected_with_reason() {
    let reason = refused("csi.example.com", |c| c.plugin_type = "CSIPlugin".into()).await;
    assert!(
        reason.contains("no handler registered for plugin type: CSIPlugin"),
        "{reason}"
    );
}

#[tokio::test]
async fn v1beta1_only_plugin_gets_v1beta1() {
    let (_dirs, registry, watcher, _driver) = with_sample_config("beta.example.com", |c| {
        c.supported_versions = vec!["v1beta1.DRAPlugin".into()]
    })
    .await;
    wait_registered(&registry, "beta.example.com").await;
    assert_eq!(
        registry.plugin("beta.example.com").unwrap().service(),
        DraService::V1Beta1
    );
    watcher.stop().await;
}

#[tokio::test]
async fn restart_under_the_same_name_registers_again() {
    let dirs = Dirs::new();
    let (registry, watcher) = registry(&dirs);
    let mut driver = sample(&dirs, "gpu.example.com").await;
    assert_eq!(
        driver.wait_for_status(0, WAIT).await,
        Some((true, String::new()))
    );
    wait_registered(&registry, "gpu.example.com").await;
    driver.restart().await.unwrap();
    assert_eq!(
        driver.wait_for_status(1, WAIT).await,
        Some((true, String::new()))
    );
    wait_registered(&registry, "gpu.example.com").await;
    assert_eq!(registry.store().plugin_count("gpu.example.com"), 1);
    watcher.stop().await;
}

#[tokio::test]
async fn rejected_plugin_is_retried_with_backoff() {
    let (_dirs, _registry, watcher, driver) = with_sample_config("old.example.com", |c| {
        c.supported_versions = vec!["v0.DRAPlugin".into()]
    })
    .await;
    assert_eq!(
        driver.wait_for_status(1, WAIT).await.map(|s| s.0),
        Some(false)
    );
    watcher.stop().await;
    // No more scans once stopped.
    let seen = driver.registration_statuses().len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(driver.registration_statuses().len(), seen);
}

#[tokio::test]
async fn non_socket_files_and_hidden_names_are_ignored() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.registry()).unwrap();
    std::fs::write(dirs.registry().join("not-a-socket"), b"x").unwrap();
    let registry = corral_dra::PluginRegistry::new(fast_config(&dirs.registry()));
    let mut events = registry.subscribe();
    registry.sync_once().await;
    assert!(events.try_recv().is_err());
    assert!(registry.drivers().is_empty());
}

/// A socket that accepts connections and never speaks: every connection it accepts is held
/// open, unanswered, until it is dropped (which also removes the socket file).
struct MuteSocket {
    path: PathBuf,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl MuteSocket {
    fn bind(path: PathBuf) -> Self {
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(stream);
            }
        });
        MuteSocket {
            path,
            accepted,
            task,
        }
    }

    /// `n` mute sockets `mute-NN.sock` in the registration directory.
    fn many(dirs: &Dirs, n: usize) -> Vec<Self> {
        std::fs::create_dir_all(dirs.registry()).unwrap();
        (0..n)
            .map(|i| Self::bind(dirs.registry().join(format!("mute-{i:02}.sock"))))
            .collect()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for MuteSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A fast registry whose handshake steps wait 1 s, a socket's whole probe 2 s.
fn mute_config(dirs: &Dirs) -> RegistryConfig {
    RegistryConfig {
        registration_timeout: Duration::from_secs(1),
        probe_timeout: Duration::from_secs(2),
        ..fast_config(&dirs.registry())
    }
}

/// Wait at most `bound` for `driver` to be registered; how long it took.
async fn registered_within(registry: &PluginRegistry, driver: &str, bound: Duration) -> Duration {
    let started = Instant::now();
    let registered = tokio::time::timeout(bound, async {
        while registry.plugin(driver).is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        registered.is_ok(),
        "{driver} was not registered within {bound:?}"
    );
    started.elapsed()
}

// Issue 12 item 6: 40 sockets that accept and never answer delayed a working driver's
// registration by 79 s, because the handshakes ran one after another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mute_sockets_do_not_delay_a_live_driver() {
    let dirs = Dirs::new();
    let mute = MuteSocket::many(&dirs, 40);
    let registry = PluginRegistry::new(mute_config(&dirs));
    let watcher = registry.watch();
    // The registry is busy with the mute sockets before the driver starts.
    eventually("a mute socket dialed", || async {
        mute.iter().any(|m| m.accepted() > 0)
    })
    .await;

    let _driver = sample(&dirs, "gpu.example.com").await;
    // Well under the per-socket deadline: one poll plus the driver's own handshake.
    let took = registered_within(&registry, "gpu.example.com", Duration::from_millis(1000)).await;
    eprintln!("registered {took:?} after starting beside 40 mute sockets");
    // And the mute sockets were all probed at once, not one per second.
    let all_dialed = tokio::time::timeout(Duration::from_millis(900), async {
        while mute.iter().any(|m| m.accepted() == 0) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(all_dialed.is_ok(), "not every mute socket was probed");
    watcher.stop().await;
}

// Retries never take more than half the probe slots: sockets that keep failing cannot
// crowd out a driver that just started, even when there are more of them than slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_sockets_leave_slots_for_a_new_driver() {
    let dirs = Dirs::new();
    let mute = MuteSocket::many(&dirs, 8);
    let registry = PluginRegistry::new(RegistryConfig {
        max_concurrent_probes: 4,
        ..mute_config(&dirs)
    });
    let mut events = registry.subscribe();
    let watcher = registry.watch();
    // Every mute socket failed once: from now on they are all retries.
    let mut failed = BTreeSet::new();
    while failed.len() < mute.len() {
        match tokio::time::timeout(WAIT, events.recv()).await.unwrap() {
            Ok(RegistrationEvent::Rejected { socket, error }) => {
                assert!(
                    matches!(
                        *error,
                        RegistrationError::GetInfo {
                            source: RpcError::DeadlineExceeded(_),
                            ..
                        }
                    ),
                    "{error:?}"
                );
                failed.insert(socket);
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(lagged) => panic!("{lagged}"),
        }
    }
    // Their backoff (50 ms) expires: retries fill every slot they may take.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let _driver = sample(&dirs, "gpu.example.com").await;
    // Without free slots it would wait for a retry to time out (1 s).
    let took = registered_within(&registry, "gpu.example.com", Duration::from_millis(400)).await;
    eprintln!("registered {took:?} after starting beside 8 failing sockets and 4 slots");
    watcher.stop().await;
}

#[tokio::test]
async fn failing_socket_is_retried_with_backoff_not_every_poll() {
    let dirs = Dirs::new();
    let mute = MuteSocket::many(&dirs, 1);
    let config = RegistryConfig {
        poll_interval: Duration::from_millis(20),
        registration_timeout: Duration::from_millis(100),
        probe_timeout: Duration::from_millis(200),
        retry_initial: Duration::from_millis(200),
        retry_max: Duration::from_millis(400),
        ..RegistryConfig::new(dirs.registry())
    };
    let registry = PluginRegistry::new(config);
    let watcher = registry.watch();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    watcher.stop().await;
    // Probes start at about 0, 0.3, 0.8, 1.3 and 1.8 s; once per poll would be ~16.
    let dials = mute[0].accepted();
    assert!((3..=7).contains(&dials), "{dials} probes in 2 s");
}

/// A registration server whose `GetInfo` answers after `hang`; it counts calls and how many
/// ran at once, and records the statuses it is sent.
#[derive(Clone)]
struct SlowRegistration {
    info: reg::PluginInfo,
    hang: Duration,
    calls: Arc<AtomicUsize>,
    running: Arc<AtomicUsize>,
    most_at_once: Arc<AtomicUsize>,
    statuses: Arc<Mutex<Vec<(bool, String)>>>,
}

struct Decrement(Arc<AtomicUsize>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tonic::async_trait]
impl reg::registration_server::Registration for SlowRegistration {
    async fn get_info(
        &self,
        _: Request<reg::InfoRequest>,
    ) -> Result<Response<reg::PluginInfo>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        let _running = Decrement(Arc::clone(&self.running));
        self.most_at_once.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.hang).await;
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let reg::RegistrationStatus {
            plugin_registered,
            error,
        } = request.into_inner();
        self.statuses
            .lock()
            .unwrap()
            .push((plugin_registered, error));
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

/// A [`SlowRegistration`] served on `<registry>/slow-reg.sock` (also its DRAPlugin
/// endpoint); stopped, and its socket removed, on drop.
struct SlowPlugin {
    service: SlowRegistration,
    socket: PathBuf,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

const SLOW: &str = "slow.example.com";

impl SlowPlugin {
    fn start(dirs: &Dirs, hang: Duration) -> Self {
        std::fs::create_dir_all(dirs.registry()).unwrap();
        let socket = dirs.registry().join("slow-reg.sock");
        let service = SlowRegistration {
            info: reg::PluginInfo {
                r#type: reg::DRA_PLUGIN.into(),
                name: SLOW.into(),
                endpoint: String::new(),
                supported_versions: vec!["v1.DRAPlugin".into()],
            },
            hang,
            calls: Arc::default(),
            running: Arc::default(),
            most_at_once: Arc::default(),
            statuses: Arc::default(),
        };
        let listener = UdsListener::bind(&socket, &SocketOptions::default()).unwrap();
        let router = tonic::transport::Server::builder().add_service(
            reg::registration_server::RegistrationServer::new(service.clone()),
        );
        let stop = CancellationToken::new();
        let serving = corral_proto::uds::serve(
            router,
            listener,
            stop.clone().cancelled_owned(),
            Duration::from_millis(100),
        );
        let task = tokio::spawn(async move {
            let _ = serving.await;
        });
        SlowPlugin {
            service,
            socket,
            stop,
            task,
        }
    }

    fn calls(&self) -> usize {
        self.service.calls.load(Ordering::SeqCst)
    }

    fn most_at_once(&self) -> usize {
        self.service.most_at_once.load(Ordering::SeqCst)
    }

    fn statuses(&self) -> Vec<(bool, String)> {
        self.service.statuses.lock().unwrap().clone()
    }
}

impl Drop for SlowPlugin {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A [`SlowPlugin`] whose `GetInfo` hangs for `hang`, then a watched registry, and the
/// registry's events from then on.
fn watched_slow_plugin(
    hang: Duration,
) -> (
    Dirs,
    SlowPlugin,
    Arc<PluginRegistry>,
    corral_dra::RegistryWatcher,
    tokio::sync::broadcast::Receiver<RegistrationEvent>,
) {
    let dirs = Dirs::new();
    let plugin = SlowPlugin::start(&dirs, hang);
    let (registry, watcher) = registry(&dirs);
    let events = registry.subscribe();
    (dirs, plugin, registry, watcher, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_answering_after_a_hang_is_probed_once_at_a_time() {
    // GetInfo answers after 30 polls, within its 1 s deadline.
    let (_dirs, plugin, registry, watcher, mut events) =
        watched_slow_plugin(Duration::from_millis(600));
    wait_registered(&registry, SLOW).await;
    let event = tokio::time::timeout(WAIT, events.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(event, RegistrationEvent::Registered { ref driver, .. } if driver == SLOW),
        "{event:?}"
    );
    // A direct pass meanwhile does not probe it again either.
    registry.sync_once().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    watcher.stop().await;
    assert_eq!(plugin.calls(), 1, "GetInfo calls");
    assert_eq!(plugin.most_at_once(), 1);
    assert_eq!(plugin.statuses(), [(true, String::new())]);
    assert!(
        events.try_recv().is_err(),
        "registered exactly once, never rejected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_removed_during_its_probe_is_not_registered() {
    let (_dirs, plugin, registry, watcher, mut events) =
        watched_slow_plugin(Duration::from_millis(500));
    eventually("GetInfo asked", || async { plugin.calls() > 0 }).await;
    // The file goes while GetInfo hangs; the server still answers on the open connection.
    std::fs::remove_file(&plugin.socket).unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(registry.drivers().is_empty());
    assert!(
        events.try_recv().is_err(),
        "a socket that went away is neither registered nor rejected"
    );
    assert_eq!(
        plugin.statuses(),
        [],
        "nothing to tell a plugin that went away"
    );
    watcher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_replaced_during_its_probe_registers_only_the_new_instance() {
    let (dirs, old, registry, watcher, _events) = watched_slow_plugin(Duration::from_millis(800));
    eventually("GetInfo asked", || async { old.calls() > 0 }).await;
    // The driver restarts under the same path while the old instance's GetInfo hangs.
    std::fs::remove_file(&old.socket).unwrap();
    let new = SlowPlugin::start(&dirs, Duration::ZERO);
    wait_registered(&registry, SLOW).await;
    eventually("the new instance told", || async {
        new.statuses() == [(true, String::new())]
    })
    .await;
    // The old instance answers late: its verdict is for a file that is gone.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(old.calls(), 1);
    assert_eq!(
        old.statuses(),
        [],
        "the replaced instance is not registered"
    );
    assert_eq!(registry.store().plugin_count(SLOW), 1);
    watcher.stop().await;
    drop(old);
    drop(new);
}
