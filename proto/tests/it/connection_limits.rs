//! Connection limits of `corral_proto::uds::serve`, over real sockets: half-open
//! connections (connect, send nothing) are closed after the handshake timeout, connections
//! beyond the cap are closed at once, running out of file descriptors (EMFILE) is named in
//! the log and backed off from, and through all of it a new client's RPC succeeds.
//!
//! The servers that must run out of file descriptors run in a child process (this test
//! binary, re-executed through `sh -c 'ulimit -n N; exec …'`) so the limit is theirs alone.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use corral_proto::deviceplugin::v1beta1::{
    DevicePluginOptions, RegisterRequest, VERSION, registration_client::RegistrationClient,
    registration_server::RegistrationServer,
};
use corral_proto::uds::{self, ServeOptions, SocketOptions, UdsListener};
use tonic::transport::Server;

use crate::support::RecordingRegistration;

/// Environment of the child server: the socket path, then its serving limits.
const CHILD_SOCKET: &str = "CORRAL_UDS_LIMITS_CHILD_SOCKET";
const CHILD_HANDSHAKE_MS: &str = "CORRAL_UDS_LIMITS_CHILD_HANDSHAKE_MS";
const CHILD_MAX_CONNECTIONS: &str = "CORRAL_UDS_LIMITS_CHILD_MAX_CONNECTIONS";

/// A `tracing` subscriber that hands every event at `WARN` or above, formatted as
/// `LEVEL message field=value …`, to a callback.
struct LineSubscriber<F>(F);

impl<F: Fn(String) + Send + Sync + 'static> tracing::Subscriber for LineSubscriber<F> {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Line(String);
        impl tracing::field::Visit for Line {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0.push_str(&format!(" {value:?}"));
                } else {
                    self.0.push_str(&format!(" {}={value:?}", field.name()));
                }
            }
        }
        let mut line = Line(event.metadata().level().to_string());
        event.record(&mut line);
        (self.0)(line.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Run `test` on a current-thread runtime with every warning it logs collected.
fn with_logs<T>(test: impl std::future::Future<Output = T>) -> (T, Vec<String>) {
    let logs = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&logs);
    let subscriber = LineSubscriber(move |line| sink.lock().unwrap().push(line));
    let result = tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(test)
    });
    let logs = logs.lock().unwrap().clone();
    (result, logs)
}

fn request() -> RegisterRequest {
    RegisterRequest {
        version: VERSION.into(),
        endpoint: "plugin.sock".into(),
        resource_name: "example.com/gpu".into(),
        options: Some(DevicePluginOptions::default()),
    }
}

/// The child server process the tests below start by re-executing this binary with
/// `CHILD_SOCKET` set; in an ordinary run (no `CHILD_SOCKET`) it returns at once.
#[test]
fn child_server() {
    let Ok(path) = std::env::var(CHILD_SOCKET) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env_number = |key: &str| std::env::var(key).ok().map(|v| v.parse::<u64>().unwrap());
    let mut options = ServeOptions {
        grace: Duration::from_secs(1),
        ..ServeOptions::default()
    };
    if let Some(ms) = env_number(CHILD_HANDSHAKE_MS) {
        options.handshake_timeout = Some(Duration::from_millis(ms));
    }
    if let Some(max) = env_number(CHILD_MAX_CONNECTIONS) {
        options.max_connections = usize::try_from(max).unwrap();
    }
    tracing::subscriber::set_global_default(LineSubscriber(|line| eprintln!("{line}"))).unwrap();
    runtime.block_on(async move {
        let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
        let router = Server::builder()
            .add_service(RegistrationServer::new(RecordingRegistration::default()));
        println!("READY");
        // Serve until the parent closes our stdin (or kills us).
        let stdin_closed = async {
            let _ = tokio::task::spawn_blocking(|| {
                let mut sink = Vec::new();
                let _ = std::io::stdin().read_to_end(&mut sink);
            })
            .await;
        };
        uds::serve_with(router, listener, stdin_closed, options)
            .await
            .unwrap();
    });
}

/// The child server; killed (and reaped) on drop.
struct ChildServer {
    child: Child,
    stderr: mpsc::Receiver<String>,
}

impl ChildServer {
    /// Start the child serving `path` with at most `nofile` open files.
    fn start(path: &Path, nofile: u32, env: &[(&str, String)]) -> ChildServer {
        let exe = std::env::current_exe().unwrap();
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
            .arg(exe)
            .args(["connection_limits::child_server", "--exact", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CHILD_SOCKET, path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("READY") {
                    let _ = ready_tx.send(());
                }
            }
        });
        let (err_tx, err_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = err_tx.send(line);
            }
        });
        let server = ChildServer {
            child,
            stderr: err_rx,
        };
        ready_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the child server starts");
        server
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Open file descriptors of the child.
    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(Iterator::count)
            .unwrap_or(0)
    }

    /// User plus system CPU time of the child so far.
    fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        // Fields after the command name (which ends with ')'): utime is the 12th, stime 13th.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // USER_HZ is 100 on Linux.
        Duration::from_millis(ticks * 10)
    }

    /// Everything the child wrote to stderr so far.
    fn stderr_lines(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Open `count` connections that never send a byte, with blocking connects on a thread,
/// at most `within`.
fn half_open(path: &Path, count: usize, within: Duration) -> Vec<StdUnixStream> {
    let (tx, rx) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut streams = Vec::with_capacity(count);
        for _ in 0..count {
            match StdUnixStream::connect(&path) {
                Ok(stream) => streams.push(stream),
                Err(err) => {
                    let _ = tx.send(Err(err.to_string()));
                    return;
                }
            }
        }
        let _ = tx.send(Ok(streams));
    });
    rx.recv_timeout(within)
        .expect("the half-open connections are accepted in time")
        .expect("connect")
}

