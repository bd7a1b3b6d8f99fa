//! The client commands (`admit`, `release`, `status`) when the agent does not answer: a
//! socket that accepts and closes (as the agent does past `maxConnectionsPerSocket`), one
//! that reads the request and closes, no socket, a socket nobody listens on. Every time the
//! command fails (status 1) with a message that names the socket and says what happened;
//! only a closed stdout ends a command quietly with status 0.

use std::io::Read as _;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use corral_proto::corral::v1 as api;
use corral_proto::corral::v1::agent_client::AgentClient;

use crate::support::{self, RunningAgent, stderr, workspace};

/// Runs of each command against each misbehaving socket: the failure used to depend on
/// when the close met the client's writes (`release` exited 0, silently, 6 times in 60).
const RUNS: usize = 30;

/// How a test socket treats each connection.
#[derive(Clone, Copy)]
enum Peer {
    /// Accept and close at once.
    CloseAtOnce,
    /// Read what the client sent first, then close.
    ReadThenClose,
}

/// A socket at `root/corral/agent.sock` served by `peer` on a thread (which ends with the
/// test process; the socket goes with the temp dir).
fn serve(root: &Path, peer: Peer) {
    std::fs::create_dir_all(root.join("corral")).unwrap();
    let listener = UnixListener::bind(root.join("corral/agent.sock")).unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            if let Peer::ReadThenClose = peer {
                // The client speaks first (the HTTP/2 preface); a read returns once it has.
                let _ = stream.set_read_timeout(Some(support::WAIT));
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request);
            }
        }
    });
}

/// The client commands, with `args` after each.
fn client_commands<'a>(manifest: &'a str, args: &[&'a str]) -> Vec<Vec<&'a str>> {
    [
        vec!["status"],
        vec!["status", "-o", "json"],
        vec!["release", "some-uid"],
        vec!["admit", "-f", manifest],
    ]
    .into_iter()
    .map(|mut command| {
        command.extend_from_slice(args);
        command
    })
    .collect()
}

/// `corral ARGS…` run from the workspace (the examples' paths are relative to it).
fn corral(args: &[&str]) -> Output {
    support::corral()
        .current_dir(workspace())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run corral")
}

/// The command failed with status 1 and said `what` about `socket`, and printed nothing.
fn assert_fails_saying(output: &Output, args: &[&str], socket: &Path, what: &str) {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {err}");
    assert!(output.stdout.is_empty(), "{args:?} printed to stdout");
    let socket = socket.display().to_string();
    assert!(
        err.contains(&socket) && err.contains(what),
        "{args:?}: expected {what:?} about {socket} in: {err}"
    );
}

#[test]
fn a_socket_that_closes_before_answering_is_an_error_every_time() {
    for peer in [Peer::CloseAtOnce, Peer::ReadThenClose] {
        let dir = tempfile::tempdir().unwrap();
        serve(dir.path(), peer);
        let socket = dir.path().join("corral/agent.sock");
        let root = dir.path().to_str().unwrap();
        for args in client_commands("examples/pods/guaranteed.yaml", &["--root", root]) {
            for _ in 0..RUNS {
                assert_fails_saying(
                    &corral(&args),
                    &args,
                    &socket,
                    "closed the connection before answering",
                );
            }
        }
    }
}

#[test]
fn no_socket_and_a_socket_nobody_listens_on_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let socket = dir.path().join("corral/agent.sock");
    for args in client_commands("examples/pods/guaranteed.yaml", &["--root", root]) {
        assert_fails_saying(&corral(&args), &args, &socket, "no such socket");
    }
    // A socket file left by an agent that is gone.
    std::fs::create_dir_all(dir.path().join("corral")).unwrap();
    drop(UnixListener::bind(&socket).unwrap());
    for args in client_commands("examples/pods/guaranteed.yaml", &["--root", root]) {
        assert_fails_saying(
            &corral(&args),
            &args,
            &socket,
            "nothing listens on the socket",
        );
    }
}

