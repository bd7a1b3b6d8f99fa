//! Serving tonic services on a unix socket.

use std::future::Future;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::UnixListener;
use tonic::transport::server::Router;

use super::UdsError;
use super::incoming::Incoming;
use super::serve_options::ServeOptions;

/// File modes for a served socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketOptions {
    /// Mode of the socket's parent directory when [`UdsListener::bind`] creates it.
    /// An existing directory keeps its mode.
    pub dir_mode: u32,
    /// Mode of the socket file.
    pub socket_mode: u32,
}

impl Default for SocketOptions {
    /// Owner-only: directory 0700, socket 0600.
    fn default() -> Self {
        Self {
            dir_mode: 0o700,
            socket_mode: 0o600,
        }
    }
}

/// A bound unix socket, ready for [`serve`]. Dropping it without serving removes the socket
/// file again.
#[derive(Debug)]
pub struct UdsListener {
    listener: UnixListener,
    file: SocketFile,
}

impl UdsListener {
    /// Bind a unix socket at `path`: create missing parent directories with
    /// `options.dir_mode`, remove a stale socket file left by a dead server, bind, and set
    /// `options.socket_mode` on the socket file.
    ///
    /// Fails, leaving the path alone, when a non-socket file is there or a live server
    /// answers on the socket. Must be called inside a tokio runtime.
    pub fn bind(path: impl AsRef<Path>, options: &SocketOptions) -> Result<Self, UdsError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_parent(parent, options.dir_mode)?;
        }
        remove_stale_socket(&path)?;
        let listener = UnixListener::bind(&path).map_err(|source| UdsError::Bind {
            path: path.clone(),
            source,
        })?;
        let set_mode = |source| UdsError::SetMode {
            path: path.clone(),
            mode: options.socket_mode,
            source,
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(options.socket_mode))
            .map_err(set_mode)?;
        let metadata = std::fs::symlink_metadata(&path).map_err(set_mode)?;
        Ok(Self {
            listener,
            file: SocketFile {
                path,
                dev: metadata.dev(),
                ino: metadata.ino(),
            },
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }
}

/// Serve `router` on `listener` until `shutdown` completes, with the default connection
/// limits ([`ServeOptions::default`]) and the shutdown grace period `grace`.
///
/// On shutdown the listener stops accepting, in-flight calls get at most `grace` to finish
/// (server streams should end on their own when the server shuts down; the grace period is
/// the backstop), and the socket file this listener created is removed.
pub async fn serve(
    router: Router,
    listener: UdsListener,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> Result<(), UdsError> {
    let options = ServeOptions {
        grace,
        ..ServeOptions::default()
    };
    serve_with(router, listener, shutdown, options).await
}

/// Serve `router` on `listener` until `shutdown` completes, with `options`' limits:
///
/// - a connection whose client does not complete the HTTP/2 handshake (preface and
///   SETTINGS) within [`ServeOptions::handshake_timeout`] is closed;
/// - at most [`ServeOptions::max_connections`] connections are open at once; one accepted
///   beyond that is closed at once;
/// - when accepting fails (e.g. EMFILE: the process is out of file descriptors), the error
///   is logged naming its cause and accepting is retried after a delay that doubles from
///   10 ms up to 1 s, never in a busy loop.
///
/// Refused connections, handshake timeouts and accept errors are each logged (`tracing`)
/// at most once per 10 s per socket, with the number not logged in between.
///
/// Shutdown is as for [`serve`], with [`ServeOptions::grace`].
pub async fn serve_with(
    router: Router,
    listener: UdsListener,
    shutdown: impl Future<Output = ()>,
    options: ServeOptions,
) -> Result<(), UdsError> {
    let UdsListener { listener, file } = listener;
    let grace = options.grace;
    let incoming = Incoming::new(listener, file.path.clone(), &options);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let server = router.serve_with_incoming_shutdown(incoming, async move {
        // An error means the sender is gone, which only happens when serving has ended.
        let _ = stop_rx.wait_for(|stop| *stop).await;
    });
    tokio::pin!(server);
    let result = tokio::select! {
        result = &mut server => result,
        () = shutdown => {
            let _ = stop_tx.send(true);
            match tokio::time::timeout(grace, &mut server).await {
                Ok(result) => result,
                Err(_) => {
                    tracing::warn!(socket = %file.path.display(), ?grace,
                        "in-flight calls did not finish within the grace period; dropping them");
                    Ok(())
                }
            }
        }
    };
    let path = file.path.clone();
    drop(file);
    result.map_err(|source| UdsError::Serve { path, source })
}

/// The socket file a listener created; removed on drop if it is still the same file.
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let Ok(metadata) = std::fs::symlink_metadata(&self.path) else {
            return;
        };
        if metadata.dev() == self.dev
            && metadata.ino() == self.ino
            && let Err(err) = std::fs::remove_file(&self.path)
        {
            tracing::warn!(socket = %self.path.display(), %err, "cannot remove socket file");
        }
    }
}

/// Create `dir` (and missing ancestors) with `mode`, unless it exists.
fn create_parent(dir: &Path, mode: u32) -> Result<(), UdsError> {
    let failed = |source| UdsError::CreateDir {
        path: dir.to_path_buf(),
        source,
    };
    match std::fs::metadata(dir) {
        Ok(metadata) if metadata.is_dir() => return Ok(()),
        Ok(_) => return Err(failed(std::io::Error::from(ErrorKind::NotADirectory))),
        Err(err) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => return Err(failed(err)),
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(failed)?;
    // The umask may have narrowed the mode; set it exactly.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(failed)
}

/// Remove a socket file nobody listens on. A live socket or a non-socket is an error.
fn remove_stale_socket(path: &Path) -> Result<(), UdsError> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(UdsError::RemoveStale {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if !metadata.file_type().is_socket() {
        return Err(UdsError::NotASocket {
            path: path.to_path_buf(),
        });
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(UdsError::InUse {
            path: path.to_path_buf(),
        }),
        Err(err) if err.kind() == ErrorKind::ConnectionRefused => std::fs::remove_file(path)
            .or_else(|err| match err.kind() {
                ErrorKind::NotFound => Ok(()),
                _ => Err(err),
            })
            .map_err(|source| UdsError::RemoveStale {
                path: path.to_path_buf(),
                source,
            }),
        Err(source) => Err(UdsError::RemoveStale {
            path: path.to_path_buf(),
            source,
        }),
    }
}
