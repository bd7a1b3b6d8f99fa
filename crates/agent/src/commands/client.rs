//! Talking to the agent: dial its socket under the root, a deadline on every call, errors
//! that name the socket; and `release`. `admit` and `status` print their answers in
//! `admit.rs` and `status.rs`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use corral_proto::corral::v1 as api;
use corral_proto::corral::v1::agent_client::AgentClient;
use corral_proto::uds::{Channel, UdsError};

use crate::cli::{AgentTarget, ConfigArgs};
use crate::config::{self, GoDuration};
use crate::output::outln;

const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a client command has no answer from the agent, or what the agent answered instead of
/// one. Each names the socket and says what happened; the underlying error is the source.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// No socket file at the path.
    #[error(
        "cannot reach the agent at {}: no such socket (is `corral run` running with the same --root?)",
        socket.display()
    )]
    NoSocket {
        /// The agent socket.
        socket: PathBuf,
        /// The dial's error.
        #[source]
        source: BoxError,
    },
    /// The socket file is there, nobody listens on it.
    #[error(
        "cannot reach the agent at {}: nothing listens on the socket (is `corral run` running with the same --root?)",
        socket.display()
    )]
    NotListening {
        /// The agent socket.
        socket: PathBuf,
        /// The dial's error.
        #[source]
        source: BoxError,
    },
    /// Any other dial failure (e.g. permission denied).
    #[error("cannot reach the agent at {}", socket.display())]
    Unreachable {
        /// The agent socket.
        socket: PathBuf,
        /// The dial's error.
        #[source]
        source: BoxError,
    },
    /// No connection within the dial timeout.
    #[error("cannot reach the agent at {}: no connection within {timeout}", socket.display())]
    DialTimeout {
        /// The agent socket.
        socket: PathBuf,
        /// The dial timeout.
        timeout: GoDuration,
    },
    /// The agent accepted the connection and closed it before answering: it is at its
    /// connection limit (`maxConnectionsPerSocket`), or stopping.
    #[error(
        "the agent at {} closed the connection before answering (it may be at its connection limit, or stopping)",
        socket.display()
    )]
    ClosedBeforeAnswer {
        /// The agent socket.
        socket: PathBuf,
        /// The connection's error.
        #[source]
        source: BoxError,
    },
    /// The connection failed otherwise before an answer came.
    #[error("the connection to the agent at {} failed before it answered", socket.display())]
    ConnectionFailed {
        /// The agent socket.
        socket: PathBuf,
        /// The connection's error.
        #[source]
        source: BoxError,
    },
    /// No answer within `--request-timeout`.
    #[error(
        "the agent at {} did not answer within {timeout} (--request-timeout)",
        socket.display()
    )]
    Late {
        /// The agent socket.
        socket: PathBuf,
        /// The deadline.
        timeout: GoDuration,
    },
    /// The agent answered with an error status.
    #[error("the agent answered {code:?}: {message}")]
    Answered {
        /// The status code.
        code: tonic::Code,
        /// The agent's message.
        message: String,
    },
}

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A call that failed on this side: tonic made the status from a transport error, which is
/// its source; the status's message restates that error, so only its code is shown.
#[derive(Debug)]
struct TransportFailure(tonic::Status);

impl std::fmt::Display for TransportFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gRPC status {:?}", self.0.code())
    }
}

impl std::error::Error for TransportFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

/// How a connection ended, by the first I/O error in `err`'s chain.
fn io_kind(err: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    std::iter::successors(Some(err), |e| e.source())
        .find_map(|e| e.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind)
}

/// The peer closed the connection (before an answer, where it is seen).
fn closed(kind: Option<std::io::ErrorKind>) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        kind,
        Some(BrokenPipe | ConnectionReset | ConnectionAborted | UnexpectedEof | NotConnected)
    )
}

/// What dialing `socket` failing with `err` means.
fn dial_error(socket: &Path, err: UdsError) -> ClientError {
    let socket = socket.to_path_buf();
    let source: BoxError = match err {
        UdsError::ConnectTimeout { timeout, .. } => {
            return ClientError::DialTimeout {
                socket,
                timeout: GoDuration(timeout),
            };
        }
        // The path is the socket's: the transport error says the rest.
        UdsError::Connect { source, .. } => Box::new(source),
        other => Box::new(other),
    };
    match io_kind(source.as_ref()) {
        Some(std::io::ErrorKind::NotFound) => ClientError::NoSocket { socket, source },
        Some(std::io::ErrorKind::ConnectionRefused) => ClientError::NotListening { socket, source },
        kind if closed(kind) => ClientError::ClosedBeforeAnswer { socket, source },
        _ => ClientError::Unreachable { socket, source },
    }
}

