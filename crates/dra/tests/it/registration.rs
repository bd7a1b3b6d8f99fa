//! The registration handshake over real unix sockets: a plugin is accepted, refused for an
//! unsupported version or a wrong type (and told why), dropped when its socket goes, and
//! registered again when it restarts under the same name. Sockets are probed concurrently:
//! sockets that accept and never answer delay no live driver, a slow socket is probed once
//! at a time, and a failing socket is retried with backoff.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
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
    let (dirs, _registry, watcher, driver) = with_sample_config("old.example.com", |c| {
        c.supported_versions = vec!["v0.DRAPlugin".into()]
    })
    .await;
    assert_eq!(
        driver.wait_for_status(1, WAIT).await.map(|s| s.0),
        Some(false)
    );
    watcher.stop().await;
    // No more scans once stopped. What proves time went by: another registry on the same
    // directory probes the driver, each pass waiting for its probe's status to arrive. Its
    // first pass settles anything the stopped watcher had on the wire; its next three are
    // 50 + 100 + 200 ms of backoff apart, longer than the stopped watcher's longest wait
    // between probes (200 ms, then one 20 ms poll), and driven by timers that expire after
    // the watcher's would have.
    let other = PluginRegistry::new(fast_config(&dirs.registry()));
    let mut events = other.subscribe();
    let mut probes = 0;
    let mut seen = None;
    let deadline = Instant::now() + WAIT;
    while probes < 4 {
        assert!(
            Instant::now() < deadline,
            "the other registry stopped probing"
        );
        other.sync_once().await;
        while let Ok(event) = events.try_recv() {
            assert!(
                matches!(event, RegistrationEvent::Rejected { .. }),
                "{event:?}"
            );
            probes += 1;
            if probes == 1 {
                seen = Some(driver.registration_statuses().len());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        driver.registration_statuses().len(),
        seen.unwrap() + (probes - 1),
        "only the other registry probed the driver after the watcher stopped"
    );
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
/// open, unanswered, until it is dropped (which also removes the socket file). Until
/// [`hold`](Self::hold) is called, a socket made by [`failing`](Self::failing) closes each
/// connection at once instead, so that its probes fail quickly.
struct MuteSocket {
    path: PathBuf,
    accepted: Arc<AtomicUsize>,
    held: Arc<AtomicUsize>,
    hold: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl MuteSocket {
    fn bind(path: PathBuf, hold: bool) -> Self {
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let held = Arc::new(AtomicUsize::new(0));
        let hold = Arc::new(AtomicBool::new(hold));
        let (count, held_count, holding) =
            (Arc::clone(&accepted), Arc::clone(&held), Arc::clone(&hold));
        let task = tokio::spawn(async move {
            let mut streams = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                if holding.load(Ordering::SeqCst) {
                    held_count.fetch_add(1, Ordering::SeqCst);
                    streams.push(stream);
                } else {
                    drop(stream);
                }
                count.fetch_add(1, Ordering::SeqCst);
            }
        });
        MuteSocket {
            path,
            accepted,
            held,
            hold,
            task,
        }
    }

    /// `n` mute sockets `mute-NN.sock` in the registration directory.
    fn many(dirs: &Dirs, n: usize) -> Vec<Self> {
        std::fs::create_dir_all(dirs.registry()).unwrap();
        (0..n)
            .map(|i| Self::bind(dirs.registry().join(format!("mute-{i:02}.sock")), true))
            .collect()
    }

    /// A socket `<name>.sock` in the registration directory that closes every connection
    /// at once (until told to [`hold`](Self::hold) them): each probe of it fails at once,
    /// and it is retried after each backoff, so its connection count shows that the
    /// registry keeps scanning.
    fn failing(dirs: &Dirs, name: &str) -> Self {
        std::fs::create_dir_all(dirs.registry()).unwrap();
        Self::bind(dirs.registry().join(format!("{name}.sock")), false)
    }

    /// From now on, hold every connection accepted.
    fn hold(&self) {
        self.hold.store(true, Ordering::SeqCst);
    }

    /// Connections accepted so far.
    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections accepted and held open so far.
    fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }
}

impl Drop for MuteSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A fast registry whose probes of a socket that never answers never end while a test runs:
/// whether other sockets are delayed by them then shows as a registration that happens or
/// never does, whatever the machine's speed.
fn mute_config(dirs: &Dirs) -> RegistryConfig {
    RegistryConfig {
        registration_timeout: NEVER,
        probe_timeout: NEVER,
        ..fast_config(&dirs.registry())
    }
}

/// Longer than any test runs: a deadline that never passes.
const NEVER: Duration = Duration::from_secs(3600);

/// Wait for `driver` to be registered; how long it took.
async fn registered(registry: &PluginRegistry, driver: &str) -> Duration {
    let started = Instant::now();
    wait_registered(registry, driver).await;
    started.elapsed()
}

/// Every event received so far.
fn received(
    events: &mut tokio::sync::broadcast::Receiver<RegistrationEvent>,
) -> Vec<RegistrationEvent> {
    let mut out = Vec::new();
    loop {
        match events.try_recv() {
            Ok(event) => out.push(event),
            Err(tokio::sync::broadcast::error::TryRecvError::Empty) => return out,
            Err(other) => panic!("{other}"),
        }
    }
}

// Issue 12 item 6: 40 sockets that accept and never answer delayed a working driver's
// registration by 79 s, because the handshakes ran one after another. Their probes never
// end here: the driver is registered, and every mute socket is dialed, only if they run
// side by side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mute_sockets_do_not_delay_a_live_driver() {
    let dirs = Dirs::new();
    let mute = MuteSocket::many(&dirs, 40);
    let registry = PluginRegistry::new(mute_config(&dirs));
    let mut events = registry.subscribe();
    let watcher = registry.watch();
    // The registry is busy with the mute sockets before the driver starts.
    eventually("a mute socket dialed", || async {
        mute.iter().any(|m| m.accepted() > 0)
    })
    .await;

    let _driver = sample(&dirs, "gpu.example.com").await;
    let took = registered(&registry, "gpu.example.com").await;
    eprintln!("registered {took:?} after starting beside 40 mute sockets");
    // And the mute sockets were all probed at once, not one after another.
    eventually("every mute socket dialed", || async {
        mute.iter().all(|m| m.accepted() > 0)
    })
    .await;
    // No mute socket's probe ended: nothing waited for one.
    let events = received(&mut events);
    assert!(
        events
            .iter()
            .all(|e| matches!(e, RegistrationEvent::Registered { driver, .. } if driver == "gpu.example.com")),
        "{events:?}"
    );
    watcher.stop().await;
}

