//! The memory a hostile runtime can cost a plugin, measured: this test binary runs again as
//! the plugin (reconnecting at once whenever its trunk ends, where the agent backs off), and
//! the test, as the runtime, floods each of its trunks with maximal frames — 4 MiB requests
//! the plugin never answers, 4 MiB garbage on its client connection and on connections
//! nobody opened — and never reads. The plugin's peak resident set stays far under what
//! the frames would take if queued or held (the acceptance bound of issue #28: 256 MB), and
//! a well-behaved runtime is served afterwards. In process, the same flood loses the
//! runtime its trunk, with the plugin holding no more requests than its in-flight bound
//! allows, and none once the trunk has ended.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use corral_proto::nri::api::{self, Event, EventMask};
use corral_proto::nri::mux::{
    MAX_FRAME_PAYLOAD, MAX_QUEUED_BYTES, PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN,
};
use corral_proto::nri::plugin::{NriPlugin, PluginConfig, PluginStub};
use corral_proto::nri::runtime::{IgnoreUpdates, PluginConnection};
use corral_proto::nri::ttrpc::{
    MAX_IN_FLIGHT_BYTES, MESSAGE_LENGTH_MAX, REQUEST_OVERHEAD, Response,
};
use corral_proto::nri::{NriError, NriStatus};
use corral_proto::prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use super::wire::{frame, message, request};

/// Upper bound of every wait: what the test waits for happens far sooner.
const WAIT: Duration = Duration::from_secs(60);
/// The child plugin's socket (set only in the child).
const CHILD_SOCKET: &str = "CORRAL_NRI_MEMORY_CHILD_SOCKET";
/// Trunks the hostile runtime floods, one after the other.
const HOSTILE_TRUNKS: usize = 9;
/// 4 MiB requests per hostile trunk.
const REQUESTS_PER_TRUNK: u32 = 16;
/// The plugin's peak resident set must stay under this (issue #28's acceptance bound).
const RSS_BOUND: u64 = 256 << 20;

/// A plugin whose container creation never answers (an agent stuck on the kubelet): every
/// request it gets is held for as long as its connection lets it live.
#[derive(Default)]
struct Stuck {
    /// Creations being answered now, and the most there were at once.
    answering: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

/// One creation being answered, counted in [`Stuck::answering`] until dropped.
struct Answering(Arc<AtomicUsize>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tonic::async_trait]
impl NriPlugin for Stuck {
    async fn configure(&self, _: api::ConfigureRequest) -> Result<EventMask, NriStatus> {
        Ok(EventMask::of(&[Event::CreateContainer]))
    }

    async fn create_container(
        &self,
        request: api::CreateContainerRequest,
    ) -> Result<api::CreateContainerResponse, NriStatus> {
        let now = self.answering.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let _answering = Answering(Arc::clone(&self.answering));
        let _held = request;
        std::future::pending().await
    }
}

/// The child plugin the test starts by re-executing this binary with `CHILD_SOCKET` set: it
/// dials the socket, serves [`Stuck`], and dials again whenever its trunk ends, until its
/// stdin closes. In an ordinary run (no `CHILD_SOCKET`) it returns at once.
#[test]
fn memory_child() {
    let Ok(path) = std::env::var(CHILD_SOCKET) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        });
        tokio::pin!(stdin_closed);
        loop {
            let mut config = PluginConfig::new("memory", "10").unwrap();
            config.socket = path.clone().into();
            config.registration_timeout = WAIT;
            let session = async {
                let stub = PluginStub::connect(config).await?;
                stub.run(Stuck::default()).await?;
                Ok::<_, NriError>(())
            };
            tokio::select! {
                _ = &mut stdin_closed => return,
                ended = session => if let Err(NriError::Connect { .. }) = ended {
                    // The test's listener is gone: it is ending (it closes stdin next).
                    tokio::time::sleep(Duration::from_millis(100)).await;
                },
            }
        }
    });
}

/// The child plugin; killed (and reaped) on drop.
struct ChildPlugin(Child);

