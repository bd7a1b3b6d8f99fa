//! Credentials of the process on the other end of a unix-socket call.

use tonic::transport::server::UdsConnectInfo;

/// The calling process as the kernel reports it (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCredentials {
    /// Process id, when the platform reports it.
    pub pid: Option<i32>,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

/// The caller's credentials, inside a handler of a service served by [`super::serve`].
/// `None` when the request did not arrive over a unix socket.
pub fn peer_credentials<T>(request: &tonic::Request<T>) -> Option<PeerCredentials> {
    let info = request.extensions().get::<UdsConnectInfo>()?;
    let cred = info.peer_cred?;
    Some(PeerCredentials {
        pid: cred.pid(),
        uid: cred.uid(),
        gid: cred.gid(),
    })
}
