//! The client commands (`admit`, `release`, `status`): dial the agent socket under the root
//! and print the answers.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use corral_proto::corral::v1 as api;
use corral_proto::corral::v1::agent_client::AgentClient;
use corral_proto::uds::{Channel, UdsError};

use crate::cli::{AgentTarget, ConfigArgs, OutputFormat};
use crate::commands::explain::read_manifests;
use crate::commands::print_document;
use crate::config::{self, GoDuration, PodLimits};
use crate::manifest::pod_from_manifest;
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
fn request<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

/// Wait for one call to the agent at `socket`, at most `timeout` (`--request-timeout`).
async fn answer<T>(
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
fn with_client<T>(
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

pub(crate) fn admit(
    target: &AgentTarget,
    files: &[PathBuf],
    output: OutputFormat,
) -> Result<ExitCode> {
    let manifests = read_manifests(files)?;
    let claims: Vec<Vec<u8>> = manifests
        .claims
        .iter()
        .map(serde_json::to_vec)
        .collect::<Result<_, _>>()?;
    let slices: Vec<Vec<u8>> = manifests
        .slices
        .iter()
        .map(serde_json::to_vec)
        .collect::<Result<_, _>>()?;
    let mut requests = Vec::new();
    let mut names = Vec::new();
    for mut pod in manifests.pods {
        let converted = pod_from_manifest(&pod, &PodLimits::DEFAULT)?;
        pod.metadata.uid = Some(converted.uid.clone());
        names.push(format!("{}/{}", converted.namespace, converted.name));
        requests.push(api::AdmitRequest {
            pod_json: serde_json::to_vec(&pod)?,
            resource_claims_json: claims.clone(),
            resource_slices_json: slices.clone(),
        });
    }
    if requests.is_empty() {
        anyhow::bail!("no Pod in {files:?}");
    }
    // A call that fails does not hide the answers before it: they are printed, then the
    // failure, with a non-zero exit.
    let (answers, failed) = with_client(target, async |mut client, socket| {
        let mut answers = Vec::new();
        for message in requests {
            let call = client.admit(request(message, target.request_timeout));
            match answer(socket, call, target.request_timeout).await {
                Ok(answer) => answers.push(answer),
                Err(err) => return Ok((answers, Some(err))),
            }
        }
        Ok((answers, None))
    })?;
    let rejected = answers.iter().any(|a| !a.admitted);
    match output {
        OutputFormat::Json | OutputFormat::Yaml => {
            let doc: Vec<_> = answers
                .iter()
                .zip(&names)
                .map(|(a, name)| {
                    serde_json::json!({
                        "pod": name,
                        "admitted": a.admitted,
                        "reason": a.reason,
                        "message": a.message,
                        "allocation": a.allocation.as_ref().map(allocation_json),
                    })
                })
                .collect();
            print_document(&serde_json::Value::from(doc), output == OutputFormat::Yaml)?;
        }
        OutputFormat::Table | OutputFormat::Wide => {
            for (answer, name) in answers.iter().zip(&names) {
                match &answer.allocation {
                    Some(pod) if answer.admitted => {
                        outln!(
                            "pod {}/{} admitted (uid {})",
                            pod.namespace,
                            pod.name,
                            pod.uid
                        );
                        print_table(std::slice::from_ref(pod), output == OutputFormat::Wide)?;
                    }
                    _ => eprintln!("pod {name} rejected: {}: {}", answer.reason, answer.message),
                }
            }
        }
    }
    if let Some(err) = failed {
        let pod = &names[answers.len()];
        return Err(anyhow::Error::from(err).context(format!("admitting pod {pod}")));
    }
    Ok(if rejected {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
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

pub(crate) fn status(target: &AgentTarget, output: OutputFormat) -> Result<ExitCode> {
    let pods = with_client(target, async |mut client, socket| {
        let call = client.list_pods(request(api::ListPodsRequest {}, target.request_timeout));
        Ok(answer(socket, call, target.request_timeout).await?.pods)
    })?;
    match output {
        OutputFormat::Json | OutputFormat::Yaml => {
            let doc: Vec<_> = pods.iter().map(allocation_json).collect();
            print_document(&serde_json::Value::from(doc), output == OutputFormat::Yaml)?;
        }
        OutputFormat::Table => print_table(&pods, false)?,
        OutputFormat::Wide => print_table(&pods, true)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The container's NUMA nodes; `~` after them when the pod's decision was approximate.
fn numa(pod: &api::PodAllocation, container: &api::ContainerAllocation) -> String {
    let mark = if pod.approximate { "~" } else { "" };
    if container.numa_affinity.is_empty() {
        return format!("-{mark}");
    }
    let ids: Vec<String> = container.numa_affinity.iter().map(i64::to_string).collect();
    format!("{}{mark}", ids.join(","))
}

/// What `~` in the NUMA column means.
const APPROXIMATE_NOTE: &str = "~ approximate: the decision ran out of its search budget; its NUMA nodes or CPUs are the best found, not proven to be upstream's";

/// One line per container; `wide` adds its container id, device nodes and environment.
fn print_table(pods: &[api::PodAllocation], wide: bool) -> Result<()> {
    let mut header = format!(
        "{:<36}  {:<28}  {:<16}  {:<7}  {:<16}  {:<4}  {:<5}  {:<24}  {:<24}",
        "POD UID", "POD", "CONTAINER", "KIND", "CPUSET", "EXCL", "NUMA", "MEMORY", "DEVICES"
    );
    if wide {
        header.push_str(&format!(
            "  {:<16}  {:<24}  ENV",
            "CONTAINER ID", "DEVICE NODES"
        ));
    }
    outln!("{}", header.trim_end());
    for pod in pods {
        for c in &pod.containers {
            let mut held: Vec<String> = c
                .devices
                .iter()
                .map(|d| format!("{}={}", d.resource, d.device_ids.join(",")))
                .collect();
            held.extend(
                c.run_options
                    .iter()
                    .flat_map(|o| o.cdi_devices.iter().map(|d| format!("cdi:{d}"))),
            );
            let memory: Vec<String> = c.memory.iter().map(memory_cell).collect();
            let mut line = format!(
                "{:<36}  {:<28}  {:<16}  {:<7}  {:<16}  {:<4}  {:<5}  {:<24}  {:<24}",
                pod.uid,
                format!("{}/{}", pod.namespace, pod.name),
                c.name,
                c.kind,
                c.cpuset,
                if c.exclusive_cpus { "yes" } else { "no" },
                numa(pod, c),
                dash_if_empty(memory.join(" ")),
                dash_if_empty(held.join(" "))
            );
            if wide {
                let nodes: Vec<&str> = c
                    .run_options
                    .iter()
                    .flat_map(|o| o.devices.iter().map(|d| d.host_path.as_str()))
                    .collect();
                let envs: std::collections::BTreeMap<&str, &str> = c
                    .run_options
                    .iter()
                    .flat_map(|o| o.envs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                    .collect();
                let envs: Vec<String> = envs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                line.push_str(&format!(
                    "  {:<16}  {:<24}  {}",
                    dash_if_empty(c.container_id.clone()),
                    dash_if_empty(nodes.join(",")),
                    dash_if_empty(envs.join(","))
                ));
            }
            outln!("{}", line.trim_end());
        }
    }
    if pods.iter().any(|p| p.approximate) {
        outln!("{APPROXIMATE_NOTE}");
    }
    Ok(())
}

/// `memory=1Gi@0`, `hugepages-2Mi=512Mi@0,1`: the type, the size in the largest binary unit
/// that divides it, the NUMA nodes.
fn memory_cell(block: &api::MemoryBlock) -> String {
    let size = corral_topology::QuantitySum::of(
        i64::try_from(block.size).unwrap_or(i64::MAX),
        corral_topology::QuantityFormat::BinarySi,
    );
    let nodes: Vec<String> = block.numa_affinity.iter().map(i64::to_string).collect();
    format!("{}={size}@{}", block.r#type, nodes.join(","))
}

fn dash_if_empty(text: String) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text
    }
}

/// A pod's holdings as JSON; `approximate: true` only on a decision that ran out of its
/// search budget (omitted otherwise, as the kubelet's `omitempty`).
fn allocation_json(pod: &api::PodAllocation) -> serde_json::Value {
    let mut json = allocation_json_fields(pod);
    if pod.approximate {
        json["approximate"] = true.into();
    }
    json
}

fn allocation_json_fields(pod: &api::PodAllocation) -> serde_json::Value {
    serde_json::json!({
        "uid": pod.uid,
        "namespace": pod.namespace,
        "name": pod.name,
        "containers": pod.containers.iter().map(|c| serde_json::json!({
            "name": c.name,
            "kind": c.kind,
            "cpuset": c.cpuset,
            "exclusiveCpus": c.exclusive_cpus,
            "cpuQuotaDisabled": c.cpu_quota_disabled,
            "numaAffinity": c.numa_affinity,
            "devices": c.devices.iter().map(|d| (d.resource.clone(), d.device_ids.clone())).collect::<std::collections::BTreeMap<_, _>>(),
            "cdiDevices": c.run_options.as_ref().map(|o| o.cdi_devices.clone()).unwrap_or_default(),
            "envs": c.run_options.as_ref().map(|o| o.envs.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<std::collections::BTreeMap<_, _>>()).unwrap_or_default(),
            "deviceNodes": c.run_options.as_ref().map(|o| o.devices.iter().map(|d| d.host_path.clone()).collect::<Vec<_>>()).unwrap_or_default(),
            "containerId": c.container_id,
            "memory": c.memory.iter().map(|m| serde_json::json!({
                "type": m.r#type,
                "size": m.size,
                "numaAffinity": m.numa_affinity,
            })).collect::<Vec<_>>(),
            // The kubelet's JSON names (`v1.ResourceStatus`, `v1.ResourceHealth`).
            "allocatedResourcesStatus": c.allocated_resources_status.iter().map(|s| serde_json::json!({
                "name": s.name,
                "resources": s.resources.iter().map(|r| {
                    let mut health = serde_json::json!({
                        "resourceID": r.resource_id,
                        "health": r.health,
                    });
                    // `message` is omitted when unset, as the kubelet's `omitempty`.
                    if !r.message.is_empty() {
                        health["message"] = r.message.clone().into();
                    }
                    health
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