/// A new client's Register succeeds within `within`, retrying refused attempts. Returns how
/// long it took.
async fn rpc_succeeds_within(path: &Path, within: Duration) -> Duration {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < within {
        let attempt = async {
            let channel = uds::connect(path, Duration::from_secs(1))
                .await
                .map_err(|e| e.to_string())?;
            RegistrationClient::new(channel)
                .register(request())
                .await
                .map_err(|e| e.to_string())
        };
        match tokio::time::timeout(Duration::from_secs(2), attempt).await {
            Ok(Ok(_)) => return started.elapsed(),
            Ok(Err(err)) => last = err,
            Err(_) => last = "no answer within 2s".to_owned(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no successful RPC within {within:?}; last attempt: {last}");
}

/// Whether the peer closed `stream` (EOF) within `within`.
fn closed_within(stream: &mut StdUnixStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            // The server's SETTINGS frame: keep reading.
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
}

fn socket_in(dir: &Path) -> PathBuf {
    dir.join("limits.sock")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_do_not_stop_a_new_client() {
    // 1,100 connections that send nothing, to a server allowed 256 open files (less than a
    // kubelet's default 1024, so the test needs fewer): without limits the server runs out
    // of file descriptors and a new client hangs forever.
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(dir.path());
    let server = ChildServer::start(
        &path,
        256,
        &[
            (CHILD_HANDSHAKE_MS, "1000".to_owned()),
            (CHILD_MAX_CONNECTIONS, "64".to_owned()),
        ],
    );
    let mut idle = half_open(&path, 1_100, Duration::from_secs(30));
    let took = rpc_succeeds_within(&path, Duration::from_secs(20)).await;
    eprintln!("a new client's RPC succeeded after {took:?}");
    let fds = server.open_fds();
    assert!(fds < 200, "the server holds {fds} file descriptors");
    // Every half-open connection is closed by the server: at once beyond the cap, at the
    // handshake timeout otherwise.
    let deadline = Instant::now() + Duration::from_secs(20);
    for stream in &mut idle {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            closed_within(stream, left.max(Duration::from_millis(1))),
            "a half-open connection is still open"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_is_named_backed_off_from_and_recovered() {
    // No cap, and only 48 open files: accepting fails with EMFILE until handshake timeouts
    // close the half-open connections.
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(dir.path());
    let server = ChildServer::start(
        &path,
        48,
        &[
            (CHILD_HANDSHAKE_MS, "1000".to_owned()),
            (CHILD_MAX_CONNECTIONS, usize::MAX.to_string()),
        ],
    );
    let cpu_before = server.cpu_time();
    let started = Instant::now();
    let _idle = half_open(&path, 120, Duration::from_secs(30));
    // Hold them while the server is out of file descriptors.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let wall = started.elapsed();
    let cpu = server.cpu_time().saturating_sub(cpu_before);
    assert!(
        cpu < wall / 4,
        "the server used {cpu:?} of CPU in {wall:?} while out of file descriptors: a busy loop"
    );
    let took = rpc_succeeds_within(&path, Duration::from_secs(30)).await;
    eprintln!("a new client's RPC succeeded after {took:?}");
    let logs = server.stderr_lines();
    let emfile: Vec<&String> = logs.iter().filter(|l| l.contains("EMFILE")).collect();
    assert!(!emfile.is_empty(), "EMFILE is named in the log: {logs:#?}");
    assert!(emfile[0].starts_with("ERROR"), "{}", emfile[0]);
    let seconds = started.elapsed().as_secs() as usize;
    assert!(
        emfile.len() <= seconds / 10 + 1,
        "{} EMFILE lines in {seconds} s: {emfile:#?}",
        emfile.len()
    );
}

#[test]
fn handshake_timeout_closes_silent_partial_and_trickling_clients_only() {
    let ((), logs) = with_logs(async {
        let dir = tempfile::tempdir().unwrap();
        let path = socket_in(dir.path());
        let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
        let router = Server::builder()
            .add_service(RegistrationServer::new(RecordingRegistration::default()));
        let timeout = Duration::from_millis(300);
        let options = ServeOptions {
            handshake_timeout: Some(timeout),
            ..ServeOptions::default()
        };
        let token = tokio_util::sync::CancellationToken::new();
        let server = tokio::spawn(uds::serve_with(
            router,
            listener,
            token.clone().cancelled_owned(),
            options,
        ));
        // A client that completed its handshake keeps its connection beyond the timeout.
        let channel = uds::connect(&path, Duration::from_secs(5)).await.unwrap();
        let mut client = RegistrationClient::new(channel);
        client.register(request()).await.unwrap();

        let path_ = path.clone();
        let verdicts = tokio::task::spawn_blocking(move || {
            let mut silent = StdUnixStream::connect(&path_).unwrap();
            let mut partial = StdUnixStream::connect(&path_).unwrap();
            std::io::Write::write_all(&mut partial, b"PRI * HTTP/2.0\r\n").unwrap();
            // The preface and a frame header promising a payload that never comes.
            let mut trickle = StdUnixStream::connect(&path_).unwrap();
            std::io::Write::write_all(&mut trickle, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
            std::io::Write::write_all(&mut trickle, &[0, 0, 6, 4, 0, 0, 0, 0, 0]).unwrap();
            let started = Instant::now();
            let closed = [&mut silent, &mut partial, &mut trickle]
                .into_iter()
                .map(|s| closed_within(s, Duration::from_secs(5)))
                .collect::<Vec<_>>();
            (closed, started.elapsed())
        })
        .await
        .unwrap();
        let (closed, took) = verdicts;
        assert_eq!(closed, [true, true, true]);
        assert!(
            took >= timeout / 2,
            "closed after {took:?}, before the deadline"
        );
        assert!(took < Duration::from_secs(3), "closed only after {took:?}");
        tokio::time::sleep(timeout * 3).await;
        client.register(request()).await.unwrap();
        token.cancel();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
    let timeouts: Vec<&String> = logs.iter().filter(|l| l.contains("preface")).collect();
    assert_eq!(timeouts.len(), 1, "logged once per interval: {logs:#?}");
    assert!(timeouts[0].contains("suppressed=0"), "{}", timeouts[0]);
}

#[test]
fn connections_beyond_the_cap_are_closed_at_once_and_logged_at_a_bounded_rate() {
    let ((), logs) = with_logs(async {
        let dir = tempfile::tempdir().unwrap();
        let path = socket_in(dir.path());
        let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
        let router = Server::builder()
            .add_service(RegistrationServer::new(RecordingRegistration::default()));
        let options = ServeOptions {
            handshake_timeout: Some(Duration::from_secs(60)),
            max_connections: 4,
            ..ServeOptions::default()
        };
        let token = tokio_util::sync::CancellationToken::new();
        let server = tokio::spawn(uds::serve_with(
            router,
            listener,
            token.clone().cancelled_owned(),
            options,
        ));
        let path_ = path.clone();
        let mut held = tokio::task::spawn_blocking(move || {
            let mut held = half_open(&path_, 4, Duration::from_secs(10));
            // Give the server time to take them, then every further one is closed at once.
            std::thread::sleep(Duration::from_millis(200));
            let started = Instant::now();
            for _ in 0..50 {
                let mut extra = StdUnixStream::connect(&path_).unwrap();
                assert!(closed_within(&mut extra, Duration::from_secs(5)));
            }
            assert!(started.elapsed() < Duration::from_secs(5));
            for stream in &mut held {
                assert!(
                    !closed_within(stream, Duration::from_millis(10)),
                    "within the cap"
                );
            }
            held
        })
        .await
        .unwrap();
        // Freed places are given back when the connections end.
        held.truncate(2);
        let took = rpc_succeeds_within(&path, Duration::from_secs(10)).await;
        assert!(took < Duration::from_secs(5), "{took:?}");
        drop(held);
        token.cancel();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
    let refused: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("too many connections"))
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "50 refusals, one line per 10 s: {logs:#?}"
    );
    assert!(refused[0].contains("max_connections=4"), "{}", refused[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_applies_the_default_cap() {
    assert_eq!(
        ServeOptions::default(),
        ServeOptions {
            grace: uds::DEFAULT_SHUTDOWN_GRACE,
            handshake_timeout: Some(uds::DEFAULT_HANDSHAKE_TIMEOUT),
            max_connections: uds::DEFAULT_MAX_CONNECTIONS,
        }
    );
    let dir = tempfile::tempdir().unwrap();
    let path = socket_in(dir.path());
    let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
    let router =
        Server::builder().add_service(RegistrationServer::new(RecordingRegistration::default()));
    let token = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(uds::serve(
        router,
        listener,
        token.clone().cancelled_owned(),
        Duration::from_secs(1),
    ));
    let path_ = path.clone();
    tokio::task::spawn_blocking(move || {
        let held = half_open(
            &path_,
            uds::DEFAULT_MAX_CONNECTIONS,
            Duration::from_secs(10),
        );
        std::thread::sleep(Duration::from_millis(300));
        let mut extra = StdUnixStream::connect(&path_).unwrap();
        assert!(
            closed_within(&mut extra, Duration::from_secs(5)),
            "connection {} is closed at once",
            uds::DEFAULT_MAX_CONNECTIONS + 1
        );
        drop(held);
    })
    .await
    .unwrap();
    rpc_succeeds_within(&path, Duration::from_secs(10)).await;
    token.cancel();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