// Retries never take more than half the probe slots: sockets that keep failing cannot
// crowd out a driver that just started, even when there are more of them than slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_sockets_leave_slots_for_a_new_driver() {
    let dirs = Dirs::new();
    let failing: Vec<MuteSocket> = (0..8)
        .map(|i| MuteSocket::failing(&dirs, &format!("mute-{i:02}")))
        .collect();
    let registry = PluginRegistry::new(RegistryConfig {
        max_concurrent_probes: 4,
        ..mute_config(&dirs)
    });
    let mut events = registry.subscribe();
    let watcher = registry.watch();
    // Every socket failed once: from now on they are all retries.
    let mut failed = BTreeSet::new();
    while failed.len() < failing.len() {
        match tokio::time::timeout(WAIT, events.recv()).await.unwrap() {
            Ok(RegistrationEvent::Rejected { socket, error }) => {
                assert!(
                    matches!(
                        *error,
                        RegistrationError::GetInfo { .. } | RegistrationError::Dial { .. }
                    ),
                    "{error:?}"
                );
                failed.insert(socket);
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(lagged) => panic!("{lagged}"),
        }
    }
    // Now they stop answering: each retry from now on holds its slot for good. Retries may
    // take 2 of the 4 slots, and do.
    for socket in &failing {
        socket.hold();
    }
    eventually("retries holding every retry slot", || async {
        failing.iter().map(MuteSocket::held).sum::<usize>() >= 2
    })
    .await;
    let _driver = sample(&dirs, "gpu.example.com").await;
    // Were the retries allowed every slot, it would wait for one to end: never.
    let took = registered(&registry, "gpu.example.com").await;
    eprintln!("registered {took:?} after starting beside 8 failing sockets and 4 slots");
    assert_eq!(
        failing.iter().map(MuteSocket::held).sum::<usize>(),
        2,
        "retries took more than half the slots"
    );
    watcher.stop().await;
}

