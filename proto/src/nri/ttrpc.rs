//! ttrpc (containerd's gRPC for low-memory environments) on one [`MuxConn`]: unary calls
//! only, which is all NRI uses.
//!
//! A message is a 10-byte header — payload length u32, stream id u32, type u8 (1 request,
//! 2 response), flags u8, big-endian — and a protobuf `ttrpc.Request` or `ttrpc.Response`.
//! A client numbers its streams 1, 3, 5, …; the server answers on the request's stream, and
//! answers several requests at once. A message over [`MESSAGE_LENGTH_MAX`] is read past and
//! answered `ResourceExhausted`, as upstream's channel does.
//!
//! A message's payload is collected as its bytes arrive, not allocated at the length its
//! header names, and is decoded only when what decoding may cost
//! ([`decode_cost`](super::decode_cost)) is bounded: a request, a response or an answer's
//! payload that would take more than [`MAX_IN_FLIGHT_BYTES`] decoded is refused undecoded
//! (`ResourceExhausted`). A server holds at most [`MAX_IN_FLIGHT_BYTES`] of requests being
//! answered, counted with what decoding them may cost (and of answers waiting to be
//! written); past it, it reads no further request until one is answered, so a peer that keeps sending fills its trunk's queue and loses the trunk
//! ([`NriError::QueueFull`]). When the connection ends, the requests still being answered
//! are cancelled (upstream cancels their contexts): none outlives its connection.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prost::Message;
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinSet;

use super::decode_cost::{IN_ENVELOPE, decode_cost};
use super::error::{NriError, NriStatus};
use super::mux::{ConnReader, ConnWriter, MuxConn};

mod envelope {
    crate::generated_api!("../gen/ttrpc.rs");
}
pub use envelope::{KeyValue, Request, Response, Status};

/// Bytes of a ttrpc message header.
pub const MESSAGE_HEADER_LEN: usize = 10;
/// The largest ttrpc message payload (4 MiB).
pub const MESSAGE_LENGTH_MAX: usize = 4 << 20;
/// Bytes of requests one served connection answers at once: each counts its payload, what
/// decoding it may cost ([`decode_cost`]) and [`REQUEST_OVERHEAD`] from when it is read until
/// its answer is written. A request that alone would cost more is answered
/// `ResourceExhausted` undecoded.
pub const MAX_IN_FLIGHT_BYTES: usize = 64 << 20;
/// What a request in flight costs beyond its payload (its task, its answer), counted
/// against [`MAX_IN_FLIGHT_BYTES`] so that a flood of small requests is bounded too.
pub const REQUEST_OVERHEAD: usize = 4 << 10;

const _: () = assert!(MAX_IN_FLIGHT_BYTES >= MESSAGE_LENGTH_MAX + REQUEST_OVERHEAD);
const TYPE_REQUEST: u8 = 1;
const TYPE_RESPONSE: u8 = 2;

/// One message read off a connection.
enum Incoming {
    /// A message within the size limit.
    Message {
        stream: u32,
        kind: u8,
        payload: Vec<u8>,
    },
    /// A message over the limit, already read past.
    Oversized { stream: u32, kind: u8, len: usize },
}

async fn read_message(reader: &mut ConnReader) -> Result<Incoming, NriError> {
    let mut header = [0u8; MESSAGE_HEADER_LEN];
    reader.read_exact(&mut header).await?;
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let stream = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    let kind = header[8];
    if len > MESSAGE_LENGTH_MAX {
        reader.skip(len).await?;
        return Ok(Incoming::Oversized { stream, kind, len });
    }
    let payload = reader.read_vec(len).await?;
    Ok(Incoming::Message {
        stream,
        kind,
        payload,
    })
}

async fn write_message(
    writer: &ConnWriter,
    stream: u32,
    kind: u8,
    payload: &[u8],
) -> Result<(), NriError> {
    if payload.len() > MESSAGE_LENGTH_MAX {
        return Err(NriError::Protocol(format!(
            "a message of {} bytes exceeds ttrpc's {MESSAGE_LENGTH_MAX}",
            payload.len()
        )));
    }
    let mut message = Vec::with_capacity(MESSAGE_HEADER_LEN + payload.len());
    message.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    message.extend_from_slice(&stream.to_be_bytes());
    message.extend_from_slice(&[kind, 0]);
    message.extend_from_slice(payload);
    writer.write_all(&message).await
}

type Pending = Arc<Mutex<HashMap<u32, oneshot::Sender<Response>>>>;

/// A ttrpc client of one service on one connection.
#[derive(Debug, Clone)]
pub struct Client {
    service: &'static str,
    writer: ConnWriter,
    pending: Pending,
    next_stream: Arc<AtomicU32>,
}

