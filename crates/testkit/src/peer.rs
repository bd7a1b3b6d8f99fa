//! [`PythonPeer`]: the foreign gRPC peer `python/corral_peer` (Python grpcio), run with a
//! bounded wait.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::python_env::{PythonEnvError, ensure_python_env};

/// How long one peer command may run before it is killed.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the peer could not be found or did not answer.
///
/// `Debug` prints the message and every cause, so an `unwrap` in a test names them all.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum PeerError {
    /// The pinned venv could not be set up.
    #[error("setting up the Python interop peer")]
    Setup(#[source] PythonEnvError),
    /// `CORRAL_PYTHON` names an interpreter that does not exist.
    #[error("no Python at {} (CORRAL_PYTHON names a missing interpreter)", python.display())]
    MissingInterpreter {
        /// The interpreter named.
        python: PathBuf,
    },
    /// The interpreter could not be started.
    #[error("starting {}", python.display())]
    Start {
        /// The interpreter.
        python: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A peer command ran longer than [`PEER_TIMEOUT`] (it was killed).
    #[error("corral_peer {args:?} did not finish within {PEER_TIMEOUT:?}")]
    TimedOut {
        /// The command's arguments.
        args: Vec<String>,
    },
    /// Waiting for the peer failed.
    #[error("waiting for corral_peer")]
    Wait(#[source] std::io::Error),
    /// The peer printed no JSON object.
    #[error("corral_peer {args:?} printed no JSON (exit {exit:?}); stderr:\n{stderr}")]
    NoJson {
        /// The command's arguments.
        args: Vec<String>,
        /// Its exit code (`None` when killed by a signal).
        exit: Option<i32>,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The peer's last JSON-looking line is not JSON.
    #[error("corral_peer printed bad JSON {line:?}")]
    BadJson {
        /// The line.
        line: String,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
}

impl std::fmt::Debug for PeerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")?;
        let mut cause = std::error::Error::source(self);
        while let Some(err) = cause {
            write!(f, ": {err}")?;
            cause = err.source();
        }
        Ok(())
    }
}

/// The Python interpreter with grpcio installed, and the harness's directory.
#[derive(Debug, Clone)]
pub struct PythonPeer {
    python: PathBuf,
    harness_dir: PathBuf,
}

impl PythonPeer {
    /// Find the interpreter: `$CORRAL_PYTHON`, else `<workspace>/.venv/bin/python`, which
    /// is created from `python/requirements.txt` first when missing or stale
    /// ([`ensure_python_env`]).
    ///
    /// Errors with the remedy when it cannot be set up: the foreign-peer tests never skip.
    pub fn locate() -> Result<Self, PeerError> {
        let root = crate::workspace_root();
        let python = ensure_python_env(&root).map_err(PeerError::Setup)?;
        if !python.exists() {
            return Err(PeerError::MissingInterpreter { python });
        }
        Ok(Self {
            python,
            harness_dir: root.join("python"),
        })
    }

    /// `python -m corral_peer ARGS…` in the harness directory, killed when dropped, with
    /// stdout piped and the given stdin and stderr.
    fn command(&self, args: &[&str], stdin: Stdio, stderr: Stdio) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.python);
        command
            .arg("-m")
            .arg("corral_peer")
            .args(args)
            .current_dir(&self.harness_dir)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        command
    }

    fn start_error(&self) -> impl FnOnce(std::io::Error) -> PeerError {
        let python = self.python.clone();
        move |source| PeerError::Start { python, source }
    }

    /// Run `python -m corral_peer ARGS…`, wait at most [`PEER_TIMEOUT`], and return the JSON
    /// object it printed. A peer that exits non-zero still answers (with `"ok": false`);
    /// a peer that prints no JSON is an error carrying its stderr.
    pub async fn run(&self, args: &[&str]) -> Result<serde_json::Value, PeerError> {
        let owned_args = || args.iter().map(|a| (*a).to_owned()).collect();
        let child = self
            .command(args, Stdio::null(), Stdio::piped())
            .spawn()
            .map_err(self.start_error())?;
        let output = tokio::time::timeout(PEER_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| PeerError::TimedOut { args: owned_args() })?
            .map_err(PeerError::Wait)?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .ok_or_else(|| PeerError::NoJson {
                args: owned_args(),
                exit: output.status.code(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            })?;
        serde_json::from_str(line).map_err(|source| PeerError::BadJson {
            line: line.to_owned(),
            source,
        })
    }

    /// Start a long-running peer (`python -m corral_peer ARGS…`, e.g. a device plugin or a
    /// DRA driver) with piped stdin/stdout. The child is killed when the handle is dropped;
    /// many peers also exit when their stdin closes.
    pub fn spawn(&self, args: &[&str]) -> Result<tokio::process::Child, PeerError> {
        self.command(args, Stdio::piped(), Stdio::inherit())
            .spawn()
            .map_err(self.start_error())
    }

    /// The Python interpreter.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// The harness directory (`python/`).
    pub fn harness_dir(&self) -> &Path {
        &self.harness_dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_step_and_debug_the_whole_chain() {
        let err = PeerError::Setup(PythonEnvError::Io {
            action: "reading",
            path: PathBuf::from("/x/requirements.txt"),
            source: std::io::Error::other("gone"),
        });
        assert_eq!(err.to_string(), "setting up the Python interop peer");
        assert_eq!(
            format!("{err:?}"),
            "setting up the Python interop peer: reading /x/requirements.txt: gone"
        );
    }
}
