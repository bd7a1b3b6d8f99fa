//! The error type of unix-socket serving and dialing.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong while binding, serving or dialing a unix socket. Every variant names the
/// socket path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UdsError {
    /// The socket's parent directory could not be created or given its mode.
    #[error("cannot create socket directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Something that is not a socket occupies the socket path; it is left alone.
    #[error("{path} exists and is not a unix socket; refusing to replace it")]
    NotASocket {
        /// The socket path.
        path: PathBuf,
    },
    /// A live server answers on the socket path.
    #[error("{path} is in use: another server is listening on it")]
    InUse {
        /// The socket path.
        path: PathBuf,
    },
    /// A stale socket file could not be inspected or removed.
    #[error("cannot remove stale socket {path}: {source}")]
    RemoveStale {
        /// The socket path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Binding the socket failed.
    #[error("cannot bind unix socket {path}: {source}")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Setting the socket file's mode failed.
    #[error("cannot set mode {mode:o} on {path}: {source}")]
    SetMode {
        /// The socket path.
        path: PathBuf,
        /// The mode that was asked for.
        mode: u32,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The gRPC server failed while serving.
    #[error("gRPC server on {path} failed: {source}")]
    Serve {
        /// The socket path.
        path: PathBuf,
        /// The underlying error.
        source: tonic::transport::Error,
    },
    /// Dialing the socket failed.
    #[error("cannot connect to unix socket {path}: {source}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// The underlying error.
        source: tonic::transport::Error,
    },
    /// Dialing the socket took longer than the deadline.
    #[error("cannot connect to unix socket {path}: no connection within {timeout:?}")]
    ConnectTimeout {
        /// The socket path.
        path: PathBuf,
        /// The deadline.
        timeout: Duration,
    },
}