impl ChildPlugin {
    fn start(socket: &std::path::Path) -> ChildPlugin {
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "nri::memory::memory_child", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CHILD_SOCKET, socket)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        ChildPlugin(child)
    }

    /// A `/proc/<pid>/status` field in bytes (`VmHWM`: the peak resident set, `VmRSS`: now).
    fn status_bytes(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap();
        let line = status
            .lines()
            .find(|line| line.starts_with(&format!("{field}:")))
            .unwrap_or_else(|| panic!("no {field} in {status}"));
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib << 10
    }

    /// Closes its stdin and waits (at most [`WAIT`]) for it to exit.
    fn stop(mut self) {
        drop(self.0.stdin.take());
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if let Some(status) = self.0.try_wait().unwrap() {
                assert!(status.success(), "the child plugin failed: {status}");
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the child plugin did not exit within {WAIT:?}");
    }
}

impl Drop for ChildPlugin {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A `CreateContainer` request as large as ttrpc allows, without a timeout.
fn maximal_create_container() -> Vec<u8> {
    let container = api::Container {
        id: "hostile".into(),
        annotations: [("filler".to_owned(), "x".repeat(MESSAGE_LENGTH_MAX - 4096))].into(),
        ..Default::default()
    };
    let create = api::CreateContainerRequest {
        container: Some(container),
        ..Default::default()
    };
    let request = request(
        api::PLUGIN_SERVICE,
        "CreateContainer",
        create.encode_to_vec(),
    );
    assert!(request.len() <= MESSAGE_LENGTH_MAX, "{}", request.len());
    request
}

/// Requests small on the wire and huge decoded: a `Synchronize` of 2 million empty pods
/// (3 GB decoded; also followed by an unknown group or a byte that is no field), a `CreateContainer` of 2 million empty mounts, a split synchronization
/// whose parts (17,000 empty pods each, 50 MiB decoded) never end.
fn amplifying_requests() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pods = [0x0a, 0x00].repeat(2_000_000);
    pods.truncate(MESSAGE_LENGTH_MAX - 64);
    // Followed by what stops a scan of the bytes (an unknown group prost skips, a byte
    // that is no field): decoding allocates every pod before it gets there.
    for tail in [&[][..], &[0xa3, 0x06, 0xa4, 0x06], &[0x0f]] {
        let mut body = pods.clone();
        body.extend_from_slice(tail);
        out.push(request(api::PLUGIN_SERVICE, "Synchronize", body));
    }
    // CreateContainerRequest.container (2) { mounts (10): empty, … }
    let mut mounts = [0x52, 0x00].repeat(2_000_000);
    mounts.truncate(MESSAGE_LENGTH_MAX - 64);
    let container = api::Container::decode(mounts.as_slice()).map(|_| ()).ok();
    assert!(container.is_some(), "field 10 of Container is its mounts");
    let mut create = vec![0x12];
    prost::encoding::encode_varint(mounts.len() as u64, &mut create);
    create.extend_from_slice(&mounts);
    out.push(request(api::PLUGIN_SERVICE, "CreateContainer", create));
    for _ in 0..8 {
        let part = api::SynchronizeRequest {
            pods: vec![api::PodSandbox::default(); 17_000],
            containers: Vec::new(),
            more: true,
        };
        out.push(request(
            api::PLUGIN_SERVICE,
            "Synchronize",
            part.encode_to_vec(),
        ));
    }
    out
}

/// Floods `trunk` and never reads it: maximal requests on the plugin's service, requests
/// that would decode to gigabytes, maximal garbage answers on its client connection and on
/// connections nobody opened. Ends when all is written or the plugin closes the trunk.
async fn flood(mut trunk: UnixStream, request: Arc<Vec<u8>>) {
    let mut frames = Vec::new();
    for (i, amplifying) in amplifying_requests().iter().enumerate() {
        let stream = 100_001 + 2 * i as u32;
        for piece in message(stream, 1, amplifying).chunks(MAX_FRAME_PAYLOAD) {
            frames.push(frame(PLUGIN_SERVICE_CONN, piece));
        }
    }
    for i in 0..REQUESTS_PER_TRUNK {
        frames.push(frame(PLUGIN_SERVICE_CONN, &message(2 * i + 1, 1, &request)));
        if i % 4 == 0 {
            let garbage = vec![0xa5; MESSAGE_LENGTH_MAX];
            frames.push(frame(RUNTIME_SERVICE_CONN, &message(1000 + i, 2, &garbage)));
            frames.push(frame(3 + i, &vec![0x5a; MAX_FRAME_PAYLOAD]));
        }
        for frame in frames.drain(..) {
            if trunk.write_all(&frame).await.is_err() {
                return;
            }
        }
    }
}