impl Client {
    /// A client of `service` on `conn`; a task reads its responses until the connection
    /// ends.
    pub fn new(conn: MuxConn, service: &'static str) -> Client {
        let pending: Pending = Arc::default();
        tokio::spawn(read_responses(conn.reader, Arc::clone(&pending)));
        Client {
            service,
            writer: conn.writer,
            pending,
            next_stream: Arc::new(AtomicU32::new(1)),
        }
    }

    /// Calls `method` with `request`; no answer within `timeout` is
    /// [`NriError::Timeout`] (the timeout is also sent, as ttrpc's `timeout_nano`).
    pub async fn call<Req: Message, Resp: Message + Default>(
        &self,
        method: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, NriError> {
        let stream = self.next_stream.fetch_add(2, Ordering::Relaxed);
        let envelope = Request {
            service: self.service.to_owned(),
            method: method.to_owned(),
            payload: request.encode_to_vec(),
            timeout_nano: i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX),
            metadata: Vec::new(),
        };
        let (tx, rx) = oneshot::channel();
        self.pending().insert(stream, tx);
        let answer = async {
            write_message(
                &self.writer,
                stream,
                TYPE_REQUEST,
                &envelope.encode_to_vec(),
            )
            .await?;
            // No answer comes once the connection has ended: say why it ended.
            rx.await.map_err(|_| self.writer.close_reason())
        };
        let outcome = tokio::time::timeout(timeout, answer).await;
        self.pending().remove(&stream);
        let response = outcome.map_err(|_| NriError::Timeout {
            method: method.to_owned(),
            timeout,
        })??;
        match response.status {
            Some(status) if status.code != 0 => Err(NriError::Status {
                method: method.to_owned(),
                source: NriStatus::new(status.code, status.message),
            }),
            _ if decode_cost(&response.payload, super::decode_cost::TOP_LEVEL)
                > MAX_IN_FLIGHT_BYTES as u64 =>
            {
                Err(NriError::Protocol(format!(
                    "the answer to {method} would take more than {MAX_IN_FLIGHT_BYTES} bytes decoded"
                )))
            }
            _ => Resp::decode(response.payload.as_slice()).map_err(|err| {
                NriError::Protocol(format!("the answer to {method} does not decode: {err}"))
            }),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u32, oneshot::Sender<Response>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn read_responses(mut reader: ConnReader, pending: Pending) {
    loop {
        let (stream, response) = match read_message(&mut reader).await {
            Ok(Incoming::Message {
                stream,
                kind: TYPE_RESPONSE,
                payload,
            }) if decode_cost(&payload, IN_ENVELOPE) > MAX_IN_FLIGHT_BYTES as u64 => {
                let why =
                    format!("response would take more than {MAX_IN_FLIGHT_BYTES} bytes decoded");
                (stream, failed(NriStatus::RESOURCE_EXHAUSTED, why))
            }
            Ok(Incoming::Message {
                stream,
                kind: TYPE_RESPONSE,
                payload,
            }) => match Response::decode(payload.as_slice()) {
                Ok(response) => (stream, response),
                Err(err) => (
                    stream,
                    failed(NriStatus::UNKNOWN, format!("undecodable: {err}")),
                ),
            },
            Ok(Incoming::Oversized {
                stream,
                kind: TYPE_RESPONSE,
                len,
            }) => {
                let why = format!("response of {len} bytes exceeds {MESSAGE_LENGTH_MAX}");
                (stream, failed(NriStatus::RESOURCE_EXHAUSTED, why))
            }
            Ok(Incoming::Message { kind, .. } | Incoming::Oversized { kind, .. }) => {
                tracing::debug!(
                    kind,
                    "ttrpc client: a message that is not a response dropped"
                );
                continue;
            }
            Err(_) => break,
        };
        let waiter = pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&stream);
        if let Some(waiter) = waiter {
            let _ = waiter.send(response);
        }
    }
    // The connection ended: every waiting call fails as closed.
    pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

fn failed(code: i32, message: String) -> Response {
    Response {
        status: Some(Status { code, message }),
        payload: Vec::new(),
    }
}

/// A request's payload as the method's message; an `InvalidArgument` status when it is
/// not one.
pub(crate) fn decode_request<M: Message + Default>(payload: &[u8]) -> Result<M, NriStatus> {
    M::decode(payload).map_err(|err| {
        let why = format!("the request does not decode: {err}");
        NriStatus::new(NriStatus::INVALID_ARGUMENT, why)
    })
}

/// The methods of one ttrpc service.
#[tonic::async_trait]
pub trait Service: Send + Sync + 'static {
    /// Answers `method` with the encoded request `payload`: the encoded response, or the
    /// status to fail with.
    async fn call(&self, method: &str, payload: Vec<u8>) -> Result<Vec<u8>, NriStatus>;
}

/// Serves `service` (named `name`) on `conn` until the connection ends; requests are
/// answered concurrently (at most [`MAX_IN_FLIGHT_BYTES`] of them), each bounded by its
/// `timeout_nano`, and those not answered when the connection ends are cancelled.
pub async fn serve(conn: MuxConn, name: &'static str, service: Arc<dyn Service>) -> NriError {
    let MuxConn { mut reader, writer } = conn;
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT_BYTES));
    // Dropped (when the connection ends or this future is), it aborts every request task.
    let mut answering = JoinSet::new();
    loop {
        while answering.try_join_next().is_some() {}
        let incoming = match read_message(&mut reader).await {
            Ok(incoming) => incoming,
            Err(err) => return err,
        };
        let cost = match &incoming {
            Incoming::Message { payload, .. } => {
                (payload.len() as u64).saturating_add(decode_cost(payload, IN_ENVELOPE))
            }
            Incoming::Oversized { .. } => 0,
        }
        .saturating_add(REQUEST_OVERHEAD as u64);
        if let Incoming::Message {
            stream,
            kind: TYPE_REQUEST,
            ..
        } = &incoming
            && cost > MAX_IN_FLIGHT_BYTES as u64
        {
            let why = format!(
                "request would take up to {cost} bytes decoded, more than {MAX_IN_FLIGHT_BYTES}"
            );
            let answer = failed(NriStatus::RESOURCE_EXHAUSTED, why);
            let (writer, stream) = (writer.clone(), *stream);
            drop(incoming);
            answering.spawn(async move { respond(writer, stream, answer).await });
            continue;
        }
        let cost = u32::try_from(cost).unwrap_or(u32::MAX);
        let permit = tokio::select! {
            permit = Arc::clone(&in_flight).acquire_many_owned(cost) => permit,
            () = reader.trunk_closed() => return reader.close_reason(),
        };
        let Ok(permit) = permit else {
            return NriError::Closed;
        };
        let (stream, request) = match incoming {
            Incoming::Message {
                stream,
                kind: TYPE_REQUEST,
                payload,
            } => (stream, Request::decode(payload.as_slice())),
            Incoming::Oversized {
                stream,
                kind: TYPE_REQUEST,
                len,
            } => {
                let why = format!("request of {len} bytes exceeds {MESSAGE_LENGTH_MAX}");
                let answer = failed(NriStatus::RESOURCE_EXHAUSTED, why);
                let writer = writer.clone();
                answering.spawn(async move {
                    respond(writer, stream, answer).await;
                    drop(permit);
                });
                continue;
            }
            Incoming::Message { kind, .. } | Incoming::Oversized { kind, .. } => {
                tracing::debug!(
                    kind,
                    "ttrpc server: a message that is not a request dropped"
                );
                continue;
            }
        };
        let service = Arc::clone(&service);
        let writer = writer.clone();
        answering.spawn(async move {
            let answer = match request {
                Ok(request) => answer(name, service.as_ref(), request).await,
                Err(err) => failed(NriStatus::INVALID_ARGUMENT, format!("undecodable: {err}")),
            };
            respond(writer, stream, answer).await;
            drop(permit);
        });
    }
}

