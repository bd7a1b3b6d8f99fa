//! How a served socket treats its connections ([`ServeOptions`]): shutdown grace, handshake
//! deadline, connection cap. A leaf, read by the accept loop and by the server.
//!
//! [`serve_with`]: super::serve_with

use std::time::Duration;

/// Default [`ServeOptions::handshake_timeout`]: a local client sends the HTTP/2 preface and
/// SETTINGS as soon as it connects; 10 s leaves room for a loaded node.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Default [`ServeOptions::max_connections`]: far more than the clients of one kubelet
/// socket, and few enough that three or four served sockets stay well inside the default
/// open-file limit of 1024.
pub const DEFAULT_MAX_CONNECTIONS: usize = 128;

/// Default [`ServeOptions::grace`].
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How [`serve_with`](super::serve_with) treats the connections of one listening socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// On shutdown, how long in-flight calls may take to finish (default
    /// [`DEFAULT_SHUTDOWN_GRACE`]).
    pub grace: Duration,
    /// A connection whose client has not sent the HTTP/2 connection preface and its first
    /// frame (SETTINGS) this long after it was accepted is closed, so half-open connections
    /// do not hold file descriptors and places under the cap. `None`: no deadline. Default
    /// [`DEFAULT_HANDSHAKE_TIMEOUT`].
    pub handshake_timeout: Option<Duration>,
    /// At most this many connections are open at once; a connection accepted beyond it is
    /// closed at once (logged at most once per 10 s, with a count). Default
    /// [`DEFAULT_MAX_CONNECTIONS`]; `usize::MAX` for no cap.
    pub max_connections: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            grace: DEFAULT_SHUTDOWN_GRACE,
            handshake_timeout: Some(DEFAULT_HANDSHAKE_TIMEOUT),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}