/// Reads one whole message the plugin wrote on `conn` (in frames of any size): its stream.
async fn read_message_on(trunk: &mut UnixStream, conn: u32) -> u32 {
    let mut bytes = Vec::new();
    while bytes.len() < 10
        || bytes.len() < 10 + u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize
    {
        let mut header = [0u8; 8];
        tokio::time::timeout(WAIT, trunk.read_exact(&mut header))
            .await
            .expect("the plugin writes")
            .unwrap();
        assert_eq!(u32::from_be_bytes(header[..4].try_into().unwrap()), conn);
        let len = u32::from_be_bytes(header[4..].try_into().unwrap()) as usize;
        let mut payload = vec![0u8; len];
        trunk.read_exact(&mut payload).await.unwrap();
        bytes.extend(payload);
    }
    u32::from_be_bytes(bytes[4..8].try_into().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_flooding_a_stuck_plugin_loses_the_trunk_and_the_requests_end_with_it() {
    let (plugin_end, mut trunk) = UnixStream::pair().unwrap();
    let mut config = PluginConfig::new("memory", "10").unwrap();
    config.registration_timeout = WAIT;
    let stuck = Stuck::default();
    let (answering, most) = (Arc::clone(&stuck.answering), Arc::clone(&stuck.most));
    let plugin = tokio::spawn(PluginStub::over(plugin_end, config).unwrap().run(stuck));
    let stream = read_message_on(&mut trunk, RUNTIME_SERVICE_CONN).await;
    let registered = Response::default().encode_to_vec();
    trunk
        .write_all(&frame(
            RUNTIME_SERVICE_CONN,
            &message(stream, 2, &registered),
        ))
        .await
        .unwrap();
    let flooding = tokio::spawn(flood(trunk, Arc::new(maximal_create_container())));
    let ended = tokio::time::timeout(WAIT, plugin)
        .await
        .expect("the flooded trunk ends")
        .unwrap();
    match ended {
        Err(NriError::QueueFull { limit }) => assert_eq!(limit, MAX_QUEUED_BYTES),
        other => panic!("expected QueueFull, got {other:?}"),
    }
    // No more requests were held at once than the in-flight bound admits, and none is held
    // once the trunk has ended.
    let request_cost = maximal_create_container().len() + REQUEST_OVERHEAD;
    let most = most.load(Ordering::SeqCst);
    assert!(
        most <= MAX_IN_FLIGHT_BYTES / request_cost,
        "{most} requests held at once"
    );
    let deadline = Instant::now() + WAIT;
    while answering.load(Ordering::SeqCst) > 0 {
        assert!(Instant::now() < deadline, "requests outlive their trunk");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    flooding.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_runtime_costs_the_plugin_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let child = ChildPlugin::start(&socket);
    let request = Arc::new(maximal_create_container());
    let mut flooding: Option<tokio::task::JoinHandle<()>> = None;
    let mut peaks = Vec::new();
    for _ in 0..HOSTILE_TRUNKS {
        let (trunk, _) = tokio::time::timeout(WAIT, listener.accept())
            .await
            .expect("the plugin dials again")
            .unwrap();
        // The plugin dialed again: the previous trunk has ended on its side.
        if let Some(previous) = flooding.take() {
            previous.abort();
        }
        peaks.push(child.status_bytes("VmHWM") >> 20);
        flooding = Some(tokio::spawn(flood(trunk, Arc::clone(&request))));
    }
    // A well-behaved runtime is served after the flood.
    let (trunk, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .expect("the plugin dials again")
        .unwrap();
    if let Some(previous) = flooding.take() {
        previous.abort();
    }
    let mut runtime = PluginConnection::accept(trunk, Arc::new(IgnoreUpdates), WAIT).unwrap();
    let registered = runtime.registration(WAIT).await.unwrap();
    assert_eq!(registered.plugin_name, "memory");
    let configured: api::ConfigureResponse = runtime
        .call("Configure", &api::ConfigureRequest::default())
        .await
        .unwrap();
    assert_eq!(
        configured.events,
        EventMask::of(&[Event::CreateContainer]).bits()
    );
    let peak = child.status_bytes("VmHWM");
    let idle = child.status_bytes("VmRSS");
    eprintln!(
        "plugin memory: peak after each hostile trunk {peaks:?} MiB, peak {} MiB, \
         with a well-behaved runtime {} MiB",
        peak >> 20,
        idle >> 20
    );
    assert!(
        peak < RSS_BOUND,
        "the plugin's peak resident set is {} MiB",
        peak >> 20
    );
    runtime.close();
    drop(listener);
    child.stop();
}
