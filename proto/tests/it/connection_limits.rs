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

/// Upper bound of every wait for something that must happen (a child server starting,
/// connections accepted or closed, an RPC succeeding): it happens far sooner, also on a busy
/// machine; this only ends a test that would otherwise hang.
const WAIT: Duration = Duration::from_secs(60);

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
            .recv_timeout(WAIT)
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

    /// Everything the child wrote to stderr so far, once it holds a line with `text`
    /// (the lines reach us through a reader thread: waited for, at most [`WAIT`]).
    fn stderr_lines_once(&self, text: &str) -> Vec<String> {
        let deadline = Instant::now() + WAIT;
        let mut lines = Vec::new();
        while !lines.iter().any(|l: &String| l.contains(text)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(_) => panic!("no {text:?} from the child server: {lines:#?}"),
            }
        }
        lines.extend(self.stderr.try_iter());
        lines
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Open `count` connections that never send a byte, with blocking connects on a thread,
/// waiting at most `within` for them all.
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

/// A new client's Register succeeds (within [`WAIT`]), retrying refused attempts. Returns
/// how long it took.
async fn rpc_succeeds(path: &Path) -> Duration {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < WAIT {
        let attempt = async {
            let channel = uds::connect(path, Duration::from_secs(10))
                .await
                .map_err(|e| e.to_string())?;
            RegistrationClient::new(channel)
                .register(request())
                .await
                .map_err(|e| e.to_string())
        };
        match tokio::time::timeout(Duration::from_secs(30), attempt).await {
            Ok(Ok(_)) => return started.elapsed(),
            Ok(Err(err)) => last = err,
            Err(_) => last = "no answer within 30s".to_owned(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no successful RPC within {WAIT:?}; last attempt: {last}");
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

/// Whether `stream` is still open: nothing of its peer's closing is waiting to be read. Only
/// meaningful once whatever would have closed it has demonstrably happened.
fn still_open(stream: &mut StdUnixStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    let open = loop {
        match stream.read(&mut buf) {
            Ok(0) => break false,
            // The server's SETTINGS frame: keep reading.
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break true,
            Err(_) => break false,
        }
    };
    stream.set_nonblocking(false).unwrap();
    open
}

/// Open `count` connections that complete the HTTP/2 handshake (the client preface and an
/// empty SETTINGS frame) and then stay silent: each holds a place under the cap, with no
/// handshake deadline to close it.
fn handshaken(path: &Path, count: usize) -> Vec<StdUnixStream> {
    (0..count)
        .map(|_| {
            let mut stream = StdUnixStream::connect(path).unwrap();
            std::io::Write::write_all(&mut stream, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
            std::io::Write::write_all(&mut stream, &[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap();
            stream
        })
        .collect()
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
    let mut idle = half_open(&path, 1_100, WAIT);
    let took = rpc_succeeds(&path).await;
    eprintln!("a new client's RPC succeeded after {took:?}");
    let fds = server.open_fds();
    assert!(fds < 200, "the server holds {fds} file descriptors");
    // Every half-open connection is closed by the server: at once beyond the cap, at the
    // handshake timeout otherwise.
    let deadline = Instant::now() + WAIT;
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
    let _idle = half_open(&path, 120, WAIT);
    // Hold them while the server is out of file descriptors. What the server does
    // meanwhile is measured, not awaited: its CPU time over the wall time, which a busy
    // machine only makes smaller for a server that waits (and larger for one that spins).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let wall = started.elapsed();
    let cpu = server.cpu_time().saturating_sub(cpu_before);
    assert!(
        cpu < wall / 4,
        "the server used {cpu:?} of CPU in {wall:?} while out of file descriptors: a busy loop"
    );
    let took = rpc_succeeds(&path).await;
    eprintln!("a new client's RPC succeeded after {took:?}");
    let logs = server.stderr_lines_once("EMFILE");
    let emfile: Vec<&String> = logs.iter().filter(|l| l.contains("EMFILE")).collect();
    assert!(emfile[0].starts_with("ERROR"), "{}", emfile[0]);
    // Lines logged since the start, at most one per 10 s (however long the test took).
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
        // Long enough that the client below, which sends its preface at once, completes its
        // handshake before it passes even on a busy machine (a deadline for what must
        // happen, so a generous one); the silent ones wait it out.
        let timeout = Duration::from_secs(10);
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
        let channel = uds::connect(&path, WAIT).await.unwrap();
        let mut client = RegistrationClient::new(channel);
        client.register(request()).await.unwrap();

        let path_ = path.clone();
        let verdicts = tokio::task::spawn_blocking(move || {
            // Before the first connect: each deadline runs from its accept, later still.
            let started = Instant::now();
            let mut silent = StdUnixStream::connect(&path_).unwrap();
            let mut partial = StdUnixStream::connect(&path_).unwrap();
            std::io::Write::write_all(&mut partial, b"PRI * HTTP/2.0\r\n").unwrap();
            // The preface and a frame header promising a payload that never comes.
            let mut trickle = StdUnixStream::connect(&path_).unwrap();
            std::io::Write::write_all(&mut trickle, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
            std::io::Write::write_all(&mut trickle, &[0, 0, 6, 4, 0, 0, 0, 0, 0]).unwrap();
            let closed = [&mut silent, &mut partial, &mut trickle]
                .into_iter()
                .map(|s| closed_within(s, WAIT))
                .collect::<Vec<_>>();
            (closed, started.elapsed())
        })
        .await
        .unwrap();
        let (closed, took) = verdicts;
        assert_eq!(closed, [true, true, true]);
        // Not before the deadline (the log line below shows it was the deadline that closed
        // them).
        assert!(
            took >= timeout,
            "closed after {took:?}, before the deadline"
        );
        // The client's connection was accepted before those three: its deadline passed too,
        // and it keeps its connection.
        client.register(request()).await.unwrap();
        token.cancel();
        tokio::time::timeout(WAIT, server)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
    let timeouts: Vec<&String> = logs.iter().filter(|l| l.contains("preface")).collect();
    assert_eq!(timeouts.len(), 1, "logged once per interval: {logs:#?}");
    assert!(timeouts[0].contains("suppressed=0"), "{}", timeouts[0]);
    assert!(timeouts[0].contains("timeout=10s"), "{}", timeouts[0]);
}

#[test]
fn connections_beyond_the_cap_are_closed_at_once_and_logged_at_a_bounded_rate() {
    let started = Instant::now();
    let ((), logs) = with_logs(async {
        let dir = tempfile::tempdir().unwrap();
        let path = socket_in(dir.path());
        let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
        let router = Server::builder()
            .add_service(RegistrationServer::new(RecordingRegistration::default()));
        // No handshake deadline: only the cap closes a connection, and closes it at once,
        // since nothing else ever would.
        let options = ServeOptions {
            handshake_timeout: None,
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
            // Accepted in the order they connect: these four take every place, then every
            // further one is closed.
            let mut held = half_open(&path_, 4, WAIT);
            for _ in 0..50 {
                let mut extra = StdUnixStream::connect(&path_).unwrap();
                assert!(closed_within(&mut extra, WAIT));
            }
            // Accepted before the 50 that were closed: had the cap closed one of these, its
            // end would be waiting to be read by now.
            for stream in &mut held {
                assert!(still_open(stream), "within the cap");
            }
            held
        })
        .await
        .unwrap();
        // Freed places are given back when the connections end.
        held.truncate(2);
        rpc_succeeds(&path).await;
        drop(held);
        token.cancel();
        tokio::time::timeout(WAIT, server)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
    // 50 refusals (and any of the new client's attempts the cap refused), one line per 10 s.
    assert_refusals_logged(&logs, started, 4);
}

/// The cap's refusals were logged, naming the cap, at most one line per 10 s since `started`.
fn assert_refusals_logged(logs: &[String], started: Instant, max_connections: usize) {
    let refused: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("too many connections"))
        .collect();
    let most = started.elapsed().as_secs() as usize / 10 + 1;
    assert!(
        !refused.is_empty() && refused.len() <= most,
        "refusals, one line per 10 s: {logs:#?}"
    );
    let cap = format!("max_connections={max_connections}");
    assert!(refused[0].contains(&cap), "{}", refused[0]);
}

#[test]
fn serve_applies_the_default_cap() {
    assert_eq!(
        ServeOptions::default(),
        ServeOptions {
            grace: uds::DEFAULT_SHUTDOWN_GRACE,
            handshake_timeout: Some(uds::DEFAULT_HANDSHAKE_TIMEOUT),
            max_connections: uds::DEFAULT_MAX_CONNECTIONS,
        }
    );
    let started = Instant::now();
    let ((), logs) = with_logs(async {
        let dir = tempfile::tempdir().unwrap();
        let path = socket_in(dir.path());
        let listener = UdsListener::bind(&path, &SocketOptions::default()).unwrap();
        let router = Server::builder()
            .add_service(RegistrationServer::new(RecordingRegistration::default()));
        let token = tokio_util::sync::CancellationToken::new();
        let server = tokio::spawn(uds::serve(
            router,
            listener,
            token.clone().cancelled_owned(),
            Duration::from_secs(1),
        ));
        let path_ = path.clone();
        tokio::task::spawn_blocking(move || {
            // Connections that completed their handshake: no deadline closes them, so they
            // hold every place until dropped.
            let held = handshaken(&path_, uds::DEFAULT_MAX_CONNECTIONS);
            let mut extra = StdUnixStream::connect(&path_).unwrap();
            assert!(
                closed_within(&mut extra, WAIT),
                "connection {} is closed",
                uds::DEFAULT_MAX_CONNECTIONS + 1
            );
            drop(held);
        })
        .await
        .unwrap();
        rpc_succeeds(&path).await;
        token.cancel();
        tokio::time::timeout(WAIT, server)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
    // Closed by the cap (at once, and said so), not by its handshake deadline; one line per
    // 10 s (the new client's attempts may have been refused too).
    assert_refusals_logged(&logs, started, uds::DEFAULT_MAX_CONNECTIONS);
}
