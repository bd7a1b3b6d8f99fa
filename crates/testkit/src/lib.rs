//! `corral-testkit`: test support shared by corral's crates (a dev-dependency only).
//!
//! It runs the project's foreign gRPC peer, `python/corral_peer` (Python grpcio, installed
//! into `.venv` on first use by [`ensure_python_env`]), with a bounded wait, and parses the JSON object every
//! peer command prints. Real device plugins and DRA drivers are Go and Python programs, so
//! corral's servers and clients are tested against a gRPC stack that is not tonic.
//!
//! ```no_run
//! # async fn demo() {
//! let peer = corral_testkit::PythonPeer::locate().expect("a Python with grpcio");
//! let answer = peer
//!     .run(&["register", "--socket", "/tmp/kubelet.sock", "--authority", "raw"])
//!     .await
//!     .unwrap();
//! assert_eq!(answer["ok"], true);
//! # }
//! ```

mod fuzz;
mod python_env;

pub mod conformance_topology;
pub mod merge_inputs;
pub mod upstream_topologies;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

pub use fuzz::{FUZZ_CASES_VAR, fuzz_config};
pub use python_env::{PythonEnvError, ensure_python_env};

/// How long one peer command may run before it is killed.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(60);

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
    pub fn locate() -> Result<Self, String> {
        let root = workspace_root();
        let python = ensure_python_env(&root).map_err(|err| {
            let mut text = format!("setting up the Python interop peer: {err}");
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        })?;
        if !python.exists() {
            return Err(format!(
                "no Python at {} (CORRAL_PYTHON names a missing interpreter)",
                python.display()
            ));
        }
        Ok(Self {
            python,
            harness_dir: root.join("python"),
        })
    }

    /// Run `python -m corral_peer ARGS…`, wait at most [`PEER_TIMEOUT`], and return the JSON
    /// object it printed. A peer that exits non-zero still answers (with `"ok": false`);
    /// a peer that prints no JSON is an error carrying its stderr.
    pub async fn run(&self, args: &[&str]) -> Result<serde_json::Value, String> {
        let child = tokio::process::Command::new(&self.python)
            .arg("-m")
            .arg("corral_peer")
            .args(args)
            .current_dir(&self.harness_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| format!("starting {}: {err}", self.python.display()))?;
        let output = tokio::time::timeout(PEER_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| format!("corral_peer {args:?} did not finish within {PEER_TIMEOUT:?}"))?
            .map_err(|err| format!("waiting for corral_peer: {err}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .ok_or_else(|| {
                format!(
                    "corral_peer {args:?} printed no JSON (exit {:?}); stderr:\n{}",
                    output.status.code(),
                    String::from_utf8_lossy(&output.stderr)
                )
            })?;
        serde_json::from_str(line)
            .map_err(|err| format!("corral_peer printed bad JSON {line:?}: {err}"))
    }

    /// Start a long-running peer (`python -m corral_peer ARGS…`, e.g. a device plugin or a
    /// DRA driver) with piped stdin/stdout. The child is killed when the handle is dropped;
    /// many peers also exit when their stdin closes.
    pub fn spawn(&self, args: &[&str]) -> Result<tokio::process::Child, String> {
        tokio::process::Command::new(&self.python)
            .arg("-m")
            .arg("corral_peer")
            .args(args)
            .current_dir(&self.harness_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| format!("starting {}: {err}", self.python.display()))
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

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testkit sits two levels below the workspace root")
        .to_path_buf()
}
