//! gRPC over unix sockets: serve any tonic service on a socket path and dial a socket path.
//!
//! The kubelet's sockets (`kubelet.sock` for device-plugin registration, the pod-resources
//! socket, plugin sockets) are unix sockets. This module owns the details every corral server
//! and client needs, in one place:
//!
//! - [`UdsListener::bind`] creates the parent directory (mode 0700 by default) when missing,
//!   removes a *stale* socket file (one nobody answers on; a live server's socket or a
//!   non-socket file is an error, never deleted), binds, and sets the socket mode (0600 by
//!   default). Both modes are [`SocketOptions`].
//! - [`serve`] runs a tonic [`Router`] on the listener until a shutdown future completes,
//!   then waits at most a grace period for in-flight calls, and removes the socket file it
//!   created (and only that file: a socket re-created at the same path by someone else
//!   stays).
//! - Every served socket bounds its connections ([`ServeOptions`], [`serve_with`]; [`serve`]
//!   uses the defaults): a client must complete the HTTP/2 handshake within
//!   [`DEFAULT_HANDSHAKE_TIMEOUT`], at most [`DEFAULT_MAX_CONNECTIONS`] connections are open
//!   at once (more are closed at once), and accept errors such as EMFILE are logged by name
//!   and backed off from, so half-open or surplus connections never exhaust the process's
//!   file descriptors or stall other clients.
//! - [`connect`] dials a socket path with a deadline and returns a tonic [`Channel`]. Requests
//!   carry `localhost` as HTTP/2 `:authority`, as the kubelet's clients do.
//! - [`peer_credentials`] reads the caller's pid/uid/gid inside a handler.
//!
//! Server-streaming handlers (such as `ListAndWatch`) keep a connection busy forever; tonic's
//! graceful shutdown waits for them. Handlers should end their streams when the server shuts
//! down (e.g. on a `tokio_util::sync::CancellationToken`); the grace period of [`serve`] is
//! the backstop.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use corral_proto::uds::{self, SocketOptions, UdsListener};
//! use corral_proto::tonic::transport::Server;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("sockets/example.sock");
//! let listener = UdsListener::bind(&path, &SocketOptions::default())?;
//! let token = tokio_util::sync::CancellationToken::new();
//! let router = Server::builder().add_routes(Default::default());
//! let server = tokio::spawn(uds::serve(router, listener, token.clone().cancelled_owned(),
//!     Duration::from_secs(1)));
//! let _channel = uds::connect(&path, Duration::from_secs(1)).await?;
//! token.cancel();
//! server.await??;
//! assert!(!path.exists(), "the socket file is removed on shutdown");
//! # Ok(()) }
//! ```

mod authority;
mod client;
mod connection;
mod error;
mod incoming;
mod peer;
mod serve_options;
mod server;

pub use client::connect;
pub use connection::UdsConnection;
pub use error::UdsError;
pub use peer::{PeerCredentials, peer_credentials};
pub use serve_options::{
    DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_SHUTDOWN_GRACE, ServeOptions,
};
pub use server::{SocketOptions, UdsListener, serve, serve_with};

#[doc(no_inline)]
pub use tonic::transport::{Channel, server::Router};