/// `maxConnectionsPerSocket: 2` for `corral run`.
fn two_connections(dir: &Path) -> String {
    let path = dir.join("config.yaml");
    std::fs::write(&path, "maxConnectionsPerSocket: 2\n").unwrap();
    path.to_str().unwrap().to_owned()
}

/// A connection to the agent that it served (a call answered): it holds one of the agent's
/// connection slots until dropped. `None` when the agent closed it (no slot was free).
async fn held_connection(socket: &Path) -> Option<AgentClient<corral_proto::uds::Channel>> {
    let channel = corral_proto::uds::connect(socket, support::WAIT)
        .await
        .ok()?;
    let mut client = AgentClient::new(channel);
    client.list_pods(api::ListPodsRequest {}).await.ok()?;
    Some(client)
}

/// The real agent at its connection limit closes a new connection at once: the first call
/// after the cap is full says so (it said "the agent answered Unknown: transport error"),
/// every time; with a slot free again, calls are answered. A closed stdout still ends a
/// client command quietly.
#[test]
fn a_real_agent_at_its_connection_limit_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let config = two_connections(dir.path());
    let agent = RunningAgent::start(
        &root,
        &workspace().join(support::MACHINE),
        &["--config", &config],
        &dir.path().join("agent.log"),
    );
    let socket = root.join("corral/agent.sock");
    let root_arg = root.to_str().unwrap();

    // stdout closed before the command writes: status 0, nothing on stderr.
    for args in [vec!["status"], vec!["status", "-o", "yaml"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = support::corral()
            .args(&args)
            .args(["--root", root_arg])
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("run corral");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(stderr(&output), "", "{args:?}");
    }

    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Two connections the agent serves. A slot of a command that just exited may not be
    // free yet: a connection the agent closed is tried again.
    let mut held = Vec::new();
    let deadline = Instant::now() + support::WAIT;
    while held.len() < 2 {
        assert!(Instant::now() < deadline, "no free slot: {}", agent.log());
        match runtime.block_on(held_connection(&socket)) {
            Some(client) => held.push(client),
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let args = ["--config", config.as_str(), "--root", root_arg];
    for args in client_commands("examples/pods/guaranteed.yaml", &args) {
        for _ in 0..RUNS / 3 {
            assert_fails_saying(
                &corral(&args),
                &args,
                &socket,
                "closed the connection before answering",
            );
        }
    }
    // A slot free again: answered (once the agent saw the connection end).
    drop(held.pop());
    let deadline = Instant::now() + support::WAIT;
    loop {
        let output = corral(&["status", "--config", &config, "--root", root_arg]);
        if output.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no answer with a slot free: {}",
            stderr(&output)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(held);
    drop(runtime);
}

/// `admit` of several pods where the agent refuses one as invalid: the answers before it
/// are printed (the first pod is admitted and durable), then the refusal, and the exit is
/// non-zero; the admitted pod was never hidden behind the error.
#[test]
fn answers_before_a_failed_admission_are_printed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "maxContainersPerPod: 1\n").unwrap();
    let agent = RunningAgent::start(
        &root,
        &workspace().join(support::MACHINE),
        &["--config", config.to_str().unwrap()],
        &dir.path().join("agent.log"),
    );
    let pods = dir.path().join("pods.yaml");
    let container = |name: &str| {
        format!(
            "    - name: {name}\n      resources:\n        limits: {{cpu: \"1\", memory: 64Mi}}\n"
        )
    };
    std::fs::write(
        &pods,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: m1, namespace: default, uid: m1}}\nspec:\n  containers:\n{}---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {{name: m2, namespace: default, uid: m2}}\nspec:\n  containers:\n{}{}",
            container("a"),
            container("a"),
            container("b")
        ),
    )
    .unwrap();
    let output = agent.cli(&["admit", "-f", pods.to_str().unwrap()]);
    assert!(!output.status.success());
    let (out, err) = (support::stdout(&output), support::stderr(&output));
    assert!(out.contains("pod default/m1 admitted"), "{out}\n{err}");
    assert!(err.contains("default/m2"), "{err}");
    let status = agent.cli(&["status", "-o", "json"]);
    assert!(support::stdout(&status).contains("\"m1\""));
}