/// The most probes of one socket that can start within `elapsed` when each failed probe
/// takes at least `config.registration_timeout` (its `GetInfo` deadline) and is followed by
/// its backoff: the first probe, then one more for each (deadline + backoff) that fits.
fn most_probes_within(elapsed: Duration, config: &RegistryConfig) -> usize {
    let (mut probes, mut spent, mut backoff) = (1, Duration::ZERO, config.retry_initial);
    loop {
        spent += config.registration_timeout + backoff;
        if spent > elapsed {
            return probes;
        }
        probes += 1;
        backoff = (backoff * 2).min(config.retry_max);
    }
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
    let registry = PluginRegistry::new(config.clone());
    let started = Instant::now();
    let watcher = registry.watch();
    // It is retried, again and again.
    eventually("5 probes", || async { mute[0].accepted() >= 5 }).await;
    let dials = mute[0].accepted();
    let elapsed = started.elapsed();
    watcher.stop().await;
    // Probes start at 0, ≥ 0.3, ≥ 0.8, ≥ 1.3, ≥ 1.8 s (deadline plus a backoff doubling to
    // its maximum): a slower machine only spaces them further. Once per poll would be
    // 5 within about 0.5 s, a backoff that never grows 5 within 1.2 s.
    let most = most_probes_within(elapsed, &config);
    assert!(
        dials <= most,
        "{dials} probes in {elapsed:?}; with backoff at most {most}"
    );
}

/// A registration server whose `GetInfo` answers once its gate is opened; it counts calls
/// and how many ran at once, and records the statuses it is sent.
#[derive(Clone)]
struct SlowRegistration {
    info: reg::PluginInfo,
    gate: tokio::sync::watch::Receiver<bool>,
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
        let mut gate = self.gate.clone();
        let _ = gate.wait_for(|open| *open).await;
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
    open: tokio::sync::watch::Sender<bool>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

const SLOW: &str = "slow.example.com";

impl SlowPlugin {
    /// Its `GetInfo` hangs until [`answer`](Self::answer) is called, unless `answering`.
    fn start(dirs: &Dirs, answering: bool) -> Self {
        std::fs::create_dir_all(dirs.registry()).unwrap();
        let socket = dirs.registry().join("slow-reg.sock");
        let (open, gate) = tokio::sync::watch::channel(answering);
        let service = SlowRegistration {
            info: reg::PluginInfo {
                r#type: reg::DRA_PLUGIN.into(),
                name: SLOW.into(),
                endpoint: String::new(),
                supported_versions: vec!["v1.DRAPlugin".into()],
            },
            gate,
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
            open,
            stop,
            task,
        }
    }