/// What a call's error status means: an answer of the agent, or (a status tonic made from
/// a transport error, which it keeps as the source) no answer at all.
fn call_error(socket: &Path, status: tonic::Status) -> ClientError {
    let socket = socket.to_path_buf();
    let Some(cause) = std::error::Error::source(&status) else {
        return ClientError::Answered {
            code: status.code(),
            message: status.message().to_owned(),
        };
    };
    // CANCELLED from the transport (before the deadline, which `answer` handles): hyper
    // gave up the request because the connection closed before it was answered.
    let closed_early = closed(io_kind(cause)) || status.code() == tonic::Code::Cancelled;
    let source: BoxError = Box::new(TransportFailure(status));
    if closed_early {
        ClientError::ClosedBeforeAnswer { socket, source }
    } else {
        ClientError::ConnectionFailed { socket, source }
    }
}

/// `message` as a request that tells the agent the deadline (`grpc-timeout`).
pub(super) fn request<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

/// Wait for one call to the agent at `socket`, at most `timeout` (`--request-timeout`).
pub(super) async fn answer<T>(
    socket: &Path,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    timeout: Duration,
) -> Result<T, ClientError> {
    let started = std::time::Instant::now();
    let late = || ClientError::Late {
        socket: socket.to_path_buf(),
        timeout: GoDuration(timeout),
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        // The channel enforces the request's `grpc-timeout` itself and may fire first
        // (tonic: CANCELLED "Timeout expired"); a server may say DEADLINE_EXCEEDED. Both are
        // this deadline.
        Ok(Err(status))
            if status.code() == tonic::Code::DeadlineExceeded
                || (status.code() == tonic::Code::Cancelled && started.elapsed() >= timeout) =>
        {
            Err(late())
        }
        Ok(Err(status)) => Err(call_error(socket, status)),
        Err(_) => Err(late()),
    }
}

fn socket(target: &AgentTarget) -> Result<PathBuf> {
    let args = ConfigArgs {
        config: target.config.clone(),
        root: target.root.clone(),
        kubelet_layout: target.kubelet_layout,
        ..ConfigArgs::default()
    };
    let (config, _) = config::load(&args)?;
    Ok(config.layout.agent_socket())
}

/// Dial the agent and run `call` with a client and the socket's path.
pub(super) fn with_client<T>(
    target: &AgentTarget,
    call: impl AsyncFnOnce(AgentClient<Channel>, &Path) -> Result<T>,
) -> Result<T> {
    let socket = socket(target)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let channel = corral_proto::uds::connect(&socket, DIAL_TIMEOUT)
            .await
            .map_err(|err| dial_error(&socket, err))?;
        call(AgentClient::new(channel), &socket).await
    })
}

/// A `NAMESPACE/NAME` that names no admitted pod, or several.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PodNameError {
    /// No admitted pod has the name.
    #[error("no admitted pod is named {name} (`corral status` lists them)")]
    NoPod {
        /// `NAMESPACE/NAME`.
        name: String,
    },
    /// Several admitted pods have it (a pod deleted and created again under one name).
    #[error("{} admitted pods are named {name} (uids {}): release one by its uid", uids.len(), uids.join(", "))]
    Several {
        /// `NAMESPACE/NAME`.
        name: String,
        /// Their uids.
        uids: Vec<String>,
    },
}

/// The uid of the one admitted pod named `namespace/name` among `pods`.
pub(crate) fn uid_of(
    pods: &[api::PodAllocation],
    namespace: &str,
    name: &str,
) -> Result<String, PodNameError> {
    let uids: Vec<String> = pods
        .iter()
        .filter(|pod| pod.namespace == namespace && pod.name == name)
        .map(|pod| pod.uid.clone())
        .collect();
    let full = || format!("{namespace}/{name}");
    match &uids[..] {
        [] => Err(PodNameError::NoPod { name: full() }),
        [uid] => Ok(uid.clone()),
        _ => Err(PodNameError::Several { name: full(), uids }),
    }
}

/// Release a pod given by uid or by `NAMESPACE/NAME` (looked up in the agent's list of
/// admitted pods).
pub(crate) fn release(target: &AgentTarget, pod: &str) -> Result<ExitCode> {
    let released = with_client(target, async |mut client, socket| {
        let pod_uid = match pod.split_once('/') {
            None => pod.to_owned(),
            Some((namespace, name)) => {
                let list = api::ListPodsRequest {};
                let call = client.list_pods(request(list, target.request_timeout));
                let pods = answer(socket, call, target.request_timeout).await?.pods;
                uid_of(&pods, namespace, name)?
            }
        };
        let message = api::PodRemovedRequest {
            pod_uid: pod_uid.clone(),
        };
        let call = client.pod_removed(request(message, target.request_timeout));
        answer(socket, call, target.request_timeout).await?;
        Ok(pod_uid)
    })?;
    if released == pod {
        outln!("pod {pod} released");
    } else {
        outln!("pod {pod} (uid {released}) released");
    }
    Ok(ExitCode::SUCCESS)
}