async fn answer(name: &str, service: &dyn Service, request: Request) -> Response {
    if request.service != name {
        let why = format!("service {} is not served here", request.service);
        return failed(NriStatus::UNIMPLEMENTED, why);
    }
    let call = service.call(&request.method, request.payload);
    let outcome = match u64::try_from(request.timeout_nano) {
        Ok(nanos) if nanos > 0 => tokio::time::timeout(Duration::from_nanos(nanos), call)
            .await
            .unwrap_or_else(|_| {
                let why = format!("{} timed out", request.method);
                Err(NriStatus::new(NriStatus::DEADLINE_EXCEEDED, why))
            }),
        _ => call.await,
    };
    match outcome {
        Ok(payload) => Response {
            status: None,
            payload,
        },
        Err(status) => failed(status.code, status.message),
    }
}

async fn respond(writer: ConnWriter, stream: u32, response: Response) {
    let mut bytes = response.encode_to_vec();
    if bytes.len() > MESSAGE_LENGTH_MAX {
        let why = format!(
            "a response of {} bytes exceeds {MESSAGE_LENGTH_MAX}",
            bytes.len()
        );
        bytes = failed(NriStatus::RESOURCE_EXHAUSTED, why).encode_to_vec();
    }
    if let Err(err) = write_message(&writer, stream, TYPE_RESPONSE, &bytes).await {
        tracing::debug!(stream, error = %err, "ttrpc server: the answer could not be written");
    }
}