    /// Let every `GetInfo`, waiting or to come, answer.
    fn answer(&self) {
        self.open.send_replace(true);
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

/// A [`SlowPlugin`] whose `GetInfo` hangs until answered, then a registry watched with
/// `config` (whose `GetInfo` deadline must outlast the hang), and the registry's events
/// from then on.
fn watched_slow_plugin(
    config: impl FnOnce(&Dirs) -> RegistryConfig,
) -> (
    Dirs,
    SlowPlugin,
    Arc<PluginRegistry>,
    corral_dra::RegistryWatcher,
    tokio::sync::broadcast::Receiver<RegistrationEvent>,
) {
    let dirs = Dirs::new();
    let plugin = SlowPlugin::start(&dirs, false);
    let registry = PluginRegistry::new(config(&dirs));
    let events = registry.subscribe();
    let watcher = registry.watch();
    (dirs, plugin, registry, watcher, events)
}

/// Wait until `ticker` (a [`MuteSocket::failing`] socket) was dialed `n` more times than
/// `since`: proof that the registry went on scanning meanwhile.
async fn scans_went_on(ticker: &MuteSocket, since: usize, n: usize) {
    eventually(
        &format!("{n} more probes of the failing socket"),
        || async { ticker.accepted() >= since + n },
    )
    .await;
}

/// The events about `socket` among `events`.
fn about(events: Vec<RegistrationEvent>, socket: &std::path::Path) -> Vec<RegistrationEvent> {
    events
        .into_iter()
        .filter(|e| match e {
            RegistrationEvent::Registered { socket: s, .. }
            | RegistrationEvent::Rejected { socket: s, .. }
            | RegistrationEvent::Deregistered { socket: s, .. } => s == socket,
            _ => true,
        })
        .collect()
}

/// A registry config for the slow-plugin tests: `GetInfo` may hang for as long as the test
/// keeps it waiting.
fn patient(dirs: &Dirs) -> RegistryConfig {
    RegistryConfig {
        registration_timeout: NEVER,
        probe_timeout: NEVER,
        ..fast_config(&dirs.registry())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_answering_after_a_hang_is_probed_once_at_a_time() {
    let (dirs, plugin, registry, watcher, mut events) = watched_slow_plugin(patient);
    let ticker = MuteSocket::failing(&dirs, "ticker");
    eventually("GetInfo asked", || async { plugin.calls() > 0 }).await;
    // While GetInfo hangs, the registry goes on scanning, and a direct pass runs too
    // (without waiting for the running probe): neither probes the socket again.
    tokio::time::timeout(WAIT, registry.sync_once())
        .await
        .expect("a direct pass neither probes the socket again nor waits for its probe");
    scans_went_on(&ticker, ticker.accepted(), 3).await;
    assert_eq!(plugin.calls(), 1, "GetInfo calls while the first hangs");
    plugin.answer();
    wait_registered(&registry, SLOW).await;
    eventually("the plugin told", || async {
        !plugin.statuses().is_empty()
    })
    .await;
    // Registered: never probed again.
    scans_went_on(&ticker, ticker.accepted(), 3).await;
    watcher.stop().await;
    assert_eq!(plugin.calls(), 1, "GetInfo calls");
    assert_eq!(plugin.most_at_once(), 1);
    assert_eq!(plugin.statuses(), [(true, String::new())]);
    let events = about(received(&mut events), &plugin.socket);
    assert!(
        matches!(events.as_slice(), [RegistrationEvent::Registered { driver, .. }] if driver == SLOW),
        "registered exactly once, never rejected: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_removed_during_its_probe_is_not_registered() {
    // One probe at a time: the next probe of another socket starts only once this one
    // ended, verdict and all.
    let (dirs, plugin, registry, watcher, mut events) =
        watched_slow_plugin(|dirs| RegistryConfig {
            max_concurrent_probes: 1,
            ..patient(dirs)
        });
    eventually("GetInfo asked", || async { plugin.calls() > 0 }).await;
    let ticker = MuteSocket::failing(&dirs, "ticker");
    // The file goes while GetInfo hangs, and a pass over the directory notices (the watcher's
    // would too, sooner or later); the server still answers on the open connection.
    std::fs::remove_file(&plugin.socket).unwrap();
    tokio::time::timeout(WAIT, registry.sync_once())
        .await
        .expect("a direct pass does not wait for a probe it did not start");
    plugin.answer();
    // The other socket's probe starts: this one has ended.
    scans_went_on(&ticker, 0, 1).await;
    assert!(registry.drivers().is_empty());
    let events = about(received(&mut events), &plugin.socket);
    assert!(
        events.is_empty(),
        "a socket that went away is neither registered nor rejected: {events:?}"
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
    // Two probes at a time: the new instance's, beside the old one's that hangs.
    let (dirs, old, registry, watcher, _events) = watched_slow_plugin(|dirs| RegistryConfig {
        max_concurrent_probes: 2,
        ..patient(dirs)
    });
    eventually("GetInfo asked", || async { old.calls() > 0 }).await;
    // The driver restarts under the same path while the old instance's GetInfo hangs.
    std::fs::remove_file(&old.socket).unwrap();
    let new = SlowPlugin::start(&dirs, true);
    wait_registered(&registry, SLOW).await;
    eventually("the new instance told", || async {
        new.statuses() == [(true, String::new())]
    })
    .await;
    // A socket that never answers takes the other slot for good...
    let mute = MuteSocket::bind(dirs.registry().join("mute.sock"), true);
    eventually("the mute socket dialed", || async { mute.accepted() > 0 }).await;
    let ticker = MuteSocket::failing(&dirs, "ticker");
    // ...so once the old instance answers, late, a probe of one more socket starts only
    // when the old instance's probe has ended: its verdict is for a file that is gone.
    old.answer();
    scans_went_on(&ticker, 0, 1).await;
    assert_eq!(old.calls(), 1);
    assert_eq!(
        old.statuses(),
        [],
        "the replaced instance is not registered"
    );
    assert_eq!(registry.store().plugin_count(SLOW), 1);
    assert_eq!(new.calls(), 1);
    watcher.stop().await;
    drop(old);
    drop(new);
}
