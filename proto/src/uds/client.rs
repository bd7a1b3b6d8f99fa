//! Dialing a tonic service on a unix socket.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use super::UdsError;

/// Dial the gRPC server listening on the unix socket `path`, waiting at most `timeout`.
///
/// The returned channel sends `localhost` as the HTTP/2 `:authority`, as the kubelet does
/// when it dials plugins. If the server goes away later, calls fail and the channel dials
/// the same path again on the next call.
pub async fn connect(path: impl AsRef<Path>, timeout: Duration) -> Result<Channel, UdsError> {
    let path: PathBuf = path.as_ref().to_path_buf();
    let endpoint = Endpoint::from_static("http://localhost").connect_timeout(timeout);
    let socket = path.clone();
    let connector = tower::service_fn(move |_: Uri| {
        let socket = socket.clone();
        async move {
            let stream = tokio::net::UnixStream::connect(socket).await?;
            Ok::<_, std::io::Error>(TokioIo::new(stream))
        }
    });
    match tokio::time::timeout(timeout, endpoint.connect_with_connector(connector)).await {
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(source)) => Err(UdsError::Connect { path, source }),
        Err(_) => Err(UdsError::ConnectTimeout { path, timeout }),
    }
}
