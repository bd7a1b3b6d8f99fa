//! The errors of NRI connections and the status a ttrpc call fails with.

use std::time::Duration;

/// A ttrpc call's failure status: a gRPC status code and message, as ttrpc carries them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct NriStatus {
    /// The gRPC status code (`codes.Code`).
    pub code: i32,
    /// The message.
    pub message: String,
}

impl NriStatus {
    /// `Unknown` (2): what a handler's plain error becomes.
    pub const UNKNOWN: i32 = 2;
    /// `InvalidArgument` (3).
    pub const INVALID_ARGUMENT: i32 = 3;
    /// `DeadlineExceeded` (4).
    pub const DEADLINE_EXCEEDED: i32 = 4;
    /// `ResourceExhausted` (8): a message over ttrpc's size limit.
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    /// `FailedPrecondition` (9): the peer cannot do what is asked in its state (a runtime
    /// that knows none of the events a plugin subscribes to).
    pub const FAILED_PRECONDITION: i32 = 9;
    /// `Unimplemented` (12): an unknown service or method.
    pub const UNIMPLEMENTED: i32 = 12;

    /// A status of `code` with `message`.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        NriStatus {
            code,
            message: message.into(),
        }
    }
}

/// What went wrong on an NRI connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NriError {
    /// The plugin name or index is not what NRI accepts.
    #[error("invalid NRI plugin {what} {value:?}: {why}")]
    InvalidConfig {
        /// `name` or `index`.
        what: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        why: &'static str,
    },
    /// Dialing the runtime's socket failed.
    #[error("cannot connect to the NRI socket {path}")]
    Connect {
        /// The socket path.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Reading or writing the trunk failed.
    #[error("NRI connection I/O failed")]
    Io(#[from] std::io::Error),
    /// The peer sent bytes that are not the protocol (a frame or message over its limit, a
    /// message that does not decode, an unknown message type).
    #[error("NRI protocol violation: {0}")]
    Protocol(String),
    /// The peer sent faster than corral read: more than `limit` bytes of its frames were
    /// queued unread on the trunk, all its connections together
    /// ([`MAX_QUEUED_BYTES`](super::mux::MAX_QUEUED_BYTES)).
    #[error("the NRI peer sent more than {limit} bytes ahead of what was read")]
    QueueFull {
        /// The bound, in bytes.
        limit: usize,
    },
    /// The connection is closed.
    #[error("NRI connection closed")]
    Closed,
    /// A call got no answer in time.
    #[error("NRI call {method} got no answer within {timeout:?}")]
    Timeout {
        /// The method.
        method: String,
        /// The bound.
        timeout: Duration,
    },
    /// The peer answered a call with an error status.
    #[error("NRI call {method} failed")]
    Status {
        /// The method.
        method: String,
        /// The peer's status.
        source: NriStatus,
    },
}
